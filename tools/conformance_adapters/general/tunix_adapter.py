"""Conformance adapter for Tunix 0.1.7: runs Tunix's own advantage, KL, aggregation and GRPO-loss code on the shared inputs.

Runs in the `tunix` environment of tools/refenvs.py (`google-tunix==0.1.7` with --no-deps, jax 0.10.2,
flax 0.12.8: the "lite" install). As in tools/make_tunix_fixtures.py, an empty `tunix` package
module whose `__path__` is the installed directory is registered first, so `tunix/__init__.py`
(which imports every trainer) never runs; then `tunix.rl.algo_core` and `tunix.rl.common` are
imported from the wheel. Nothing is copied. Dtypes are Tunix's own: GAE, the KL and the
aggregation run in float32 (JAX's default; Tunix casts), the group advantages are NumPy functions
and run in float64 on the float32 rewards. The losses take a model; the one call in each that runs the model
(`common.compute_per_token_logps`, `common.compute_score`) is replaced by one returning the given
log-probs or value predictions (below).

    <tunix-python> tools/conformance_adapters/general/tunix_adapter.py INPUTS.npz OUTPUTS.npz OUTPUTS.json
"""
import importlib.metadata
import sys
from pathlib import Path
import types

import numpy as np

from _common import Recorder, load_inputs

VERSION = importlib.metadata.version("google-tunix")
assert VERSION == "0.1.7", VERSION
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "stubs"))
from tunix_lite import install  # noqa: E402

install()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from tunix.rl import algo_core as ac  # noqa: E402
from tunix.rl import common  # noqa: E402

rec = Recorder("tunix", f"Tunix {VERSION}")
AC, CO = "tunix/rl/algo_core.py", "tunix/rl/common.py"
MODES = ("token-mean", "sequence-mean-token-mean", "sequence-mean-token-scale", "seq-mean-token-sum",
         "sequence-mean-token-sum-norm")


def run_case(case, x):
    m, G = x["mask"], int(x["G"])
    put = lambda *a, **k: rec.put(case, *a, **k)  # noqa: E731
    j = jnp.asarray

    def gae():
        for gamma, lam in ((1.0, 0.95), (0.9, 0.8)):
            adv, ret = ac.compute_gae_advantages(j(x["token_rewards"]), j(x["values"]), j(m), gamma, lam)
            s = f"gamma={gamma}, lam={lam}, float32; every position compared"
            put("gae_advantages", adv, f"{AC}:compute_gae_advantages", s, gamma=gamma, lam=lam)
            put("gae_returns", ret, f"{AC}:compute_gae_advantages", s, gamma=gamma, lam=lam)
    rec.attempt(f"{case}: gae", gae)

    def group():
        s = x["scores"].astype(np.float64)
        put("group_advantage", ac.compute_advantages(s, G), f"{AC}:compute_advantages",
            f"num_generations={G} (std ddof=1, + 1e-6), NumPy float64, per row", std=True)
        put("group_advantage", ac.compute_drgrpo_advantages(s, G), f"{AC}:compute_drgrpo_advantages",
            f"num_generations={G}, NumPy float64, per row", std=False)
        put("rloo_advantage", ac.compute_rloo_advantages(s, G), f"{AC}:compute_rloo_advantages",
            f"num_generations={G}, NumPy float64, per row")
    rec.attempt(f"{case}: group advantages", group)

    def kl():
        for name, k in (("kl", "k1"), ("mse_kl", "k2"), ("low_var_kl", "k3")):
            put("kl", common.compute_kl_divergence(j(x["lp"]), j(x["ref"]), name), f"{CO}:compute_kl_divergence",
                f"method={name!r}, no clamp (kl_clamp_value=None), float32", k=k)
    rec.attempt(f"{case}: compute_kl_divergence", kl)

    def agg():
        for mode in MODES:
            put("aggregate", common.aggregate_loss(j(x["loss"]), j(m), mode), f"{CO}:aggregate_loss",
                f"loss_agg_mode={mode!r}, norm=None (defaults), float32", mode=mode)
    rec.attempt(f"{case}: aggregate_loss", agg)


# --- grpo_loss_fn: Tunix's GRPO/DAPO/GSPO-token policy loss ------------------------------------------------
# It takes a model and computes the log-probs itself (common.compute_per_token_logps). The adapter replaces
# that one call, for the duration of the run, with one that returns the given per-token log-probs (and
# zero logits, which only feed the logged entropy); every line of the loss after it is Tunix's.
from flax import nnx  # noqa: E402

_GIVEN = {}


def _given_log_probs(graphdef, state, **kw):
    lp = _GIVEN["lp"]
    return lp, jnp.zeros(lp.shape + (2,), jnp.float32)


common.compute_per_token_logps = _given_log_probs
_MODEL = nnx.Linear(1, 1, rngs=nnx.Rngs(0))  # any nnx module: grpo_loss_fn only nnx.split()s it


def grpo_loss(x, loss_algo, eps, eps_high, eps_c, mode):
    B, T = x["mask"].shape
    _GIVEN["lp"] = jnp.asarray(x["lp"])
    ex = types.SimpleNamespace(prompt_ids=jnp.zeros((B, 1), jnp.int32), completion_ids=jnp.zeros((B, T), jnp.int32),
                               completion_mask=jnp.asarray(x["mask"]), advantages=jnp.asarray(x["adv"]),
                               old_per_token_logps=jnp.asarray(x["old"]), ref_per_token_logps=None)
    cfg = types.SimpleNamespace(beta=0.0, epsilon=eps, epsilon_high=eps_high, epsilon_c=eps_c, loss_algo=loss_algo,
                                loss_agg_mode=mode, temperature=1.0, kl_loss_mode="kl", kl_clamp_value=None)
    return ac.grpo_loss_fn(_MODEL, ex, cfg, pad_id=0, eos_id=1)


def run_policy_losses(case, x):
    put = lambda *a, **k: rec.put(case, *a, **k)  # noqa: E731
    fn = f"{AC}:grpo_loss_fn"
    note = "advantages [B, T] given, beta=0.0 (no KL term), the model's log-probs replaced by the given ones"

    def grpo():
        for eps, hi, c in ((0.2, 0.2, None), (0.2, 0.28, 3.0)):
            for mode in ("token-mean", "sequence-mean-token-mean"):
                loss, aux = grpo_loss(x, "grpo", eps, hi, c, mode)
                s = f"loss_algo='grpo', epsilon={eps}, epsilon_high={hi}, epsilon_c={c}, loss_agg_mode={mode!r}; {note}"
                put("ppo_loss", loss, fn, s, lo=eps, hi=hi, c=c, mode=mode)
                if mode == "token-mean":
                    for k in ("pg_clipfrac", "ppo_kl", "pg_clipfrac_lower"):
                        put(f"ppo_{k}", aux[k], fn + f" (aux[{k!r}])", s, lo=eps, hi=hi, c=c)
    rec.attempt(f"{case}: grpo_loss_fn grpo", grpo)

    def gspo():
        for mode in ("token-mean", "sequence-mean-token-mean"):
            loss, aux = grpo_loss(x, "gspo-token", 3e-4, 4e-4, None, mode)
            s = f"loss_algo='gspo-token', epsilon=3e-4, epsilon_high=4e-4, loss_agg_mode={mode!r}; {note}"
            put("gspo_loss", loss, fn, s, mode=mode, lo=3e-4, hi=4e-4)
            if mode == "token-mean":
                put("gspo_clipfrac", aux["pg_clipfrac"], fn + " (aux['pg_clipfrac'])", s, lo=3e-4, hi=4e-4)
    rec.attempt(f"{case}: grpo_loss_fn gspo-token", gspo)


# --- ppo_policy_loss_fn and ppo_value_loss_fn: Tunix's PPO actor and critic losses -------------------------
# The same replacement for the policy's log-probs; for the critic, common.compute_score (the value head's
# forward) is replaced by one returning the given predictions where ppo_value_loss_fn slices them
# ([:, -T - 1:-1] of a [B, T + 1] score).
def _given_scores(model, prompt_ids, completion_ids, pad_id, eos_id, **kw):
    v = _GIVEN["vpred"]
    return jnp.concatenate([v, jnp.zeros((v.shape[0], 1), v.dtype)], axis=1)


common.compute_score = _given_scores


def run_ppo_losses(case, x):
    put = lambda *a, **k: rec.put(case, *a, **k)  # noqa: E731
    B, T = x["mask"].shape
    _GIVEN["lp"], _GIVEN["vpred"] = jnp.asarray(x["lp"]), jnp.asarray(x["vpred"])
    ex = types.SimpleNamespace(prompt_ids=jnp.zeros((B, 1), jnp.int32), completion_ids=jnp.zeros((B, T), jnp.int32),
                               completion_mask=jnp.asarray(x["mask"]), advantages=jnp.asarray(x["adv"]),
                               old_per_token_logps=jnp.asarray(x["old"]), ref_per_token_logps=None,
                               old_values=jnp.asarray(x["vold"]), returns=jnp.asarray(x["returns"]))
    note = "advantages [B, T] given, entropy_coef=0.0, kl_coef=0.0, the model's log-probs replaced by the given ones"

    def policy():
        fn = f"{AC}:ppo_policy_loss_fn"
        for lo, hi, c in ((0.2, 0.2, None), (0.2, 0.28, 3.0)):
            cfg = types.SimpleNamespace(epsilon_low=lo, epsilon_high=hi, epsilon_c=c, entropy_coef=0.0, kl_coef=0.0)
            loss, aux = ac.ppo_policy_loss_fn(_MODEL, ex, cfg, pad_id=0, eos_id=1)
            s = f"epsilon_low={lo}, epsilon_high={hi}, epsilon_c={c} (token mean, no log-ratio clamp); {note}"
            put("ppo_loss", loss, fn, s, lo=lo, hi=hi, c=c, fn="ppo")
            for k in ("pg_clipfrac", "pg_clipfrac_lower"):
                put(f"ppo_{k}", aux[k], fn + f" (aux[{k!r}])", s, lo=lo, hi=hi, c=c, fn="ppo")
    rec.attempt(f"{case}: ppo_policy_loss_fn", policy)

    def value():
        fn = f"{AC}:ppo_value_loss_fn"
        loss, aux = ac.ppo_value_loss_fn(_MODEL, ex, 0.2, pad_id=0, eos_id=1)
        s = "clip_range_value=0.2 (token mean); the critic's predictions replaced by the given ones"
        put("value_loss", loss, fn, s)
        put("value_clipfrac", aux["vf_clipfrac"], fn + " (aux['vf_clipfrac'])", s)
    rec.attempt(f"{case}: ppo_value_loss_fn", value)


cases = load_inputs(sys.argv[1])
for case, x in cases.items():
    run_policy_losses(case, x)
    run_ppo_losses(case, x)
for case, x in cases.items():
    run_case(case, x)
rec.unavailable("tunix/rl/grpo/grpo_learner.py (token TIS)", "behavior_importance_weights",
                "computed inline inside the learner's training step, not a callable function")
rec.unavailable("tunix/sft/dpo/dpo_trainer.py:dpo_loss_fn", "preference_logsigmoid",
                "needs the full Tunix install (the lite environment lacks the SFT trainer's dependencies) and a model")
rec.save(sys.argv[2], sys.argv[3], dict(jax=jax.__version__))
print(f"[tunix] {len(rec.records)} outputs, {len(rec.failed)} failures")
