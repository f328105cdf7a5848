"""Formulations of the fused vocabulary path's training step against torch, in ONE interleaved run.

    python tools/bench_logits_forms.py --rounds 7            # N = 1024 tokens, D = 1024, V = 32768
    python tools/bench_logits_forms.py --tokens 4096 --rounds 3 --chunks 8192 --skip transposed

The step is tools/bench_logits.py's: forward and backward of sum(log_probs) + sum(entropy) w.r.t. hidden and
weight, float32. Contestants: the library (`linear_log_probs_and_entropy`, chunk 4096), the formulations of
tools/logits_forms.py (store, transposed, scan, and the chunk width chosen from the shape or given), the naive
jitted JAX form, and torch eager (the verl environment's torch, or DEW_RL_TORCH_PYTHON) in its own process,
answering one request per round, so that each round runs every contestant once, one after the other, and
a slow spell of the shared machine falls on all of them. Every JAX formulation is checked against the
library's values and gradients before it is timed. Writes data/bench_logits_forms_<N>.json.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import logits_forms  # noqa: E402
from bench_common import TORCH_NAIVE_STEP, torch_python  # noqa: E402
from dew_rl._logits import VOCAB_CHUNK, linear_log_probs_and_entropy  # noqa: E402

TORCH_SERVER = textwrap.dedent(r"""
    import json, sys, time
    import torch
    torch.manual_seed(0)
    N, D, V = (int(a) for a in sys.argv[1:4])
    h = torch.randn(N, D, requires_grad=True)
    w = (torch.randn(D, V) / D ** 0.5).requires_grad_(True)
    tok = torch.randint(0, V, (N,))
""") + TORCH_NAIVE_STEP + textwrap.dedent(r"""
    step = torch_naive_step
    step()
    print(json.dumps({"ready": torch.__version__, "threads": torch.get_num_threads()}), flush=True)
    for line in sys.stdin:
        t0 = time.perf_counter(); step(); print(json.dumps({"s": time.perf_counter() - t0}), flush=True)
""")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=1024)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--vocab", type=int, default=32768)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--chunks", type=int, nargs="*", default=[8192, 16384])
    ap.add_argument("--skip", nargs="*", default=[], help="leave out the contestants whose name starts with one of these")
    ap.add_argument("--out", type=Path, default=None, help="default data/bench_logits_forms_<N>.json")
    a = ap.parse_args(argv)
    N, D, V = a.tokens, a.hidden, a.vocab
    a.out = a.out or ROOT / "data" / f"bench_logits_forms_{N}.json"
    rng = np.random.default_rng(0)
    h = jnp.asarray(rng.normal(size=(N, D)).astype(np.float32))
    w = jnp.asarray((rng.normal(size=(D, V)) / np.sqrt(D)).astype(np.float32))
    tok = jnp.asarray(rng.integers(0, V, size=(N,)).astype(np.int32))
    tau = jnp.float32(1.0)

    def naive(h, w, t):
        logp = jax.nn.log_softmax(h @ w, axis=-1)
        return jnp.take_along_axis(logp, t[:, None], -1)[:, 0], -jnp.sum(jnp.exp(logp) * logp, -1)

    auto_c = logits_forms.chunk_for(N, V)
    forms = {"library (chunk 4096)": lambda h, w, t: [o[0] for o in linear_log_probs_and_entropy(h[None], w, t[None])],
             "store logits": lambda h, w, t: logits_forms.store(h, w, t, tau, VOCAB_CHUNK),
             "transposed weight": lambda h, w, t: logits_forms.transposed(h, w, t, tau, VOCAB_CHUNK),
             "lax.scan loop": lambda h, w, t: logits_forms.scan(h, w, t, tau, VOCAB_CHUNK),
             **{f"chunk {c}": (lambda h, w, t, c=c: [o[0] for o in linear_log_probs_and_entropy(h[None], w, t[None], 1.0, c)])
                for c in sorted(set(a.chunks) | {auto_c}) if c != VOCAB_CHUNK},
             "naive jax [N, V]": naive}
    forms = {k: f for k, f in forms.items() if k.startswith("library") or not k.startswith(tuple(a.skip))}
    compiled, temp, check = {}, {}, {}
    ref = None
    for name, f in forms.items():
        g = jax.jit(jax.value_and_grad(lambda h, w, t, f=f: (lambda o: jnp.sum(o[0]) + jnp.sum(o[1]))(f(h, w, t)), (0, 1)))
        c = g.lower(h, w, tok).compile()
        compiled[name], temp[name] = c, int(c.memory_analysis().temp_size_in_bytes)
        out = jax.block_until_ready(c(h, w, tok))
        if ref is None:
            ref = out
        rel = [float(jnp.max(jnp.abs(x - y)) / jnp.max(jnp.abs(y))) for x, y in zip(jax.tree.leaves(out), jax.tree.leaves(ref))]
        check[name] = max(rel)
        assert check[name] < 1e-4, (name, rel)
        print(f"[forms] compiled {name}: temp {temp[name] / 2**20:.0f} MiB, max relative difference to the library {check[name]:.1e}",
              flush=True)
    py, _ = torch_python()
    server = None
    if py:
        server = subprocess.Popen([py, "-c", TORCH_SERVER, str(N), str(D), str(V)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        info = json.loads(server.stdout.readline())
    for c in compiled.values():   # warm-up
        jax.block_until_ready(c(h, w, tok))
    times = {k: [] for k in [*compiled, *(["torch eager"] if server else [])]}
    for r in range(a.rounds):
        for name, c in compiled.items():
            t0 = time.perf_counter()
            jax.block_until_ready(c(h, w, tok))
            times[name].append(time.perf_counter() - t0)
        if server:
            server.stdin.write("go\n")
            server.stdin.flush()
            times["torch eager"].append(json.loads(server.stdout.readline())["s"])
        print(f"[forms] round {r + 1}/{a.rounds}: " + ", ".join(f"{k} {v[-1]:.2f}s" for k, v in times.items()), flush=True)
    if server:
        server.stdin.close()
        server.wait(timeout=60)
    med = {k: statistics.median(v) for k, v in times.items()}
    lib = med["library (chunk 4096)"]
    report = {"date": time.strftime("%Y-%m-%d", time.gmtime()), "N": N, "D": D, "V": V, "rounds": a.rounds,
              "auto_chunk": auto_c, "machine": f"{os.cpu_count()} CPUs, jax {jax.__version__} on {jax.default_backend()}",
              "torch": info if server else None,
              "contestants": {k: {"median_s": med[k], "rounds_s": times[k], "temp_bytes": temp.get(k),
                                  "max_rel_diff_to_library": check.get(k)} for k in times}}
    a.out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"\n{'contestant':<26}{'median s':>10}{'/ library':>11}{'/ torch':>9}{'temp MiB':>10}")
    for k, v in med.items():
        tt = f"{v / med['torch eager']:>9.2f}" if server else f"{'-':>9}"
        tm = f"{temp[k] / 2**20:>10.0f}" if k in temp else f"{'-':>10}"
        print(f"{k:<26}{v:>10.3f}{v / lib:>11.2f}{tt}{tm}")
    print(f"written to {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
