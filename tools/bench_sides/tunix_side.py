"""`make bench`, the Tunix 0.1.7 side: Tunix's own jitted JAX functions (GAE, KL, aggregation) and its NumPy GRPO.

Runs in Tunix's environment with the lite shim of tools/stubs/tunix_lite.py: an empty `tunix`
package module whose path is the installed directory, so that `tunix/__init__.py` (every trainer)
is never imported.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "stubs"))
from tunix_lite import install  # noqa: E402

install()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from tunix.rl import algo_core as ac  # noqa: E402
from tunix.rl import common  # noqa: E402

from bench_common import GROUP, serve  # noqa: E402

KL = {"k1": "kl", "k2": "mse_kl", "k3": "low_var_kl"}
AGG = {"token-mean": "token-mean", "seq-mean-token-sum": "seq-mean-token-sum",
       "seq-mean-token-mean": "sequence-mean-token-mean", "seq-mean-token-sum-norm": "sequence-mean-token-sum-norm"}


def build(case, data):
    name = case.split("@")[0]
    x = {k: jnp.asarray(v) for k, v in data.items()}
    if name == "gae":
        f = lambda: ac.compute_gae_advantages(x["token_rewards"], x["values"], x["mask"], 1.0, 0.95)
    elif name == "group_advantage":
        s = data["scores"].astype("float64")
        return lambda: ac.compute_advantages(s, GROUP)
    elif name in KL:
        f = jax.jit(lambda a, b: common.compute_kl_divergence(a, b, KL[name]))
        return lambda: jax.block_until_ready(f(x["log_probs"], x["ref_log_probs"]))
    elif name.startswith("aggregate:"):
        mode = AGG[name.split(":", 1)[1]]
        f = jax.jit(lambda l, m: common.aggregate_loss(l, m, mode))
        return lambda: jax.block_until_ready(f(x["advantages"], x["mask"]))
    else:
        raise KeyError(case)
    return lambda: jax.block_until_ready(f())


def has(case):
    name = case.split("@")[0]
    return name in ("gae", "group_advantage", "k1", "k2", "k3") or (
        name.startswith("aggregate:") and name.split(":", 1)[1] in AGG)


if __name__ == "__main__":
    serve(build, has)
