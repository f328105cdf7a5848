"""`make bench`, the training-step rows: examples/train.py's optimiser step with `dew_rl.objectives` against the
same step with a hand-written minimal GRPO loss in plain jnp (the floor for a loss library inside a trainer).

Both steps are built by examples/train.py's own `make_train_step` (the same Flax NNX transformer, AdamW,
micro-batch scan, mini-batch counts and jit options), on the same parameters, optimiser state and rollout
(sampled once by the example's sampler, scored, and passed through `obj.advantages` once). The only
difference is the loss inside the micro-batch: for "floor" the example's `obj.loss` and `obj.loss_counts`
are replaced, while the step is traced, by `minimal_grpo_loss` below: GRPO's recipe (dual-clip PPO at
eps 0.2 and c 3, verl's k3 KL loss at `kl_loss_coef`, seq-mean-token-mean over the mini-batch's rows),
no input checks and no metrics. The first call of each checks that both give the same loss and parameters.
Two diagnostic steps run beside them: the library step without the entropy metric (`entropy=None`, what
the trainer's train/entropy costs), and the library step whose metrics are dropped (what computing the
metrics costs when XLA cannot remove them).

The rounds are interleaved (each round times every step a fixed number of times, about `--target-s` seconds, one after the other) and the
median per call over all rounds is recorded in data/bench_train.json, which nbs/07_benchmarks reads.

    python tools/bench_train.py                     # train.py's defaults and one larger shape
    python tools/bench_train.py --rounds 5 --only defaults
"""
from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import statistics
import sys
import time
import types
from pathlib import Path
from typing import NamedTuple

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "data" / "bench_train.json"

# name -> overrides of examples/train.py's Args: its defaults, and a wider, longer problem (still CPU-sized)
SHAPES = {
    "defaults": {},
    "wide": {"n_digits": 11, "base": 10, "d_model": 64},
}


def load_example():
    spec = importlib.util.spec_from_file_location("dew_rl_example_train", ROOT / "examples" / "train.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class Counts(NamedTuple):   # what the step reads of LossCounts: the mini-batch's rows and tokens
    rows: "object"
    tokens: "object"


def minimal_grpo_loss(cfg, log_probs, rollout, axis_name=None, counts=None, entropy=None, values=None):
    "GRPO's micro-batch loss in plain jnp: dual-clip PPO + kl_loss_coef * k3, seq-mean-token-mean over counts.rows."
    import jax.numpy as jnp
    m = rollout.mask > 0
    lp = jnp.where(m, log_probs, 0.0)
    old = jnp.where(m, rollout.old_log_probs, 0.0)
    adv = jnp.where(m, rollout.advantages, 0.0)
    ratio = jnp.exp(jnp.clip(lp - old, -20.0, 20.0))
    l1, l2 = -adv * ratio, -adv * jnp.clip(ratio, 1 - cfg.clip_ratio_low, 1 + cfg.clip_ratio_high)
    clipped = jnp.maximum(l1, l2)
    pg = jnp.where(adv < 0, jnp.minimum(-adv * cfg.clip_ratio_c, clipped), clipped)
    d = jnp.clip(jnp.where(m, rollout.ref_log_probs, 0.0) - lp, -20.0, 20.0)
    k3 = jnp.clip(jnp.expm1(d) - d, -10.0, 10.0)
    per_token = pg + cfg.kl_loss_coef * k3
    n = m.sum(1)
    row_mean = jnp.where(m, per_token, 0.0).sum(1) / jnp.maximum(n, 1)
    return row_mean.sum() / counts.rows, {}


def minimal_counts(rollout, axis_name=None):
    return Counts(rows=rollout.mask.shape[0], tokens=(rollout.mask > 0).sum())


def build(ex, overrides, seed=0):
    "(steps {label: zero-argument callable}, check info) for one shape."
    import jax
    import jax.numpy as jnp
    import optax
    from flax import nnx
    import collections

    args = dataclasses.replace(ex.Args(), **overrides)
    rows = args.prompts * args.group_size
    task = ex.Task(args.n_digits, args.base)
    rng, key = np.random.default_rng(seed), jax.random.key(seed)
    model = ex.Policy(task.prompt_len + task.response_len, d_model=args.d_model, n_layers=args.n_layers,
                      rngs=nnx.Rngs(seed))
    graphdef, params = nnx.split(model, nnx.Param)
    ref_params = jax.tree.map(jnp.copy, params)
    tx = optax.adamw(args.lr, eps=args.adam_eps, weight_decay=0.01)
    opt_state = tx.init(params)
    cfg, kl_field = ex.make_objective("grpo", args.group_size, args.kl_coef)
    assert kl_field == "kl_loss_coef"
    traces = collections.Counter()
    # one rollout batch, as train() makes it
    prompts = task.prompts(rng, args.prompts)
    tiled = np.repeat(prompts, args.group_size, axis=0)
    group_ids = np.repeat(np.arange(args.prompts), args.group_size)
    key, k_sample = jax.random.split(key)
    seqs, mask, old_lp, _ = ex.sample(graphdef, params, jnp.asarray(tiled), k_sample, task.response_len, 1.0)
    rewards = ex.verify(task, tiled, np.asarray(seqs[:, task.prompt_len:]), np.asarray(mask))
    ref_lp = ex.token_log_probs(graphdef, ref_params, seqs, task.prompt_len)
    rollout = ex.obj.Rollout(mask=mask, old_log_probs=old_lp, rewards=rewards, ref_log_probs=ref_lp,
                             group_ids=group_ids)
    rollout, _ = ex.make_stage1(traces)(cfg, rollout)
    # a little off-policy, as in the second epoch of a real run: one update of the parameters first
    idx = np.arange(rows).reshape(args.mini_batches, -1)[0]
    step_fn = ex.make_train_step(graphdef, tx, task.prompt_len, args.micro_batches, traces)
    params, opt_state, _, _ = step_fn(params, opt_state, cfg, (seqs, rollout), idx)
    call_args = (params, opt_state, cfg, (seqs, rollout), idx)

    real_obj = ex.obj
    no_entropy = lambda cfg, lp, ro, entropy=None, **kw: real_obj.loss(cfg, lp, ro, entropy=None, **kw)
    no_metrics = lambda *a, **kw: (real_obj.loss(*a, **kw)[0], {})
    variants = {
        "dew_rl": real_obj,
        "floor": types.SimpleNamespace(loss=minimal_grpo_loss, loss_counts=minimal_counts),
        "dew_rl[no entropy metric]": types.SimpleNamespace(loss=no_entropy, loss_counts=real_obj.loss_counts),
        "dew_rl[metrics dropped]": types.SimpleNamespace(loss=no_metrics, loss_counts=real_obj.loss_counts),
    }
    steps, outs, info = {}, {}, {}
    for label, namespace in variants.items():
        ex.obj = namespace     # read by make_train_step's closures while the step is traced, here
        try:
            fn = ex.make_train_step(graphdef, tx, task.prompt_len, args.micro_batches, collections.Counter())
            t0 = time.perf_counter()
            compiled = fn.lower(*call_args).compile()
            info[label] = {"compile_s": time.perf_counter() - t0,
                           "temp_bytes": int(compiled.memory_analysis().temp_size_in_bytes)}
        finally:
            ex.obj = real_obj
        outs[label] = jax.block_until_ready(compiled(*call_args))
        steps[label] = (lambda c=compiled: jax.block_until_ready(c(*call_args)))
    # the floor computes the same step: same loss, same new parameters (float32 round-off)
    ref_params_out, ref_loss = outs["dew_rl"][0], float(outs["dew_rl"][2])
    check = {}
    for label, out in outs.items():
        diff = max(float(jnp.max(jnp.abs(a - b))) for a, b in
                   zip(jax.tree.leaves(out[0]), jax.tree.leaves(ref_params_out)))
        check[label] = {"loss": float(out[2]), "loss_diff": abs(float(out[2]) - ref_loss), "max_param_diff": diff}
        assert abs(float(out[2]) - ref_loss) <= 1e-5 * max(1.0, abs(ref_loss)), (label, float(out[2]), ref_loss)
    shape = {"rows": rows, "mini_batch_rows": rows // args.mini_batches, "micro_batches": args.micro_batches,
             "response_len": task.response_len, "seq_len": task.prompt_len + task.response_len,
             "d_model": args.d_model, "n_layers": args.n_layers, "vocab": ex.VOCAB,
             "kept_tokens": int(np.asarray(mask).sum())}
    return steps, {"shape": shape, "check": check, "compile": info}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--target-s", type=float, default=0.2, help="wall time of one step's calls in one round")
    ap.add_argument("--only", default="")
    ap.add_argument("--out", default=str(OUT))
    a = ap.parse_args(argv)
    import jax
    ex = load_example()
    result = {"date": time.strftime("%Y-%m-%d", time.gmtime()), "rounds": a.rounds,
              "jax": jax.__version__, "backend": jax.default_backend(),
              "devices": sorted({f"{d.platform}: {d.device_kind}" for d in jax.devices()}), "shapes": {}}
    t_start = time.time()
    for name, overrides in SHAPES.items():
        if not name.startswith(a.only):
            continue
        steps, info = build(ex, overrides)
        times = {label: [] for label in steps}
        t0 = time.perf_counter()
        steps["floor"]()
        repeat = max(1, min(50, int(a.target_s / (time.perf_counter() - t0))))
        for rnd in range(a.rounds):
            for label, fn in steps.items():
                for _ in range(repeat):
                    t0 = time.perf_counter()
                    fn()
                    times[label].append(time.perf_counter() - t0)
        stats = {label: {"median_ms": statistics.median(ts) * 1e3, "min_ms": min(ts) * 1e3, "max_ms": max(ts) * 1e3,
                         "calls": len(ts), **info["compile"][label]} for label, ts in times.items()}
        floor = stats["floor"]["median_ms"]
        result["shapes"][name] = {"overrides": overrides, **info, "repeat": repeat, "steps": stats,
                                  "ratios": {f"{label}/floor": s["median_ms"] / floor for label, s in stats.items()}}
        print(f"[bench_train] {name} {info['shape']}", flush=True)
        for label, s in stats.items():
            print(f"  {label:<28}{s['median_ms']:>9.3f} ms  (min {s['min_ms']:.3f}, max {s['max_ms']:.3f})  "
                  f"/ floor {s['median_ms'] / floor:.3f}", flush=True)
    result["wall_s"] = round(time.time() - t_start, 1)
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"[bench_train] wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
