"""dew_rl's CISPO, SAPO, OPSM, KL estimators and GAE against Relax's frozen outputs (tests/fixtures/ppo_relax.npz).

The fixture was written by tools/make_relax_ppo_fixtures.py, which executed Relax's own
relax/utils/training/ppo_utils.py (redai-infra/Relax at the revision in the .json beside it, sha256 pinned;
torch.compile the identity, so the functions ran eagerly) on inputs it drew with a fixed seed and stored under
in/<case>/<name>. No framework is needed here: dew_rl's side is recomputed from the stored inputs, in float32, and
compared at float32 round-off (|dew_rl - Relax| <= 1e-6 + 1e-5 * max|Relax|). Relax's per-token outputs are
unmasked; dew_rl's are zero outside the mask, so Relax's are compared times the mask (its gradients of the masked
sum are zero there by construction).

What agrees:

* `signed_cispo_terms(lp - old, lp, A, mask, epsilon_low=eps_clip, epsilon_high=eps_clip_high)` and
  `compute_cispo_loss(lp, old - lp, A, eps_clip, eps_clip_high)`: value, gradient w.r.t. the log-probs and the
  clip indicator (exactly), for (0.2, 0.28) and (1.0, 0.28);
* `sapo_terms(lp - old, A, mask, tau_pos, tau_neg)` and `compute_sapo_loss(old - lp, A, tau_pos, tau_neg)`: value
  and gradient. dew_rl returns no clip indicator; Relax's (gradient weight 4 s (1 - s) < 0.9) is recovered exactly
  from dew_rl's gradient, -g / (rho A), wherever A != 0;
* `kl_penalty(lp, ref, kind)` and `compute_approx_kl(lp, ref, kind)` for k1, k2, low_var_kl (value, gradient);
  `importance_weighted_kl(lp, old, ref, mask, kind)` and `compute_approx_kl(..., importance_ratio=exp(lp - old))` for
  k1, k2 (value, gradient through the ratio);
* `opsm_mask(lp, old, A, mask, delta, scope="token")` and `compute_opsm_mask`: the mask on every loss token (exactly);
* `gae_raw(r, V, mask, gamma, lam)` and the returns of `gae(...)` against both `vanilla_gae` and `chunked_gae`
  (chunk 4, padded), with the prefix mask and with an all-ones mask on Relax's zero-padded rows.

Conventions that differ, pinned below with their sizes:

1. Relax's "k3" is not clamped; dew_rl's "k3" is verl's low_var_kl (clamped to [-10, 10]; dew_rl has no unclamped
   k3). Where k3 > 10 (case a [2, 5], d = 3: 16.09; case b [6, 6], d = 4: 49.60) dew_rl gives 10 and a zero
   gradient, Relax the value and the gradient 1 - e^d (-19.09, -53.60). Everywhere else they agree.
2. With the importance ratio r = pi/pi_old, Relax clamps low_var_kl after weighting, min(r k3, 10); dew_rl weights
   the clamped estimate, r min(k3, 10). They differ wherever r k3 > 10 or k3 > 10 (8 valid tokens here, up to 77.5 in
   value), and so does the "k3" of item 1 times r.
3. OPSM's per-token mask at loss-masked positions: Relax marks a dropped sample's negative-advantage positions 0
   whether or not they are loss tokens, dew_rl's mask is 0 at every non-loss position; harmless (the loss mask
   multiplies), but Relax's `opsm_clipfrac` (a sum over samples of dropped positions / loss tokens, not "the count
   of masked sequences" its docstring says) counts those positions too: 3.3690 and 2.0357 where the loss-token
   count gives 2.8833 and 1.7500.
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
FIXTURE = ROOT / "tests" / "fixtures" / "ppo_relax.npz"
SCRIPT = ROOT / "tools" / "make_relax_ppo_fixtures.py"
TOKEN_CASES = ("a", "b", "c")
GAE_CASES = ("g1", "g2")
CISPO_SETTINGS = ((0.2, 0.28), (1.0, 0.28))
TAU = (1.0, 1.05)
DELTAS = (0.1, 0.3)
GAE_SETTINGS = ((1.0, 1.0), (1.0, 0.95), (0.99, 0.9), (0.9, 0.0))
IMPLS = ("vanilla", "chunked")


fx = npz_fixture(FIXTURE)
assert_close = comparer("Relax")


def tok(fx, case):
    "(log_probs, old_log_probs, ref_log_probs, advantages, mask) as float32 JAX arrays."
    return case_arrays(fx, case, ("log_probs", "old_log_probs", "ref_log_probs", "advantages", "mask"))


def grad_and_terms(f, lp):
    "d/d lp of f(lp).sum() (f's terms are already zero outside the mask) and the terms."
    g, t = jax.grad(lambda x: (lambda t: (t.sum(), t))(f(x)), has_aux=True)(lp)
    return np.asarray(t), np.asarray(g)


# ------------------------------------------------------------------ dew_rl's side
def ours_cispo(fx, case, eps_clip, eps_clip_high, fn=None):
    lp, old, _, adv, m = tok(fx, case)
    fn = fn or rl.signed_cispo_terms
    clipped = fn(lp - old, lp, adv, m, epsilon_low=eps_clip, epsilon_high=eps_clip_high)[1]["clipped"]
    t, g = grad_and_terms(lambda x: fn(x - old, x, adv, m, epsilon_low=eps_clip, epsilon_high=eps_clip_high)[0], lp)
    return t, g, np.asarray(clipped)


def ours_sapo(fx, case, tau_pos=TAU[0], tau_neg=TAU[1], sign=1.0):
    lp, old, _, adv, m = tok(fx, case)
    return grad_and_terms(lambda x: rl.sapo_terms(sign * (x - old), adv, m, tau_pos, tau_neg), lp)


def ours_kl(fx, case, kind, importance):
    lp, old, ref, _, m = tok(fx, case)
    if importance == "ratio":
        return grad_and_terms(lambda x: rl.importance_weighted_kl(x, old, ref, m, kind), lp)
    t, g = grad_and_terms(lambda x: rl.kl_penalty(x, ref, kind) * m, lp)
    return np.asarray(rl.kl_penalty(lp, ref, kind)), g  # kl_penalty is unmasked, as Relax's output


def ours_opsm(fx, delta, scope="token", swap=False):
    lp, old, adv, m = (jnp.asarray(fx[f"in/o/{n}"]) for n in ("log_probs", "old_log_probs", "advantages", "mask"))
    if swap:
        lp, old = old, lp
    keep, metrics = rl.opsm_mask(lp, old, adv, m, delta, scope=scope)
    return np.asarray(keep), {k: float(v) for k, v in metrics.items()}


def rows(fx, a):
    "Row i of a [B, T] array cut to the sample's length, concatenated: Relax's layout."
    n = fx["in/o/lengths"]
    return np.concatenate([np.asarray(a)[i, :n[i]] for i in range(len(n))])


def gae_in(fx, case):
    return case_arrays(fx, case, ("rewards", "values", "mask"))


# ------------------------------------------------------------------ the fixture itself
def test_stored_inputs_are_the_scripts(fx):
    assert_inputs_are_the_scripts(fx, load_script(SCRIPT).make_inputs(),
                                  lambda k: np.int32 if k == "in/o/lengths" else np.float32)


def test_json_describes_every_output(fx):
    mod, meta = relax_meta(FIXTURE, SCRIPT, "redai-infra/Relax", fx)
    kinds = {}
    for r in meta["records"]:
        kinds[r["kind"]] = kinds.get(r["kind"], 0) + 1
        assert r["dtype"] == "torch.float32", r["key"]
    assert kinds == {"cispo_loss": 6, "cispo_clipfrac": 6, "cispo_grad": 6, "sapo_loss": 3, "sapo_clipfrac": 3,
                     "sapo_grad": 3, "approx_kl": 24, "approx_kl_grad": 24, "opsm_mask": 2, "opsm_clipfrac": 2,
                     "gae_adv": 16, "gae_ret": 16}
    assert len(meta["records"]) == 111 and FIXTURE.stat().st_size < 300_000
    assert {r["framework_function"].split(":")[1] for r in meta["records"]} == {
        "compute_cispo_loss", "compute_sapo_loss", "compute_approx_kl", "compute_opsm_mask", "vanilla_gae",
        "chunked_gae"}


def test_inputs_cover_the_corners(fx):
    """Interior holes, fully masked rows, ratios far from 1 both ways, advantages of both signs and exact zeros, and
    no decision within round-off of its threshold (CISPO's bands, SAPO's 0.9, OPSM's deltas)."""
    for case in TOKEN_CASES:
        lp, old, ref, adv, m = (np.asarray(a, np.float64) for a in tok(fx, case))
        v = m > 0
        assert np.any(np.diff(m, axis=1) > 0), case  # a 0 followed by a 1: an interior hole
        a = adv[v]
        assert np.any(a > 0) and np.any(a < 0) and np.any(a == 0), case
        rho = np.exp(np.asarray(fx[f"in/{case}/log_probs"] - fx[f"in/{case}/old_log_probs"], np.float64))
        assert rho[v].max() > 3 and rho[v].min() < 0.2, case
        for bound in (1.28, 0.8):
            assert np.abs(rho[v] - bound).min() > 1e-4, (case, bound)
        tau = np.where(adv > 0, TAU[0], TAU[1])
        s = 1 / (1 + np.exp(-tau * (rho - 1)))
        assert np.abs(4 * s * (1 - s) - 0.9)[v].min() > 1e-4, case
    assert fx["in/b/mask"][3].sum() == 0 and fx["in/o/mask"][3].sum() == 0
    assert abs((fx["in/b/log_probs"] - fx["in/b/old_log_probs"])[0, 7] - 15.0) < 1e-5 and fx["in/b/mask"][0, 7] == 0
    # OPSM: per-row drift mean(old - lp) over the loss tokens, well away from both deltas
    m = fx["in/o/mask"].astype(np.float64)
    drift = ((fx["in/o/old_log_probs"] - fx["in/o/log_probs"]) * m).sum(1) / np.maximum(m.sum(1), 1)
    assert min(abs(drift - d).min() for d in DELTAS) > 1e-2
    adv = fx["in/o/advantages"]
    mixed = [i for i in range(len(m)) if (adv[i][m[i] > 0] > 0).any() and (adv[i][m[i] > 0] < 0).any()]
    assert mixed == [5, 6] and (adv[5] * m[5]).sum() > 0 > (adv[6] * m[6]).sum()
    # GAE: T not a multiple of the chunk, rows shorter than T, zero-padded
    for case in GAE_CASES:
        r, v, gm = (fx[f"in/{case}/{n}"] for n in ("rewards", "values", "mask"))
        assert r.shape[1] % 4 != 0 and (gm.sum(1) < r.shape[1]).any()
        assert np.all(r[gm == 0] == 0) and np.all(v[gm == 0] == 0)


# ------------------------------------------------------------------ CISPO
@pytest.mark.parametrize("eps_clip,eps_clip_high", CISPO_SETTINGS)
@pytest.mark.parametrize("case", TOKEN_CASES)
def test_cispo_matches(fx, case, eps_clip, eps_clip_high):
    p = dict(eps_clip=eps_clip, eps_clip_high=eps_clip_high)
    m = fx[f"in/{case}/mask"]
    t, g, clipped = ours_cispo(fx, case, eps_clip, eps_clip_high)
    assert_close(t, relax(fx, case, "cispo_loss", **p) * m, f"{case} {p} pg_loss")
    assert_close(g, relax(fx, case, "cispo_grad", **p), f"{case} {p} gradient")
    np.testing.assert_array_equal(clipped, relax(fx, case, "cispo_clipfrac", **p) * m > 0)
    assert np.all(t[m == 0] == 0) and np.all(g[m == 0] == 0) and not clipped[m == 0].any()


def test_cispo_settings_clip_different_tokens(fx):
    "The two settings differ only on A < 0 tokens with rho < 0.8, which eps_clip = 1 leaves unclipped."
    for case in TOKEN_CASES:
        c02 = relax(fx, case, "cispo_clipfrac", eps_clip=0.2, eps_clip_high=0.28)
        c10 = relax(fx, case, "cispo_clipfrac", eps_clip=1.0, eps_clip_high=0.28)
        rho = np.exp(fx[f"in/{case}/log_probs"] - fx[f"in/{case}/old_log_probs"])
        adv = fx[f"in/{case}/advantages"]
        np.testing.assert_array_equal(c02 - c10, ((adv < 0) & (rho < 0.8)).astype(np.float64))
        assert (c02 - c10).sum() > 0 and c10.sum() > 0, case


# ------------------------------------------------------------------ SAPO
@pytest.mark.parametrize("case", TOKEN_CASES)
def test_sapo_matches(fx, case):
    p = dict(tau_pos=TAU[0], tau_neg=TAU[1])
    m = fx[f"in/{case}/mask"]
    t, g = ours_sapo(fx, case)
    assert_close(t, relax(fx, case, "sapo_loss", **p) * m, f"{case} SAPO pg_loss")
    assert_close(g, relax(fx, case, "sapo_grad", **p), f"{case} SAPO gradient")
    # Relax's clip indicator, 4 s (1 - s) < 0.9, is the gradient weight: dew_rl's gradient is -4 s (1 - s) rho A
    adv = fx[f"in/{case}/advantages"].astype(np.float64)
    rho = np.exp((fx[f"in/{case}/log_probs"] - fx[f"in/{case}/old_log_probs"]).astype(np.float64))
    at = (m > 0) & (adv != 0)
    weight = -g[at] / (rho[at] * adv[at])
    np.testing.assert_array_equal(weight < 0.9, relax(fx, case, "sapo_clipfrac", **p)[at] > 0)
    assert 0 < (weight < 0.9).sum() <= at.sum() - (case != "c"), case  # case c: every ratio far from 1


# ------------------------------------------------------------------ KL estimators
@pytest.mark.parametrize("importance", ("none", "ratio"))
@pytest.mark.parametrize("kind", ("k1", "k2", "low_var_kl", "k3"))
@pytest.mark.parametrize("case", TOKEN_CASES)
def test_kl_matches(fx, case, kind, importance):
    """k1, k2 everywhere; low_var_kl without the ratio; k3 and low_var_kl with the ratio wherever neither r k3 nor
    k3 exceeds 10 (the conventions of items 1 and 2 are pinned in the next tests)."""
    m = fx[f"in/{case}/mask"]
    v, g = ours_kl(fx, case, kind, importance)
    theirs = relax(fx, case, "approx_kl", kl_loss_type=kind, importance=importance)
    theirs_g = relax(fx, case, "approx_kl_grad", kl_loss_type=kind, importance=importance)
    if importance == "ratio":
        theirs = theirs * m
    k3 = relax(fx, case, "approx_kl", kl_loss_type="k3", importance="none")
    r = np.exp((fx[f"in/{case}/log_probs"] - fx[f"in/{case}/old_log_probs"]).astype(np.float64))
    if kind == "k3" or (kind == "low_var_kl" and importance == "ratio"):
        same = (k3 <= 10) & ((r * k3 <= 10) | (importance == "none"))
    else:
        same = np.ones(m.shape, bool)
    assert_close(np.where(same, v, 0), np.where(same, theirs, 0), f"{case} {kind} {importance} value")
    assert_close(np.where(same, g, 0), np.where(same, theirs_g, 0), f"{case} {kind} {importance} gradient")


def test_k3_is_clamped_in_dew_rl_only(fx):
    """Item 1: dew_rl's "k3" is low_var_kl (clamped at 10), Relax's k3 is not. At the two tokens with k3 > 10 (case a
    [2, 5]: 16.09, case b [6, 6]: 49.60) dew_rl gives 10 and a zero gradient, Relax 1 - e^d; with the ratio, r times
    that. Case c has no k3 > 10 and agrees in full."""
    seen = {}
    for case in TOKEN_CASES:
        m = fx[f"in/{case}/mask"]
        k3 = relax(fx, case, "approx_kl", kl_loss_type="k3", importance="none")
        over = k3 > 10
        seen[case] = sorted(map(tuple, np.argwhere(over & (m > 0)).tolist()))
        v, g = ours_kl(fx, case, "k3", "none")
        np.testing.assert_array_equal(v[over], 10.0)
        assert np.all(g[over] == 0)
        d = (fx[f"in/{case}/ref_log_probs"] - fx[f"in/{case}/log_probs"]).astype(np.float64)
        theirs_g = relax(fx, case, "approx_kl_grad", kl_loss_type="k3", importance="none")
        np.testing.assert_allclose(theirs_g[over & (m > 0)], 1 - np.exp(d[over & (m > 0)]), rtol=1e-5)
        r = np.exp((fx[f"in/{case}/log_probs"] - fx[f"in/{case}/old_log_probs"]).astype(np.float64))
        vr, _ = ours_kl(fx, case, "k3", "ratio")
        np.testing.assert_allclose(vr[over & (m > 0)], 10 * r[over & (m > 0)], rtol=1e-5)
    assert seen == {"a": [(2, 5)], "b": [(6, 6)], "c": []}
    np.testing.assert_allclose(relax(fx, "a", "approx_kl", kl_loss_type="k3", importance="none")[2, 5],
                               np.exp(3.0) - 4.0, rtol=1e-5)
    np.testing.assert_allclose(relax(fx, "b", "approx_kl", kl_loss_type="k3", importance="none")[6, 6],
                               np.exp(4.0) - 5.0, rtol=1e-5)
    v, _ = ours_kl(fx, "c", "k3", "ratio")
    assert_close(v, relax(fx, "c", "approx_kl", kl_loss_type="k3", importance="ratio") * fx["in/c/mask"], "c k3")


def test_low_var_kl_clamp_order_differs(fx):
    """Item 2: with r = pi/pi_old, Relax gives min(r k3, 10), dew_rl r min(k3, 10): both formulas hold to round-off
    on every valid token; they differ on 8 (a: 2, b: 1, c: 5), by up to 77.5 (case c)."""
    n_diff, worst = 0, 0.0
    for case in TOKEN_CASES:
        m = fx[f"in/{case}/mask"] > 0
        r = np.exp((fx[f"in/{case}/log_probs"] - fx[f"in/{case}/old_log_probs"]).astype(np.float64))
        k3 = relax(fx, case, "approx_kl", kl_loss_type="k3", importance="none")
        theirs = relax(fx, case, "approx_kl", kl_loss_type="low_var_kl", importance="ratio")
        v, _ = ours_kl(fx, case, "low_var_kl", "ratio")
        assert_close(theirs[m], np.minimum(r * k3, 10)[m], f"{case} Relax's min(r k3, 10)")
        assert_close(v[m], (r * np.minimum(k3, 10))[m], f"{case} dew_rl's r min(k3, 10)")
        differ = m & ((r * k3 > 10) | (k3 > 10))
        n_diff += int(differ.sum())
        worst = max(worst, float(np.abs(v - theirs)[differ].max(initial=0)))
    assert n_diff == 8 and 77 < worst < 78, (n_diff, worst)


# ------------------------------------------------------------------ OPSM
@pytest.mark.parametrize("delta", DELTAS)
def test_opsm_mask_matches(fx, delta):
    keep, _ = ours_opsm(fx, delta)
    theirs = relax(fx, "o", "opsm_mask", opsm_delta=delta)
    loss = rows(fx, fx["in/o/mask"]) > 0
    np.testing.assert_array_equal(rows(fx, keep)[loss], theirs[loss])
    assert 0 < (theirs[loss] == 0).sum() < loss.sum()
    n = fx["in/o/lengths"]
    assert np.all(keep[np.arange(keep.shape[1])[None, :] >= n[:, None]] == 0)


def test_opsm_masked_positions_and_clipfrac(fx):
    """Item 3: Relax's mask is 0 at a dropped sample's negative-advantage positions whether loss tokens or not, and
    its clipfrac counts them: sum_i (dropped positions of i) / max(loss tokens of i, 1)."""
    lengths = fx["in/o/lengths"]
    off = np.concatenate([[0], np.cumsum(lengths)])
    expected = {0.1: (3.3690474, 2.8833333, [(0, 2), (0, 6), (1, 3)]), 0.3: (2.0357141, 1.75, [(0, 2), (0, 6)])}
    for delta, (relax_cf, loss_cf, zeros_off_loss) in expected.items():
        keep, metrics = ours_opsm(fx, delta)
        theirs = relax(fx, "o", "opsm_mask", opsm_delta=delta)
        loss = rows(fx, fx["in/o/mask"]) > 0
        found = [(i, t) for i in range(len(lengths)) for t in range(lengths[i])
                 if not loss[off[i] + t] and theirs[off[i] + t] == 0]
        assert found == zeros_off_loss
        cf = float(relax(fx, "o", "opsm_clipfrac", opsm_delta=delta))
        m = fx["in/o/mask"]
        per_row_n = np.maximum(m.sum(1), 1)
        dropped_all = np.array([(1 - theirs[off[i]:off[i + 1]]).sum() for i in range(len(lengths))])
        np.testing.assert_allclose(cf, (dropped_all / per_row_n).sum(), rtol=1e-6)
        ours_cf = ((m - keep).sum(1) / per_row_n).sum()  # the same sum over the loss tokens only, from dew_rl
        np.testing.assert_allclose([cf, ours_cf], [relax_cf, loss_cf], rtol=1e-6)
        # dew_rl's own metrics: dropped loss tokens / loss tokens, rows with a drop / non-empty rows
        valid_rows = m.sum(1) > 0
        np.testing.assert_allclose(metrics["opsm_masked_fraction"], (m - keep).sum() / m.sum(), rtol=1e-6)
        np.testing.assert_allclose(metrics["opsm_seq_masked_fraction"],
                                   ((m - keep).sum(1) > 0)[valid_rows].mean(), rtol=1e-6)


# ------------------------------------------------------------------ GAE
@pytest.mark.parametrize("gamma,lam", GAE_SETTINGS)
@pytest.mark.parametrize("case", GAE_CASES)
def test_gae_matches(fx, case, gamma, lam):
    r, v, m = gae_in(fx, case)
    adv = rl.gae_raw(r, v, m, gamma, lam)
    adv_ones = rl.gae_raw(r, v, jnp.ones_like(m), gamma, lam)  # Relax's own view: no mask, zero padding
    _, ret = rl.gae(r, v, m, gamma, lam)
    for impl in IMPLS:
        p = dict(impl=impl, gamma=gamma, lambd=lam)
        assert_close(adv, relax(fx, case, "gae_adv", **p), f"{case} {p} advantages")
        assert_close(adv_ones, relax(fx, case, "gae_adv", **p), f"{case} {p} advantages, all-ones mask")
        assert_close(ret, relax(fx, case, "gae_ret", **p), f"{case} {p} returns")


@pytest.mark.parametrize("case", GAE_CASES)
def test_gae_two_level_matches_chunked(fx, case):
    "dew_rl's two-level (chunked) scan, chunk 4 as Relax's chunked_gae here."
    from dew_rl._advantages import gae as gae_mod
    two_level = getattr(gae_mod, "_gae_raw_two_level", None)
    if two_level is None:
        pytest.skip("dew_rl has no two-level GAE scan")
    r, v, m = gae_in(fx, case)
    for gamma, lam in GAE_SETTINGS:
        assert_close(two_level(r, v, m, gamma, lam, chunk=4),
                     relax(fx, case, "gae_adv", impl="chunked", gamma=gamma, lambd=lam), f"{case} two-level")


# ------------------------------------------------------------------ the comparison can fail
def test_the_comparison_can_fail(fx):
    """Plausible slips, each caught: CISPO with the symmetric band (dew_rl's `cispo_terms`) or the log-ratio's sign
    flipped; SAPO fed Relax's ppo_kl (old - new) as the log ratio, or with tau_pos and tau_neg swapped; OPSM at TRL's
    sequence scope or with the drift's sign flipped; k3 with the arguments swapped; GAE with gamma and lambda
    swapped."""
    for case in TOKEN_CASES:
        for e, h in CISPO_SETTINGS:
            p = dict(eps_clip=e, eps_clip_high=h)
            theirs = relax(fx, case, "cispo_loss", **p) * fx[f"in/{case}/mask"]
            t, g, _ = ours_cispo(fx, case, e, h, fn=rl.cispo_terms)
            assert not close(t, theirs) and not close(g, relax(fx, case, "cispo_grad", **p)), (case, p)
            lp, old, _, adv, m = tok(fx, case)
            flipped, _ = rl.signed_cispo_terms(old - lp, lp, adv, m, epsilon_low=e, epsilon_high=h)
            assert not close(flipped, theirs), (case, p)
        theirs = relax(fx, case, "sapo_loss", tau_pos=TAU[0], tau_neg=TAU[1]) * fx[f"in/{case}/mask"]
        assert not close(ours_sapo(fx, case, sign=-1.0)[0], theirs), case
        assert not close(ours_sapo(fx, case, tau_pos=TAU[1], tau_neg=TAU[0])[0], theirs), case
    for delta in DELTAS:
        theirs = relax(fx, "o", "opsm_mask", opsm_delta=delta)
        loss = rows(fx, fx["in/o/mask"]) > 0
        for keep in (ours_opsm(fx, delta, scope="sequence")[0], ours_opsm(fx, delta, swap=True)[0]):
            assert not np.array_equal(rows(fx, keep)[loss], theirs[loss]), delta
    lp, _, ref, _, _ = tok(fx, "a")
    assert not close(rl.kl_penalty(ref, lp, "low_var_kl"),
                     relax(fx, "a", "approx_kl", kl_loss_type="low_var_kl", importance="none"))
    for case in GAE_CASES:
        r, v, m = gae_in(fx, case)
        assert not close(rl.gae_raw(r, v, m, 0.9, 0.99),
                         relax(fx, case, "gae_adv", impl="vanilla", gamma=0.99, lambd=0.9)), case
