"""A loss mode with its own coefficient, registered from user code (issue 28, item 1).

The review found that `register_loss_mode` accepted a stage reading an undeclared field, and that
`grpo(loss_mode="toy2", toy_coef=0.5)` then raised `TypeError: unexpected keyword argument`. A
registered record now brings its fields (`dew_rl.objectives.Field`): the entry points take them as
keywords, `dataclasses.replace` changes them, a traced one is a pytree leaf, and the usual rules
(range, unread) apply. Everything here uses only the public names, as user code would; the
float64 reference is written out in NumPy.
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dew_rl.objectives as obj
from dew_rl.objectives import _core           # only to undo the registration after the module
from tracing import jit_counting_traces

B, T, G = 8, 5, 4
rng = np.random.default_rng(0)
MASK = np.ones((B, T), np.float32)
MASK[1, 3:] = 0
MASK[5, 1:] = 0
OLD = rng.normal(-1.0, 0.3, (B, T))
LP = OLD + rng.normal(0.0, 0.2, (B, T))
REWARDS = rng.normal(0.5, 1.0, B)


def scaled_pg(cfg, log_probs, old_log_probs, advantages, keep, ctx):
    "A toy policy loss: -scale * exp(lp - old) * A per kept token."
    ratio = jnp.exp(log_probs - old_log_probs)
    terms = jnp.where(keep, -cfg.scale_coef * ratio * advantages, 0.0)
    return terms, {"big": keep & (ratio > 1.1)}


@pytest.fixture(scope="module")
def registered():
    field = obj.Field("scale_coef", 1.0, "the weight of the toy term", check=lambda v: 0.0 < v < 10.0,
                      expect="in (0, 10)")
    obj.register_loss_mode("scaled_pg", obj.PolicyStage(scaled_pg, reads=("scale_coef",),
                                                        metrics={"big": "train/big_ratio_frac"}), fields=(field,))
    yield field
    _core._LOSS_MODES.pop("scaled_pg", None)
    _core._EXTRA_FIELDS.pop("scale_coef", None)


def reference(scale):
    "float64: GRPO's group z-score (unbiased std + 1e-6, verl's) then seq-mean-token-mean of the toy term."
    r = REWARDS.reshape(-1, G)
    adv = ((r - r.mean(1, keepdims=True)) / (r.std(1, ddof=1, keepdims=True) + 1e-6)).reshape(-1)
    k = MASK != 0
    terms = np.where(k, -scale * np.exp(LP - OLD) * adv[:, None], 0.0)
    return np.mean([terms[i][k[i]].mean() for i in range(B)])


def rollout():
    return obj.Rollout(mask=MASK, old_log_probs=jnp.asarray(OLD, jnp.float32), rewards=jnp.asarray(REWARDS, jnp.float32))


def test_a_stage_reading_an_undeclared_field_is_refused():
    with pytest.raises(ValueError, match=r"reads unknown fields \['undeclared_coef'\]"):
        obj.register_loss_mode("bad_mode", obj.PolicyStage(scaled_pg, reads=("undeclared_coef",)))
    assert "bad_mode" not in obj.LOSS_MODES
    with pytest.raises(ValueError, match="built-in ObjectiveConfig field"):
        obj.register_loss_mode("bad_mode", obj.PolicyStage(scaled_pg), fields=(obj.Field("entropy_coeff", 0.0),))


def test_the_field_is_a_keyword_of_the_entry_points_and_reaches_the_loss(registered):
    cfg = obj.grpo(n_samples_per_prompt=G, loss_mode="scaled_pg", scale_coef=0.5)
    assert cfg.scale_coef == 0.5 and ("scale_coef", 0.5) in cfg.extra_fields
    assert obj.grpo(n_samples_per_prompt=G, loss_mode="scaled_pg").scale_coef == 1.0     # the declared default
    ro = obj.advantages(cfg, rollout())[0]
    value, met = obj.loss(cfg, jnp.asarray(LP, jnp.float32), ro)
    assert float(value) == pytest.approx(reference(0.5), rel=1e-5)
    assert "train/big_ratio_frac" in met
    cfg2 = dataclasses.replace(cfg, scale_coef=2.0)
    assert float(obj.loss(cfg2, jnp.asarray(LP, jnp.float32), ro)[0]) == pytest.approx(reference(2.0), rel=1e-5)
    rebuilt = obj.ObjectiveConfig(**{f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)})
    assert rebuilt == cfg and hash(rebuilt) == hash(cfg)


def test_the_field_traces_and_a_schedule_compiles_once(registered):
    cfg = obj.grpo(n_samples_per_prompt=G, loss_mode="scaled_pg", scale_coef=0.5)
    assert "scale_coef" in [jax.tree_util.keystr(p)[1:] for p, _ in jax.tree_util.tree_flatten_with_path(cfg)[0]]
    ro = obj.advantages(cfg, rollout())[0]
    step, traces = jit_counting_traces(lambda c, x: obj.loss(c, x, ro)[0])
    got = [float(step(dataclasses.replace(cfg, scale_coef=s), jnp.asarray(LP, jnp.float32)))
           for s in (0.5, 0.25, jnp.float32(3.0))]
    assert len(traces) == 1
    np.testing.assert_allclose(got, [reference(0.5), reference(0.25), reference(3.0)], rtol=1e-5)


def test_the_rules_of_a_builtin_field_apply(registered):
    with pytest.raises(ValueError, match=r"`scale_coef` must be in \(0, 10\); got 20.0"):
        obj.grpo(loss_mode="scaled_pg", scale_coef=20.0)
    with pytest.raises(ValueError, match="`scale_coef`=0.5 is never read by grpo"):
        obj.grpo(scale_coef=0.5)                                        # the default loss mode does not read it
    with pytest.raises(TypeError):
        obj.grpo(loss_mode="scaled_pg", scale_coeff=0.5)                # a misspelt field is still an error
