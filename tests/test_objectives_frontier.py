"""The frontier wired into `dew_rl.objectives`: off-policy correction, the new loss modes and estimators, the KL in
the reward, the top-entropy mask, the DPO loss types.

The low-level functions are tested against float64 references in their chapters. Here each path through the
objectives is checked in one of two ways, and the docstring says which:
- against an independent float64 NumPy reference written from the equations (tests/objectives_reference.py's
  helpers, or a few lines here), for the paths whose composition is the objectives' own (where the weights enter,
  which tokens leave the mask and the denominators, which log-probs a ratio takes);
- as a wiring check: the objective equals the public low-level function it names, reduced by `aggregate`, so that
  a field routed to the wrong argument, or a stage that skips a term, fails.
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dew_rl as rl
import dew_rl.objectives as obj
from tracing import jit_counting_traces
from dew_rl.testing import poison, random_mask
import objectives_reference as ref

B, T, G = 8, 6, 4
rng = np.random.default_rng(2026)
M = random_mask(11, B, T, empty_rows=1).astype(np.float32)
K = M > 0
OLD = rng.normal(-1.0, 0.3, (B, T))
BEH = OLD + rng.normal(0.0, 0.25, (B, T))
REF = OLD + rng.normal(0.0, 0.1, (B, T))
LP = OLD + rng.normal(0.0, 0.2, (B, T))
R = np.array([1.0, 0.0, 0.5, 0.25, 0.0, 1.0, 1.0, 0.0])
f32 = lambda a: jnp.asarray(poison(a, M), jnp.float32)  # noqa: E731
RO = obj.Rollout(mask=M, old_log_probs=f32(OLD), behavior_log_probs=f32(BEH), ref_log_probs=f32(REF),
                 rewards=jnp.asarray(R, jnp.float32), group_ids=np.repeat([5, 8], G))


def run(cfg, lp=LP, ro=RO, **kw):
    ro2, rmet = obj.advantages(cfg, ro)
    (val, tmet), g = jax.value_and_grad(lambda x: obj.loss(cfg, x, ro2, counts=obj.loss_counts(ro2), **kw),
                                        has_aux=True)(f32(lp))
    return ro2, rmet, float(val), tmet, np.asarray(g)


def grpo_adv(keep=K):
    adv, _, _, _ = ref.ref_advantages(obj.grpo(n_samples_per_prompt=G), M, R)
    return np.where(keep, adv, 0.0)


# ------------------------------------------------------------------------------------- off-policy correction
def test_tis_cap_is_the_token_case_of_rollout_is():
    """Float64 reference: tis_cap=C and rollout_is='token' with threshold C are one weight, min(exp(old - beh), C)."""
    a = obj.grpo(n_samples_per_prompt=G, tis_cap=1.2)
    b = obj.grpo(n_samples_per_prompt=G, rollout_is="token", rollout_is_threshold=1.2)
    want, _ = ref.ref_loss(a, LP, M, OLD, grpo_adv(), behavior=BEH)
    assert run(a)[2] == pytest.approx(want, rel=1e-5)
    assert run(b)[2] == pytest.approx(want, rel=1e-5)


@pytest.mark.parametrize("level,mode,lo,hi", [("token", "truncate", 0.8, 1.2), ("token", "mask", 0.8, 1.2),
                                              ("sequence", "truncate", None, 2.0), ("geometric_mean", "mask", 0.9, 1.1)])
def test_importance_weights_against_float64(level, mode, lo, hi):
    """Float64 reference: the weights of each level and mode multiply the policy terms; the denominators are unchanged."""
    cfg = obj.grpo(n_samples_per_prompt=G, rollout_is=level, rollout_is_mode=mode, rollout_is_threshold=hi,
                   rollout_is_threshold_lower=lo)
    d = np.where(K, OLD - BEH, 0.0)
    if level == "token":
        rho = np.exp(d)
    else:
        s = d.sum(1) if level == "sequence" else d.sum(1) / np.maximum(K.sum(1), 1)
        rho = np.repeat(np.exp(s)[:, None], T, 1)
    low = (1.0 / hi if mode == "mask" else 0.0) if lo is None else lo
    w = np.clip(rho, low, hi) if mode == "truncate" else np.where((rho >= low) & (rho <= hi), rho, 0.0)
    terms, _, _ = ref.policy_terms(cfg, np.where(K, LP, 0.0), np.where(K, OLD, 0.0), grpo_adv(), K, np.where(K, LP, 0.0))
    want = ref.aggregate(terms * np.where(K, w, 0.0), K, cfg.loss_agg_mode)
    ro2, rmet, val, tmet, _ = run(cfg)
    assert val == pytest.approx(want, rel=1e-5, abs=1e-7)
    np.testing.assert_allclose(np.asarray(ro2.rollout_is_weights), np.where(K, w, 0.0), rtol=1e-5, atol=1e-7)
    assert "rollout_corr/rollout_is_mean" in rmet


def test_rejection_leaves_the_mask_and_the_denominators():
    """Float64 reference: token_k1 keeps lo <= e^{k1} = pi_beh / pi_old <= hi (verl's band of ratios); the rest leave the
    mask and the denominators."""
    cfg = obj.grpo(n_samples_per_prompt=G, loss_agg_mode="token-mean", rollout_rs="token_k1", rollout_rs_threshold=1.15,
                   rollout_rs_threshold_lower=0.85)
    rho = np.exp(np.where(K, BEH - OLD, 0.0))
    kept = K & (rho >= 0.85) & (rho <= 1.15)
    assert 0 < kept.sum() < K.sum()
    ro2, rmet, val, tmet, g = run(cfg)
    np.testing.assert_array_equal(np.asarray(ro2.mask) != 0, kept)
    assert int(obj.loss_counts(ro2).tokens) == kept.sum() == int(rmet["rollout/valid_tokens"])
    terms, _, _ = ref.policy_terms(cfg, np.where(K, LP, 0.0), np.where(K, OLD, 0.0), grpo_adv(), K, np.where(K, LP, 0.0))
    assert val == pytest.approx(np.where(kept, terms, 0).sum() / kept.sum(), rel=1e-5)
    assert (g[~kept] == 0).all()


def test_every_token_rejected_trains_on_nothing():
    cfg = obj.grpo(n_samples_per_prompt=G, rollout_rs="token_k1", rollout_rs_threshold=1.0001, rollout_rs_threshold_lower=0.9999)
    ro2, rmet, val, tmet, g = run(cfg)
    assert val == 0.0 and not g.any() and int(rmet["rollout/valid_tokens"]) == 0
    assert float(rmet["rollout_corr/rollout_rs_masked_fraction"]) == 1.0
    assert all(np.isfinite(float(v)) for v in (*rmet.values(), *tmet.values()))


def test_bypass_mode_takes_the_ratio_against_the_sampler():
    """Float64 reference: in bypass mode the PPO ratio is pi_theta / pi_beh (two policies)."""
    cfg = obj.grpo(n_samples_per_prompt=G, bypass_mode=True)
    want, _ = ref.ref_loss(cfg, LP, M, BEH, grpo_adv())
    assert run(cfg)[2] == pytest.approx(want, rel=1e-5)
    with pytest.raises(ValueError, match="`bypass_mode`=True with importance weights and loss_mode='vanilla'"):
        obj.grpo(n_samples_per_prompt=G, bypass_mode=True, rollout_is="token")


def test_opsm_drops_negative_rows_that_drifted():
    """Float64 reference (TRL's sequence OPSM): drop a row with A < 0 whose mean log(pi_beh / pi_theta) exceeds delta."""
    delta = 0.05
    cfg = obj.grpo(n_samples_per_prompt=G, off_policy_mask_threshold=delta, loss_agg_mode="token-mean")
    adv = grpo_adv()
    drift = np.where(K, BEH - LP, 0.0).sum(1) / np.maximum(K.sum(1), 1)
    drop = (adv[:, 0] < 0) & (drift > delta) & K.any(1)
    assert drop.any() and not drop.all()
    terms, _, _ = ref.policy_terms(cfg, np.where(K, LP, 0.0), np.where(K, OLD, 0.0), adv, K, np.where(K, LP, 0.0))
    want = np.where(K & ~drop[:, None], terms, 0).sum() / K.sum()
    _, _, val, tmet, g = run(cfg)
    assert val == pytest.approx(want, rel=1e-5)
    assert not g[drop].any()


def test_the_importance_weighted_kl_has_its_gradient_through_r():
    """Float64 reference: the KL term is mean(r * k3) with r = exp(lp - old); its gradient at lp = old is k3' + k3."""
    cfg = obj.grpo(n_samples_per_prompt=G, use_kl_loss=True, kl_loss_coef=1.0, use_bias_correction_kl=True,
                   loss_agg_mode="token-mean")
    lp = np.where(K, LP, 0.0)
    d = np.where(K, REF - lp, 0.0)
    k3 = np.exp(d) - d - 1
    r = np.exp(np.where(K, lp - OLD, 0.0))
    _, _, _, tmet, _ = run(cfg)
    assert float(tmet["train/kl_loss"]) == pytest.approx((r * k3)[K].sum() / K.sum(), rel=1e-5)
    plain = obj.grpo(n_samples_per_prompt=G, use_kl_loss=True, kl_loss_coef=1.0, loss_agg_mode="token-mean")
    assert float(run(plain)[3]["train/kl_loss"]) == pytest.approx(k3[K].sum() / K.sum(), rel=1e-5)


def test_correction_thresholds_trace():
    cfg = obj.grpo(n_samples_per_prompt=G, rollout_is="token", rollout_is_threshold=1.5, off_policy_mask_threshold=0.1)
    step, traces = jit_counting_traces(lambda c, x: obj.loss(c, x, obj.advantages(c, RO)[0])[0])
    values = {float(step(dataclasses.replace(cfg, rollout_is_threshold=t, off_policy_mask_threshold=d), f32(LP)))
              for t, d in ((1.5, 0.1), (1.1, 0.01), (jnp.float32(3.0), 0.5))}
    assert len(traces) == 1 and len(values) == 3


@pytest.mark.parametrize("name", sorted(rl.ROLLOUT_CORRECTION_PRESETS))
def test_every_verl_preset_builds_and_trains(name):
    cfg = obj.grpo(n_samples_per_prompt=G, **obj.rollout_correction_preset(name))
    _, rmet, val, tmet, g = run(cfg)
    assert np.isfinite(val) and np.isfinite(g).all()


@pytest.mark.parametrize("kw,piece", [
    (dict(rollout_is="token", rollout_is_threshold=1.1, rollout_is_threshold_lower=1.5), "`rollout_is_threshold_lower`=1.5 exceeds"),
    (dict(rollout_is="tokens"), "`rollout_is` must be one of"),
    (dict(rollout_is="token", rollout_is_mode="clip"), "`rollout_is_mode` must be one of"),
    (dict(rollout_is="token", rollout_is_threshold=0.0), "`rollout_is_threshold` must be None or a positive number"),
    (dict(rollout_rs="token_k4", rollout_rs_threshold=1.1), "`rollout_rs` must be one of"),
    (dict(rollout_rs="token_k1"), "the rejection needs its upper threshold"),
    (dict(rollout_rs="token_k1,seq_mean_k3", rollout_rs_threshold=(1.1,)), "has 1 thresholds for 2 rejection option(s)"),
    (dict(rollout_is_threshold=3.0), "`rollout_is_threshold`=3.0 is never read by grpo"),
    (dict(tis_cap=2.0, rollout_is="token"), "tis_cap is rollout_is='token'"),
])
def test_bad_correction_fields(kw, piece):
    with pytest.raises(ValueError, match=None) as e:
        obj.grpo(n_samples_per_prompt=G, **kw)
    assert piece in str(e.value), str(e.value)


def test_missing_sampler_log_probs_are_named():
    cfg = obj.grpo(n_samples_per_prompt=G, rollout_is="token")
    with pytest.raises(ValueError, match="`rollout.behavior_log_probs` is required by the rollout correction"):
        obj.advantages(cfg, dataclasses.replace(RO, behavior_log_probs=None))


# -------------------------------------------------------------------------------------------- loss modes
LOW_LEVEL = {  # loss mode -> its per-token terms from the public function, as the registry should call it
    "reinforce": lambda c, lp, old, a, k: rl.reinforce_terms(lp, a, k)[0],
    "dro": lambda c, lp, old, a, k: rl.dro_terms(lp, old, a, k, c.dro_beta)[0],
    "dppo_tv": lambda c, lp, old, a, k: rl.dppo_tv_terms(lp, old, a, k, c.clip_ratio_low, c.clip_ratio_high, c.clip_ratio_c)[0],
    "dppo_kl": lambda c, lp, old, a, k: rl.dppo_kl_terms(lp, old, a, k, c.clip_ratio_low, c.clip_ratio_high, c.clip_ratio_c)[0],
    "geo_mean": lambda c, lp, old, a, k: rl.gmpo_terms(rl.token_log_ratio(lp, old), a, k, c.clip_ratio_low, c.clip_ratio_high)[0],
    "sequence_product": lambda c, lp, old, a, k: rl.sequence_product_terms(rl.token_log_ratio(lp, old), a, k, c.clip_ratio_low,
                                                                          c.clip_ratio_high, c.clip_ratio_c)[0],
    "signed_cispo": lambda c, lp, old, a, k: rl.signed_cispo_terms(rl.token_log_ratio(lp, old), lp, a, k)[0],
    "topr": lambda c, lp, old, a, k: rl.topr_terms(rl.token_log_ratio(lp, old), lp, a, k, jnp.asarray(R, jnp.float32))[0],
    "vespo": lambda c, lp, old, a, k: rl.vespo_terms(rl.token_log_ratio(lp, old), lp, a, k)[0],
    "kl_cov": lambda c, lp, old, a, k: rl.kl_cov_terms(rl.token_log_ratio(lp, old), lp, a, k, c.kl_cov_ratio, c.ppo_kl_coef)[0],
    "p3o": lambda c, lp, old, a, k: rl.p3o_terms(lp, f32(BEH), a, k)[0],
    "clip_cov": lambda c, lp, old, a, k: rl.clip_cov_terms(rl.token_log_ratio(lp, old), lp, a, k, jax.random.key(1))[0],
}


@pytest.mark.parametrize("mode", sorted(LOW_LEVEL))
def test_loss_modes_are_wired_to_their_function(mode):
    """Wiring: the objective's policy term is the public function of the loss mode, reduced by `aggregate`."""
    cfg = obj.grpo(n_samples_per_prompt=G, loss_mode=mode)
    ro2, _ = obj.advantages(cfg, RO)
    val, tmet = obj.loss(cfg, f32(LP), ro2, key=jax.random.key(1))
    keep = jnp.asarray(K)
    lp, old = jnp.where(keep, f32(LP), 0), jnp.where(keep, f32(OLD), 0)
    want = rl.aggregate(LOW_LEVEL[mode](cfg, lp, old, ro2.advantages, keep), keep, cfg.loss_agg_mode)
    assert float(val) == pytest.approx(float(want), rel=1e-5, abs=1e-7)
    g = jax.grad(lambda x: obj.loss(cfg, x, ro2, key=jax.random.key(1))[0])(f32(LP))
    assert np.isfinite(np.asarray(g)).all() and not np.asarray(g)[~K].any()


def test_clip_cov_needs_a_key():
    cfg = obj.grpo(n_samples_per_prompt=G, loss_mode="clip_cov")
    with pytest.raises(ValueError, match="`key` is required by loss_mode='clip_cov'"):
        obj.loss(cfg, f32(LP), obj.advantages(cfg, RO)[0])


# ---------------------------------------------------------------------------------------- new estimators
def test_new_estimators_against_float64():
    """Float64 references: OPO's length-weighted baseline; GPG's alpha (R - mean) with alpha = B / #{R != 0}."""
    ro2 = obj.advantages(obj.opo(n_samples_per_prompt=G), RO)[0]
    L = K.sum(1).astype(float)
    want = np.zeros(B)
    for g in range(2):
        s = slice(g * G, (g + 1) * G)
        want[s] = R[s] - (L[s] * R[s]).sum() / L[s].sum()
    np.testing.assert_allclose(np.asarray(ro2.advantages), np.where(K, want[:, None], 0), rtol=1e-5, atol=1e-6)
    ro2 = obj.advantages(obj.gpg(n_samples_per_prompt=G), RO)[0]
    centred = R - np.repeat(R.reshape(2, G).mean(1), G)
    want = B / (R != 0).sum() * centred
    np.testing.assert_allclose(np.asarray(ro2.advantages), np.where(K, want[:, None], 0), rtol=1e-5, atol=1e-6)
    assert obj.gpg().loss_mode == "reinforce"


def test_estimators_with_new_rollout_fields_name_what_is_missing():
    for name, field in (("gdpo", "reward_components"), ("remax", "token_rewards"), ("optimal_token_baseline", "token_rewards")):
        with pytest.raises(ValueError, match=f"`rollout.{field}` is required"):
            obj.advantages(getattr(obj, name)(**({"n_samples_per_prompt": G} if name != "remax" else {})), RO)


# ---------------------------------------------------------------- the KL in the reward, the entropy mask
def test_rloo_subtracts_the_rows_summed_kl_before_the_baseline():
    """Float64 reference (TRL's RLOO): R_i <- R_i - beta * sum_t kX(old, ref), then the leave-one-out baseline."""
    beta = 0.3
    cfg = obj.rloo(n_samples_per_prompt=G, kl_coef=beta, kl_penalty="k2")
    k2 = 0.5 * np.where(K, OLD - REF, 0.0) ** 2
    r = R - beta * k2.sum(1)
    want = np.zeros(B)
    for i in range(B):
        g = i // G
        others = [j for j in range(g * G, (g + 1) * G) if j != i]
        want[i] = r[i] - r[others].mean()
    ro2 = obj.advantages(cfg, RO)[0]
    np.testing.assert_allclose(np.asarray(ro2.advantages), np.where(K, want[:, None], 0), rtol=1e-5, atol=1e-6)


def test_the_top_entropy_mask_keeps_the_high_entropy_tokens():
    """Float64 reference: keep the tokens with entropy >= the q-quantile of every valid token (linear interpolation)."""
    ent = rng.uniform(0.1, 2.0, (B, T))
    q = 0.6
    thr = np.quantile(ent[K], 1.0 - q)
    top = K & (ent >= thr)
    cfg = obj.grpo(n_samples_per_prompt=G, top_entropy_quantile=q, loss_agg_mode="token-mean")
    _, _, val, tmet, g = run(cfg, entropy=f32(ent))
    terms, _, _ = ref.policy_terms(cfg, np.where(K, LP, 0.0), np.where(K, OLD, 0.0), grpo_adv(), K, np.where(K, LP, 0.0))
    assert val == pytest.approx(np.where(top, terms, 0).sum() / K.sum(), rel=1e-5)
    assert float(tmet["train/entropy_threshold"]) == pytest.approx(thr, rel=1e-5)
    assert not g[K & ~top].any()
    with pytest.raises(ValueError, match="`entropy` is required when top_entropy_quantile < 1"):
        obj.loss(cfg, f32(LP), obj.advantages(cfg, RO)[0])


# ------------------------------------------------------------------------------------- the DPO loss types
@pytest.mark.parametrize("loss_type", list(rl.DPO_LOSS_TYPES))
def test_dpo_loss_types_are_wired(loss_type):
    """Wiring: preference_loss with TRL's `loss_type` is `dew_rl.dpo_loss` with the config's fields."""
    pairs = obj.PreferencePairs(f32(REF)[0::2], f32(REF)[1::2], M[0::2], M[1::2])
    eps = 1e-3 if loss_type == "exo_pair" else 0.0                  # EXO needs a positive smoothing
    cfg = obj.dpo(loss_type=loss_type, beta=0.2, label_smoothing=eps)
    val, met = obj.preference_loss(cfg, f32(LP)[0::2], f32(LP)[1::2], pairs)
    want, _ = rl.dpo_loss(f32(LP)[0::2], f32(LP)[1::2], pairs.ref_chosen, pairs.ref_rejected, M[0::2], M[1::2], beta=0.2,
                          loss_type=loss_type, label_smoothing=eps)
    assert float(val) == pytest.approx(float(want), rel=1e-6, abs=1e-7)
    assert np.isfinite(float(met["train/empty_pairs"]))


def test_dpo_sigmoid_against_float64_and_empty_pairs_are_reported():
    """Float64 reference: -log sigmoid(beta * margin) averaged over the pairs that have a token."""
    pc, pr = np.where(K[0::2], LP[0::2], 0).sum(1), np.where(K[1::2], LP[1::2], 0).sum(1)
    rc, rr = np.where(K[0::2], REF[0::2], 0).sum(1), np.where(K[1::2], REF[1::2], 0).sum(1)
    z = 0.1 * ((pc - rc) - (pr - rr))
    nonempty = K[0::2].any(1) | K[1::2].any(1)
    want = np.log1p(np.exp(-z))[nonempty].mean()
    pairs = obj.PreferencePairs(f32(REF)[0::2], f32(REF)[1::2], M[0::2], M[1::2])
    val, met = obj.preference_loss(obj.dpo(), f32(LP)[0::2], f32(LP)[1::2], pairs)
    assert float(val) == pytest.approx(want, rel=1e-5)
    assert float(met["train/empty_pairs"]) == float((~nonempty).sum())


# ------------------------------------------------------------------------------------- on-policy distillation
TEACH = OLD + rng.normal(0.0, 0.4, (B, T))
_I = tuple(np.argwhere(K)[0])
TEACH[_I] = OLD[_I] - 25.0              # beyond verl's loss_max_clamp of 10: the clamp must bite
RO_T = dataclasses.replace(RO, teacher_log_probs=f32(TEACH))


def test_on_policy_distillation_against_float64():
    """Float64 reference: A = -clip(old - teacher, -10, 10) on kept tokens, no normalisation; PPO clip, token mean;
    NaN/inf stored in the teacher's log-probs at masked positions reach neither the loss nor its gradient."""
    cfg = obj.on_policy_distillation()
    assert cfg.loss_max_clamp == 10.0 and cfg.loss_agg_mode == "token-mean" and cfg.loss_mode == "vanilla"
    adv = np.where(K, -np.clip(OLD - TEACH, -10.0, 10.0), 0.0)
    ro2, rmet, val, _, g = run(cfg, ro=RO_T)
    np.testing.assert_allclose(np.asarray(ro2.advantages), adv, rtol=1e-5, atol=1e-6)
    assert abs(adv).max() == 10.0
    want, _ = ref.ref_loss(cfg, LP, M, OLD, adv)
    assert val == pytest.approx(want, rel=1e-5)
    assert np.isfinite(g).all() and (g[~K] == 0).all()
    seq = np.where(K, TEACH - OLD, 0.0).sum(1)           # seq-mean-token-sum: every row counts, as in ReMax's metric
    assert float(rmet["rollout/raw_reward"]) == pytest.approx(seq.mean(), rel=1e-5)


def test_opd_kl_coef_adds_distillation_after_the_estimators_normalisation():
    """Float64 reference: GRPO's advantage minus c * (old - teacher) per kept token (slime's order: after the
    group z-score); the coefficient traces (a schedule does not recompile); without teacher log-probs, 0 is off."""
    want0 = grpo_adv()
    for c in (0.25, 1.5):
        ro2, rmet, *_ = run(obj.grpo(n_samples_per_prompt=G, opd_kl_coef=c), ro=RO_T)
        np.testing.assert_allclose(np.asarray(ro2.advantages), want0 - c * np.where(K, OLD - TEACH, 0.0),
                                   rtol=1e-5, atol=1e-5)
        assert float(rmet["rollout/opd_reverse_kl"]) == pytest.approx((OLD - TEACH)[K].mean(), rel=1e-5)
    # no teacher log-probs and a host 0: off (the term is on when the rollout carries them)
    ro0, rmet0, *_ = run(obj.grpo(n_samples_per_prompt=G, opd_kl_coef=0.0))
    assert "rollout/opd_reverse_kl" not in rmet0
    np.testing.assert_allclose(np.asarray(ro0.advantages), want0, rtol=1e-5, atol=1e-6)
    step, traces = jit_counting_traces(lambda cfg: obj.advantages(cfg, RO_T)[0].advantages)
    outs = [np.asarray(step(obj.grpo(n_samples_per_prompt=G, opd_kl_coef=jnp.float32(c)))) for c in (0.1, 0.2, 0.3)]
    assert len(traces) == 1
    np.testing.assert_allclose(outs[2] - outs[0], -0.2 * np.where(K, OLD - TEACH, 0.0), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kw, piece", [
    (dict(opd_kl_coef=-0.1), "opd_kl_coef"),
    (dict(loss_max_clamp=5.0), "loss_max_clamp"),            # no distillation term: the clamp is never read
    (dict(opd_kl_coef=0.1, loss_max_clamp=0.0), "loss_max_clamp"),
])
def test_bad_distillation_fields(kw, piece):
    with pytest.raises(ValueError, match=piece):
        obj.grpo(n_samples_per_prompt=G, **kw)


def test_distillation_fields_missing_or_misplaced_are_named():
    with pytest.raises(ValueError, match="opd_kl_coef"):
        obj.on_policy_distillation(opd_kl_coef=0.1)        # the estimator is the distillation term already
    with pytest.raises(ValueError, match="teacher_log_probs"):
        obj.advantages(obj.on_policy_distillation(), RO)
    with pytest.raises(ValueError, match="teacher_log_probs"):
        obj.advantages(obj.grpo(n_samples_per_prompt=G, opd_kl_coef=0.1), RO)
    assert "opd_kl_coef" not in obj.fields_read("on_policy_distillation")
    assert "loss_max_clamp" in obj.fields_read("on_policy_distillation")


# ------------------------------------------------------------------------ group scalings, VAPO's NLL, M2PO
def _group_rows():
    return [np.arange(g * G, (g + 1) * G) for g in range(B // G)]


def test_scale_rewards_batch_against_float64():
    """Float64 reference (TRL's scale_rewards='batch'): (R_i - group mean) / (std of every reward, ddof 1, + 1e-4)."""
    want = np.zeros(B)
    for rows in _group_rows():
        want[rows] = R[rows] - R[rows].mean()
    want /= R.std(ddof=1) + 1e-4
    ro2, *_ = run(obj.grpo(n_samples_per_prompt=G, scale_rewards="batch"))
    np.testing.assert_allclose(np.asarray(ro2.advantages), np.where(K, want[:, None], 0.0), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("normalise", [True, False])
def test_leave_one_out_baseline_against_float64(normalise):
    """Float64 reference (NeMo-RL's GRPO): R_i minus the others' mean, over the others' std (ddof 1, + 1e-6) where
    it is > 0; not rescaled where it is 0."""
    want = np.zeros(B)
    for rows in _group_rows():
        for i in rows:
            others = R[[j for j in rows if j != i]]
            a = R[i] - others.mean()
            s = others.std(ddof=1)
            want[i] = a / (s + 1e-6) if normalise and s > 0 else a
    cfg = obj.grpo(n_samples_per_prompt=G, use_leave_one_out_baseline=True, norm_adv_by_std_in_grpo=normalise)
    ro2, *_ = run(cfg)
    np.testing.assert_allclose(np.asarray(ro2.advantages), np.where(K, want[:, None], 0.0), rtol=1e-5, atol=1e-6)


def test_positive_example_nll_against_float64():
    """Float64 reference (VAPO, NeMo-RL's weight): GRPO's loss + w * mean over the kept tokens of rewarded rows of
    -log pi; its gradient there is -w / count; with no rewarded row the term is 0, never NaN."""
    w = 0.7
    cfg = obj.grpo(n_samples_per_prompt=G, positive_example_nll_weight=w)
    base, _ = ref.ref_loss(obj.grpo(n_samples_per_prompt=G), LP, M, OLD, grpo_adv())
    pos = K & (R > 0)[:, None]
    nll = -LP[pos].mean()
    _, _, val, tmet, g = run(cfg)
    assert val == pytest.approx(base + w * nll, rel=1e-5)
    assert float(tmet["train/positive_nll"]) == pytest.approx(nll, rel=1e-5)
    g0 = run(obj.grpo(n_samples_per_prompt=G))[4]
    np.testing.assert_allclose((g - g0)[pos], -w / pos.sum(), rtol=1e-4)
    assert np.abs(g - g0)[~pos].max() < 1e-7
    ro0 = dataclasses.replace(RO, rewards=jnp.zeros(B))
    _, _, val0, tmet0, g0 = run(cfg, ro=ro0)
    assert np.isfinite(val0) and float(tmet0["train/positive_nll"]) == 0.0 and np.isfinite(g0).all()


def test_m2_threshold_masks_in_stage_one_against_float64():
    """Float64 reference (AReaL's M2PO mask): the kept tokens are the largest prefix of the ascending
    (behaviour - proximal)^2 whose mean is below the threshold; they leave the mask and the loss's counts."""
    tau = 0.03
    d2 = np.where(K, (BEH - OLD) ** 2, np.inf)[K]
    order = np.sort(d2)
    means = np.cumsum(order) / np.arange(1, order.size + 1)
    n = max(1, int((means < tau).sum()))
    keep = K & ((BEH - OLD) ** 2 <= order[n - 1])
    assert 0 < n < K.sum()            # the mask bites, and leaves something
    ro2, rmet, *_ = run(obj.grpo(n_samples_per_prompt=G, m2_threshold=tau))
    np.testing.assert_array_equal(np.asarray(ro2.mask) != 0, keep)
    assert float(rmet["rollout/m2po_masked_fraction"]) == pytest.approx(1 - keep.sum() / K.sum(), rel=1e-6)
    assert int(obj.loss_counts(ro2).tokens) == keep.sum()


def test_m2po_loss_mode_is_wired_to_its_function():
    """Wiring check: loss_mode='m2po' is aggregate(m2po_terms(lp - old, A, mask, kl2_budget, miniclip_low, _high))."""
    cfg = obj.grpo(n_samples_per_prompt=G, loss_mode="m2po", kl2_budget=0.01, miniclip_low=0.2, miniclip_high=0.4)
    ro2, _, val, tmet, _ = run(cfg)
    terms, ind = rl.m2po_terms(f32(LP) - f32(OLD), ro2.advantages, K, 0.01, 0.2, 0.4)
    want = rl.aggregate(terms, K, cfg.loss_agg_mode)
    assert val == pytest.approx(float(want), rel=1e-6)
    assert float(tmet["train/pg_clipfrac"]) == pytest.approx(float(rl.aggregate(ind["clipped"].astype(jnp.float32), K,
                                                                                   cfg.loss_agg_mode)), rel=1e-6)


@pytest.mark.parametrize("kw, piece", [
    (dict(scale_rewards="group"), "norm_adv_by_std_in_grpo"),
    (dict(scale_rewards="batch", use_leave_one_out_baseline=True), "use_leave_one_out_baseline"),
    (dict(loss_mode="m2po"), "kl2_budget"),
    (dict(m2_threshold=0.0), "m2_threshold"),
    (dict(positive_example_nll_weight=-1.0), "positive_example_nll_weight"),
    (dict(miniclip_high=0.1), "miniclip_high"),     # read only by loss_mode='m2po'
])
def test_bad_frontier_fields(kw, piece):
    with pytest.raises(ValueError, match=piece):
        obj.grpo(n_samples_per_prompt=G, **kw)
    with pytest.raises(ValueError, match="scale_rewards"):
        obj.rloo(n_samples_per_prompt=G, scale_rewards="batch")   # not a group z-score estimator


@pytest.mark.parametrize("kw", [dict(gae_lambda_value=1.0), dict(length_adaptive_alpha=0.4),
                                dict(length_adaptive_alpha=0.4, gae_lambda_value=1.0)])
def test_vapo_gae_against_float64(kw):
    """Float64 reference (VAPO's decoupled and length-adaptive GAE, NeMo-RL's names): the policy's advantages with
    lambda_i = 1 - 1/(alpha L_i) (or lam), whitened; the critic's returns with gae_lambda_value (or the policy's)."""
    tok = rng.normal(0.0, 1.0, (B, T))
    vals = rng.normal(0.0, 0.5, (B, T))
    ro = obj.Rollout(mask=M, token_rewards=f32(tok), old_values=f32(vals))
    cfg = obj.ppo(lam=0.9, **kw)
    adv, ret, _, _ = ref.ref_advantages(cfg, M, token_rewards=tok, old_values=vals)
    ro2, _ = obj.advantages(cfg, ro)
    np.testing.assert_allclose(np.asarray(ro2.advantages), adv, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(ro2.returns), ret, rtol=1e-4, atol=1e-5)
    plain, plain_ret, _, _ = ref.ref_advantages(obj.ppo(lam=0.9), M, token_rewards=tok, old_values=vals)
    assert np.abs(ret - plain_ret).max() > 1e-3 or np.abs(adv - plain).max() > 1e-3   # the field changes something


def test_vapo_gae_fields_are_ppos():
    for kw in (dict(gae_lambda_value=1.0), dict(length_adaptive_alpha=0.05)):
        with pytest.raises(ValueError, match=next(iter(kw))):
            obj.grpo(n_samples_per_prompt=G, **kw)
    with pytest.raises(ValueError, match="gae_lambda_value"):
        obj.ppo(gae_lambda_value=1.5)


def test_sample_weights_against_float64():
    """Float64 reference (ROLL's per-sample weights): each row's policy terms times its weight before the
    reduction; a NaN weight of a row with no kept token reaches neither the loss nor the gradient."""
    sw = np.linspace(0.5, 1.5, B)
    sw[~K.any(1)] = np.nan
    cfg = obj.grpo(n_samples_per_prompt=G)
    adv = grpo_adv()
    ro = dataclasses.replace(RO, sample_weights=jnp.asarray(sw, jnp.float32))
    ro2, _ = obj.advantages(cfg, ro)
    (val, _), g = jax.value_and_grad(lambda x: obj.loss(cfg, x, ro2), has_aux=True)(f32(LP))
    # the PPO terms from the equations, weighted per row, response mean
    ratio = np.exp(np.clip(LP - OLD, -20, 20))
    lo, hi = 1 - cfg.clip_ratio_low, 1 + cfg.clip_ratio_high
    t = np.maximum(-adv * ratio, -adv * np.clip(ratio, lo, hi))
    t = np.where(adv < 0, np.minimum(t, -adv * cfg.clip_ratio_c), t)
    t = np.where(K, t * np.nan_to_num(sw)[:, None], 0.0)
    want = ref.response_mean(t, K)
    assert float(val) == pytest.approx(want, rel=1e-5)
    assert np.isfinite(np.asarray(g)).all()
    with pytest.raises(ValueError, match="sample_weights"):
        obj.loss(cfg, f32(LP), dataclasses.replace(ro2, sample_weights=jnp.ones(B + 1)))
