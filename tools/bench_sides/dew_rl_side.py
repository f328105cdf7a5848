"""`make bench`, the dew_rl side (and, with --floor, the memory floor): every case jitted, float32.

With --variant, the same functions on a few cases only, under the XLA_FLAGS that tools/bench.py sets.
With --baseline, the dew_rl of an earlier commit (unpacked by tools/bench.py into DEW_RL_BENCH_BASELINE),
on the cases that checkout has: the before of a change, timed in the same interleaved rounds as the after.

The floor of a case is a jitted function that reads the same inputs once and writes outputs of the
same shapes once (their elementwise sum, reduced where the output is a scalar or per row); no loss
can be faster on this machine than moving its data once. Both report the compiled function's
temporary memory.
"""
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
BASELINE = "--baseline" in sys.argv
if BASELINE:  # the earlier checkout's dew_rl comes first on the path
    sys.path.insert(0, os.environ["DEW_RL_BENCH_BASELINE"])

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import dew_rl as rl  # noqa: E402
import dew_rl.objectives as obj  # noqa: E402
from dew_rl._ops import count_kept  # noqa: E402
from dew_rl._advantages.gae import _gae_two_level  # noqa: E402
from bench_common import GROUP, NEW_CASES, VARIANT_CASES, serve  # noqa: E402

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
    if name in ("gae_associative", "gae_blocked8"):
        import gae_forms
        form = gae_forms.associative if name == "gae_associative" else gae_forms.blocked
        return (lambda r, v, m: form(r, v, m, 1.0, 0.95)), ("token_rewards", "values", "mask"), "2xBT"
    if name.startswith("aggregate:"):
        mode = name.split(":", 1)[1]
        return (lambda x, m: rl.aggregate(x, m, mode)), ("advantages", "mask"), "scalar"
    if name == "masked_mean":
        return rl.masked_mean, ("advantages", "mask"), "scalar"
    if name == "masked_whiten":
        return rl.masked_whiten, ("advantages", "mask"), "BT"
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
    if name in ("primitive:masked_row_sums", "primitive:exp_masked_row_sums"):  # the one-pass form (reverted)
        from reduction_forms import masked_row_sums
        pre = jnp.exp if "exp_" in name else (lambda x: x)
        return (lambda x, m: [s.sum() for s in masked_row_sums(m != 0, pre(x))]), ("advantages", "mask"), "scalar"
    if name == "primitive:exp_masked_sum+count":  # the library's plain form, on a value computed in front of it
        return ((lambda x, m: (jnp.where(m != 0, jnp.exp(x), 0).sum(), count_kept(m != 0))), ("advantages", "mask"),
                "scalar")
    if name in ("primitive:variadic_row", "primitive:variadic_slices32"):  # the forms it was chosen against
        def variadic(x, m):
            k = m != 0
            ops = (jnp.where(k, x, 0), k.astype(jnp.float32))
            if name.endswith("slices32"):
                ops = tuple(o.reshape(o.shape[0], 32, -1) for o in ops)
            parts = jax.lax.reduce(ops, (jnp.float32(0), jnp.float32(0)), lambda a, b: (a[0] + b[0], a[1] + b[1]), (1,))
            return [p.sum() for p in parts]
        return variadic, ("advantages", "mask"), "scalar"
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
    if case.split("@")[0] in ("gae_associative", "gae_blocked8") and not FLOOR:  # the same outputs as gae, or no row
        want = rl.gae(*args, 1.0, 0.95)
        for got_, want_ in zip(jax.jit(fn)(*args), want):
            assert float(jnp.max(jnp.abs(got_ - want_))) < 1e-4, case
    t0 = time.perf_counter()
    compiled = jax.jit(fn).lower(*args).compile()  # tracing, lowering and XLA compilation, timed alone
    compile_s = time.perf_counter() - t0
    temp = compiled.memory_analysis().temp_size_in_bytes
    return (lambda: jax.block_until_ready(compiled(*args))), {"temp_bytes": int(temp), "compile_s": compile_s}


if __name__ == "__main__":
    serve(build, lambda case: case in VARIANT_CASES if VARIANT else (not case.startswith(NEW_CASES) if BASELINE else True))
