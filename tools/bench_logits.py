"""Time and compiled temporary memory of `linear_log_probs_and_entropy` against the naive forms.

    python tools/bench_logits.py                 # V = 32768 and 151936 (Qwen's vocabulary)
    python tools/bench_logits.py --vocab 32768   # one vocabulary only
    python tools/bench_logits.py --vocab 32768 --memory-only 151936   # time 32k, only compile 152k
    DEW_RL_TORCH_PYTHON=/path/to/venv/bin/python python tools/bench_logits.py   # torch from elsewhere
    python tools/bench_logits.py --vocab 32768 151936 --rounds 1 --no-warmup   # what `make bench` runs
    python tools/bench_logits.py --distill --vocab 32768 --memory-only 151936 --rounds 1 --no-warmup
        # the distillation step instead: data/bench_distill.json (below)

Every case is the training step of the log-prob and entropy path: forward and backward of
sum(log_probs) + sum(entropy) w.r.t. `hidden` [N, D] and `weight` [D, V], float32, at N = 4096
tokens and D = 1024 (one micro-batch of a 1B-class model). Three contestants:

* ours: `dew_rl.linear_log_probs_and_entropy` (vocabulary chunks, custom VJP), jitted;
* naive JAX: `log_softmax(hidden @ weight)`, a gather and -sum(p log p), jitted;
* torch: `log_softmax(hidden @ weight)` + `gather` and the same entropy, with autograd, float32 on
  CPU, in its own interpreter: DEW_RL_TORCH_PYTHON if set, else the verl environment of
  tools/refenvs.py (torch==2.13.0), which `make bench` builds; skipped with a note when neither exists.

Time is the median over `--rounds` interleaved rounds (each round runs every contestant once, so a
slow spell of a shared machine hits all of them), after compilation and one warm-up call (without
it, with --no-warmup, for vocabularies where one call takes minutes). Memory is
XLA's compiled temporary bytes (`memory_analysis().temp_size_in_bytes`) for the JAX contestants and
the peak resident-set growth for torch (`ru_maxrss`, a coarser measure). The ratios are printed and
written to docs/bench_logits.json. Nothing is asserted: speed is reported, never tested.

With --distill the step is a top-k distillation loss instead, and the report goes to
data/bench_distill.json: forward and backward w.r.t. `hidden` and `weight` of the token mean of
`top_k_kl(linear_log_probs_at(hidden, weight, teacher_ids), teacher_log_probs, mask)` (forward KL, tail
bins) against the same loss on `take_along_axis(log_softmax(hidden @ weight), teacher_ids)`, jitted, at
--topk teacher ids per position (default 64); and the teacher's side, `linear_top_k_log_probs` against
`lax.top_k(log_softmax(hidden @ weight), k)` (no gradient). No torch contestant there.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from dew_rl._logits import VOCAB_CHUNK, linear_log_probs_and_entropy

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import TORCH_NAIVE_STEP, torch_python  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "bench_logits.json"

TORCH_CHILD = textwrap.dedent(r"""
    import json, resource, statistics, sys, time
    import numpy as np, torch
    torch.manual_seed(0)
    N, D, V, rounds, warmup = (int(a) for a in sys.argv[1:6])
    h = torch.randn(N, D, requires_grad=True)
    w = (torch.randn(D, V) / D ** 0.5).requires_grad_(True)
    tok = torch.randint(0, V, (N,))
""") + TORCH_NAIVE_STEP + textwrap.dedent(r"""
    step = torch_naive_step
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if warmup:
        step()
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter(); step(); times.append(time.perf_counter() - t0)
        print(json.dumps({"round": times[-1]}), flush=True)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"times": times, "peak_rss_growth_bytes": (peak - base) * 1024, "torch": torch.__version__,
                      "threads": torch.get_num_threads()}))
""")


def jax_cases(N, D, V, C, run=True):
    rng = np.random.default_rng(0)
    if run:
        h = jnp.asarray(rng.normal(size=(1, N, D)).astype(np.float32))
        w = jnp.asarray((rng.normal(size=(D, V)) / np.sqrt(D)).astype(np.float32))
        tok = jnp.asarray(rng.integers(0, V, size=(1, N)).astype(np.int32))
    else:  # shapes only: compile, never allocate
        h, w = jax.ShapeDtypeStruct((1, N, D), jnp.float32), jax.ShapeDtypeStruct((D, V), jnp.float32)
        tok = jax.ShapeDtypeStruct((1, N), jnp.int32)

    def naive(h, w, t):
        logp = jax.nn.log_softmax(h @ w, axis=-1)
        return jnp.take_along_axis(logp, t[..., None], -1)[..., 0], -jnp.sum(jnp.exp(logp) * logp, -1)

    ours = lambda h, w, t: linear_log_probs_and_entropy(h, w, t, 1.0, C)
    out = {}
    for name, f in (("ours", ours), ("naive", naive)):
        g = jax.jit(jax.grad(lambda h, w, t: (lambda o: jnp.sum(o[0]) + jnp.sum(o[1]))(f(h, w, t)), (0, 1)))
        compiled = g.lower(h, w, tok).compile()
        temp = compiled.memory_analysis().temp_size_in_bytes
        out[name] = (lambda c=compiled: jax.block_until_ready(c(h, w, tok)), temp)
    return out


def distill_cases(N, D, V, C, K, run=True):
    "The distillation step (student loss and gradient) and the teacher's top-k, ours and naive."
    from dew_rl import aggregate, linear_log_probs_at, linear_top_k_log_probs, top_k_kl
    rng = np.random.default_rng(0)
    if run:
        h = jnp.asarray(rng.normal(size=(1, N, D)).astype(np.float32))
        w = jnp.asarray((rng.normal(size=(D, V)) / np.sqrt(D)).astype(np.float32))
        ids = jnp.asarray(np.stack([rng.choice(V, K, replace=False) for _ in range(N)])[None].astype(np.int32))
        tlp = jnp.asarray(np.log(rng.dirichlet(np.ones(K), size=N) * 0.9)[None].astype(np.float32))
        m = jnp.ones((1, N), jnp.float32)
    else:
        h, w = jax.ShapeDtypeStruct((1, N, D), jnp.float32), jax.ShapeDtypeStruct((D, V), jnp.float32)
        ids, tlp = jax.ShapeDtypeStruct((1, N, K), jnp.int32), jax.ShapeDtypeStruct((1, N, K), jnp.float32)
        m = jax.ShapeDtypeStruct((1, N), jnp.float32)

    def ours(h, w, ids, tlp, m):
        return aggregate(top_k_kl(linear_log_probs_at(h, w, ids, 1.0, C), tlp, m), m, "token-mean")

    def naive(h, w, ids, tlp, m):
        lp = jnp.take_along_axis(jax.nn.log_softmax(h @ w, axis=-1), ids, -1)
        return aggregate(top_k_kl(lp, tlp, m), m, "token-mean")

    out = {}
    for name, f in (("ours", ours), ("naive", naive)):
        compiled = jax.jit(jax.grad(f, (0, 1))).lower(h, w, ids, tlp, m).compile()
        out[name] = (lambda c=compiled: jax.block_until_ready(c(h, w, ids, tlp, m)), compiled.memory_analysis().temp_size_in_bytes)
    teacher = {"teacher_ours": lambda h, w: linear_top_k_log_probs(h, w, K, 1.0, C),
               "teacher_naive": lambda h, w: jax.lax.top_k(jax.nn.log_softmax(h @ w, axis=-1), K)}
    for name, f in teacher.items():
        compiled = jax.jit(f).lower(h, w).compile()
        out[name] = (lambda c=compiled: jax.block_until_ready(c(h, w)), compiled.memory_analysis().temp_size_in_bytes)
    return out


def bench_distill(V, N, D, C, K, rounds, warmup=True):
    cases = distill_cases(N, D, V, C, K)
    times = {k: [] for k in cases}
    for fn, _ in cases.values() if warmup else ():
        fn()
    for r in range(rounds):
        for k, (fn, _) in cases.items():
            t0 = time.perf_counter(); fn(); times[k].append(time.perf_counter() - t0)
        print(f"  V={V} round {r + 1}/{rounds}: " + ", ".join(f"{k} {times[k][-1]:.2f}s" for k in cases), flush=True)
    return {"V": V, **{f"{k}_s": statistics.median(v) for k, v in times.items()},
            **{f"{k}_temp_bytes": cases[k][1] for k in cases}, **{f"{k}_rounds_s": v for k, v in times.items()}}


def torch_start(N, D, V, rounds, warmup):
    py, why = torch_python()
    if not py:
        return None, why
    try:
        proc = subprocess.run([py, "-c", "import torch"], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"{py}: {e}"
    if proc.returncode:
        return None, f"{py} cannot import torch"
    return [py, "-c", TORCH_CHILD, str(N), str(D), str(V), str(rounds), str(int(warmup))], None


def bench(V, N, D, C, rounds, warmup=True):
    cases = jax_cases(N, D, V, C)
    times = {k: [] for k in cases}
    for fn, _ in cases.values() if warmup else ():
        fn()  # warm-up: compiled already, first run pays page faults
    for r in range(rounds):  # interleaved rounds
        for k, (fn, _) in cases.items():
            t0 = time.perf_counter(); fn(); times[k].append(time.perf_counter() - t0)
        print(f"  V={V} round {r + 1}/{rounds}: " + ", ".join(f"{k} {times[k][-1]:.2f}s" for k in cases), flush=True)
    row = {"V": V, "ours_s": statistics.median(times["ours"]), "naive_s": statistics.median(times["naive"]),
           "ours_temp_bytes": cases["ours"][1], "naive_temp_bytes": cases["naive"][1],
           "ours_rounds_s": times["ours"], "naive_rounds_s": times["naive"]}
    del cases
    cmd, why = torch_start(N, D, V, rounds, warmup)
    if cmd is None:
        row.update(torch_s=None, torch_note=why)
    else:  # run after the JAX rounds, so the two processes never compete for the two cores
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode:
            row.update(torch_s=None, torch_note=proc.stderr.strip().splitlines()[-1:])
        else:
            res = json.loads(proc.stdout.strip().splitlines()[-1])
            row.update(torch_s=statistics.median(res["times"]), torch_rounds_s=res["times"],
                       torch_peak_rss_growth_bytes=res["peak_rss_growth_bytes"], torch_version=res["torch"],
                       torch_threads=res["threads"])
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vocab", type=int, nargs="*", default=[32768, 151936])
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--chunk-size", type=int, default=VOCAB_CHUNK)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--memory-only", type=int, nargs="*", default=[],
                    help="vocabularies whose compiled memory is reported without timing (too slow to run here)")
    ap.add_argument("--no-warmup", action="store_true",
                    help="time the first call after compilation (for vocabularies where one call takes minutes)")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--distill", action="store_true", help="time the top-k distillation step instead (data/bench_distill.json)")
    ap.add_argument("--topk", type=int, default=64, help="teacher ids per position for --distill")
    a = ap.parse_args(argv)
    if a.distill:
        return main_distill(a)
    a.out = a.out or OUT
    results = []
    for V in a.vocab:
        print(f"V = {V}: N = {a.tokens}, D = {a.hidden}, chunk_size = {a.chunk_size}", flush=True)
        results.append(bench(V, a.tokens, a.hidden, a.chunk_size, a.rounds, not a.no_warmup))
    for V in a.memory_only:
        print(f"V = {V}: compiled memory only", flush=True)
        cases = jax_cases(a.tokens, a.hidden, V, a.chunk_size, run=False)
        results.append({"V": V, "ours_s": None, "naive_s": None, "torch_s": None, "torch_note": "not timed",
                        "ours_temp_bytes": cases["ours"][1], "naive_temp_bytes": cases["naive"][1]})
        del cases
    machine = f"{platform.machine()}, {os.cpu_count()} CPUs, jax {jax.__version__} on {jax.default_backend()}"
    report = {"machine": machine, "N": a.tokens, "D": a.hidden, "chunk_size": a.chunk_size, "rounds": a.rounds,
              "warmup": not a.no_warmup,
              "step": "forward + backward of sum(log_probs) + sum(entropy), float32", "results": results}
    print(f"\n{'V':>7} {'ours s':>8} {'naive s':>8} {'torch s':>8} {'naive/ours':>10} {'torch/ours':>10} "
          f"{'temp MiB ours':>13} {'naive':>8} {'mem naive/ours':>14}")
    for r in results:
        t, o, n = r["torch_s"], r["ours_s"], r["naive_s"]
        f2 = lambda x: "—" if x is None else f"{x:.2f}"
        print(f"{r['V']:>7} {f2(o):>8} {f2(n):>8} {f2(t):>8} "
              f"{f2(o and n / o):>10} {f2(o and t and t / o):>10} "
              f"{r['ours_temp_bytes'] / 2**20:>13.0f} {r['naive_temp_bytes'] / 2**20:>8.0f} "
              f"{r['naive_temp_bytes'] / r['ours_temp_bytes']:>14.1f}")
        if t is None:
            print(f"        torch skipped: {r['torch_note']}")
    a.out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"\nwritten to {a.out.relative_to(ROOT) if a.out.is_relative_to(ROOT) else a.out}")


def main_distill(a):
    out = a.out or ROOT / "data" / "bench_distill.json"
    results = []
    for V in a.vocab:
        print(f"V = {V}: N = {a.tokens}, D = {a.hidden}, K = {a.topk}, chunk_size = {a.chunk_size}", flush=True)
        results.append(bench_distill(V, a.tokens, a.hidden, a.chunk_size, a.topk, a.rounds, not a.no_warmup))
    for V in a.memory_only:
        print(f"V = {V}: compiled memory only", flush=True)
        cases = distill_cases(a.tokens, a.hidden, V, a.chunk_size, a.topk, run=False)
        results.append({"V": V, **{f"{k}_s": None for k in cases}, **{f"{k}_temp_bytes": cases[k][1] for k in cases}})
    machine = f"{platform.machine()}, {os.cpu_count()} CPUs, jax {jax.__version__} on {jax.default_backend()}"
    report = {"machine": machine, "N": a.tokens, "D": a.hidden, "K": a.topk, "chunk_size": a.chunk_size, "rounds": a.rounds,
              "warmup": not a.no_warmup,
              "step": "forward + backward w.r.t. hidden and weight of the token mean of top_k_kl (forward, tail) of the "
                      "student's log-probs at the teacher's top-k ids, float32; and the teacher's top-k (no gradient)",
              "results": results}
    for r in results:
        f2 = lambda x: "—" if x is None else f"{x:.2f}"
        print(f"V={r['V']}: student step ours {f2(r['ours_s'])} s / naive {f2(r['naive_s'])} s, temp "
              f"{r['ours_temp_bytes'] / 2**20:.0f} / {r['naive_temp_bytes'] / 2**20:.0f} MiB; teacher top-k ours "
              f"{f2(r['teacher_ours_s'])} s / naive {f2(r['teacher_naive_s'])} s, temp {r['teacher_ours_temp_bytes'] / 2**20:.0f} / "
              f"{r['teacher_naive_temp_bytes'] / 2**20:.0f} MiB")
    out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"\nwritten to {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")


if __name__ == "__main__":
    main()
