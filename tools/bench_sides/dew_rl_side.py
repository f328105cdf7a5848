"""`make bench`, the dew_rl side (and, with --floor, the memory floor): every case jitted, float32.

With --variant, the same functions on a few cases only, under the XLA_FLAGS that tools/bench.py sets.

The floor of a case is a jitted function that reads the same inputs once and writes outputs of the
same shapes once (their elementwise sum, reduced where the output is a scalar or per row); no loss
can be faster on this machine than moving its data once. Both report the compiled function's
temporary memory.
"""
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import dew_rl as rl  # noqa: E402
import dew_rl.objectives as obj  # noqa: E402
from dew_rl._ops import count_kept  # noqa: E402
from dew_rl._advantages.gae import _gae_two_level  # noqa: E402
from bench_common import GROUP, VARIANT_CASES, serve  # noqa: E402

FLOOR = "--floor" in sys.argv
VARIANT = "--variant" in sys.argv  # run under XLA_FLAGS set by tools/bench.py: only the cases it is compared on
AGG = {"token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"}


def spec(case: str):
    """(function of the named inputs, their names, output kind) for one case."""
    name = case.split("@")[0]
    if name == "gae":
        return (lambda r, v, m: rl.gae(r, v, m, 1.0, 0.95)), ("token_rewards", "values", "mask"), "2xBT"
    if name == "gae_two_level":
        return (lambda r, v, m: _gae_two_level(r, v, m, 1.0, 0.95)), ("token_rewards", "values", "mask"), "2xBT"
    if name == "group_advantage":
        return (lambda s: rl.group_advantage(s, GROUP)), ("scores",), "B"
    if name == "global_normalize":
        return rl.global_masked_whiten, ("advantages", "mask"), "BT"
    if name.startswith("aggregate:"):
        mode = name.split(":", 1)[1]
        return (lambda x, m: rl.aggregate(x, m, mode)), ("advantages", "mask"), "scalar"
    if name in ("k1", "k2", "k3"):
        return getattr(rl, f"{name}_kl"), ("log_probs", "ref_log_probs"), "BT"
    if name.startswith("ppo_dual_clip+"):
        reduce_, _, pass_ = name.split("+", 1)[1].partition(":")
        red = rl.token_mean if reduce_ == "token_mean" else rl.response_mean

        def loss(lp, old, a, m):
            terms, _ = rl.clipped_surrogate_terms(rl.token_log_ratio(lp, old), a, m, 0.2, 0.2, 3.0)
            return red(terms, m)

        if pass_ == "fwd":
            return loss, ("log_probs", "old_log_probs", "advantages", "mask"), "scalar"
        return jax.value_and_grad(loss), ("log_probs", "old_log_probs", "advantages", "mask"), "scalar+BT"
    if name.startswith("objective:"):
        est = name.split(":")[1]
        cfg = getattr(obj, est)()

        def stage2(lp, old, ref, a, m):
            roll = obj.Rollout(mask=m, old_log_probs=old, ref_log_probs=ref, advantages=a)
            return obj.loss(cfg, lp, roll)[0]

        return jax.value_and_grad(stage2), ("log_probs", "old_log_probs", "ref_log_probs", "advantages",
                                            "mask"), "scalar+BT"
    if name == "primitive:copy":
        return (lambda x: x + 1), ("advantages",), "BT"
    if name == "primitive:masked_sum":
        return (lambda x, m: jnp.where(m != 0, x, 0).sum()), ("advantages", "mask"), "scalar"
    if name == "primitive:masked_sum+count":
        # the count as every dew_rl reduction takes it (`_ops.count_kept`)
        return (lambda x, m: (jnp.where(m != 0, x, 0).sum(), count_kept(m != 0))), ("advantages", "mask"), "scalar"
    if name == "primitive:scan":
        def scan(x):  # the cost of one step of a sequential loop over T, with 64 lanes per step
            return jax.lax.scan(lambda c, x_t: (x_t + 0.95 * c, c), jnp.zeros_like(x[:, 0]), x.T, reverse=True)[1].T
        return scan, ("advantages",), "BT"
    if name == "primitive:gather":  # one gather per position along T: what a masked fill costs
        def gather(x, m):
            idx = (jnp.arange(x.shape[1], dtype=jnp.int32)[None, :] * 7 + (m > 0)) % x.shape[1]
            return jnp.take_along_axis(x, jnp.broadcast_to(idx, x.shape), axis=1)
        return gather, ("advantages", "mask"), "BT"
    if name == "primitive:blocked_matmul":  # prefix sums as [B T/128, 128] @ [128, 128]
        def blocked(x):
            C = 128
            tri = (jnp.arange(C)[:, None] >= jnp.arange(C)[None, :]).astype(x.dtype)
            return (x.reshape(-1, C) @ tri).reshape(x.shape)
        return blocked, ("advantages",), "BT"
    if name == "primitive:masked_whiten":
        return rl.masked_whiten, ("advantages", "mask"), "BT"
    raise KeyError(case)


def floor(names, kind):
    def f(*xs):
        s = xs[0]
        for x in xs[1:]:
            s = s + x
        if kind == "B":
            return s * 2.0
        if kind == "BT":
            return s
        if kind == "2xBT":
            return s, s * 2.0
        if kind == "scalar":
            return jnp.sum(s)
        return jnp.sum(s), s  # scalar + BT (a loss and its gradient)
    return f


def build(case, data):
    fn, names, kind = spec(case)
    if FLOOR:
        fn = floor(names, kind)
    args = [jnp.asarray(data[n]) for n in names]
    t0 = time.perf_counter()
    compiled = jax.jit(fn).lower(*args).compile()  # tracing, lowering and XLA compilation, timed alone
    compile_s = time.perf_counter() - t0
    temp = compiled.memory_analysis().temp_size_in_bytes
    return (lambda: jax.block_until_ready(compiled(*args))), {"temp_bytes": int(temp), "compile_s": compile_s}


if __name__ == "__main__":
    serve(build, lambda case: case in VARIANT_CASES if VARIANT else True)
