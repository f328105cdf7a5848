"""dew_rl's P3O (`p3o_ess`, `p3o_terms`) against Relax's frozen outputs (tests/fixtures/p3o_relax.npz).

The fixture was written by tools/make_relax_p3o_fixtures.py, which executed Relax's own
relax/utils/training/p3o_utils.py (redai-infra/Relax at the revision in the .json beside it, sha256 pinned) on
inputs it drew with a fixed seed and stored under in/<case>/<name>. No framework is needed here: dew_rl's side is
recomputed from the stored inputs, in float32, and compared at float32 round-off
(|dew_rl - Relax| <= 1e-6 + 1e-5 * max|Relax|).

What agrees: the ESS (`finalize_p3o_step_context`), the per-token loss `score_loss + adaptive_kl_loss` and its
gradient w.r.t. the log-probs for both KL modes (dew_rl's `kl_mode` takes Relax's names, "proxy" / "proxy_safe"),
the behaviour-KL proxy and the adaptive KL loss separately, the score loss separately (isolated in float64), the cap
hits (exactly), and exact zeros on every masked position on both sides.

One convention differs, within round-off, pinned below: Relax sums the ESS statistics in float64 (from the float32
log ratio), dew_rl in the input's dtype with float32 as the floor. On these inputs dew_rl's float32 ESS is 0.5 to 3
float32 ulps from Relax's (relative <= 2.5e-7); fed the float32 log ratio in float64, dew_rl gives Relax's ESS to
1e-15.
"""
from __future__ import annotations

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dew_rl as rl
from frozen import assert_inputs_are_the_scripts, close, comparer, load_script, npz_fixture, relax_meta
from frozen import relax_output

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "p3o_relax.npz"
SCRIPT = ROOT / "tools" / "make_relax_p3o_fixtures.py"
CASES = ("a", "b", "c")
MODES = ("proxy", "proxy_safe")


fx = npz_fixture(FIXTURE)
assert_close = comparer("Relax")


def relax(fx, case, kind, mode=None):
    return relax_output(fx, case, kind, **({} if mode is None else {"mode": mode}))


def inputs(fx, case, dtype=jnp.float32):
    return tuple(jnp.asarray(fx[f"in/{case}/{n}"], dtype)
                 for n in ("log_probs", "behavior_log_probs", "advantages", "mask"))


def ours(fx, case, mode, ess=None, adv_scale=1.0, dtype=jnp.float32):
    "dew_rl's per-token terms, capped flags and d/d log_probs of the masked sum."
    lp, beh, adv, m = inputs(fx, case, dtype)
    adv = adv * adv_scale

    def loss(lp):
        terms, aux = rl.p3o_terms(lp, beh, adv, m, ess=ess, kl_mode=mode)
        return (terms * m).sum(), (terms, aux["capped"])

    g, (terms, capped) = jax.grad(loss, has_aux=True)(lp)
    return np.asarray(terms), np.asarray(capped), np.asarray(g)


# ------------------------------------------------------------------ the fixture itself
def test_stored_inputs_are_the_scripts(fx):
    assert_inputs_are_the_scripts(fx, load_script(SCRIPT).make_inputs(), lambda k: np.float32)


def test_json_describes_every_output(fx):
    mod, meta = relax_meta(FIXTURE, SCRIPT, "redai-infra/Relax", fx)
    kinds = {(r["case"], r["kind"], r["params"].get("mode")) for r in meta["records"]}
    assert {(c, "ess", None) for c in CASES} <= kinds
    assert {(c, k, m) for c in CASES for k in mod.TOKEN_KINDS for m in MODES} <= kinds
    assert len(meta["records"]) == 39 and FIXTURE.stat().st_size < 200_000


def test_inputs_cover_the_corners(fx):
    """Interior holes, a fully masked row, log ratios beyond +-10 (the k3 exponent clamp) both ways, a masked +30,
    advantages of both signs, tokens on both sides of the cap, and no ratio within 1e-3 (relative) of the cap."""
    seen_pos = seen_neg = False
    for case in CASES:
        lp, beh, adv, m = (fx[f"in/{case}/{n}"] for n in ("log_probs", "behavior_log_probs", "advantages", "mask"))
        v = m > 0
        l = (lp - beh)[v]
        assert np.any(np.diff(m, axis=1) > 0), case  # a 0 followed by a 1: an interior hole
        assert np.any(adv[v] > 0) and np.any(adv[v] < 0), case
        rho, ess = np.exp(l.astype(np.float64)), float(relax(fx, case, "ess"))
        assert np.abs(rho - ess).min() > 1e-3 * ess, case  # the cap hits are not a round-off coin toss
        seen_pos |= bool(l.max() > 10)
        seen_neg |= bool(l.min() < -10)
    assert seen_pos and seen_neg
    _, _, _, mb = inputs(fx, "b")
    assert np.asarray(mb)[3].sum() == 0
    assert (fx["in/b/log_probs"] - fx["in/b/behavior_log_probs"])[0, 8] == 30.0 and fx["in/b/mask"][0, 8] == 0
    capped = relax(fx, "a", "cap_hits", "proxy")
    assert 0 < capped.sum() < (fx["in/a/mask"] > 0).sum()


# ------------------------------------------------------------------ the ESS
@pytest.mark.parametrize("case", CASES)
def test_ess_matches(fx, case):
    lp, beh, _, m = inputs(fx, case)
    assert_close(rl.p3o_ess(lp, beh, m), relax(fx, case, "ess"), f"{case} ESS")


def test_ess_statistics_precision(fx):
    """The one convention that differs: Relax's S1, S2 are float64 sums of exp(float32 log ratio); dew_rl sums in
    float32 for float32 inputs. The float32 ESS is within 4 float32 ulps of Relax's (measured: a 3.0, b 0.54,
    c 2.3 ulps; relative 2.2e-7, 5.5e-8, 2.4e-7), not bit-equal; given the float32 log ratio in float64, dew_rl's
    ESS is Relax's to 1e-15."""
    diffs = {}
    for case in CASES:
        lp, beh, _, m = inputs(fx, case)
        theirs = float(relax(fx, case, "ess"))
        diffs[case] = abs(float(rl.p3o_ess(lp, beh, m)) - theirs) / np.spacing(np.float32(theirs))
        l32 = np.asarray(lp - beh, np.float32)  # Relax's compute_p3o_log_ratio: a float32 difference
        with jax.enable_x64(True):
            e64 = rl.p3o_ess(jnp.asarray(l32, jnp.float64), jnp.zeros(l32.shape, jnp.float64),
                             jnp.asarray(m, jnp.float64))
            assert e64.dtype == jnp.float64
            assert abs(float(e64) - theirs) <= 1e-15, case
    assert all(d < 4 for d in diffs.values()), diffs
    assert diffs["a"] > 1 and diffs["c"] > 1, diffs  # a real (round-off) difference, not bit-equality


# ------------------------------------------------------------------ the per-token loss and its gradient
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", CASES)
def test_terms_and_gradient_match(fx, case, mode):
    terms, capped, g = ours(fx, case, mode)  # dew_rl's own (float32) ESS, as in training
    assert_close(terms, relax(fx, case, "total", mode), f"{case} {mode} score_loss + adaptive_kl_loss")
    assert_close(g, relax(fx, case, "grad", mode), f"{case} {mode} gradient")
    np.testing.assert_array_equal(capped, relax(fx, case, "cap_hits", mode) > 0)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", CASES)
def test_kl_terms_match(fx, case, mode):
    """With zero advantages dew_rl's terms are (1 - ESS) K: at ESS 0 Relax's behavior_kl_proxy, at the batch's ESS
    its adaptive_kl_loss."""
    kl, _, _ = ours(fx, case, mode, ess=0.0, adv_scale=0.0)
    assert_close(kl, relax(fx, case, "behavior_kl_proxy", mode), f"{case} {mode} behavior_kl_proxy")
    akl, _, _ = ours(fx, case, mode, adv_scale=0.0)
    assert_close(akl, relax(fx, case, "adaptive_kl_loss", mode), f"{case} {mode} adaptive_kl_loss")


def ours_score64(fx, case, ess):
    "dew_rl's score part -sg(min(rho, ess)) A log pi, isolated as terms(A) - terms(0) in float64 (exact enough)."
    with jax.enable_x64(True):
        t1, _, _ = ours(fx, case, "proxy", ess=ess, dtype=jnp.float64)
        t0, _, _ = ours(fx, case, "proxy", ess=ess, adv_scale=0.0, dtype=jnp.float64)
    return t1 - t0


@pytest.mark.parametrize("case", CASES)
def test_score_loss_matches(fx, case):
    ess = float(relax(fx, case, "ess"))
    for mode in MODES:
        assert_close(ours_score64(fx, case, ess), relax(fx, case, "score_loss", mode), f"{case} score_loss")


@pytest.mark.parametrize("case", CASES)
def test_masked_positions_are_exact_zeros(fx, case):
    off = fx[f"in/{case}/mask"] == 0
    for mode in MODES:
        terms, capped, g = ours(fx, case, mode)
        assert np.all(terms[off] == 0) and np.all(g[off] == 0) and not capped[off].any()
        for kind in ("score_loss", "behavior_kl_proxy", "adaptive_kl_loss", "cap_hits", "total", "grad"):
            assert np.all(relax(fx, case, kind, mode)[off] == 0), (case, mode, kind)


def test_kl_modes_differ_only_in_the_gradient_past_the_clamp(fx):
    """Relax's two modes give the same values; the gradients differ where the exponent -l is clamped: at l = -10.5
    (case b) by (1 - ESS)(e^10) = 2.16e4 and at l = -11 (case c) by 9.44e3; at l = +12.5 (case b) by
    (1 - ESS) e^-10 = 4.46e-5, below the comparison's resolution there (2.2e-1). Elsewhere they agree within 2
    float32 ulps of max(|gradient|, e^-l) (measured <= 1; autograd of l + exp(-l) - 1 and Relax's hand-written
    1 - exp(-l) round differently)."""
    for case in CASES:
        np.testing.assert_array_equal(relax(fx, case, "total", "proxy"), relax(fx, case, "total", "proxy_safe"))
    d = {c: np.abs(relax(fx, c, "grad", "proxy") - relax(fx, c, "grad", "proxy_safe")) for c in CASES}
    one_minus = {c: 1.0 - float(relax(fx, c, "ess")) for c in CASES}
    np.testing.assert_allclose(d["b"][6, 4], one_minus["b"] * np.exp(10.0), rtol=1e-5)
    np.testing.assert_allclose(d["c"][2, 1], one_minus["c"] * np.exp(10.0), rtol=1e-5)
    np.testing.assert_allclose(d["b"][1, 2], one_minus["b"] * np.exp(-10.0), rtol=1e-2)
    for c, skip in (("a", []), ("b", [(6, 4), (1, 2)]), ("c", [(2, 1)])):
        e = np.exp(np.clip(fx[f"in/{c}/behavior_log_probs"] - fx[f"in/{c}/log_probs"], -10, 10))  # K's exp term
        scale = np.maximum(np.abs(relax(fx, c, "grad", "proxy")), e).astype(np.float32)
        rest = d[c] / np.spacing(scale)
        for i in skip:
            rest[i] = 0
        assert rest.max() <= 2, (c, rest.max())  # in float32 ulps of max(|gradient|, exp(-l))


# ------------------------------------------------------------------ the comparison can fail
def test_the_comparison_can_fail(fx):
    """Three plausible slips, each caught: the ESS without the 1e-8 in its denominator (visible in case c, where
    S2 ~ 1e-5: the ESS moves by 4.8e-4), the other KL mode's gradient at a clamped token (cases b, c), and a cap at 1
    in place of the ESS (case a, the score loss)."""
    # 1. no epsilon: ESS * (S2 + 1e-8) / S2, with S2 dew_rl's own float32 sum of squares
    lp, beh, _, m = inputs(fx, "c")
    keep = np.asarray(m) > 0
    rho = np.exp(np.asarray(lp - beh, np.float32)[keep])
    s2 = float((rho * rho).sum())
    no_eps = float(rl.p3o_ess(lp, beh, m)) * (s2 + 1e-8) / s2
    assert abs(no_eps - float(relax(fx, "c", "ess"))) > 4e-4
    assert not close(no_eps, relax(fx, "c", "ess"))
    for mode in MODES:
        terms, _, g = ours(fx, "c", mode, ess=no_eps)
        assert not close(terms, relax(fx, "c", "total", mode))
        assert not close(g, relax(fx, "c", "grad", mode))
    # 2. the other KL mode's gradient
    for case in ("b", "c"):
        for mine, theirs in (("proxy", "proxy_safe"), ("proxy_safe", "proxy")):
            _, _, g = ours(fx, case, mine)
            assert not close(g, relax(fx, case, "grad", theirs)), (case, mine)
    _, _, g = ours(fx, "a", "proxy_safe")  # case a never reaches the clamp: the modes agree there
    assert close(g, relax(fx, "a", "grad", "proxy"))
    # 3. a cap at 1 (PPO's ratio 1) instead of the ESS
    assert not close(ours_score64(fx, "a", 1.0), relax(fx, "a", "score_loss", "proxy"))
