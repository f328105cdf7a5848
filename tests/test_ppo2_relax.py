"""dew_rl's M2PO (Relax's form), PPO clip and RLOO against Relax's frozen outputs (tests/fixtures/ppo2_relax.npz).

The fixture was written by tools/make_relax_ppo2_fixtures.py, which executed seven definitions of Relax's own
relax/utils/training/ppo_utils.py (redai-studio/Relax at the revision in the .json beside it; taken from the file's
syntax tree, the sha256 of their source pinned; torch.compile the identity, so they ran eagerly) on inputs it drew
with a fixed seed and stored under in/<case>/<name>. Relax was given the valid tokens only (mask > 0, flattened in
row order: its packed [total_tokens] layout) and its per-token outputs are stored packed, so dew_rl's [B, T] outputs
are packed the same way, `x[mask > 0]`. No framework is needed here: dew_rl's side is recomputed from the stored
inputs, in float32, and compared at float32 round-off (|dew_rl - Relax| <= 1e-6 + 1e-5 * max|Relax|).

What agrees (log ratio x = log_probs - old_log_probs; Relax's ppo_kl is -x):

* `m2po_clip_bounds(x, A, mask, kl2_budget)` and `m2po_terms(x, A, mask, kl2_budget)` (miniclips 0.3, 0.5, the
  defaults of both) with `compute_m2po_loss(ppo_kl, A, kl2_budget)`, kl2_budget 0.02, 0.3, 2.0: the offsets
  eps_low, eps_high (the miniclip floors, the budget's tau, and the no-clip sentinel (1.0, 99999.0) alike), the
  second moment M2_now of the harmful tokens, the per-token loss, its gradient w.r.t. the log-probs and the clip
  indicator (exactly), including the token whose square sets the water-filling level, whose ratio sits on the bound
  (unclipped on both sides); M2_after wherever the budget holds or the level is above zero;
* `clipped_surrogate_terms(x, A, mask, epsilon_low=eps_clip, epsilon_high=eps_clip_high, dual_clip=eps_clip_c)` and
  `compute_policy_loss(ppo_kl, A, eps_clip, eps_clip_high, eps_clip_c)` for (0.2, 0.2, None) and (0.2, 0.28, 3.0):
  value, gradient, and dew_rl's "clipped" indicator is Relax's clipfrac exactly (neither counts the dual clip; dew_rl
  reports it apart, "dual_clipped", which is where Relax's loss is -3 A);
* `reinforce_terms(log_probs, A, mask)[0]` and `compute_rloo_loss(log_probs, A)`: value and gradient (Relax's
  clipfrac is all zeros);
* `rloo_advantage(rewards, group_ids)` and `compute_rloo_leave_one_out_rewards(group_rewards)` per group.

Conventions that differ, pinned below with their sizes:

1. M2PO's logged M2_after when even the smallest harmful squared log ratio is over the budget (Relax's solver stops
   at k = 0, clip level tau = 0): Relax reports the unclipped second moment (its `csum[-1] / n`, = M2_now), dew_rl
   the mean of min(x^2, tau^2) = 0. Case b, kl2_budget 0.02 and 0.3 (smallest harmful x^2 0.5604): Relax 4.252434,
   dew_rl 0.0. The offsets (the floors 0.3, 0.5), the loss and the gradient agree.
2. RLOO on a group of equal rewards: Relax's G/(G-1) (r - mean) leaves the float32 residue of the mean, dew_rl gives
   exact zeros: 8.94e-8 on each of 0.9 x 3, 7.15e-8 on each of 0.6 x 6 (0.7 x 4 and 0.2 x 2: exact zeros on both
   sides). Within float32 round-off of the rewards (the comparison passes), but not bit-equal.
3. Precision of M2PO's scalars: Relax's are Python floats (a float32 sum divided by n in float64, math.exp of the
   float64 square root), dew_rl's float32; they differ by at most 1.06 float32 ulps here (relative 9.7e-8).
"""
from __future__ import annotations

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dew_rl as rl
from frozen import assert_inputs_are_the_scripts, case_arrays, close, comparer, load_script, npz_fixture, relax_meta
from frozen import relax_output as relax

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "ppo2_relax.npz"
SCRIPT = ROOT / "tools" / "make_relax_ppo2_fixtures.py"
CASES = ("a", "b", "c")
BUDGETS = (0.02, 0.3, 2.0)
PPO = ((0.2, 0.2, None), (0.2, 0.28, 3.0))
SCALARS = ("m2po_m2_now", "m2po_m2_after", "m2po_eps_low", "m2po_eps_high")
ZERO_LEVEL = {("b", 0.02), ("b", 0.3)}  # item 1: the water-filling level is 0


fx = npz_fixture(FIXTURE)
assert_close = comparer("Relax")


def tok(fx, case):
    "(log_probs, old_log_probs, advantages, mask) as float32 JAX arrays."
    return case_arrays(fx, case, ("log_probs", "old_log_probs", "advantages", "mask"))


def pack(fx, case, a):
    "Relax's layout: the valid tokens, flattened in row order."
    return np.asarray(a)[fx[f"in/{case}/mask"] > 0]


def ppo_params(e, h, c):
    return dict(eps_clip=e, eps_clip_high=h, eps_clip_c=c)


def log_ratio32(fx, case):
    "The float32 log ratio both frameworks compute, as float64."
    return (fx[f"in/{case}/log_probs"] - fx[f"in/{case}/old_log_probs"]).astype(np.float64)


def grad_terms_aux(f, lp):
    "d/d lp of f(lp)[0].sum(), f's terms and its indicators."
    g, (t, aux) = jax.grad(lambda x: (lambda out: (out[0].sum(), out))(f(x)), has_aux=True)(lp)
    return np.asarray(t), np.asarray(g), aux


# ------------------------------------------------------------------ dew_rl's side
def ours_bounds(fx, case, budget, sign=1.0, adv=None, **kw):
    "m2po_clip_bounds as (eps_low, eps_high, M2_now, M2_after) floats."
    lp, old, A, m = tok(fx, case)
    lo, hi, st = rl.m2po_clip_bounds(sign * (lp - old), A if adv is None else adv, m, budget, **kw)
    return float(lo), float(hi), float(st["m2po_m2_now"]), float(st["m2po_m2_after"])


def ours_m2po(fx, case, budget):
    "m2po_terms: packed terms, gradient and clip indicator."
    lp, old, A, m = tok(fx, case)
    t, g, ind = grad_terms_aux(lambda x: rl.m2po_terms(x - old, A, m, budget), lp)
    return pack(fx, case, t), pack(fx, case, g), pack(fx, case, ind["clipped"]), pack(fx, case, ind["dual_clipped"])


def ours_ppo(fx, case, e, h, c, sign=1.0):
    "clipped_surrogate_terms: packed terms, gradient, clipped and dual_clipped indicators."
    lp, old, A, m = tok(fx, case)
    t, g, ind = grad_terms_aux(
        lambda x: rl.clipped_surrogate_terms(sign * (x - old), A, m, epsilon_low=e, epsilon_high=h, dual_clip=c), lp)
    return pack(fx, case, t), pack(fx, case, g), pack(fx, case, ind["clipped"]), pack(fx, case, ind["dual_clipped"])


def ours_reinforce(fx, case, of_ratio=False):
    lp, old, A, m = tok(fx, case)
    t, g, _ = grad_terms_aux(lambda x: (rl.reinforce_terms(x - old if of_ratio else x, A, m)[0], None), lp)
    return pack(fx, case, t), pack(fx, case, g)


def groups(fx):
    return fx["in/r/rewards"], fx["in/r/group"]


# ------------------------------------------------------------------ the fixture itself
def test_stored_inputs_are_the_scripts(fx):
    assert_inputs_are_the_scripts(fx, load_script(SCRIPT).make_inputs(),
                                  lambda k: np.int32 if k == "in/r/group" else np.float32)


def test_json_describes_every_output(fx):
    mod, meta = relax_meta(FIXTURE, SCRIPT, "redai-studio/Relax", fx)
    assert mod.FILE == "relax/utils/training/ppo_utils.py"
    assert meta["definitions"] == list(mod.DEFINITIONS) and len(mod.DEFINITIONS) == 7
    kinds = {}
    for r in meta["records"]:
        kinds[r["kind"]] = kinds.get(r["kind"], 0) + 1
        assert r["dtype"] == ("python float" if r["kind"] in SCALARS else "torch.float32"), r["key"]
    assert kinds == {"m2po_loss": 9, "m2po_clipfrac": 9, "m2po_grad": 9, "m2po_m2_now": 9, "m2po_m2_after": 9,
                     "m2po_eps_low": 9, "m2po_eps_high": 9, "ppo_loss": 6, "ppo_clipfrac": 6, "ppo_grad": 6,
                     "rloo_loss": 3, "rloo_loss_clipfrac": 3, "rloo_loss_grad": 3, "rloo_loo": 7}
    assert len(meta["records"]) == 97 and FIXTURE.stat().st_size < 300_000
    assert {r["framework_function"].split(":")[1] for r in meta["records"]} == {
        "compute_m2po_loss", "compute_policy_loss", "compute_rloo_loss", "compute_rloo_leave_one_out_rewards"}


def test_script_refuses_other_definitions():
    "The pin is over the definitions' source: a text missing them, or with other bodies, is refused (no torch needed)."
    mod = load_script(SCRIPT)
    with pytest.raises(SystemExit, match="not"):
        mod.definitions("def compute_rloo_loss(log_probs, advantages):\n    return -advantages * log_probs\n")
    fake = "".join(f"def {n}(*args):\n    return None\n\n\n" for n in mod.DEFINITIONS)
    with pytest.raises(SystemExit, match="sha256"):
        mod.definitions(fake)


def test_packed_outputs_have_one_entry_per_valid_token(fx):
    for case in CASES:
        n = int((fx[f"in/{case}/mask"] > 0).sum())
        for b in BUDGETS:
            for kind in ("m2po_loss", "m2po_clipfrac", "m2po_grad"):
                assert relax(fx, case, kind, kl2_budget=b).shape == (n,)
            for kind in SCALARS:
                assert relax(fx, case, kind, kl2_budget=b).shape == ()
        for e, h, c in PPO:
            for kind in ("ppo_loss", "ppo_clipfrac", "ppo_grad"):
                assert relax(fx, case, kind, **ppo_params(e, h, c)).shape == (n,)
        for kind in ("rloo_loss", "rloo_loss_clipfrac", "rloo_loss_grad"):
            assert relax(fx, case, kind).shape == (n,)


def harmful32(fx, case):
    "Relax's harmful tokens (valid ones): A > 1e-12 with ratio > 1, A < -1e-12 with ratio < 1 (float32 ratio)."
    m = fx[f"in/{case}/mask"] > 0
    r = np.exp(np.float32(fx[f"in/{case}/log_probs"] - fx[f"in/{case}/old_log_probs"]))
    A = fx[f"in/{case}/advantages"]
    return m & (((A > 1e-12) & (r > np.float32(1.0))) | ((A < -1e-12) & (r < np.float32(1.0))))


def m2po_level(fx, case, budget):
    """Relax's water-filling on the harmful tokens' float32 squares d2 (sorted), in float64: (regime, k, level sums,
    b n, the squares); the level is d2[k - 1] (0 when k = 0)."""
    h = harmful32(fx, case)
    d2 = np.sort((np.float32(log_ratio32(fx, case)[h]) ** 2).astype(np.float64))
    n = len(d2)
    if d2.mean() <= budget:
        return "holds", None, None, budget * n, d2
    level = np.array([np.minimum(d2, s).sum() for s in d2])  # sum of min(d2, d2[k])
    k = int(np.argmax(level >= budget * n))  # Relax: the first k whose level reaches b n
    lo, hi = (float(relax(fx, case, kk, kl2_budget=budget)) for kk in ("m2po_eps_low", "m2po_eps_high"))
    regime = "level 0" if k == 0 else ("floors" if (lo, hi) == (0.3, 0.5) else "tau")
    return regime, k, level, budget * n, d2


def level_token(fx, case, budget):
    "Valid-token (packed) indicator of the harmful token(s) whose square is the water-filling level (regime tau)."
    regime, k, _, _, d2 = m2po_level(fx, case, budget)
    assert regime == "tau"
    x = np.float32(log_ratio32(fx, case))
    return pack(fx, case, harmful32(fx, case) & ((x ** 2).astype(np.float64) == d2[k - 1]))


def test_inputs_cover_the_corners(fx):
    """Interior holes, a fully masked row, advantages of both signs with exact zeros, ratios far from 1, one l = 0;
    M2PO's budget binding at the floors, at a level above them, at level 0, and holding; no decision within
    round-off of its threshold (the budget, the water-filling level, PPO's bands, the dual clip, M2PO's bounds),
    except the token whose square sets the level: its ratio is the bound (see test_m2po_level_token)."""
    regimes = {}
    for case in CASES:
        for b in BUDGETS:
            regime, k, level, bn, d2 = m2po_level(fx, case, b)
            regimes[case, b] = regime
            assert abs(d2.mean() - b) > 1e-3 * b, (case, b)
            if k is not None:
                assert abs(level[k] - bn) > 1e-4 * bn and (k == 0 or abs(level[k - 1] - bn) > 1e-4 * bn), (case, b)
    assert regimes == {("a", 0.02): "floors", ("a", 0.3): "tau", ("a", 2.0): "holds", ("b", 0.02): "level 0",
                       ("b", 0.3): "level 0", ("b", 2.0): "tau", ("c", 0.02): "holds", ("c", 0.3): "holds",
                       ("c", 2.0): "holds"}
    for case in CASES:
        m, A = fx[f"in/{case}/mask"], fx[f"in/{case}/advantages"]
        v = m > 0
        assert np.any(np.diff(m, axis=1) > 0), case  # an interior hole
        assert np.any(A[v] > 0) and np.any(A[v] < 0) and np.any(A[v] == 0), case
        rho = np.exp(log_ratio32(fx, case))[v]
        assert rho.max() > 9 and rho.min() < 0.25, case
        for bound in (0.8, 1.2, 1.28, 3.0):
            assert np.abs(rho - bound).min() > 1e-4, (case, bound)
        for b in BUDGETS:
            at = level_token(fx, case, b) if regimes[case, b] == "tau" else np.zeros(rho.shape, bool)
            lo, hi = (float(relax(fx, case, k, kl2_budget=b)) for k in ("m2po_eps_low", "m2po_eps_high"))
            assert np.abs(rho - (1 - lo))[~at].min() > 1e-4 and np.abs(rho - (1 + hi))[~at].min() > 1e-4, (case, b)
    assert fx["in/b/mask"][3].sum() == 0 and fx["in/b/mask"][0, 7] == 0 and log_ratio32(fx, "b")[0, 7] > 14.99
    assert np.all(np.abs(log_ratio32(fx, "b")[fx["in/b/mask"] > 0]) >= 0.5 - 1e-6)
    # the exact l = 0 with A != 0 in case a: not harmful on either side (ratio exactly 1)
    at = (log_ratio32(fx, "a") == 0) & (fx["in/a/mask"] > 0)
    assert at.sum() == 1 and fx["in/a/advantages"][at][0] != 0 and not harmful32(fx, "a")[at].any()
    # RLOO: groups of 2 to 6, equal-reward groups and partial ties
    r, g = groups(fx)
    sizes = np.bincount(g)
    assert sorted(set(sizes.tolist())) == [2, 3, 4, 5, 6]
    equal = [i for i in range(len(sizes)) if np.all(r[g == i] == r[g == i][0])]
    assert equal == [1, 2, 5, 6]
    assert all(len(np.unique(r[g == i])) < sizes[i] for i in (3, 4))


# ------------------------------------------------------------------ M2PO
@pytest.mark.parametrize("budget", BUDGETS)
@pytest.mark.parametrize("case", CASES)
def test_m2po_matches(fx, case, budget):
    p = dict(kl2_budget=budget)
    lo, hi, now, after = ours_bounds(fx, case, budget)
    assert_close(lo, relax(fx, case, "m2po_eps_low", **p), f"{case} {p} eps_low")
    assert_close(hi, relax(fx, case, "m2po_eps_high", **p), f"{case} {p} eps_high")
    assert_close(now, relax(fx, case, "m2po_m2_now", **p), f"{case} {p} M2_now")
    if (case, budget) not in ZERO_LEVEL:  # item 1
        assert_close(after, relax(fx, case, "m2po_m2_after", **p), f"{case} {p} M2_after")
    t, g, clipped, dual = ours_m2po(fx, case, budget)
    assert_close(t, relax(fx, case, "m2po_loss", **p), f"{case} {p} pg_loss")
    assert_close(g, relax(fx, case, "m2po_grad", **p), f"{case} {p} gradient")
    np.testing.assert_array_equal(clipped, relax(fx, case, "m2po_clipfrac", **p) > 0)
    assert not dual.any()  # M2PO has no dual clip


def test_m2po_level_token(fx):
    """Where the budget sets the level (case a 0.3, case b 2.0), the harmful token whose square is the level has its
    ratio on the bound (1 + eps_high, within 2.2e-8): clipping it or not is a round-off decision, which both sides
    take the same way (not clipped), so its loss and its non-zero gradient agree (a clip would zero the gradient)."""
    for case, b in (("a", 0.3), ("b", 2.0)):
        at = level_token(fx, case, b)
        assert at.sum() == 1
        hi = float(relax(fx, case, "m2po_eps_high", kl2_budget=b))
        rho = np.exp(pack(fx, case, log_ratio32(fx, case)))
        assert abs(rho[at][0] - (1 + hi)) < 3e-8
        _, g, clipped, _ = ours_m2po(fx, case, b)
        assert not clipped[at].any() and not relax(fx, case, "m2po_clipfrac", kl2_budget=b)[at].any()
        theirs = relax(fx, case, "m2po_grad", kl2_budget=b)[at][0]
        assert theirs != 0 and abs(g[at][0] - theirs) <= 1e-6 * abs(theirs)


def test_m2po_m2_after_at_level_zero(fx):
    """Item 1: in case b with kl2_budget 0.02 and 0.3 every harmful x^2 (the smallest 0.5604) is over the budget, so
    both clip at level 0 (the offsets fall to the floors 0.3, 0.5). Relax logs M2_after = M2_now = 4.252434,
    dew_rl 0.0, the mean of min(x^2, 0); with kl2_budget 2.0 (level > 0) both log 1.733524."""
    h = harmful32(fx, "b")
    assert abs(float((np.float32(log_ratio32(fx, "b")[h]) ** 2).min()) - 0.5604) < 1e-4
    for b in (0.02, 0.3):
        lo, hi, now, after = ours_bounds(fx, "b", b)
        theirs = {k: float(relax(fx, "b", k, kl2_budget=b)) for k in SCALARS}
        assert (theirs["m2po_eps_low"], theirs["m2po_eps_high"]) == (0.3, 0.5)
        assert abs(lo - 0.3) < 1e-7 and hi == 0.5
        assert theirs["m2po_m2_after"] == theirs["m2po_m2_now"]
        assert abs(theirs["m2po_m2_after"] - 4.252434) < 1e-6 and after == 0.0
        assert_close(now, theirs["m2po_m2_now"], f"b {b} M2_now")
    _, _, _, after = ours_bounds(fx, "b", 2.0)
    assert abs(after - 1.733524) < 1e-6
    assert abs(float(relax(fx, "b", "m2po_m2_after", kl2_budget=2.0)) - 1.733524) < 1e-6


def test_m2po_within_budget_does_not_clip(fx):
    """Where the budget holds, both encode "no clip" as the offsets (1.0, 99999.0) (ratio bounds (0, 1e5)), and
    M2_after = M2_now: case c for every budget (harmful |x| <= 0.12, non-harmful ratios 0.06 to 12 untouched) and
    case a with kl2_budget 2.0, whose harmful ratios up to 9.0 the floors alone would clip."""
    for case, b in (("c", 0.02), ("c", 0.3), ("c", 2.0), ("a", 2.0)):
        lo, hi, now, after = ours_bounds(fx, case, b)
        assert (lo, hi) == (1.0, 99999.0) == tuple(float(relax(fx, case, k, kl2_budget=b))
                                                   for k in ("m2po_eps_low", "m2po_eps_high"))
        assert now == after and float(relax(fx, case, "m2po_m2_now", kl2_budget=b)) == float(
            relax(fx, case, "m2po_m2_after", kl2_budget=b))
        assert not relax(fx, case, "m2po_clipfrac", kl2_budget=b).any()
    rho = np.exp(log_ratio32(fx, "a"))[harmful32(fx, "a")]
    assert rho.max() > 9.0 and (rho > 1.5).sum() >= 2


def test_m2po_scalar_precision(fx):
    """Item 3: Relax's M2PO scalars are Python floats from float32 sums (M2_now = float32 sum / n in float64; the
    offsets from math.exp of a float64 square root), dew_rl's float32: within 1.06 float32 ulps of Relax's value here
    (relative <= 9.7e-8; the largest is M2_now of case a), not bit-equal."""
    ulps = []
    for case in CASES:
        for b in BUDGETS:
            ours = dict(zip(SCALARS, ours_bounds(fx, case, b)[2:] + ours_bounds(fx, case, b)[:2]))
            for k in SCALARS:
                if k == "m2po_m2_after" and (case, b) in ZERO_LEVEL:
                    continue
                theirs = float(relax(fx, case, k, kl2_budget=b))
                ulps.append(abs(ours[k] - theirs) / np.spacing(np.float32(theirs)))
    assert 1.0 < max(ulps) < 1.1, max(ulps)


# ------------------------------------------------------------------ PPO's clip
@pytest.mark.parametrize("setting", PPO)
@pytest.mark.parametrize("case", CASES)
def test_ppo_matches(fx, case, setting):
    p = ppo_params(*setting)
    t, g, clipped, dual = ours_ppo(fx, case, *setting)
    assert_close(t, relax(fx, case, "ppo_loss", **p), f"{case} {p} pg_losses")
    assert_close(g, relax(fx, case, "ppo_grad", **p), f"{case} {p} gradient")
    np.testing.assert_array_equal(clipped, relax(fx, case, "ppo_clipfrac", **p) > 0)
    if setting[2] is None:
        assert not dual.any()


def test_ppo_dual_clip_indicator(fx):
    """Relax's clipfrac does not count the dual clip (nor does dew_rl's "clipped"); dew_rl's "dual_clipped" is where
    Relax's loss is capped: A < 0 and its dual-clipped loss below the loss without the dual clip (for A < 0 the upper
    offset 0.2 / 0.28 does not matter), with a zero gradient there. 0, 12 and 11 tokens in cases a, b, c."""
    counts = {}
    for case in CASES:
        A = pack(fx, case, fx[f"in/{case}/advantages"])
        _, _, clipped, dual = ours_ppo(fx, case, 0.2, 0.28, 3.0)
        with_dual = relax(fx, case, "ppo_loss", **ppo_params(0.2, 0.28, 3.0))
        without = relax(fx, case, "ppo_loss", **ppo_params(0.2, 0.2, None))
        capped = (A < 0) & (without > with_dual)
        np.testing.assert_array_equal(dual, capped)
        np.testing.assert_allclose(with_dual[capped], -3.0 * A[capped], rtol=1e-6)
        assert np.all(relax(fx, case, "ppo_grad", **ppo_params(0.2, 0.28, 3.0))[capped] == 0)
        assert not (clipped & dual).any()
        counts[case] = int(dual.sum())
    assert counts == {"a": 0, "b": 12, "c": 11}


# ------------------------------------------------------------------ RLOO
@pytest.mark.parametrize("case", CASES)
def test_rloo_loss_matches(fx, case):
    t, g = ours_reinforce(fx, case)
    assert_close(t, relax(fx, case, "rloo_loss"), f"{case} pg_loss")
    assert_close(g, relax(fx, case, "rloo_loss_grad"), f"{case} gradient")
    assert not relax(fx, case, "rloo_loss_clipfrac").any()


def test_rloo_leave_one_out_matches(fx):
    r, g = groups(fx)
    ours = np.asarray(rl.rloo_advantage(jnp.asarray(r), jnp.asarray(g)))
    for i in range(int(g.max()) + 1):
        theirs = relax(fx, "r", "rloo_loo", group=i)
        assert_close(ours[g == i], theirs, f"group {i}")
        # the fixed-size form of dew_rl (group = G) on the group alone gives the same
        np.testing.assert_array_equal(np.asarray(rl.rloo_advantage(jnp.asarray(r[g == i]), int((g == i).sum()))),
                                      ours[g == i])


def test_rloo_equal_rewards(fx):
    """Item 2: on groups of equal rewards dew_rl's advantages are exact zeros; Relax's G/(G-1) (r - mean) keeps the
    float32 residue of the mean: 8.94e-8 on 0.9 x 3 and 7.15e-8 on 0.6 x 6; exact zeros on 0.7 x 4 and 0.2 x 2."""
    r, g = groups(fx)
    ours = np.asarray(rl.rloo_advantage(jnp.asarray(r), jnp.asarray(g)))
    residue = {}
    for i in (1, 2, 5, 6):
        assert np.all(ours[g == i] == 0), i
        theirs = relax(fx, "r", "rloo_loo", group=i)
        assert np.all(theirs == theirs[0]), i
        residue[i] = float(theirs[0])
    np.testing.assert_allclose([residue[1], residue[5]], [8.940697e-8, 7.152558e-8], rtol=1e-5)
    assert residue[2] == 0.0 and residue[6] == 0.0


# ------------------------------------------------------------------ the comparison can fail
def test_the_comparison_can_fail(fx):
    """Plausible slips, each caught. M2PO: Relax's ppo_kl (old - new) fed as the log ratio; the second moment over
    every valid token instead of the harmful ones; no miniclip floors; the floors applied where the budget holds;
    the dual clip added. PPO: the log ratio's sign flipped; no dual clip; a symmetric 0.2 band for eps_clip_high
    0.28. RLOO: the log ratio in place of the log-probs; the advantage's sign flipped; the plain group-mean baseline
    (no G / (G - 1)); GRPO's division by the group's standard deviation."""
    # M2PO, kl2_budget 0.3 on case a and 2.0 on case b: the offsets set by the budget
    for case, b in (("a", 0.3), ("b", 2.0)):
        theirs = [float(relax(fx, case, k, kl2_budget=b)) for k in ("m2po_eps_low", "m2po_eps_high", "m2po_m2_now")]
        flipped = ours_bounds(fx, case, b, sign=-1.0)
        assert not close(flipped[:3], theirs), (case, b)
        lp, old, A, m = tok(fx, case)
        every = ours_bounds(fx, case, b, adv=jnp.sign(lp - old))  # every token with x != 0 counted as harmful
        assert not close(every[:3], theirs), (case, b)
    lo, hi, _, _ = ours_bounds(fx, "a", 0.02, miniclip_low=0.0, miniclip_high=0.0)
    assert not close([lo, hi], [float(relax(fx, "a", k, kl2_budget=0.02)) for k in ("m2po_eps_low", "m2po_eps_high")])
    floors, _, _, _ = ours_ppo(fx, "a", 0.3, 0.5, None)
    assert not close(floors, relax(fx, "a", "m2po_loss", kl2_budget=2.0))
    lp, old, A, m = tok(fx, "b")
    lo, hi, _ = rl.m2po_clip_bounds(lp - old, A, m, 2.0)
    dual, _ = rl.clipped_surrogate_terms(lp - old, A, m, lo, hi, 3.0)
    assert not close(pack(fx, "b", dual), relax(fx, "b", "m2po_loss", kl2_budget=2.0))
    # PPO
    for case in CASES:
        for setting in PPO:
            p = ppo_params(*setting)
            assert not close(ours_ppo(fx, case, *setting, sign=-1.0)[0], relax(fx, case, "ppo_loss", **p)), (case, p)
    for case in ("b", "c"):
        assert not close(ours_ppo(fx, case, 0.2, 0.28, None)[0], relax(fx, case, "ppo_loss", **ppo_params(*PPO[1])))
    for case in ("a", "b"):
        assert not close(ours_ppo(fx, case, 0.2, 0.2, 3.0)[0], relax(fx, case, "ppo_loss", **ppo_params(*PPO[1])))
    # RLOO
    for case in CASES:
        assert not close(ours_reinforce(fx, case, of_ratio=True)[0], relax(fx, case, "rloo_loss")), case
        assert not close(-ours_reinforce(fx, case)[1], relax(fx, case, "rloo_loss_grad")), case
    r, g = groups(fx)
    for i in (0, 3, 4):
        x = r[g == i].astype(np.float64)
        theirs = relax(fx, "r", "rloo_loo", group=i)
        assert not close(x - x.mean(), theirs), i
        assert not close((x - x.mean()) / x.std(ddof=1), theirs), i
