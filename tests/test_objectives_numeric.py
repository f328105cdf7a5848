"""`dew_rl.objectives` against the independent float64 references of tests/objectives_reference.py.

Every estimator's stage 1 (advantages, returns, rollout metrics) and stage 2 (loss, train metrics),
in float32 and float64, eager and jitted, with NaN and infinities stored at every masked position
of every [B, T] array; gradients against central finite differences of the reference; micro-batch
accumulation with `loss_counts` in every aggregation mode; and bad input, each a ValueError at trace
time that names the function and the argument.
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dew_rl as rl
import dew_rl.objectives as obj
from dew_rl.testing import poison, random_mask
import objectives_reference as ref

B, T, G = 12, 7, 4


def make_batch(seed=0, B=B, T=T):
    rng = np.random.default_rng(seed)
    m = random_mask(seed, B, T, empty_rows=1)
    old = rng.normal(-1.0, 0.3, (B, T))
    data = dict(
        mask=m,
        old_log_probs=old,
        ref_log_probs=old + rng.normal(0.0, 0.2, (B, T)),
        behavior_log_probs=old + rng.normal(0.0, 0.3, (B, T)),
        token_rewards=rng.normal(0.0, 0.5, (B, T)),
        old_values=rng.normal(0.0, 0.5, (B, T)),
        rewards=np.concatenate([rng.normal(0.5, 1.0, B - G), np.full(G, 0.25)]),  # the last group is degenerate
    )
    extra = dict(lp=old + rng.normal(0.0, 0.3, (B, T)), values=data["old_values"] + rng.normal(0.0, 0.3, (B, T)),
                 entropy=rng.uniform(0.2, 2.0, (B, T)))
    return data, extra


DATA, EXTRA = make_batch()

CONFIGS = {
    "rfpp": obj.reinforce_plus_plus(),
    "rfpp_gamma": obj.reinforce_plus_plus(gamma=0.9, kl_coef=0.05),
    "rfpp_baseline": obj.reinforce_plus_plus_baseline(n_samples_per_prompt=G),
    "grpo": obj.grpo(n_samples_per_prompt=G),
    "grpo_kl_ent_tis": obj.grpo(n_samples_per_prompt=G, use_kl_loss=True, kl_loss_type="k3+", kl_loss_coef=0.05,
                                entropy_coeff=0.01, tis_cap=1.5),
    "dr_grpo": obj.dr_grpo(n_samples_per_prompt=G),
    "dr_grpo_maxlen": obj.dr_grpo(n_samples_per_prompt=G, max_response_length=10),
    "dapo": obj.dapo(n_samples_per_prompt=G),                       # the last group is removed
    "dapo_overlong": obj.dapo(n_samples_per_prompt=G, overlong_buffer_len=4, max_response_length=T),
    "gspo": obj.gspo(n_samples_per_prompt=G),
    "sapo": obj.sapo(n_samples_per_prompt=G),
    "cispo": obj.cispo(n_samples_per_prompt=G, cispo_epsilon_high=0.3),
    "rloo": obj.rloo(n_samples_per_prompt=G, use_kl_loss=True, kl_loss_type="low_var_kl"),
    "ppo": obj.ppo(),
    "ppo_kl": obj.ppo(kl_coef=0.05, use_kl_loss=True, kl_loss_type="k1", entropy_coeff=0.02),
}

ROLLOUT_METRICS = {"rollout/raw_reward", "rollout/advantages_raw_mean", "rollout/advantages_raw_std",
                   "rollout/advantages_mean", "rollout/advantages_std", "rollout/valid_tokens",
                   "rollout/zero_variance"}
# the sampler-mismatch diagnostics stage 1 reports whenever a rollout correction is on (here: tis_cap)
ROLLOUT_CORR_METRICS = {f"rollout_corr/{k}" for k in (
    "chi2_seq chi2_token eff_sample_size_seq eff_sample_size_token js_divergence_error k3_kl kl log_ppl_abs_diff "
    "log_ppl_diff log_ppl_diff_max log_ppl_diff_min policy_kl_error ppl_ratio rollout_is_eff_sample_size "
    "rollout_is_max rollout_is_mean rollout_is_min rollout_is_oob_ratio rollout_is_ratio_fraction_high "
    "rollout_is_ratio_fraction_low rollout_is_seq_fraction_high rollout_is_seq_fraction_low rollout_is_seq_max "
    "rollout_is_seq_max_deviation rollout_is_seq_mean rollout_is_seq_min rollout_is_seq_std rollout_is_std "
    "rollout_log_ppl rollout_ppl token_mult_prob_error train_rollout_logprob_abs_diff "
    "train_rollout_logprob_abs_diff_max training_log_ppl training_ppl").split()}
TRAIN_METRICS = {"train/loss", "train/pg_loss", "train/pg_clipfrac", "train/pg_clipfrac_lower", "train/ppo_kl"}


def rollout(data, dtype, poisoned=True):
    m = data["mask"]
    conv = lambda a: jnp.asarray(poison(a, m) if poisoned else a, dtype)
    fields = {k: conv(v) for k, v in data.items() if k not in ("mask", "rewards")}
    return obj.Rollout(mask=m, rewards=jnp.asarray(data["rewards"], dtype), **fields)


def uses_entropy(cfg):
    return cfg.entropy_coeff != 0


def expected_names(cfg):
    est = cfg.advantage_estimator
    r = set(ROLLOUT_METRICS)
    if est in ("reinforce_plus_plus", "ppo"):
        r.add("rollout/returns")
        r.add("rollout/reward_kl_penalty")   # the shaping is on: this rollout carries ref_log_probs (kl_coef 0 weighs nothing)
    if est == "dapo" and cfg.dynamic_sampling:
        r.add("rollout/kept_groups")
    if cfg.tis_cap is not None:
        r |= ROLLOUT_CORR_METRICS
    t = set(TRAIN_METRICS) | {"train/log_ratio_clampfrac"}
    if cfg.use_kl_loss:
        t.add("train/kl_loss")
    if uses_entropy(cfg):
        t.add("train/entropy")
    if est == "ppo":
        t |= {"train/vf_loss", "train/vf_clipfrac"}
    return r, t


def reference(cfg, data, extra):
    adv, returns, k, rmet = ref.ref_advantages(cfg, data["mask"], data["rewards"], data["old_log_probs"],
                                               data["ref_log_probs"], data["token_rewards"], data["old_values"])
    is_ppo = cfg.advantage_estimator == "ppo"
    total, tmet = ref.ref_loss(cfg, extra["lp"], k, data["old_log_probs"], adv, ref=data["ref_log_probs"],
                               returns=returns, old_values=data["old_values"],
                               values=extra["values"] if is_ppo else None,
                               entropy=extra["entropy"] if uses_entropy(cfg) else None,
                               behavior=data["behavior_log_probs"])
    if cfg.tis_cap is not None:  # two diagnostics, from their definitions: mean |old - behavior| and mean capped weight
        d = np.where(k, data["old_log_probs"] - np.where(k, data["behavior_log_probs"], 0.0), 0.0)
        rmet = dict(rmet)
        rmet["rollout_corr/train_rollout_logprob_abs_diff"] = np.abs(d).sum() / k.sum()
        rmet["rollout_corr/rollout_is_mean"] = np.where(k, np.minimum(np.exp(d), cfg.tis_cap), 0.0).sum() / k.sum()
    return adv, returns, k, rmet, total, tmet


def run(cfg, data, extra, dtype, jit):
    ro = rollout(data, dtype)
    m = data["mask"]
    lp = jnp.asarray(poison(extra["lp"], m), dtype)
    kw = {}
    if cfg.advantage_estimator == "ppo":
        kw["values"] = jnp.asarray(poison(extra["values"], m), dtype)
    if uses_entropy(cfg):
        kw["entropy"] = jnp.asarray(poison(extra["entropy"], m), dtype)
    stage1 = jax.jit(obj.advantages, static_argnums=0) if jit else obj.advantages
    ro2, rmet = stage1(cfg, ro)
    stage2 = (jax.jit(lambda c, l, r, **k: obj.loss(c, l, r, **k), static_argnums=0) if jit else obj.loss)
    total, tmet = stage2(cfg, lp, ro2, **kw)
    return ro2, rmet, total, tmet


TOL = {jnp.float32: dict(rtol=2e-5, atol=2e-5), jnp.float64: dict(rtol=1e-10, atol=1e-10)}


@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
@pytest.mark.parametrize("jit", [False, True])
def test_against_reference(name, dtype, jit):
    cfg = CONFIGS[name]
    with jax.enable_x64(dtype == jnp.float64):
        ro2, rmet, total, tmet = run(cfg, DATA, EXTRA, dtype, jit)
        adv, returns, k, want_r, want_total, want_t = reference(cfg, DATA, EXTRA)
        names_r, names_t = expected_names(cfg)
        assert set(rmet) == names_r and set(tmet) == names_t
        tol = TOL[dtype]
        np.testing.assert_allclose(np.asarray(ro2.advantages, np.float64), adv, **tol)
        assert (np.asarray(ro2.advantages)[~k] == 0).all()
        if returns is None:
            assert ro2.returns is None
        else:
            np.testing.assert_allclose(np.asarray(ro2.returns, np.float64), returns, **tol)
        np.testing.assert_array_equal(np.asarray(ro2.mask) != 0, k)
        for key, want in want_r.items():
            np.testing.assert_allclose(float(rmet[key]), want, err_msg=key, **tol)
        np.testing.assert_allclose(float(total), want_total, **tol)
        for key, want in want_t.items():
            np.testing.assert_allclose(float(tmet[key]), want, err_msg=key, **tol)
        for v in (*rmet.values(), *tmet.values()):
            assert jnp.ndim(v) == 0 and np.isfinite(float(v))


def test_reference_can_fail():
    """The comparison rejects a plausible mistake: GRPO's std with ddof 0, and PPO whitened without Bessel."""
    cfg = CONFIGS["grpo"]
    adv, *_ = reference(cfg, DATA, EXTRA)
    ro2, *_ = run(cfg, DATA, EXTRA, jnp.float32, False)
    rg = DATA["rewards"].reshape(-1, G)
    a0 = ((rg - rg.mean(1, keepdims=True)) / (rg.std(1, keepdims=True) + 1e-6)).reshape(-1)   # ddof 0: wrong
    wrong = np.where(DATA["mask"] != 0, a0[:, None], 0.0)
    assert np.abs(wrong - adv).max() > 1e-2
    np.testing.assert_allclose(np.asarray(ro2.advantages), adv, rtol=2e-5, atol=2e-5)
    cfg = CONFIGS["ppo"]
    adv, *_ = reference(cfg, DATA, EXTRA)
    k = DATA["mask"] != 0
    raw, _, _, _ = ref.ref_advantages(dataclasses.replace(cfg, normalize_advantages=False), DATA["mask"],
                                      token_rewards=DATA["token_rewards"], old_values=DATA["old_values"])
    assert np.abs(ref.population_normalize(raw, k) - adv).max() > 1e-3


def test_dapo_dynamic_sampling_masks_the_degenerate_group():
    cfg = CONFIGS["dapo"]
    ro2, rmet, _, _ = run(cfg, DATA, EXTRA, jnp.float32, False)
    assert int(rmet["rollout/kept_groups"]) == B // G - 1
    assert (np.asarray(ro2.mask)[-G:] == 0).all()
    assert int(rmet["rollout/valid_tokens"]) == int(DATA["mask"][:-G].sum())


@pytest.mark.parametrize("name", list(CONFIGS))
def test_gradient_against_finite_differences(name):
    cfg = CONFIGS[name]
    with jax.enable_x64(True):
        ro = rollout(DATA, jnp.float64)
        ro2, _ = obj.advantages(cfg, ro)
        m = DATA["mask"]
        adv, returns, k, *_ = reference(cfg, DATA, EXTRA)
        is_ppo = cfg.advantage_estimator == "ppo"
        ent = EXTRA["entropy"] if uses_entropy(cfg) else None
        kw = dict(entropy=jnp.asarray(poison(ent, m))) if ent is not None else {}

        def f_ref(lp, values=EXTRA["values"]):
            return ref.ref_loss(cfg, lp, k, DATA["old_log_probs"], adv, ref=DATA["ref_log_probs"], returns=returns,
                                old_values=DATA["old_values"], values=values if is_ppo else None, entropy=ent,
                                behavior=DATA["behavior_log_probs"], frozen=EXTRA["lp"])[0]

        lp = EXTRA["lp"]
        vals = jnp.asarray(poison(EXTRA["values"], m)) if is_ppo else None
        g = jax.grad(lambda x, v: obj.loss(cfg, x, ro2, values=v, **kw)[0], argnums=(0, 1) if is_ppo else 0)(
            jnp.asarray(poison(lp, m)), vals)
        g_lp = np.asarray(g[0] if is_ppo else g)
        want = ref.numeric_grad(f_ref, lp)
        np.testing.assert_allclose(g_lp, want, rtol=1e-6, atol=1e-7)
        assert np.isfinite(g_lp).all() and (g_lp[~k] == 0).all()
        assert np.abs(want).max() > 1e-4                              # the check has something to compare
        if is_ppo:
            want_v = ref.numeric_grad(lambda v: f_ref(lp, v), EXTRA["values"])
            np.testing.assert_allclose(np.asarray(g[1]), want_v, rtol=1e-6, atol=1e-7)


def test_stop_gradients_are_pinned():
    """GSPO's pooled ratio, CISPO's weight and the k3+ estimator are detached: a reference that
    differentiates through them gives a different gradient, which the objective must not match."""
    with jax.enable_x64(True):
        # With advantages constant along a row, GSPO-token has plain GSPO's gradient in every mode
        # (GSPO-token's construction); the pin needs token-level advantages, given through custom_advantage
        tok_adv = np.where(DATA["mask"] != 0, EXTRA["values"], 0.0)
        gspo_tok = obj.gspo(n_samples_per_prompt=G, clip_ratio_low=0.2, clip_ratio_high=0.2,
                            custom_advantage=lambda ro, axis_name: jnp.asarray(tok_adv))
        for name, cfg in (("gspo", gspo_tok), ("cispo", CONFIGS["cispo"]), ("k3+", CONFIGS["grpo_kl_ent_tis"])):
            ro2, _ = obj.advantages(cfg, rollout(DATA, jnp.float64))
            adv, returns, k, *_ = reference(cfg, DATA, EXTRA)
            if name == "gspo":
                np.testing.assert_allclose(np.asarray(ro2.advantages), tok_adv)
                adv = tok_adv
            ent = EXTRA["entropy"] if uses_entropy(cfg) else None
            kw = dict(entropy=jnp.asarray(poison(ent, DATA["mask"]))) if ent is not None else {}
            g = np.asarray(jax.grad(lambda x: obj.loss(cfg, x, ro2, **kw)[0])(jnp.asarray(poison(EXTRA["lp"], DATA["mask"]))))
            through = ref.numeric_grad(lambda lp: ref.ref_loss(
                cfg, lp, k, DATA["old_log_probs"], adv, ref=DATA["ref_log_probs"], entropy=ent,
                behavior=DATA["behavior_log_probs"], frozen=lp)[0], EXTRA["lp"])
            assert np.abs(g - through).max() > 1e-4, name


def test_advantages_carry_no_gradient():
    cfg = CONFIGS["rfpp_baseline"]
    ro = rollout(DATA, jnp.float32)

    def f(old):
        ro2, met = obj.advantages(cfg, dataclasses.replace(ro, old_log_probs=old))
        return ro2.advantages.sum() + sum(v.sum() for v in met.values())

    g = jax.grad(f)(ro.old_log_probs)
    assert (np.asarray(g) == 0).all()


# ------------------------------------------------------------------------------ micro-batches
MICRO_CONFIGS = [("grpo", dict(use_kl_loss=True, kl_loss_type="k2", entropy_coeff=0.01)), ("gspo", {}),
                 ("cispo", {}), ("sapo", {}), ("ppo", dict(use_kl_loss=True)), ("rloo", dict(tis_cap=2.0))]


@pytest.mark.parametrize("mode", rl.AGGREGATION_MODES)
@pytest.mark.parametrize("est,kw", MICRO_CONFIGS)
def test_micro_batches_sum_to_the_mini_batch(mode, est, kw):
    extra_kw = {} if est == "ppo" else {"n_samples_per_prompt": G}
    cfg = getattr(obj, est)(loss_agg_mode=mode, **extra_kw, **kw)
    ro = rollout(DATA, jnp.float32)
    ro2, _ = obj.advantages(cfg, ro)
    m = DATA["mask"]
    lp = jnp.asarray(poison(EXTRA["lp"], m), jnp.float32)
    vals = jnp.asarray(poison(EXTRA["values"], m), jnp.float32) if est == "ppo" else None
    ent = jnp.asarray(poison(EXTRA["entropy"], m), jnp.float32) if cfg.entropy_coeff else None

    def f(x, r, v, e, counts=None):
        return obj.loss(cfg, x, r, counts=counts, values=v, entropy=e)

    full, full_met = f(lp, ro2, vals, ent)
    gfull = jax.grad(lambda x: f(x, ro2, vals, ent)[0])(lp)
    counts = rl.loss_counts(ro2.mask)
    total, mets, grads = 0.0, {}, []
    for idx in np.split(np.arange(B), [3, 5, 9]):                    # unequal micro-batches: 3, 2, 4, 3 rows
        sub = jax.tree_util.tree_map(lambda a: a[idx], ro2)
        v = None if vals is None else vals[idx]
        e = None if ent is None else ent[idx]
        val, met = f(lp[idx], sub, v, e, counts)
        total += float(val)
        for key, x in met.items():
            mets[key] = mets.get(key, 0.0) + float(x)
        grads.append(np.asarray(jax.grad(lambda x: f(x, sub, v, e, counts)[0])(lp[idx])))
    np.testing.assert_allclose(total, float(full), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.concatenate(grads), np.asarray(gfull), rtol=1e-5, atol=1e-7)
    for key in full_met:
        np.testing.assert_allclose(mets[key], float(full_met[key]), rtol=1e-5, atol=1e-6, err_msg=key)
    # the reference agrees with the same counts on one micro-batch
    adv, returns, k, *_ = reference(cfg, DATA, EXTRA)
    idx = np.arange(3, 5)
    want, _ = ref.ref_loss(cfg, EXTRA["lp"][idx], k[idx], DATA["old_log_probs"][idx], adv[idx],
                           ref=DATA["ref_log_probs"][idx], returns=None if returns is None else returns[idx],
                           old_values=DATA["old_values"][idx], values=None if vals is None else EXTRA["values"][idx],
                           entropy=None if ent is None else EXTRA["entropy"][idx],
                           behavior=DATA["behavior_log_probs"][idx], counts=(B, int(k.sum())))
    sub = jax.tree_util.tree_map(lambda a: a[idx], ro2)
    got, _ = f(lp[idx], sub, None if vals is None else vals[idx], None if ent is None else ent[idx], counts)
    np.testing.assert_allclose(float(got), want, rtol=2e-5, atol=2e-6)


def test_micro_batches_without_counts_would_differ():
    """The accumulation check can fail: own denominators per micro-batch give another token mean."""
    cfg = obj.dapo(n_samples_per_prompt=G)
    ro2, _ = obj.advantages(cfg, rollout(DATA, jnp.float32))
    lp = jnp.asarray(poison(EXTRA["lp"], DATA["mask"]), jnp.float32)
    full = float(obj.loss(cfg, lp, ro2)[0])
    parts = [np.split(np.arange(B), [3, 5, 9])][0]
    own = sum(float(obj.loss(cfg, lp[i], jax.tree_util.tree_map(lambda a: a[i], ro2))[0]) for i in parts
              if (np.asarray(ro2.mask)[i] != 0).any())
    assert abs(own - full) > 1e-3


# ------------------------------------------------------------------------------ the DPO path
def test_preference_loss_against_reference():
    rng = np.random.default_rng(5)
    P_, Tc, Tr = 5, 6, 4
    mc = random_mask(1, P_, Tc, empty_rows=0)
    mr = random_mask(2, P_, Tr, empty_rows=1)
    pc, rc = rng.normal(-1, 0.3, (P_, Tc)), rng.normal(-1, 0.3, (P_, Tc))
    pr, rr = rng.normal(-1, 0.3, (P_, Tr)), rng.normal(-1, 0.3, (P_, Tr))
    pairs = obj.PreferencePairs(ref_chosen=jnp.asarray(poison(rc, mc), jnp.float32),
                                ref_rejected=jnp.asarray(poison(rr, mr), jnp.float32), mask_chosen=mc, mask_rejected=mr)
    cfg = obj.dpo(beta=0.3)
    val, met = jax.jit(obj.preference_loss, static_argnums=0)(
        cfg, jnp.asarray(poison(pc, mc), jnp.float32), jnp.asarray(poison(pr, mr), jnp.float32), pairs)
    want, want_met = ref.ref_dpo(pc, pr, rc, rr, mc, mr, 0.3)
    np.testing.assert_allclose(float(val), want, rtol=1e-5)
    assert set(met) == set(want_met)
    for key in want_met:
        np.testing.assert_allclose(float(met[key]), want_met[key], rtol=1e-5, atol=1e-6)
    g = jax.grad(lambda a: obj.preference_loss(cfg, a, jnp.asarray(poison(pr, mr), jnp.float32), pairs)[0])(
        jnp.asarray(poison(pc, mc), jnp.float32))
    assert np.isfinite(np.asarray(g)).all() and (np.asarray(g)[mc == 0] == 0).all()


# ------------------------------------------------------------------------------ bad input
def _ro(**changes):
    return dataclasses.replace(rollout(DATA, jnp.float32), **changes)


BAD = [
    ("mismatched old_log_probs", lambda: obj.advantages(CONFIGS["rfpp"], _ro(old_log_probs=jnp.zeros((B, T + 1)))),
     "advantages: `rollout.old_log_probs` must have the shape of `rollout.mask` [12, 7]; got [12, 8]"),
    ("mismatched rewards", lambda: obj.advantages(CONFIGS["grpo"], _ro(rewards=jnp.zeros(B - G))),
     "advantages: `rollout.rewards` must have the shape of"),
    ("rewards of rank 2", lambda: obj.advantages(CONFIGS["grpo"], _ro(rewards=jnp.zeros((B, 1)))),
     "advantages: `rollout.rewards` must have the shape of"),
    ("mismatched token_rewards", lambda: obj.advantages(CONFIGS["ppo"], _ro(token_rewards=jnp.zeros((B - 1, T)))),
     "advantages: `rollout.token_rewards` must have the shape of `rollout.mask`"),
    ("mismatched old_values in loss", lambda: obj.loss(CONFIGS["ppo"], jnp.zeros((B, T)),
                                                       _ro(advantages=jnp.zeros((B, T)), returns=jnp.zeros((B, T)),
                                                           old_values=jnp.zeros((B, 3))), values=jnp.zeros((B, T))),
     "loss: `rollout.old_values` must have the shape of `rollout.mask`"),
    ("mismatched log_probs", lambda: obj.loss(CONFIGS["grpo"], jnp.zeros((B, T - 1)), _ro(advantages=jnp.zeros((B, T)))),
     "loss: `log_probs` must have the shape of `rollout.mask`"),
    ("mask of rank 1", lambda: obj.advantages(CONFIGS["grpo"], _ro(mask=np.ones(B))), "advantages: `rollout.mask` must be [B, T]"),
    ("group split across shards", lambda: obj.advantages(CONFIGS["grpo"], jax.tree_util.tree_map(lambda a: a[:6], _ro())),
     "advantages: `rollout.mask` must hold whole groups: its 6 local rows must be a multiple of n_samples_per_prompt=4"),
    ("integer log-probs", lambda: obj.loss(CONFIGS["grpo"], jnp.zeros((B, T), jnp.int32), _ro(advantages=jnp.zeros((B, T)))),
     "loss: `log_probs` must be a floating array"),
    ("integer old log-probs", lambda: obj.loss(CONFIGS["grpo"], jnp.zeros((B, T)),
                                               _ro(advantages=jnp.zeros((B, T)), old_log_probs=jnp.zeros((B, T), jnp.int32))),
     "loss: `rollout.old_log_probs` must be a floating array"),
    ("values for a non-PPO estimator", lambda: obj.loss(CONFIGS["grpo"], jnp.zeros((B, T)), _ro(advantages=jnp.zeros((B, T))),
                                                        values=jnp.zeros((B, T))),
     "loss: `values` must be None for grpo: it has no critic"),
    ("PPO without values", lambda: obj.loss(CONFIGS["ppo"], jnp.zeros((B, T)), _ro(advantages=jnp.zeros((B, T)))),
     "loss: `values` is required by ppo"),
    ("entropy_coeff without entropy", lambda: obj.loss(CONFIGS["grpo_kl_ent_tis"], jnp.zeros((B, T)),
                                                       _ro(advantages=jnp.zeros((B, T)))),
     "loss: `entropy` is required when entropy_coeff=0.01 (not 0)"),
    ("missing rewards", lambda: obj.advantages(CONFIGS["grpo"], _ro(rewards=None)), "advantages: `rollout.rewards` is required by grpo"),
    ("missing ref for k1 shaping", lambda: obj.advantages(CONFIGS["rfpp"], _ro(ref_log_probs=None)),
     "advantages: `rollout.ref_log_probs` is required by reinforce_plus_plus with kl_coef > 0"),
    ("missing token_rewards", lambda: obj.advantages(CONFIGS["ppo"], _ro(token_rewards=None)),
     "advantages: `rollout.token_rewards` is required by ppo"),
    ("missing old_values", lambda: obj.advantages(CONFIGS["ppo"], _ro(old_values=None)), "advantages: `rollout.old_values` is required by ppo"),
    ("missing advantages", lambda: obj.loss(CONFIGS["grpo"], jnp.zeros((B, T)), _ro()),
     "loss: `rollout.advantages` is required (call advantages(config, rollout) first)"),
    ("missing old_log_probs", lambda: obj.loss(CONFIGS["grpo"], jnp.zeros((B, T)), _ro(advantages=jnp.zeros((B, T)), old_log_probs=None)),
     "loss: `rollout.old_log_probs` is required by grpo"),
    ("missing ref for the KL loss", lambda: obj.loss(CONFIGS["rfpp_baseline"], jnp.zeros((B, T)),
                                                     _ro(advantages=jnp.zeros((B, T)), ref_log_probs=None)),
     "loss: `rollout.ref_log_probs` is required by use_kl_loss=True"),
    ("missing behaviour log-probs for TIS", lambda: obj.advantages(CONFIGS["grpo_kl_ent_tis"],
                                                                   _ro(behavior_log_probs=None)),
     "advantages: `rollout.behavior_log_probs` is required by the rollout correction"),
    ("TIS weights not computed by stage 1", lambda: obj.loss(CONFIGS["grpo_kl_ent_tis"], jnp.zeros((B, T)),
                                                             _ro(advantages=jnp.zeros((B, T))),
                                                             entropy=jnp.zeros((B, T))),
     "loss: `rollout.rollout_is_weights` is required by the rollout correction (call advantages(config, rollout) first"),
    ("missing returns for PPO", lambda: obj.loss(CONFIGS["ppo"], jnp.zeros((B, T)), _ro(advantages=jnp.zeros((B, T))),
                                                 values=jnp.zeros((B, T))),
     "loss: `rollout.returns` is required by ppo"),
    ("dpo in advantages", lambda: obj.advantages(obj.dpo(), _ro()), "advantages: `config` has advantage_estimator='dpo'"),
    ("dpo in loss", lambda: obj.loss(obj.dpo(), jnp.zeros((B, T)), _ro()), "loss: `config` has advantage_estimator='dpo'"),
    ("grpo in preference_loss", lambda: obj.preference_loss(obj.grpo(), jnp.zeros((2, 3)), jnp.zeros((2, 3)),
                                                            obj.PreferencePairs(jnp.zeros((2, 3)), jnp.zeros((2, 3)),
                                                                                np.ones((2, 3)), np.ones((2, 3)))),
     "preference_loss: `config` has advantage_estimator='grpo'"),
    ("counts not LossCounts", lambda: obj.loss(CONFIGS["grpo"], jnp.zeros((B, T)), _ro(advantages=jnp.zeros((B, T))),
                                               counts=(B, 10)), "loss: `counts` must be None or the LossCounts of loss_counts(rollout, axis_name)"),
    ("not a config", lambda: obj.advantages({"advantage_estimator": "grpo"}, _ro()), "advantages: `config` must be an ObjectiveConfig"),
    ("not a rollout", lambda: obj.advantages(CONFIGS["grpo"], {"mask": DATA["mask"]}), "advantages: `rollout` must be a Rollout"),
]


@pytest.mark.parametrize("what,call,piece", BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_a_value_error(what, call, piece):
    with pytest.raises(ValueError) as e:
        call()
    assert piece in str(e.value), str(e.value)


@pytest.mark.parametrize("what,call,piece", BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_raised_at_trace_time(what, call, piece):
    """The same errors under jax.jit: raised while tracing, before anything runs."""
    traced = jax.jit(lambda: call())
    with pytest.raises(ValueError) as e:
        traced.lower()
    assert piece in str(e.value)


def test_global_empty_batch_is_reported():
    """Stage 1 raises on a rollout whose mask keeps nothing (the statistics need a population); a loss over nothing is 0."""
    cfg = CONFIGS["rfpp_baseline"]
    empty = _ro(mask=np.zeros((B, T)))
    with pytest.raises(rl.EmptyBatchError, match="keeps no token in the whole"):
        obj.advantages(cfg, empty)
    f = jax.jit(lambda r: obj.advantages(cfg, r)[1]["rollout/valid_tokens"])
    with pytest.raises(Exception, match="keeps no token in the whole"):
        f(empty).block_until_ready()
    assert int(f(_ro())) == int(DATA["mask"].sum())
    # the loss of a batch with no token is 0, with zero gradients and finite metrics (a sum over nothing)
    lp0 = jnp.asarray(poison(EXTRA["lp"], np.zeros((B, T))))
    empty_adv = dataclasses.replace(empty, advantages=jnp.zeros((B, T)))
    for counts in (None, rl.loss_counts(np.zeros((B, T)))):
        (val, met), g = jax.value_and_grad(lambda x: obj.loss(cfg, x, empty_adv, counts=counts), has_aux=True)(lp0)
        assert float(val) == 0.0 and (np.asarray(g) == 0).all()
        assert all(np.isfinite(float(v)) for v in met.values())
    # a micro-batch with no token of its own, inside a non-empty mini-batch, is fine
    ro2, _ = obj.advantages(cfg, _ro())
    counts = obj.loss_counts(ro2)
    sub = jax.tree_util.tree_map(lambda a: a[:1], ro2)                 # row 0 is fully masked
    val, _ = jax.jit(lambda x, r, c: obj.loss(cfg, x, r, counts=c), )(jnp.zeros((1, T)), sub, counts)
    assert float(val) == 0.0


def test_integer_and_boolean_rewards_are_taken_as_float32():
    """Amendment 5: `Rollout.rewards` and `token_rewards` may be bool or integer; the result equals the float32 one."""
    r_int = np.arange(B) % 3
    for name in ("grpo", "rfpp", "rloo", "dapo"):
        for r in (r_int.astype(np.int32), jnp.asarray(r_int, jnp.int32), r_int > 0, jnp.asarray(r_int > 0)):
            want = obj.advantages(CONFIGS[name], _ro(rewards=np.asarray(r).astype(np.float32)))[0].advantages
            got = obj.advantages(CONFIGS[name], _ro(rewards=r))[0].advantages
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    tok = (np.asarray(DATA["token_rewards"]) > 0).astype(np.int32)
    got = obj.advantages(CONFIGS["ppo"], _ro(token_rewards=tok))[0].advantages
    want = obj.advantages(CONFIGS["ppo"], _ro(token_rewards=tok.astype(np.float32)))[0].advantages
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


@pytest.mark.parametrize("name", ["rfpp", "rfpp_baseline", "grpo_kl_ent_tis", "dapo", "gspo", "cispo", "ppo_kl"])
def test_bfloat16_inputs(name):
    """bfloat16 arrays: statistics run in float32, the loss comes back in bfloat16, close to the reference."""
    cfg = CONFIGS[name]
    ro2, rmet, total, tmet = run(cfg, DATA, EXTRA, jnp.bfloat16, True)
    *_, want_total, want_t = reference(cfg, DATA, EXTRA)
    assert total.dtype == jnp.bfloat16 and ro2.advantages.dtype == jnp.bfloat16
    assert all(v.dtype in (jnp.float32, jnp.int32) for v in (*rmet.values(), *tmet.values()))
    np.testing.assert_allclose(float(total), want_total, rtol=3e-2, atol=3e-2)
    np.testing.assert_allclose(float(tmet["train/pg_loss"]), want_t["train/pg_loss"], rtol=3e-2, atol=3e-2)
