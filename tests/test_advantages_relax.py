"""dew_rl's group advantages against Relax's reward normalisers and advantage estimators
(tests/fixtures/advantages_relax.npz).

The fixture was written by tools/make_relax_advantage_fixtures.py, which executed definitions of Relax's own
relax/algorithms/rewards.py and relax/algorithms/advantages.py (redai-infra/Relax at the revision in the .json), with
the helpers they import from relax/algorithms/numerics.py and relax/utils/training/ppo_utils.py (at the revisions
the .json names; see the script's docstring), taken from the files' syntax trees with the sha256 of their source
pinned, on inputs it drew with a fixed seed and stored under in/<case>/<name>. No framework is needed here: dew_rl's
side is recomputed from the stored inputs, in float32, and compared at float32 round-off
(|dew_rl - Relax| <= 1e-6 + 1e-5 * max|Relax|).

Relax's settings, read from the code run: GRPO divides the group-centred float32 rewards by their std (torch's
default, ddof = 1) plus STD_EPS = 1e-6; Dr.GRPO only centres; RLOO is G / (G - 1) (r - mean(r)); GDPO standardises
each component in its group with ddof 1 and GDPO_EPS = 1e-4 on the std (a flat column gives exactly 0), sums them
with the weights, and whitens the sum per training batch (mini_batch_sizes) with the Bessel std plus 1e-4 (a flat
batch gives exactly 0); REINFORCE++ puts the reward on the last valid token, adds -kl_coef * kl on the valid tokens
and takes the discounted return to go over every position of the response (masked ones included in the exponent),
zero at masked positions; REINFORCE++-baseline broadcasts r - group mean (itself included) to the valid tokens.

What agrees (exact calls):

* `group_advantage(rewards, group_ids)` (normalise_by_std=True, eps=GROUP_EPS = 1e-6: Relax's ddof and epsilon)
  with `normalize_group_mean_std(grpo_std_normalization=True)`, except the four groups of items 1 and 2;
* `group_advantage(rewards, group_ids, normalise_by_std=False)` with `normalize_group_mean_std(
  grpo_std_normalization=False)` (Dr.GRPO), every group;
* `rloo_advantage(rewards, group_ids)` with `normalize_group_leave_one_out`, every group;
* GDPO steps 1 and 2: sum_k w_k `group_advantage(rewards[:, k], group_ids, eps=1e-4)` with
  `normalize_gdpo_decoupled` (weights None and (1, 0.5, 2)), including the flat group and the cancelling group
  (Relax's noise floor: exact zeros on both sides);
* GDPO step 3: `gdpo_advantage(rewards, mask, group_ids, reward_weights, eps=1e-4)` (whiten="rows") called once per
  training batch, times sqrt(s^2 + 1e-8) / (s + 1e-4) (item 3), with `advantage_gdpo(mini_batch_sizes=...)`;
* `reinforce_plus_plus_returns(rewards, kl, mask, beta=kl_coef, gamma)` with `advantage_reinforce_plus_plus`
  (kl_coef, gamma) = (0, 1), (0.05, 1), (0.05, 0.9), including holes, masked tokens after the last valid one and a
  fully masked response;
* `group_baseline_advantage(rewards, mask, group_ids)` with `normalize_group_mean` then
  `advantage_reinforce_plus_plus_baseline`.

Differences, pinned below with their sizes:

1. GRPO on a group of equal rewards whose float32 mean is not the reward: Relax centres in float32 (r - mean(r)),
   which leaves the same residue on every member, and the std of those equal residues is 0, so it returns
   residue / 1e-6 on each: +0.0596046 on each of 0.9 x 3 (residue 5.96e-8), -0.00745058 on each of 0.1 x 8 (residue
   -7.45e-9). dew_rl returns exact zeros (a group with no spread carries no signal). Equal groups whose float32 mean
   is exact (0 x 2, 0.9 x 2, 0.6 x 5) give zeros on both sides. (Dr.GRPO and RLOO keep the bare residue, <= 8.9e-8:
   within round-off.)
2. GRPO on a near-degenerate group: Relax's float32 r - mean(r) loses the low bits of the rewards (about half an
   ulp of the rewards, divided by the group std): [1.0, 1.0015] (std 1.06e-3) gives -0.7064969, +0.7063846 against
   +-0.7064408 in float64 (error 5.6e-5); 3.0 + 1e-3 * [...] (std 7.6e-4) errs by 1.17e-4. dew_rl shifts each group
   by its first member before centring and is within 1e-7 of the float64 value on both.
3. GDPO's batch whitening: Relax divides by (s + 1e-4) with s the Bessel std of the training batch, dew_rl's
   whitening multiplies by rsqrt(s^2 + 1e-8) (Bessel, as `global_masked_whiten`). Relative difference about 1e-4 / s:
   largest 9.9e-4 on the training batch of m4 with s = 0.101 (|dew_rl - Relax| up to 2.33e-3); 3.9e-5 to 1.7e-4 on
   the others. After rescaling dew_rl's output by sqrt(s^2 + 1e-8) / (s + 1e-4) they agree at round-off.

Not compared: the token whitening REINFORCE++ and REINFORCE++-baseline apply afterwards (`--normalize-advantages`,
relax.utils.distributed_utils, not in these files), so `global_masked_normalize` has no counterpart here.
"""
from __future__ import annotations

import json
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

import dew_rl as rl
from frozen import assert_inputs_are_the_scripts, close, comparer, load_script, npz_fixture, relax_meta
from frozen import relax_output as relax

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "advantages_relax.npz"
SCRIPT = ROOT / "tools" / "make_relax_advantage_fixtures.py"
GROUP_CASES = {"g2": 2, "g3": 3, "g5": 5, "g8": 8}
WEIGHTS = {"none": None, "1,0.5,2": (1.0, 0.5, 2.0)}
SEGMENTS = {"m4": ((24,), (12, 12)), "m8": ((24,), (8, 16))}
RPP = ((0.0, 1.0), (0.05, 1.0), (0.05, 0.9))
EQUAL_RESIDUE = {("g3", 0): 0.0596046448, ("g8", 1): -0.0074505806}  # item 1: Relax's GRPO value on each member
NEAR_DEGENERATE = {("g2", 5): 5.61e-5, ("g8", 4): 1.17e-4}  # item 2: Relax's largest error against float64
GDPO_RAW_DIFF = {("m4", "none", (24,)): 3.777e-4, ("m4", "none", (12, 12)): 2.328e-3,  # item 3
                 ("m4", "1,0.5,2", (24,)): 1.609e-4, ("m4", "1,0.5,2", (12, 12)): 3.538e-4,
                 ("m8", "none", (24,)): 1.153e-4, ("m8", "none", (8, 16)): 1.158e-4,
                 ("m8", "1,0.5,2", (24,)): 7.021e-5, ("m8", "1,0.5,2", (8, 16)): 6.998e-5}


fx = npz_fixture(FIXTURE)
assert_close = comparer("Relax")


def seg_key(seg):
    return ",".join(map(str, seg))


def groups(fx, case):
    return fx[f"in/{case}/rewards"], fx[f"in/{case}/group"]


def f64(a):
    return np.asarray(a, np.float64)


def grpo64(r, gid, std=True, eps=1e-6):
    "GRPO / Dr.GRPO in float64 on the float32 rewards: the reference for items 1 and 2."
    r, out = f64(r), np.zeros(len(r))
    for g in np.unique(gid):
        m = gid == g
        c = r[m] - r[m].mean()
        out[m] = c / (r[m].std(ddof=1) + eps) if std else c
    return out


def flagged(fx, case):
    "Rows of the groups of items 1 and 2."
    gid = fx[f"in/{case}/group"]
    return np.isin(gid, [g for c, g in list(EQUAL_RESIDUE) + list(NEAR_DEGENERATE) if c == case])


# ------------------------------------------------------------------ dew_rl's side
def ours_grpo(fx, case, **kw):
    r, gid = groups(fx, case)
    return f64(rl.group_advantage(jnp.asarray(r), jnp.asarray(gid), **kw))


def ours_rloo(fx, case):
    r, gid = groups(fx, case)
    return f64(rl.rloo_advantage(jnp.asarray(r), jnp.asarray(gid)))


def gdpo_mask(fx, case):
    L = fx[f"in/{case}/lengths"]
    return (np.arange(int(L.max()))[None, :] < L[:, None]).astype(np.float32)


def ours_combined(fx, case, w, eps=1e-4):
    "GDPO steps 1 and 2 with dew_rl: sum_k w_k group_advantage(rewards[:, k], group, eps)."
    r, gid = groups(fx, case)
    ws = np.ones(r.shape[1], np.float32) if w is None else np.asarray(w, np.float32)
    return sum(f64(ws[k] * rl.group_advantage(jnp.asarray(r[:, k]), jnp.asarray(gid), eps=eps))
               for k in range(r.shape[1]))


def slices(seg):
    return [slice(sum(seg[:i]), sum(seg[:i + 1])) for i in range(len(seg))]


def ours_gdpo(fx, case, w, seg, whiten="rows", rescale=False):
    """gdpo_advantage once per training batch, packed (valid tokens in row order); with `rescale`, times
    sqrt(s^2 + 1e-8) / (s + 1e-4), s the Bessel std of Relax's float32 combined rewards of that batch (item 3)."""
    r, gid = groups(fx, case)
    mask = gdpo_mask(fx, case)
    comb = np.float32(relax(fx, case, "gdpo_combined", w=[k for k, v in WEIGHTS.items() if v == w][0]))
    out = []
    for sl in slices(seg):
        a = f64(rl.gdpo_advantage(jnp.asarray(r[sl]), jnp.asarray(mask[sl]), jnp.asarray(gid[sl]),
                                  None if w is None else jnp.asarray(w, jnp.float32), eps=1e-4, whiten=whiten))
        if rescale:
            s = f64(comb[sl]).std(ddof=1)
            a = a * np.sqrt(s * s + 1e-8) / (s + 1e-4)
        out.append(a)
    return np.concatenate(out)[mask > 0]


def rpp_inputs(fx):
    return tuple(fx[f"in/r/{n}"] for n in ("rewards", "kl", "mask", "lengths", "group"))


def response(fx, a):
    "Relax's layout: each response's [:lengths[i]], concatenated."
    L = fx["in/r/lengths"]
    return np.asarray(a)[np.arange(np.asarray(a).shape[1])[None, :] < L[:, None]]


def ours_rpp(fx, beta, gamma, sign=1.0):
    r, kl, mask, _, _ = rpp_inputs(fx)
    return response(fx, rl.reinforce_plus_plus_returns(jnp.asarray(r), sign * jnp.asarray(kl), jnp.asarray(mask),
                                                       beta, gamma))


# ------------------------------------------------------------------ the fixture itself
def test_stored_inputs_are_the_scripts(fx):
    assert_inputs_are_the_scripts(fx, load_script(SCRIPT).make_inputs(),
                                  lambda k: np.int32 if k.endswith(("/group", "/lengths")) else np.float32)


def test_json_describes_every_output(fx):
    mod, meta = relax_meta(FIXTURE, SCRIPT, "redai-infra/Relax", fx)
    assert list(meta["files"]) == ["numerics", "ppo_utils", "rewards", "advantages"]
    for name, spec in mod.FILES.items():
        assert meta["files"][name] == {k: spec[k] for k in ("repository", "revision", "path", "chars")}
        assert meta["definitions"][name] == list(spec["definitions"]) and meta["sha256"][name] == spec["sha256"]
    assert meta["files"]["rewards"]["revision"] == meta["files"]["advantages"]["revision"] == mod.REVISION
    kinds = {}
    for r in meta["records"]:
        kinds[r["kind"]] = kinds.get(r["kind"], 0) + 1
        assert r["dtype"] == ("torch.float32" if r["kind"] in ("gdpo_adv", "rpp_returns", "rpp_baseline_adv")
                              else "list[float]"), r["key"]
    assert kinds == {"grpo_adv": 4, "drgrpo_adv": 4, "rloo_adv": 4, "gdpo_combined": 4, "gdpo_adv": 8,
                     "rpp_returns": 3, "rpp_baseline_reward": 1, "rpp_baseline_adv": 1}
    assert len(meta["records"]) == 29 and FIXTURE.stat().st_size < 200_000
    assert {r["framework_function"].split(":")[1] for r in meta["records"]} == {
        "normalize_group_mean_std", "normalize_group_leave_one_out", "normalize_gdpo_decoupled", "advantage_gdpo",
        "advantage_reinforce_plus_plus", "normalize_group_mean", "advantage_reinforce_plus_plus_baseline"}


def test_script_refuses_other_definitions():
    "The pins are over each file's length and its definitions' source: other texts are refused (no torch needed)."
    mod = load_script(SCRIPT)
    with pytest.raises(SystemExit, match="characters"):
        mod.definitions("def whiten_scalar(values):\n    return values\n", "advantages")
    fake = "".join(f"def {n}(*args):\n    return None\n\n\n" for n in mod.FILES["advantages"]["definitions"])
    fake += "#" * (mod.FILES["advantages"]["chars"] - len(fake) - 1) + "\n"
    with pytest.raises(SystemExit, match="sha256"):
        mod.definitions(fake, "advantages")


def test_shapes(fx):
    for case in GROUP_CASES:
        n = len(fx[f"in/{case}/rewards"])
        for kind in ("grpo_adv", "drgrpo_adv", "rloo_adv"):
            assert relax(fx, case, kind).shape == (n,)
    for case in SEGMENTS:
        n, tokens = len(fx[f"in/{case}/group"]), int(fx[f"in/{case}/lengths"].sum())
        for w in WEIGHTS:
            assert relax(fx, case, "gdpo_combined", w=w).shape == (n,)
            for seg in SEGMENTS[case]:
                assert relax(fx, case, "gdpo_adv", segments=seg_key(seg), w=w).shape == (tokens,)
    tokens = int(fx["in/r/lengths"].sum())
    for b, g in RPP:
        assert relax(fx, "r", "rpp_returns", gamma=g, kl_coef=b).shape == (tokens,)
    assert relax(fx, "r", "rpp_baseline_adv").shape == (tokens,)


def test_inputs_cover_the_corners(fx):
    for case, G in GROUP_CASES.items():
        r, gid = groups(fx, case)
        assert np.all(np.bincount(gid) == G)
        assert any(np.all(r[gid == g] == r[gid == g][0]) for g in np.unique(gid)), case  # an equal group
        assert any(len(np.unique(r[gid == g])) < G for g in np.unique(gid)
                   if not np.all(r[gid == g] == r[gid == g][0])) or G == 2, case  # partial ties
        assert np.any((r != 0) & (r != 1)), case  # non-binary
    assert np.any(np.diff(fx["in/g5/group"]) < 0)  # g5: groups interleaved
    assert np.abs(fx["in/g8/rewards"]).max() > 100
    # GDPO: a flat column, a flat group, a cancelling pair, a length column of spread ~1e-3
    r, gid = groups(fx, "m4")
    flat = lambda g: np.all(r[gid == g] == r[gid == g][0], axis=0)  # noqa: E731
    assert flat(0).tolist() == [False, True, False] and flat(1).all() and flat(2).tolist() == [False, False, True]
    np.testing.assert_array_equal(r[gid == 2][:, 0] + r[gid == 2][:, 1], 1.0)
    assert 1e-4 < f64(r[gid == 3][:, 2]).std(ddof=1) < 2e-3
    # REINFORCE++: holes, masked tokens after the last valid one, a fully masked response, masked kl of 1e3
    _, kl, mask, L, _ = rpp_inputs(fx)
    assert mask[5].sum() == 0 and mask[2, 6:8].sum() == 0 and mask[2, 5] == 1 and L[2] == 8
    assert np.any(np.diff(mask[0, :L[0]]) > 0) and np.all(kl[mask == 0] == 1e3)


# ------------------------------------------------------------------ GRPO, Dr.GRPO, RLOO
@pytest.mark.parametrize("case", GROUP_CASES)
def test_grpo_matches(fx, case):
    "Every group but those of items 1 and 2; the fixed-size layout (group = G) gives the same where contiguous."
    keep = ~flagged(fx, case)
    ours = ours_grpo(fx, case)
    assert_close(ours[keep], relax(fx, case, "grpo_adv")[keep], f"{case} GRPO")
    assert rl.GROUP_EPS == 1e-6
    if case != "g5":
        r, _ = groups(fx, case)
        np.testing.assert_array_equal(f64(rl.group_advantage(jnp.asarray(r), GROUP_CASES[case])), ours)


@pytest.mark.parametrize("case", GROUP_CASES)
def test_drgrpo_and_rloo_match(fx, case):
    assert_close(ours_grpo(fx, case, normalise_by_std=False), relax(fx, case, "drgrpo_adv"), f"{case} Dr.GRPO")
    assert_close(ours_rloo(fx, case), relax(fx, case, "rloo_adv"), f"{case} RLOO")


def test_grpo_equal_group_residue(fx):
    """Item 1: Relax's GRPO on 0.9 x 3 and 0.1 x 8 is its Dr.GRPO residue over 1e-6 on every member; dew_rl's is 0.
    Equal groups with an exact float32 mean are zero on both sides."""
    for (case, g), value in EQUAL_RESIDUE.items():
        r, gid = groups(fx, case)
        m = gid == g
        assert np.all(r[m] == r[m][0])
        theirs, residue = relax(fx, case, "grpo_adv")[m], relax(fx, case, "drgrpo_adv")[m]
        assert np.all(theirs == theirs[0]) and abs(theirs[0] - value) < 1e-9
        np.testing.assert_allclose(theirs, residue / 1e-6, rtol=1e-6)
        assert np.all(ours_grpo(fx, case)[m] == 0) and np.all(ours_grpo(fx, case, normalise_by_std=False)[m] == 0)
        assert 0 < np.abs(residue).max() < 1e-7 and 0 < np.abs(relax(fx, case, "rloo_adv")[m]).max() < 9e-8
    zero = [(c, g) for c in GROUP_CASES for g in np.unique(fx[f"in/{c}/group"])
            if np.all(groups(fx, c)[0][groups(fx, c)[1] == g] == groups(fx, c)[0][groups(fx, c)[1] == g][0])
            and (c, g) not in EQUAL_RESIDUE]
    assert zero == [("g2", 1), ("g2", 2), ("g5", 1)]
    for c, g in zero:
        m = fx[f"in/{c}/group"] == g
        assert np.all(relax(fx, c, "grpo_adv")[m] == 0) and np.all(ours_grpo(fx, c)[m] == 0)


def test_grpo_near_degenerate_precision(fx):
    """Item 2: on [1.0, 1.0015] and 3.0 + 1e-3 * [...] Relax's float32 r - mean(r) errs by 5.6e-5 and 1.17e-4
    against float64; dew_rl is within 1e-7 of it. Every other group: both within 2e-7 of float64."""
    for case in GROUP_CASES:
        r, gid = groups(fx, case)
        ref = grpo64(r, gid)
        ours, theirs = ours_grpo(fx, case), relax(fx, case, "grpo_adv")
        for g in np.unique(gid):
            m = gid == g
            assert np.abs(ours[m] - ref[m]).max() < 2e-7, (case, g)
            if (case, g) in NEAR_DEGENERATE:
                err = np.abs(theirs[m] - ref[m]).max()
                assert abs(err - NEAR_DEGENERATE[case, g]) < 0.01 * NEAR_DEGENERATE[case, g], (case, g, err)
                assert f64(r[m]).std(ddof=1) < 2e-3 and np.abs(ours[m] - ref[m]).max() < 1e-7
            elif (case, g) not in EQUAL_RESIDUE:
                assert np.abs(theirs[m] - ref[m]).max() < 2e-7, (case, g)
    m = fx["in/g2/group"] == 5
    np.testing.assert_allclose(relax(fx, "g2", "grpo_adv")[m], [-0.7064969, 0.7063846], atol=1e-7)
    np.testing.assert_allclose(grpo64(*groups(fx, "g2"))[m], [-0.7064408, 0.7064408], atol=1e-7)


def test_group_comparisons_catch_mistakes(fx):
    "Each comparison fails on a plausible mistake: another epsilon or ddof, no std, no leave-one-out."
    for case in GROUP_CASES:
        keep = ~flagged(fx, case)
        theirs = relax(fx, case, "grpo_adv")[keep]
        assert not close(ours_grpo(fx, case, eps=1e-4)[keep], theirs), case  # GDPO's / TRL's epsilon
        r, gid = groups(fx, case)
        pop = grpo64(r, gid, std=False)
        for g in np.unique(gid):  # population std (ddof 0)
            m = gid == g
            pop[m] = pop[m] / (f64(r[m]).std() + 1e-6)
        assert not close(pop[keep], theirs), case
        assert not close(ours_grpo(fx, case), relax(fx, case, "drgrpo_adv")), case  # Dr.GRPO divided by the std
        assert not close(ours_grpo(fx, case, normalise_by_std=False), relax(fx, case, "rloo_adv")), case  # no G/(G-1)


# ------------------------------------------------------------------ GDPO
@pytest.mark.parametrize("w", WEIGHTS)
@pytest.mark.parametrize("case", SEGMENTS)
def test_gdpo_steps_1_2_match(fx, case, w):
    assert_close(ours_combined(fx, case, WEIGHTS[w]), relax(fx, case, "gdpo_combined", w=w), f"{case} w={w}")


def test_gdpo_flat_and_cancelling_groups(fx):
    """A group flat in every column (m4 group 1) and, under equal weights, a group whose first two columns sum to 1
    (m4 group 2; Relax's noise floor) give exact zeros on both sides; with weights (1, 0.5, 2) group 2 does not."""
    gid = fx["in/m4/group"]
    for g, w in ((1, "none"), (1, "1,0.5,2"), (2, "none")):
        m = gid == g
        assert np.all(relax(fx, "m4", "gdpo_combined", w=w)[m] == 0)
        assert np.all(ours_combined(fx, "m4", WEIGHTS[w])[m] == 0)
    m = gid == 2
    np.testing.assert_allclose(relax(fx, "m4", "gdpo_combined", w="1,0.5,2")[m], [-0.25, 0.75, -0.25, -0.25],
                               atol=2e-4)


@pytest.mark.parametrize("w", WEIGHTS)
@pytest.mark.parametrize("case", SEGMENTS)
def test_gdpo_whitened_match_after_rescaling(fx, case, w):
    "Item 3: dew_rl's GDPO per training batch, rescaled by sqrt(s^2 + 1e-8) / (s + 1e-4), is Relax's advantage_gdpo."
    for seg in SEGMENTS[case]:
        theirs = relax(fx, case, "gdpo_adv", segments=seg_key(seg), w=w)
        assert_close(ours_gdpo(fx, case, WEIGHTS[w], seg, rescale=True), theirs, f"{case} w={w} segments={seg}")


def test_gdpo_whitening_epsilon_difference(fx):
    """Item 3: without the rescaling the largest |dew_rl - Relax| is pinned per setting (2.33e-3 at most, m4 with
    equal weights, training batches of 12: the first has s = 0.101, relative difference 9.9e-4)."""
    for (case, w, seg), pinned in GDPO_RAW_DIFF.items():
        d = np.abs(ours_gdpo(fx, case, WEIGHTS[w], seg) - relax(fx, case, "gdpo_adv", segments=seg_key(seg), w=w))
        assert abs(d.max() - pinned) < 0.01 * pinned, (case, w, seg, d.max())
    comb = np.float32(relax(fx, "m4", "gdpo_combined", w="none"))[:12]
    s = f64(comb).std(ddof=1)
    assert abs(s - 0.10115) < 1e-4 and abs((s + 1e-4) / np.sqrt(s * s + 1e-8) - 1 - 9.87e-4) < 1e-5


def test_gdpo_comparisons_catch_mistakes(fx):
    """Each GDPO comparison fails on a plausible mistake: the group epsilon 1e-6 (dew_rl's default) for step 1,
    weights applied to the raw rewards before one standardisation, whitening the merged rollout instead of each
    training batch, whitening over tokens (verl) instead of rows."""
    assert not close(ours_combined(fx, "m4", None, eps=rl.GROUP_EPS), relax(fx, "m4", "gdpo_combined", w="none"))
    r, gid = groups(fx, "m4")
    raw = f64(rl.group_advantage(jnp.asarray(r @ np.asarray([1.0, 0.5, 2.0], np.float32)), jnp.asarray(gid),
                                 eps=1e-4))
    assert not close(raw, relax(fx, "m4", "gdpo_combined", w="1,0.5,2"))
    for case, w in (("m4", "none"), ("m8", "1,0.5,2")):
        seg = SEGMENTS[case][1]
        theirs = relax(fx, case, "gdpo_adv", segments=seg_key(seg), w=w)
        merged = ours_gdpo(fx, case, WEIGHTS[w], (sum(seg),), rescale=True)
        assert not close(merged, theirs), case
        assert not close(ours_gdpo(fx, case, WEIGHTS[w], seg, whiten="tokens"), theirs), case


# ------------------------------------------------------------------ REINFORCE++, REINFORCE++-baseline
@pytest.mark.parametrize("beta,gamma", RPP)
def test_reinforce_plus_plus_returns_match(fx, beta, gamma):
    theirs = relax(fx, "r", "rpp_returns", gamma=gamma, kl_coef=beta)
    assert_close(ours_rpp(fx, beta, gamma), theirs, f"kl_coef={beta} gamma={gamma}")
    mask = response(fx, fx["in/r/mask"])
    assert np.all(theirs[mask == 0] == 0)  # masked positions, the fully masked response included


def test_reinforce_plus_plus_baseline_matches(fx):
    r, _, mask, _, gid = rpp_inputs(fx)
    ours = rl.group_baseline_advantage(jnp.asarray(r), jnp.asarray(mask), jnp.asarray(gid))
    assert_close(response(fx, ours), relax(fx, "r", "rpp_baseline_adv"), "REINFORCE++-baseline")
    assert_close(f64(rl.group_advantage(jnp.asarray(r), jnp.asarray(gid), normalise_by_std=False)),
                 relax(fx, "r", "rpp_baseline_reward"), "group mean")


def test_reinforce_plus_plus_comparisons_catch_mistakes(fx):
    """Each comparison fails on a plausible mistake: the kl with the other sign, discounting over the valid tokens
    only (holes skipped in the exponent), the reward on the response's last position instead of its last valid
    token, a leave-one-out baseline."""
    theirs = relax(fx, "r", "rpp_returns", gamma=0.9, kl_coef=0.05)
    assert not close(ours_rpp(fx, 0.05, 1.0, sign=-1.0), relax(fx, "r", "rpp_returns", gamma=1.0, kl_coef=0.05))
    r, kl, mask, L, gid = rpp_inputs(fx)
    packed = np.zeros_like(kl)  # the valid tokens moved to the front of each row
    pmask = np.zeros_like(mask)
    for i in range(len(r)):
        v = mask[i] > 0
        packed[i, :v.sum()], pmask[i, :v.sum()] = kl[i, v], 1.0
    p = np.asarray(rl.reinforce_plus_plus_returns(jnp.asarray(r), jnp.asarray(packed), jnp.asarray(pmask), 0.05, 0.9))
    skipped = np.zeros_like(kl)
    for i in range(len(r)):
        skipped[i, mask[i] > 0] = p[i, :int(mask[i].sum())]
    assert not close(response(fx, skipped), theirs)
    last = mask.copy()  # the last position of each (non-empty) response counted as valid
    for i in (2, 4):
        last[i, L[i] - 1] = 1.0
    lk = np.where(last > mask, 0.0, kl).astype(np.float32)
    wrong = np.asarray(rl.reinforce_plus_plus_returns(jnp.asarray(r), jnp.asarray(lk), jnp.asarray(last), 0.05, 0.9))
    assert not close(response(fx, np.where(mask > 0, wrong, 0)), theirs)
    loo = np.asarray(rl.rloo_advantage(jnp.asarray(r), jnp.asarray(gid)))[:, None] * (mask > 0)
    assert not close(response(fx, loo), relax(fx, "r", "rpp_baseline_adv"))
