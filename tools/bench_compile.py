"""`make bench`, the compile-time rows: `jax.jit(f).lower(*args).compile()` of `obj.advantages` and of the
gradient of `obj.loss`, for every registered estimator and every loss mode, at a realistic shape.

Each compilation is timed alone in this fresh interpreter (tracing, lowering and XLA compilation together);
a configuration that the estimator refuses (its recipe needs a field the shared rollout lacks) is recorded
with the reason instead of a time. The result is one JSON object on stdout, which tools/bench.py stores
under "compile" in data/bench.json; run alone it prints a table.

    python tools/bench_compile.py            # table
    python tools/bench_compile.py --json     # what tools/bench.py reads
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


def timed_compile(fn, *args) -> float:
    t0 = time.perf_counter()
    jax.jit(fn).lower(*args).compile()
    return time.perf_counter() - t0


def one(cfg, d, roll):
    "(advantages compile s, loss gradient compile s) for one configuration."
    adv_s = timed_compile(lambda ro: obj.advantages(cfg, ro), roll)
    stage = jax.jit(lambda ro: obj.advantages(cfg, ro))(roll)
    roll2 = stage[0]
    lp = jnp.asarray(d["log_probs"])
    kw = {"values": jnp.asarray(d["values"])} if cfg.advantage_estimator == "ppo" else {}
    if cfg.loss_mode == "clip_cov":
        kw["key"] = jax.random.key(0)

    def step(lp, ro):
        return obj.loss(cfg, lp, ro, **kw)[0]

    loss_s = timed_compile(jax.value_and_grad(step), lp, roll2)
    return adv_s, loss_s


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
    for kind, name, make in configs:
        row = {"kind": kind, "name": name}
        try:
            cfg = make()
            row["advantages_s"], row["loss_grad_s"] = one(cfg, d, roll)
        except Exception as e:  # a recipe this shared rollout cannot feed: recorded, not hidden
            row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
        rows.append(row)
        print(f"[bench_compile] {kind} {name}: {row}", file=sys.stderr, flush=True)
    return {"shape": SHAPE, "backend": jax.default_backend(), "rows": rows}


if __name__ == "__main__":
    res = run()
    if "--json" in sys.argv:
        print(json.dumps(res))
    else:
        for r in res["rows"]:
            print(f"{r['kind']:<10}{r['name']:<34}" + (f"{r['advantages_s']:>8.2f}{r['loss_grad_s']:>8.2f}" if "error" not in r
                                                      else "  " + r["error"]))
