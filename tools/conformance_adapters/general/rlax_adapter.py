"""Conformance adapter for rlax 0.1.9: runs rlax's own GAE, clipped surrogate and L2 loss on the shared inputs.

Runs in the `rlax` environment of tools/refenvs.py (`rlax==0.1.9`, jax 0.10.2). rlax's functions are
unbatched (one trajectory [T]) and take no mask, so each row is one trajectory through `jax.vmap`;
GAE's `values` are T + 1 long (a 0 bootstrap appended) and `discount_t` is gamma at every step; the
clipped surrogate takes probability ratios exp(lp - old) and averages over all T positions. Nothing
is copied from rlax (rlax/_src/multistep.py, rlax/_src/policy_gradients.py, rlax/_src/losses.py are
called). float32 throughout.

    <rlax-python> tools/conformance_adapters/general/rlax_adapter.py INPUTS.npz OUTPUTS.npz OUTPUTS.json
"""
import importlib.metadata
import sys

import jax
import jax.numpy as jnp
import numpy as np
import rlax

from _common import Recorder, load_inputs

VERSION = importlib.metadata.version("rlax")
assert VERSION == "0.1.9", VERSION
rec = Recorder("rlax", f"rlax {VERSION}")


def run_case(case, x):
    put = lambda *a, **k: rec.put(case, *a, **k)  # noqa: E731
    r, v = jnp.asarray(x["token_rewards"]), jnp.asarray(x["values"])
    B, T = r.shape

    def gae():
        v1 = jnp.concatenate([v, jnp.zeros((B, 1), v.dtype)], axis=1)
        for gamma, lam in ((1.0, 0.95), (0.9, 0.8)):
            disc = jnp.full((B, T), gamma, jnp.float32)
            adv = jax.vmap(rlax.truncated_generalized_advantage_estimation, in_axes=(0, 0, None, 0))(r, disc, lam, v1)
            put("gae_raw", adv, "rlax/_src/multistep.py:truncated_generalized_advantage_estimation",
                f"vmap over rows; discount_t={gamma} everywhere, lambda_={lam}, values + [0] (T + 1), no mask",
                gamma=gamma, lam=lam)
    rec.attempt(f"{case}: gae", gae)

    def ppo():
        ratio = jnp.exp(jnp.asarray(x["lp"]) - jnp.asarray(x["old"]))
        for eps in (0.2, 0.3):
            loss = jax.vmap(rlax.clipped_surrogate_pg_loss, in_axes=(0, 0, None))(ratio, jnp.asarray(x["adv"]), eps)
            put("ppo_rows", loss, "rlax/_src/policy_gradients.py:clipped_surrogate_pg_loss",
                f"vmap over rows (one loss per row, mean over all T); prob_ratios_t = exp(lp - old), epsilon={eps} "
                "(symmetric), no dual clip, no mask", eps=eps)
    rec.attempt(f"{case}: clipped_surrogate_pg_loss", ppo)

    def l2():
        put("value_terms_unclipped", rlax.l2_loss(jnp.asarray(x["vpred"]), jnp.asarray(x["returns"])),
            "rlax/_src/losses.py:l2_loss", "l2_loss(predictions, targets) = 0.5 (p - t)^2 per element, no clipping")
    rec.attempt(f"{case}: l2_loss", l2)


cases = load_inputs(sys.argv[1])
for case, x in cases.items():
    run_case(case, x)
for fn, ours in (("group / leave-one-out advantages", "group_advantage, rloo_advantage"),
                 ("KL estimators k1/k2/k3", "k1_kl, k2_kl, k3_kl"),
                 ("masked aggregation", "aggregate"), ("DPO", "preference_logsigmoid")):
    rec.unavailable(f"rlax ({fn})", ours, "no counterpart in rlax 0.1.9 (an RL library without LLM losses; only the "
                    "full-distribution categorical_kl_divergence exists)")
rec.save(sys.argv[2], sys.argv[3], dict(jax=jax.__version__))
print(f"[rlax] {len(rec.records)} outputs, {len(rec.failed)} failures")
