"""A coefficient's value, 0 included, never changes a config's structure (issue 27, item 3).

An outside check found that `jit(lambda cfg, lp, ro: obj.loss(cfg, lp, ro)[0])` traced twice over
`entropy_coeff` 0.01 -> 0.0 -> 0.05: a host 0 switched the term off and changed the config's pytree
structure, so an entropy bonus annealed to 0, or an adaptive KL reaching 0, paid a full compile. Now a
term that needs an input is on when its input is passed (loss's `entropy`, the rollout's
`ref_log_probs` or `teacher_log_probs`), and `positive_example_nll_weight` is on unless it is None.
Each test counts traces (tests/tracing.py) and checks the value at 0 against the same batch without
the term, and the coefficient's effect against its definition in NumPy. The same finding: a config
rebuilt from `dataclasses.fields` failed (`unexpected keyword argument '_off'`).
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dew_rl.objectives as obj
from dew_rl.testing import poison, random_mask
from tracing import jit_counting_traces

B, T, G = 8, 5, 4


def batch(seed=0):
    rng = np.random.default_rng(seed)
    m = random_mask(seed, B, T, empty_rows=0).astype(np.float32)
    old = rng.normal(-1.0, 0.3, (B, T))
    ro = obj.Rollout(mask=m, old_log_probs=jnp.asarray(poison(old, m), jnp.float32),
                     ref_log_probs=jnp.asarray(poison(old + 0.1, m), jnp.float32),
                     teacher_log_probs=jnp.asarray(poison(old - 0.3, m), jnp.float32),
                     rewards=jnp.asarray(rng.normal(0.5, 1.0, B), jnp.float32))
    lp = jnp.asarray(poison(old + rng.normal(0.0, 0.2, (B, T)), m), jnp.float32)
    return ro, lp, m, old


def test_entropy_bonus_through_zero_compiles_once():
    ro, lp, m, _ = batch(1)
    cfg = obj.grpo(n_samples_per_prompt=G)
    ro2 = obj.advantages(cfg, ro)[0]
    ent = jnp.asarray(poison(np.full((B, T), 0.7), m), jnp.float32)   # constant: every reduction of it is 0.7
    step, traces = jit_counting_traces(lambda c, x: obj.loss(c, x, ro2, entropy=ent)[0])
    losses = [float(step(dataclasses.replace(cfg, entropy_coeff=k), lp)) for k in (0.01, 0.0, 0.05, jnp.float32(0.0))]
    assert len(traces) == 1
    without = float(obj.loss(cfg, lp, ro2)[0])                         # no entropy passed: no bonus
    assert losses[1] == pytest.approx(without, abs=1e-7) and losses[3] == pytest.approx(without, abs=1e-7)
    for k, value in ((0.01, losses[0]), (0.05, losses[2])):
        assert value - without == pytest.approx(-k * 0.7, rel=1e-5)
    with pytest.raises(ValueError, match="`entropy` is required when entropy_coeff=0.05"):
        obj.loss(dataclasses.replace(cfg, entropy_coeff=0.05), lp, ro2)


def test_kl_in_reward_through_zero_compiles_once():
    """REINFORCE++'s k1 shaping (verl's `kl_coef`): on because the rollout carries ref_log_probs."""
    ro, _, m, old = batch(2)
    cfg = obj.reinforce_plus_plus()
    stage1, traces = jit_counting_traces(lambda c, r: obj.advantages(c, r))
    outs = {k: stage1(dataclasses.replace(cfg, kl_coef=k), ro) for k in (0.05, 0.0, 0.1)}
    assert len(traces) == 1
    no_ref = obj.advantages(dataclasses.replace(cfg, kl_coef=0.0), dataclasses.replace(ro, ref_log_probs=None))
    np.testing.assert_allclose(np.asarray(outs[0.0][0].advantages), np.asarray(no_ref[0].advantages), atol=1e-6)
    k = m != 0                                                          # the metric: mean over rows of the token mean of old - ref
    want = np.mean([(-0.1 * np.ones(k[i].sum())).mean() for i in range(B) if k[i].any()])
    assert float(outs[0.0][1]["rollout/reward_kl_penalty"]) == pytest.approx(want, rel=1e-5)
    assert not np.allclose(np.asarray(outs[0.05][0].advantages), np.asarray(outs[0.0][0].advantages))
    with pytest.raises(ValueError, match="ref_log_probs"):
        obj.advantages(cfg, dataclasses.replace(ro, ref_log_probs=None))   # kl_coef=0.01, a host number: needs them


def test_opd_kl_coef_through_zero_compiles_once():
    """slime's `opd_kl_coef` on GRPO: `A - coef * sg(old - teacher)` after the estimator's normalisation."""
    ro, _, m, old = batch(3)
    cfg = obj.grpo(n_samples_per_prompt=G)
    stage1, traces = jit_counting_traces(lambda c, r: obj.advantages(c, r)[0].advantages)
    outs = {k: np.asarray(stage1(dataclasses.replace(cfg, opd_kl_coef=k), ro)) for k in (0.1, 0.0, 0.2)}
    assert len(traces) == 1
    base = np.asarray(obj.advantages(cfg, dataclasses.replace(ro, teacher_log_probs=None))[0].advantages)
    np.testing.assert_allclose(outs[0.0], base, atol=1e-6)
    k = m != 0
    for c in (0.1, 0.2):                                                # old - teacher = 0.3 on every kept token
        np.testing.assert_allclose(outs[c], np.where(k, base - c * 0.3, 0.0), atol=1e-5)
    with pytest.raises(ValueError, match="teacher_log_probs"):
        obj.advantages(obj.grpo(n_samples_per_prompt=G, opd_kl_coef=0.1), dataclasses.replace(ro, teacher_log_probs=None))


def test_positive_example_nll_weight_through_zero_compiles_once():
    """NeMo-RL's `positive_example_nll_weight`: None leaves the term out; any number, 0 included, computes it."""
    ro, lp, m, _ = batch(4)
    cfg = obj.grpo(n_samples_per_prompt=G)
    assert cfg.positive_example_nll_weight is None
    ro2 = obj.advantages(cfg, ro)[0]
    step, traces = jit_counting_traces(lambda c, x: obj.loss(c, x, ro2))
    outs = {w: step(dataclasses.replace(cfg, positive_example_nll_weight=w), lp) for w in (0.5, 0.0, 1.0)}
    assert len(traces) == 1
    base = float(obj.loss(cfg, lp, ro2)[0])
    assert float(outs[0.0][0]) == pytest.approx(base, abs=1e-7) and "train/positive_nll" not in obj.loss(cfg, lp, ro2)[1]
    k = (m != 0) & (np.asarray(ro.rewards) > 0)[:, None]               # tokens of the rewarded rows
    nll = -np.asarray(lp, np.float64)[k].mean()
    assert float(outs[0.0][1]["train/positive_nll"]) == pytest.approx(nll, rel=1e-5)
    assert float(outs[1.0][0]) - base == pytest.approx(nll, rel=1e-4)


@pytest.mark.parametrize("name", [e for e in obj.ESTIMATORS if e != "dpo"] + ["dpo"])
def test_a_config_rebuilt_from_its_fields_is_the_same_config(name):
    for cfg in (getattr(obj, name)(), getattr(obj, name)(entropy_coeff=jnp.float32(0.02)) if name != "dpo" else None):
        if cfg is None:
            continue
        rebuilt = obj.ObjectiveConfig(**{f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)})
        assert jax.tree.structure(rebuilt) == jax.tree.structure(cfg)
        for a, b in zip(jax.tree.leaves(rebuilt), jax.tree.leaves(cfg)):
            assert float(a) == float(b)
        assert not any(f.name.startswith("_") and f.init is False for f in dataclasses.fields(cfg))


@pytest.mark.parametrize("field,on", [("entropy_coeff", 0.3), ("kl_coef", 0.3), ("opd_kl_coef", 0.3),
                                      ("positive_example_nll_weight", 0.3), ("kl_loss_coef", 0.3)])
def test_the_leaves_never_depend_on_a_value(field, on):
    base = obj.ppo(use_kl_loss=True)
    for zero in (0.0, 0, jnp.float32(0.0)):
        a, b = dataclasses.replace(base, **{field: zero}), dataclasses.replace(base, **{field: on})
        assert jax.tree.structure(a) == jax.tree.structure(b), (field, zero)


def test_top_entropy_quantile_is_static():
    """A token selection, not a weight: its value is static structure, so a JAX scalar is refused."""
    cfg = obj.grpo(top_entropy_quantile=0.8)
    assert "top_entropy_quantile" not in obj.COEFFICIENTS
    assert jax.tree.structure(cfg) != jax.tree.structure(obj.grpo(top_entropy_quantile=0.5))
    with pytest.raises(ValueError, match="top_entropy_quantile"):
        obj.grpo(top_entropy_quantile=jnp.float32(0.8))
