"""dew_rl against OpenRLHF 0.11.2 itself, run as an oracle.

The expected values were produced by the real framework (PyPI openrlhf==0.11.2 on torch 2.13.0 CPU) by
tools/make_openrlhf_fixtures.py and frozen in tests/fixtures/openrlhf_0_11_2.npz (the script's docstring says how it is installed); no OpenRLHF code is in this repository. What is compared, and where the conventions
deliberately differ (each difference is asserted exactly, not skipped):

* REINFORCE++ (`reinforce`, gamma 1 and 0.9) and REINFORCE++-baseline (`reinforce_baseline` with the KL
  as a loss, so the pipeline's kl is zero) through `RemoteExperienceMaker.compute_advantages_and_returns`
  over two micro-batch experiences: `reinforce_plus_plus_returns` (kl = OpenRLHF's k1, beta = kl_coef) or
  `group_baseline_advantage`, then `global_masked_normalize`. Valid positions agree; OpenRLHF computes
  the k1, the token rewards, the returns and the moments in float32 (`compute_approx_kl` and the
  normaliser call `.float()`), so the tolerance is float32 rounding of values below ~4 (atol 1e-6; seen
  3.5e-7). Padded positions differ by design (chapter 02d): dew_rl returns exactly 0, OpenRLHF
  (G_pad - mu) * rstd, which is -mu * rstd at trailing pads and in an empty row (see the REINFORCE++ chapter) but
  the whitened return to go at an interior hole, because OpenRLHF's returns are not masked there.
* OpenRLHF clamps the baselined reward and the k1 to +-10 before the return; dew_rl leaves that to the
  caller (chapter 02e). One batch with a reward of 24 and a k1 of 12 shows the outputs differ, and
  agree once the caller clamps.
* `compute_approx_kl` k1/k2/k3 (float32 inside OpenRLHF): k1 and k2 are bit-identical to dew_rl in
  float32; k3 agrees to float32 rounding (OpenRLHF's exp(-d) - 1 + d cancels near 0, dew_rl uses
  expm1). Outside +-10, OpenRLHF clamps k1 and k2 and dew_rl does not (chapter 03b): asserted as
  OpenRLHF = clip(dew_rl, -10, 10). k3 agrees everywhere, even at infinite log-probs (both give 10).
* `PolicyLoss` ("ppo", token mean, eps 0.2 or 0.2/0.28, dual clip 3 or none) against
  `clipped_surrogate(token_log_ratio(...))`, float64, exact: loss, clip ratio, ppo_kl. OpenRLHF's ppo_kl
  is of the unclamped log ratio (see the log-ratio chapter): with two tokens beyond +-20 it differs from the
  token_log_ratio one by exactly the clamped-off excess / N, and equals dew_rl's on the raw difference.
  The per-sample mode (`token_level_loss=False`, 0.11.2's seq-mean-token-mean) equals
  `aggregate(..., "seq-mean-token-mean")` when the caller passes `global_batch_size` = all rows (to
  OpenRLHF's n + 1e-8, so rtol 1e-7); without it, OpenRLHF drops the empty row from the denominator.
* `DPOLoss` (sigmoid, beta 0.1, no label smoothing; and IPO) on the masked per-token sums against
  `preference_logsigmoid` / `preference_ipo` (summed, as OpenRLHF does), float64, exact.
"""
from pathlib import Path

import numpy as np
import pytest

import dew_rl as rl

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "openrlhf_0_11_2.npz"
G = 4
HOLES = ([1, 4, 9], [1, 2, 3])  # the interior holes the generator planted (row, column)
EMPTY_ROW = 6
TOL64 = dict(rtol=1e-12, atol=1e-14)  # float64 on both sides
TOL32 = dict(rtol=0, atol=1e-6)  # OpenRLHF's float32 rewards, returns and moments; values below ~4
F32 = 2.0 ** -22  # two float32 roundings, relative


pytestmark = pytest.mark.usefixtures("x64")  # float64 on both sides


def a(x):
    return np.asarray(x, dtype=np.float64)


def moments(x, m):
    "Population mean and max(var, 1e-8)^-1/2 over the valid positions, float64."
    v = m > 0
    mu = x[v].mean()
    return mu, 1.0 / np.sqrt(max(((x[v] - mu) ** 2).mean(), 1e-8))


def check_pipeline(ref, raw, theirs_adv, theirs_ret):
    "Valid positions equal dew_rl's; every other position is OpenRLHF's (G_pad - mu) * rstd."
    m = ref["mask"]
    v = m > 0
    ours = a(rl.global_masked_normalize(raw, m))
    np.testing.assert_allclose(ours[v], theirs_adv[v], **TOL32)
    np.testing.assert_allclose(raw[v], theirs_ret[v], **TOL32)
    np.testing.assert_array_equal(ours[~v], 0.0)  # dew_rl: exactly zero outside the mask
    mu, rstd = moments(raw, m)
    np.testing.assert_allclose(theirs_adv[~v], (theirs_ret[~v] - mu) * rstd, **TOL32)
    trailing = ~v & (np.cumsum(m[:, ::-1], 1)[:, ::-1] == 0)  # after the last valid token, or an empty row
    assert trailing[EMPTY_ROW].all() and trailing.sum() > 10
    np.testing.assert_array_equal(theirs_ret[trailing], 0.0)
    np.testing.assert_allclose(theirs_adv[trailing], -mu * rstd, **TOL32)  # an unmasked pad is whitened too: (0 - mu) * rstd
    assert np.abs(mu * rstd) > 1e-3  # so the pads are really non-zero
    return mu, rstd


@pytest.mark.parametrize("gamma,beta", [(1.0, 0.01), (0.9, 0.1)])
def test_reinforce_plus_plus(ref, gamma, beta):
    m, kl = ref["mask"], ref["rf/kl"]
    np.testing.assert_allclose(kl, ref["rf/old_log_probs"] - ref["rf/ref_log_probs"], rtol=F32)  # OpenRLHF's k1
    assert np.abs(kl).max() < 10 and np.abs(ref["rf/rewards"]).max() < 10  # inside both clamps
    raw = a(rl.reinforce_plus_plus_returns(ref["rf/rewards"], kl, m, beta, gamma))
    key = f"rf/reinforce_{gamma}_{beta}"
    mu, rstd = check_pipeline(ref, raw, ref[f"{key}/advantages"], ref[f"{key}/returns"])
    # At an interior hole OpenRLHF keeps the return to go: dew_rl's return with the hole made valid
    # but carrying no KL (its reward is zero in OpenRLHF) reproduces it.
    filled = m.copy()
    filled[HOLES] = 1.0
    carried = a(rl.reinforce_plus_plus_returns(ref["rf/rewards"], kl * m, filled, beta, gamma))
    np.testing.assert_allclose(ref[f"{key}/returns"][HOLES], carried[HOLES], **TOL32)
    np.testing.assert_allclose(ref[f"{key}/advantages"][HOLES], (carried[HOLES] - mu) * rstd, **TOL32)
    assert np.abs(carried[HOLES]).min() > 1e-3


def test_reinforce_plus_plus_baseline(ref):
    m = ref["mask"]
    raw = a(rl.group_baseline_advantage(ref["rf/rewards"], m, G))
    assert np.abs(raw).max() < 10
    mu, rstd = check_pipeline(ref, raw, ref["rf/baseline/advantages"], ref["rf/baseline/returns"])
    # the hole carries the row's baselined reward (returns summed from the last token back)
    c = ref["rf/rewards"].reshape(-1, G)
    c = (c - c.mean(1, keepdims=True)).reshape(-1)
    np.testing.assert_allclose(ref["rf/baseline/advantages"][HOLES], (c[HOLES[0]] - mu) * rstd, **TOL32)


def test_reward_and_kl_clamps(ref):
    """OpenRLHF clamps the (baselined) reward and the k1 to +-10; dew_rl takes them as given."""
    m, v = ref["mask"], ref["mask"] > 0
    raw_kl = ref["rf/old_log_probs"] - ref["clamp/ref_log_probs"]
    assert raw_kl[3, 0] == 12.0 and ref["clamp/kl"][3, 0] == 10.0 and ref["clamp/rewards"][2] == 24.0
    theirs = ref["clamp/reinforce/advantages"]
    unclamped = a(rl.global_masked_normalize(rl.reinforce_plus_plus_returns(ref["clamp/rewards"], raw_kl, m, 0.1), m))
    clamped = a(rl.global_masked_normalize(
        rl.reinforce_plus_plus_returns(np.clip(ref["clamp/rewards"], -10, 10), np.clip(raw_kl, -10, 10), m, 0.1), m))
    np.testing.assert_allclose(clamped[v], theirs[v], **TOL32)
    assert np.abs(unclamped - theirs)[v].max() > 0.4  # 0.448 on this batch
    theirs = ref["clamp/baseline/advantages"]
    base = a(rl.group_baseline_advantage(ref["clamp/rewards"], m, G))
    assert base[2].max() > 17.9  # 24 minus its group mean
    np.testing.assert_allclose(a(rl.global_masked_normalize(np.clip(base, -10, 10), m))[v], theirs[v], **TOL32)
    assert np.abs(a(rl.global_masked_normalize(base, m)) - theirs)[v].max() > 0.4  # 0.473


@pytest.mark.parametrize("k", ["k1", "k2", "k3"])
def test_kl_estimators_inside_the_clamp(ref, k):
    lp, rf, theirs = ref["kl/log_probs"], ref["kl/ref_log_probs"], ref[f"kl/{k}"]
    ours = a(getattr(rl, f"{k}_kl")(lp, rf))
    if k == "k3":  # float32 exp(-d) - 1 + d in OpenRLHF: absolute error near one float32 ulp of 1
        np.testing.assert_allclose(ours, theirs, rtol=F32, atol=2.5e-7)
    else:
        assert np.abs(theirs).max() < 10
        np.testing.assert_allclose(ours, theirs, rtol=F32, atol=0)
        ours32 = np.asarray(getattr(rl, f"{k}_kl")(lp.astype(np.float32), rf.astype(np.float32)))
        np.testing.assert_array_equal(ours32, theirs.astype(np.float32))  # bit-identical in float32


def test_kl_estimators_outside_the_clamp(ref):
    """|d| = 30, 12, 15, infinite log-probs: OpenRLHF clamps k1 and k2 to +-10, dew_rl does not; k3 agrees."""
    lp, rf = ref["kl/out/log_probs"], ref["kl/out/ref_log_probs"]
    assert np.isinf(lp).any() and np.isinf(rf).any()
    for k in ("k1", "k2"):
        ours = a(getattr(rl, f"{k}_kl")(lp, rf))
        assert np.abs(ours).max() > 10
        np.testing.assert_array_equal(ref[f"kl/out/{k}"], np.clip(ours, -10, 10))
    np.testing.assert_array_equal(ref["kl/out/k3"], a(rl.k3_kl(lp, rf)))
    assert (ref["kl/out/k3"][:6] == 10.0).all()  # lp = -inf included: 0.11.2 gives +10, not -10


@pytest.mark.parametrize("lo,hi,c", [(0.2, 0.2, 3.0), (0.2, 0.28, 3.0), (0.2, 0.2, None)])
def test_policy_loss(ref, lo, hi, c):
    m, old, adv = ref["ppo/mask"], ref["ppo/old_log_probs"], ref["ppo/advantages"]
    loss, metrics = rl.clipped_surrogate(rl.token_log_ratio(ref["ppo/log_probs"], old), adv, m, lo, hi, c)
    key = f"ppo/{lo}_{hi}_{c}"
    np.testing.assert_allclose(loss, ref[f"{key}/loss"], **TOL64)
    np.testing.assert_allclose(loss, ref[f"{key}/loss_global_tokens"], **TOL64)  # batch_num_tokens = N
    np.testing.assert_allclose(metrics["pg_clipfrac"], ref[f"{key}/clip_ratio"], **TOL64)
    np.testing.assert_allclose(metrics["ppo_kl"], ref[f"{key}/ppo_kl"], **TOL64)
    assert ref[f"{key}/clip_ratio"] > 0.1


def test_policy_loss_per_sample_mode(ref):
    m, old, adv = ref["ppo/mask"], ref["ppo/old_log_probs"], ref["ppo/advantages"]
    terms, _ = rl.clipped_surrogate_terms(rl.token_log_ratio(ref["ppo/log_probs"], old), adv, m)
    ours = float(rl.aggregate(terms, m, "seq-mean-token-mean"))
    np.testing.assert_allclose(ours, ref["ppo/sample/loss_global_rows"], rtol=1e-7)  # global_batch_size = B
    rows, nonempty = m.shape[0], int((m.sum(1) > 0).sum())
    assert nonempty == rows - 1
    np.testing.assert_allclose(ours * rows / nonempty, ref["ppo/sample/loss_local"], rtol=1e-7)  # local: NE rows


def test_policy_loss_ppo_kl_is_unclamped(ref):
    m, old, adv, lp = ref["ppo/mask"], ref["ppo/old_log_probs"], ref["ppo/advantages"], ref["ppo/far/log_probs"]
    x = lp - old
    assert x[0, 0] == pytest.approx(25.0) and x[3, 1] == pytest.approx(-30.0) and m[0, 0] == m[3, 1] == 1
    loss, metrics = rl.clipped_surrogate(rl.token_log_ratio(lp, old), adv, m)
    np.testing.assert_allclose(loss, ref["ppo/far/loss"], **TOL64)
    np.testing.assert_allclose(metrics["pg_clipfrac"], ref["ppo/far/clip_ratio"], **TOL64)
    excess = (25.0 - 20.0) + (-30.0 + 20.0)  # what the +-20 clamp removes from the mean log ratio
    np.testing.assert_allclose(metrics["ppo_kl"] - ref["ppo/far/ppo_kl"], excess / m.sum(), rtol=1e-9)
    loss, metrics = rl.clipped_surrogate(x, adv, m)  # the raw difference gives OpenRLHF's ppo_kl
    np.testing.assert_allclose(loss, ref["ppo/far/loss"], **TOL64)
    np.testing.assert_allclose(metrics["ppo_kl"], ref["ppo/far/ppo_kl"], **TOL64)


def test_dpo_loss(ref):
    args = [ref[f"dpo/{k}"] for k in ("pc", "pr", "rc", "rr")] + [ref["dpo/mask_chosen"], ref["dpo/mask_rejected"]]
    np.testing.assert_allclose(rl.preference_logsigmoid(*args, 0.1), ref["dpo/sigmoid/loss"], **TOL64)
    np.testing.assert_allclose(rl.preference_ipo(*args, 0.1), ref["dpo/ipo/loss"], **TOL64)
    pc, pr, rc, rr, mc, mr = args
    np.testing.assert_allclose(0.1 * ((pc - rc) * mc).sum(1), ref["dpo/sigmoid/chosen_rewards"], **TOL64)
    np.testing.assert_allclose(0.1 * ((pr - rr) * mr).sum(1), ref["dpo/sigmoid/rejected_rewards"], **TOL64)


def test_the_oracle_can_tell_conventions_apart(ref):
    """Bessel whitening, the clamped ppo_kl, no dual clip, or length-normalised IPO all miss the fixture."""
    m, v = ref["mask"], ref["mask"] > 0
    raw = a(rl.reinforce_plus_plus_returns(ref["rf/rewards"], ref["rf/kl"], m, 0.01))
    bessel = a(rl.masked_whiten(raw, m))
    assert not np.allclose(bessel[v], ref["rf/reinforce_1.0_0.01/advantages"][v], **TOL32)  # off by 0.017
    assert not np.allclose(ref["ppo/0.2_0.2_3.0/loss"], ref["ppo/0.2_0.2_None/loss"], **TOL64)  # the dual clip binds
    pm, old, adv = ref["ppo/mask"], ref["ppo/old_log_probs"], ref["ppo/advantages"]
    no_dual, _ = rl.clipped_surrogate(rl.token_log_ratio(ref["ppo/log_probs"], old), adv, pm, dual_clip=None)
    assert not np.allclose(no_dual, ref["ppo/0.2_0.2_3.0/loss"], **TOL64)
    args = [ref[f"dpo/{k}"] for k in ("pc", "pr", "rc", "rr")] + [ref["dpo/mask_chosen"], ref["dpo/mask_rejected"]]
    assert not np.allclose(rl.preference_ipo(*args, 0.1, length_normalize=True), ref["dpo/ipo/loss"], **TOL64)
