"""`make bench`, the compile-time rows: `jax.jit(f).lower(*args).compile()` of `obj.advantages` and of the
gradient of `obj.loss`, for every registered estimator and every loss mode, at a realistic shape.

Each compilation is timed alone in this fresh interpreter (tracing and lowering, then XLA compilation, and the
total); every configuration is compiled twice, and the row is the second pass (the first, with its one-time
costs of the process, is kept as "cold");
a configuration that the estimator refuses (its recipe needs a field the shared rollout lacks) is recorded
with the reason instead of a time. The result is one JSON object on stdout, which tools/bench.py stores
under "compile" in data/bench.json; run alone it prints a table.

    python tools/bench_compile.py            # table
    python tools/bench_compile.py --json     # what tools/bench.py reads
    python tools/bench_compile.py --parts    # only what REINFORCE++'s advantages compile (also part of --json)
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import dew_rl.objectives as obj  # noqa: E402
from bench_common import GROUP, inputs  # noqa: E402

SHAPE = "64x2048"  # B = 64 responses (8 prompts of 8), T = 2048


def rollout(d):
    B = d["mask"].shape[0]
    j = lambda k: jnp.asarray(d[k])
    rng = np.random.default_rng(0)
    return obj.Rollout(mask=j("mask"), old_log_probs=j("old_log_probs"), ref_log_probs=j("ref_log_probs"),
                       rewards=j("rewards"), token_rewards=j("token_rewards"), old_values=j("values"),
                       behavior_log_probs=j("old_log_probs") - 0.01, teacher_log_probs=j("ref_log_probs"),
                       reward_components=jnp.asarray(rng.integers(0, 2, size=(B, 2)), jnp.float32),
                       reward_baselines=jnp.asarray(rng.integers(0, 2, size=B), jnp.float32),
                       sum_pi_squared=jnp.full(d["mask"].shape, 0.3, jnp.float32),
                       group_ids=jnp.repeat(jnp.arange(B // GROUP, dtype=jnp.int32), GROUP))


def timed_compile(fn, *args) -> tuple:
    "(total s, tracing + lowering s, XLA compilation s) of `jax.jit(fn).lower(*args).compile()`."
    t0 = time.perf_counter()
    lowered = jax.jit(fn).lower(*args)
    t1 = time.perf_counter()
    lowered.compile()
    t2 = time.perf_counter()
    return t2 - t0, t1 - t0, t2 - t1


def one(cfg, d, roll):
    "{advantages_s, advantages_lower_s, advantages_xla_s, loss_grad_s, loss_grad_lower_s, loss_grad_xla_s} of one configuration."
    adv = timed_compile(lambda ro: obj.advantages(cfg, ro), roll)
    stage = jax.jit(lambda ro: obj.advantages(cfg, ro))(roll)
    roll2 = stage[0]
    lp = jnp.asarray(d["log_probs"])
    kw = {"values": jnp.asarray(d["values"])} if cfg.advantage_estimator == "ppo" else {}
    if cfg.loss_mode == "clip_cov":
        kw["key"] = jax.random.key(0)

    def step(lp, ro):
        return obj.loss(cfg, lp, ro, **kw)[0]

    loss = timed_compile(jax.value_and_grad(step), lp, roll2)
    return {f"{stage}{part}": v for stage, t in (("advantages", adv), ("loss_grad", loss))
            for part, v in zip(("_s", "_lower_s", "_xla_s"), t)}


def parts(repeat: int = 3) -> dict:
    """What REINFORCE++'s advantages compile: its discounted suffix sum (an associative scan over T, XLA:CPU's
    log2(T) levels of slices, pads and concatenations) alone, against a sequential `lax.scan` of the same
    recursion (other summation order: not a drop-in), each compiled `repeat` times (medians), and the number of
    StableHLO operations of the two estimators' lowered advantages."""
    import re
    import statistics
    from dew_rl._advantages.reinforce_pp import _discounted_suffix_sum
    d = inputs(SHAPE)
    r = jnp.asarray(d["token_rewards"])

    def sequential(r, gamma):
        return jax.lax.scan(lambda c, x: (x + gamma * c, x + gamma * c), jnp.zeros(r.shape[0], r.dtype), r.T,
                            reverse=True)[1].T

    out = {"suffix_sum_associative_s": statistics.median(
               timed_compile(lambda r: _discounted_suffix_sum.__wrapped__(r, 1.0), r)[0] for _ in range(repeat)),
           "suffix_sum_sequential_s": statistics.median(timed_compile(lambda r: sequential(r, 1.0), r)[0] for _ in range(repeat))}
    roll = rollout(d)
    for name in ("reinforce_plus_plus", "grpo"):
        cfg = getattr(obj, name)()
        out[f"{name}_advantages_s"] = statistics.median(
            timed_compile(lambda ro: obj.advantages(cfg, ro), roll)[0] for _ in range(repeat))
        txt = jax.jit(lambda ro: obj.advantages(cfg, ro)).lower(roll).as_text()
        out[f"{name}_hlo_ops"] = len(re.findall(r"stablehlo\.\w+", txt))
        out[f"{name}_hlo_slice_pad_concat"] = len(re.findall(r"stablehlo\.(?:slice|pad|concatenate)\b", txt))
    return out


def run() -> dict:
    d = inputs(SHAPE)
    roll = rollout(d)
    rows = []
    configs = [("estimator", name, lambda name=name: getattr(obj, name)()) for name in obj.ESTIMATORS
               if obj.ESTIMATOR_RECORDS[name].default_agg is not None]
    extra = {"m2po": {"kl2_budget": 0.04}}  # a field the loss mode requires, with the value its source suggests
    configs += [("loss_mode", mode, lambda mode=mode: obj.grpo(loss_mode=mode, **extra.get(mode, {})))
                for mode in obj.LOSS_MODES]
    jax.jit(lambda x: jnp.tanh(x).sum()).lower(jnp.zeros(8)).compile()  # the process's first compilation, not counted
    # Two passes over every configuration. The first ("cold") is the first time this process meets each of them,
    # and the configuration that comes first also pays JAX's one-time costs (the first lowering of a scan, a sort,
    # ...); the second is the row: the cost of the configuration itself, which the order no longer changes.
    cold = {}
    for p in (0, 1):
        for kind, name, make in configs:
            row = {"kind": kind, "name": name}
            try:
                cfg = make()
                row.update(one(cfg, d, roll))
            except Exception as e:  # a recipe this shared rollout cannot feed: recorded, not hidden
                row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
            if p == 0:
                cold[(kind, name)] = {k: v for k, v in row.items() if k in ("advantages_s", "loss_grad_s")}
                continue
            row["cold"] = cold[(kind, name)]
            rows.append(row)
            print(f"[bench_compile] {kind} {name}: {row}", file=sys.stderr, flush=True)
    return {"shape": SHAPE, "backend": jax.default_backend(), "order": "configurations in this order, twice; rows from the second pass",
            "rows": rows, "parts": parts()}


if __name__ == "__main__":
    if "--parts" in sys.argv:   # only the REINFORCE++ parts (merged into data/bench.json by hand when run alone)
        jax.jit(lambda x: jnp.tanh(x).sum()).lower(jnp.zeros(8)).compile()
        print(json.dumps(parts()))
        sys.exit(0)
    res = run()
    if "--json" in sys.argv:
        print(json.dumps(res))
    else:
        for r in res["rows"]:
            print(f"{r['kind']:<10}{r['name']:<34}" + (f"{r['advantages_s']:>8.2f}{r['loss_grad_s']:>8.2f}" if "error" not in r
                                                      else "  " + r["error"]))
