"""`ObjectiveConfig` and the entry points: recipes, hashing, and every validation rule of the contract.

Each rule is one parametrised case: building the config raises `ValueError`, and the message names
the field and says what to change.
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dew_rl as rl
import dew_rl.objectives as obj

NAMES = ("reinforce_plus_plus", "reinforce_plus_plus_baseline", "grpo", "dr_grpo", "dapo", "gspo", "sapo",
         "cispo", "rloo", "ppo", "dpo")


def test_estimators_and_entry_points():
    assert obj.ESTIMATORS[:len(NAMES)] == NAMES           # the contract's names first; more follow
    for name in NAMES:
        assert callable(getattr(obj, name))


def test_module_is_not_loaded_by_the_package():
    import subprocess
    import sys
    code = "import sys, dew_rl; assert 'dew_rl.objectives' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


# The recipes of the contract's table, written out here field by field (not read from RECIPES).
CONTRACT = {
    "reinforce_plus_plus": dict(normalize_advantages=True, gamma=1.0, kl_coef=0.01, use_kl_loss=False,
                                clip_ratio_low=0.2, clip_ratio_high=0.2, clip_ratio_c=None,
                                loss_agg_mode="seq-mean-token-mean"),
    "reinforce_plus_plus_baseline": dict(normalize_advantages=True, n_samples_per_prompt=8, kl_coef=0.0,
                                         use_kl_loss=True, kl_loss_type="k2", kl_loss_coef=0.01, clip_ratio_c=None,
                                         clip_ratio_low=0.2, clip_ratio_high=0.2, loss_agg_mode="seq-mean-token-mean"),
    "grpo": dict(clip_ratio_low=0.2, clip_ratio_high=0.2, clip_ratio_c=3.0, loss_agg_mode="seq-mean-token-mean",
                 use_kl_loss=False, kl_loss_type="k3", norm_adv_by_std_in_grpo=True),
    "dr_grpo": dict(norm_adv_by_std_in_grpo=False, loss_agg_mode="seq-mean-token-sum-norm", loss_agg_norm=None,
                    clip_ratio_c=3.0, use_kl_loss=False),
    "dapo": dict(clip_ratio_low=0.2, clip_ratio_high=0.28, clip_ratio_c=3.0, loss_agg_mode="token-mean",
                 dynamic_sampling=True, overlong_penalty_factor=1.0, use_kl_loss=False),
    "gspo": dict(clip_ratio_low=3e-4, clip_ratio_high=4e-4, clip_ratio_c=None, loss_agg_mode="seq-mean-token-mean"),
    "sapo": dict(tau_pos=1.0, tau_neg=1.05, loss_agg_mode="seq-mean-token-mean"),
    "cispo": dict(cispo_epsilon_low=1.0, cispo_epsilon_high=4.0, loss_agg_mode="token-mean"),
    "rloo": dict(clip_ratio_low=0.2, clip_ratio_high=0.2, clip_ratio_c=3.0, loss_agg_mode="token-mean"),
    "ppo": dict(gamma=1.0, lam=0.95, clip_ratio_low=0.2, clip_ratio_high=0.2, clip_ratio_c=3.0, vf_coef=0.5,
                cliprange_value=0.2, loss_agg_mode="token-mean", kl_coef=0.0, normalize_advantages=True),
    "dpo": dict(beta=0.1),
}


@pytest.mark.parametrize("name", NAMES)
def test_recipe_matches_the_contract(name):
    cfg = getattr(obj, name)()
    for field, want in CONTRACT[name].items():
        assert getattr(cfg, field) == want, (name, field, getattr(cfg, field), want)
    assert cfg == obj.ObjectiveConfig(advantage_estimator=name, **obj.RECIPES[name])
    assert hash(cfg) == hash(obj.ObjectiveConfig(advantage_estimator=name, **obj.RECIPES[name]))
    if name in obj.GROUP_ESTIMATORS:
        assert cfg.n_samples_per_prompt >= 2


def test_overrides_equal_the_constructor():
    got = obj.reinforce_plus_plus_baseline(kl_loss_coef=0.02, n_samples_per_prompt=4)
    want = obj.ObjectiveConfig(advantage_estimator="reinforce_plus_plus_baseline",
                               **{**obj.RECIPES["reinforce_plus_plus_baseline"], "kl_loss_coef": 0.02,
                                  "n_samples_per_prompt": 4})
    assert got == want and hash(got) == hash(want)
    assert obj.grpo(calculate_per_token_loss=True).loss_agg_mode == "token-mean"
    assert obj.dr_grpo(max_response_length=1024).max_response_length == 1024
    with pytest.raises(ValueError, match="`advantage_estimator` is fixed by the entry point"):
        obj.grpo(advantage_estimator="rloo")


def test_frozen_hashable_static():
    cfg = obj.dapo()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.clip_ratio_high = 0.3
    assert len({obj.grpo(), obj.grpo(), obj.rloo()}) == 2
    f = jax.jit(lambda c, x: x * c.clip_ratio_high, static_argnums=0)
    np.testing.assert_allclose(float(f(cfg, 1.0)), 0.28, rtol=1e-6)
    # replace re-validates
    with pytest.raises(ValueError, match="`tau_pos`"):
        dataclasses.replace(obj.grpo(), tau_pos=2.0)
    assert dataclasses.replace(obj.grpo(), clip_ratio_high=0.3).clip_ratio_high == 0.3


RFPP = ("reinforce_plus_plus", "reinforce_plus_plus_baseline")


def _for_each(estimators, label: str, keywords: dict, pieces: list) -> list:
    "One rule per estimator: `estimator(**keywords)` must raise a message with every piece."
    return [(f"{e} {label}", (lambda e=e: getattr(obj, e)(**keywords)), pieces) for e in estimators]


RULES = [
    # (id, call, pieces that must all be in the message)
    ("unknown estimator", lambda: obj.ObjectiveConfig(advantage_estimator="vapo"), ["`advantage_estimator`", "one of"]),
    ("unknown loss_agg_mode", lambda: obj.grpo(loss_agg_mode="seq-mean"), ["`loss_agg_mode`", "one of", "'token-mean'"]),
    ("unknown kl_loss_type", lambda: obj.grpo(use_kl_loss=True, kl_loss_type="k4"), ["`kl_loss_type`", "'low_var_kl'"]),
    ("clip_ratio_low 0", lambda: obj.grpo(clip_ratio_low=0.0), ["`clip_ratio_low`", "in (0, 1)"]),
    ("clip_ratio_low 1", lambda: obj.grpo(clip_ratio_low=1.0), ["`clip_ratio_low`", "in (0, 1)"]),
    ("clip_ratio_high negative", lambda: obj.dapo(clip_ratio_high=-0.28), ["`clip_ratio_high`", "positive"]),
    ("clip_ratio_c <= 1", lambda: obj.grpo(clip_ratio_c=1.0), ["`clip_ratio_c`", "> 1"]),
    ("cliprange_value 0", lambda: obj.ppo(cliprange_value=0.0), ["`cliprange_value`", "positive"]),
    ("cispo high 0", lambda: obj.cispo(cispo_epsilon_high=0.0), ["`cispo_epsilon_high`", "positive"]),
    ("cispo low 0", lambda: obj.cispo(cispo_epsilon_low=0.0), ["`cispo_epsilon_low`", "(0, 1]"]),
    ("tau 0", lambda: obj.sapo(tau_neg=0.0), ["`tau_neg`", "positive"]),
    ("beta 0", lambda: obj.dpo(beta=0.0), ["`beta`", "positive"]),
    ("tis_cap 0", lambda: obj.grpo(tis_cap=0.0), ["`tis_cap`", "positive"]),
    ("n_samples 0", lambda: obj.grpo(n_samples_per_prompt=0), ["`n_samples_per_prompt`", ">= 1"]),
    ("n_samples float", lambda: obj.grpo(n_samples_per_prompt=4.0), ["`n_samples_per_prompt`", "Python int"]),
    ("gamma > 1", lambda: obj.reinforce_plus_plus(gamma=1.01), ["`gamma`", "[0, 1]"]),
    ("gamma < 0", lambda: obj.ppo(gamma=-0.5), ["`gamma`", "[0, 1]"]),
    ("lam > 1", lambda: obj.ppo(lam=2.0), ["`lam`", "[0, 1]"]),
    ("kl_coef negative", lambda: obj.reinforce_plus_plus(kl_coef=-0.01), ["`kl_coef`", ">= 0"]),
    ("baseline with G = 1", lambda: obj.reinforce_plus_plus_baseline(n_samples_per_prompt=1),
     ["`n_samples_per_prompt`", "every raw advantage would be 0", "n_samples_per_prompt >= 2"]),
    *_for_each(obj.GROUP_ESTIMATORS, "with G = 1", dict(n_samples_per_prompt=1),
               ["`n_samples_per_prompt`", "n_samples_per_prompt >= 2"]),
    *_for_each(RFPP, "per-token loss", dict(calculate_per_token_loss=True),
               ["`calculate_per_token_loss`", "leave calculate_per_token_loss=False"]),
    *[rule for mode in ("token-mean", "token-sum", "seq-mean-token-sum", "seq-mean-token-sum-norm")
      for rule in _for_each(RFPP, f"mode {mode}", dict(loss_agg_mode=mode), ["`loss_agg_mode`", "seq-mean-token-mean"])],
    ("rf++ with KL loss", lambda: obj.reinforce_plus_plus(use_kl_loss=True), ["`use_kl_loss`", "leave use_kl_loss=False"]),
    ("baseline with kl_coef", lambda: obj.reinforce_plus_plus_baseline(kl_coef=0.01),
     ["`kl_coef`", "never read by reinforce_plus_plus_baseline", "default 0.0", "separate k2 loss"]),
    *_for_each(RFPP, "cp", dict(context_parallel_size=2), ["`context_parallel_size`", "use context_parallel_size=1"]),
    *[rule for mode in ("fully_async", "hybrid")
      for rule in _for_each(RFPP, mode, dict(rollout_mode=mode), ["`rollout_mode`", "use rollout_mode='colocate'"])],
    ("unknown rollout_mode", lambda: obj.grpo(rollout_mode="async"), ["`rollout_mode`", "one of"]),
    ("baseline reward hook", lambda: obj.reinforce_plus_plus_baseline(reward_post_process=lambda r: r),
     ["`reward_post_process`", "never read by reinforce_plus_plus_baseline", "default None", "inclusive group-mean"]),
    ("baseline advantage hook", lambda: obj.reinforce_plus_plus_baseline(custom_advantage=lambda r, a: r.rewards),
     ["`custom_advantage`", "never read by reinforce_plus_plus_baseline", "default None", "inclusive group-mean"]),
    ("hook not callable", lambda: obj.grpo(reward_post_process=3), ["`reward_post_process`", "callable"]),
    ("per-token loss and another mode", lambda: obj.grpo(calculate_per_token_loss=True, loss_agg_mode="seq-mean-token-mean"),
     ["`calculate_per_token_loss`", "True means loss_agg_mode='token-mean'"]),
    ("unread: tau in grpo", lambda: obj.grpo(tau_pos=2.0), ["`tau_pos`", "never read by grpo", "default 1.0"]),
    ("unread: cispo bound in dapo", lambda: obj.dapo(cispo_epsilon_high=2.0), ["`cispo_epsilon_high`", "never read by dapo"]),
    ("unread: clip in sapo", lambda: obj.sapo(clip_ratio_high=0.3), ["`clip_ratio_high`", "never read by sapo"]),
    ("unread: clip in cispo", lambda: obj.cispo(clip_ratio_c=None), ["`clip_ratio_c`", "never read by cispo"]),
    ("unread: value in grpo", lambda: obj.grpo(cliprange_value=0.5), ["`cliprange_value`", "never read by grpo"]),
    ("unread: lam in rf++", lambda: obj.reinforce_plus_plus(lam=0.9), ["`lam`", "never read by reinforce_plus_plus"]),
    ("unread: gamma in grpo", lambda: obj.grpo(gamma=0.9), ["`gamma`", "never read by grpo"]),
    ("unread: kl_coef in grpo", lambda: obj.grpo(kl_coef=0.1), ["`kl_coef`", "never read by grpo"]),
    ("unread: G in ppo", lambda: obj.ppo(n_samples_per_prompt=8), ["`n_samples_per_prompt`", "never read by ppo"]),
    ("unread: G in rf++", lambda: obj.reinforce_plus_plus(n_samples_per_prompt=8), ["`n_samples_per_prompt`", "never read"]),
    ("unread: normalize in grpo", lambda: obj.grpo(normalize_advantages=True), ["`normalize_advantages`", "never read by grpo"]),
    ("unread: std flag in rloo", lambda: obj.rloo(norm_adv_by_std_in_grpo=False), ["`norm_adv_by_std_in_grpo`", "never read by rloo"]),
    ("unread: dynamic sampling in grpo", lambda: obj.grpo(dynamic_sampling=True), ["`dynamic_sampling`", "never read by grpo"]),
    ("unread: overlong in grpo", lambda: obj.grpo(overlong_buffer_len=64), ["`overlong_buffer_len`", "never read by grpo"]),
    ("unread: beta in ppo", lambda: obj.ppo(beta=0.5), ["`beta`", "never read by ppo"]),
    ("unread: reward hook in ppo", lambda: obj.ppo(reward_post_process=lambda r: r), ["`reward_post_process`", "never read by ppo"]),
    ("unread: anything policy in dpo", lambda: obj.dpo(loss_agg_mode="token-mean"), ["`loss_agg_mode`", "never read by dpo"]),
    ("unread: tis in dpo", lambda: obj.dpo(tis_cap=2.0), ["`tis_cap`", "never read by dpo"]),
    ("conditional: kl_loss_type without the loss", lambda: obj.grpo(kl_loss_type="k2"), ["`kl_loss_type`", "set use_kl_loss=True"]),
    ("conditional: kl_loss_coef without the loss", lambda: obj.ppo(kl_loss_coef=0.1), ["`kl_loss_coef`", "set use_kl_loss=True"]),
    ("conditional: norm of another mode", lambda: obj.grpo(loss_agg_norm=100.0), ["`loss_agg_norm`", "seq-mean-token-sum-norm"]),
    ("conditional: max length unread", lambda: obj.grpo(max_response_length=100), ["`max_response_length`", "never read by grpo"]),
    ("conditional: penalty without buffer", lambda: obj.dapo(overlong_penalty_factor=0.5), ["`overlong_penalty_factor`", "set overlong_buffer_len"]),
    ("dr_grpo with std", lambda: obj.dr_grpo(norm_adv_by_std_in_grpo=True), ["`norm_adv_by_std_in_grpo`", "norm_adv_by_std_in_grpo=False"]),
    ("dynamic sampling with seq-mean", lambda: obj.dapo(loss_agg_mode="seq-mean-token-sum"), ["`dynamic_sampling`", "token-mean"]),
    ("buffer beyond max length", lambda: obj.dapo(overlong_buffer_len=512, max_response_length=256), ["`overlong_buffer_len`", "no longer than"]),
    ("array of shape [2]", lambda: obj.grpo(clip_ratio_high=jnp.ones(2)), ["`clip_ratio_high`", "a real scalar"]),
    ("array for an unread field", lambda: obj.grpo(tau_pos=jnp.asarray(1.0)), ["`tau_pos`=a JAX array", "never read by grpo"]),
    ("estimator changed by replace", lambda: dataclasses.replace(obj.grpo(), advantage_estimator="dapo"),
     ["`advantage_estimator` was changed from 'grpo' to 'dapo'", "dew_rl.objectives.dapo(...)"]),
    ("flag not bool", lambda: obj.ppo(normalize_advantages=1), ["`normalize_advantages`", "Python bool"]),
    ("entropy_coeff nan", lambda: obj.grpo(entropy_coeff=float("nan")), ["`entropy_coeff`", "finite"]),
]


@pytest.mark.parametrize("what,call,pieces", RULES, ids=[r[0] for r in RULES])
def test_validation_rule(what, call, pieces):
    with pytest.raises(ValueError) as e:
        call()
    msg = str(e.value)
    assert msg.startswith("ObjectiveConfig: "), msg
    for p in pieces:
        assert p in msg, (p, msg)


def test_read_fields_are_accepted():
    """The fields each estimator reads may be set away from their defaults."""
    obj.grpo(use_kl_loss=True, kl_loss_type="low_var_kl+", kl_loss_coef=0.01, entropy_coeff=0.001, tis_cap=2.0)
    obj.dr_grpo(max_response_length=4096)
    obj.dr_grpo(loss_agg_norm=1024.0)
    obj.dapo(overlong_buffer_len=1024, max_response_length=4096, overlong_penalty_factor=0.5)
    obj.ppo(kl_coef=0.02, use_kl_loss=True, lam=1.0, gamma=0.99, cliprange_value=0.5, vf_coef=1.0)
    obj.reinforce_plus_plus(gamma=0.99, kl_coef=0.0, normalize_advantages=False, custom_advantage=lambda r, a: r.mask)
    obj.cispo(cispo_epsilon_low=0.5, cispo_epsilon_high=2.0)
    obj.sapo(tau_pos=0.5, tau_neg=2.0)
    obj.gspo(clip_ratio_c=3.0)
    obj.grpo(rollout_mode="fully_async", context_parallel_size=2)
    obj.dpo(beta=0.5)
    for kind in rl.KL_PENALTY_KINDS:
        obj.rloo(use_kl_loss=True, kl_loss_type=kind)
