"""`make bench`, the rlax 0.1.9 side: `truncated_generalized_advantage_estimation`, vmapped over rows and jitted.

rlax's GAE is unbatched ([T] rewards, discounts and T+1 values) and has no mask, so it computes the
plain recursion over every position of every row, without the masked-step carry and without
whitening: less work than the masked, whitened GAE it is compared with.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import rlax  # noqa: E402

from bench_common import serve  # noqa: E402


def build(case, data):
    r = jnp.asarray(data["token_rewards"])
    v = jnp.concatenate([jnp.asarray(data["values"]), jnp.zeros((r.shape[0], 1), r.dtype)], axis=1)
    disc = jnp.ones_like(r)
    f = jax.jit(jax.vmap(lambda r, d, v: rlax.truncated_generalized_advantage_estimation(r, d, 0.95, v)))
    temp = f.lower(r, disc, v).compile().memory_analysis().temp_size_in_bytes
    return (lambda: jax.block_until_ready(f(r, disc, v))), {"temp_bytes": int(temp)}


if __name__ == "__main__":
    serve(build, lambda case: case.startswith("gae@"))
