"""`make bench`, the rows that only make sense on an accelerator: run unchanged on a GPU, skipped on a CPU.

    python tools/bench_accel.py                    # on whatever jax.default_backend() is: data/bench_accel.json
    python tools/bench_accel.py --if-accelerator   # what `make bench` runs: the same on a GPU/TPU, nothing on a CPU
    python tools/bench_accel.py --smoke            # tiny shapes on any backend (the code path, not a figure):
                                                   # data/bench_accel_smoke.json

Three groups of rows, each timed in interleaved rounds (every contestant of a group once per round, median
over the rounds, after compilation and one warm-up call):

* **bandwidth**: elementwise losses and reductions (tools/bench_sides/dew_rl_side.py's cases: k3, dual-clip
  PPO token-mean forward and forward + backward, seq-mean-token-mean, masked_whiten, and the copy `x + 1`) at
  [1024, 8192] float32, each as bytes moved (its inputs read once, its outputs written once) per second, and
  as a fraction of the device's nominal memory bandwidth (NOMINAL_GBPS, by device kind; None when the kind is
  not listed) and of the copy's measured bandwidth in the same run.
* **gae**: `dew_rl.gae` (the scan over T) against the associative-scan and blocked formulations of
  tools/gae_forms.py, at [64, 8192] and [64, 32768], each checked against `gae` before it is timed.
* **vocab**: the fused vocabulary path at V = 151936 (Qwen's vocabulary), N = 4096 tokens, D = 1024:
  `linear_log_probs_and_entropy` against the naive [N, V] computation in JAX (tools/bench_logits.py's two
  JAX contestants, forward + backward of sum(log_probs) + sum(entropy)), and in torch, on the torch device
  ("cuda" when available): the same naive step, and Liger-Kernel's `LigerFusedLinearCrossEntropyLoss` where
  `liger_kernel` imports (forward + backward of the mean cross-entropy only: no entropy, so less work than the
  other contestants). Torch is the interpreter of DEW_RL_TORCH_PYTHON, else the verl environment of
  tools/refenvs.py; a contestant that cannot run is recorded with the reason.

Nothing here is asserted about speed, and nothing in `make test` runs it.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tools" / "bench_sides"))
from bench_common import TORCH_NAIVE_STEP, torch_python  # noqa: E402

# nominal peak memory bandwidth, GB/s, by a substring of jax's device_kind (vendor data sheets)
NOMINAL_GBPS = {"H200": 4800.0, "H100 80GB HBM3": 3350.0, "H100 PCIe": 2000.0, "H100": 3350.0, "A100-SXM4-80GB": 2039.0,
                "A100": 1555.0, "L4": 300.0, "A10G": 600.0, "TPU v5e": 819.0, "TPU v4": 1200.0, "TPU v5p": 2765.0}

FULL = {"bw_shape": (1024, 8192), "gae_shapes": [(64, 8192), (64, 32768)], "vocab": (4096, 1024, 151936), "rounds": 10}
SMOKE = {"bw_shape": (8, 256), "gae_shapes": [(4, 256), (4, 1024)], "vocab": (64, 32, 1000), "rounds": 2}
BW_CASES = ["primitive:copy", "k3", "ppo_dual_clip+token_mean:fwd", "ppo_dual_clip+token_mean:fwd+bwd",
            "aggregate:seq-mean-token-mean", "masked_whiten"]
GAE_FORMS = ["gae", "gae_associative", "gae_blocked8"]

TORCH_CHILD = textwrap.dedent(r"""
    import json, statistics, sys, time
    import torch
    N, D, V, rounds = (int(a) for a in sys.argv[1:5])
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    h = torch.randn(N, D, device=dev, requires_grad=True)
    w = (torch.randn(D, V, device=dev) / D ** 0.5).requires_grad_(True)
    tok = torch.randint(0, V, (N,), device=dev)
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
""") + TORCH_NAIVE_STEP + textwrap.dedent(r"""
    naive = torch_naive_step
    steps, notes = {"torch naive": naive}, {}
    try:
        from liger_kernel.transformers import LigerFusedLinearCrossEntropyLoss
        if dev != "cuda":
            raise RuntimeError("Liger-Kernel's Triton kernels need a GPU; torch sees none")
        liger = LigerFusedLinearCrossEntropyLoss()
        wt = w.detach().t().contiguous().requires_grad_(True)   # Liger takes the [V, D] lm_head weight
        def liger_step():
            liger(wt, h, tok).backward()
            h.grad = None; wt.grad = None
        steps["liger fused linear CE"] = liger_step
    except Exception as e:   # not installed, or no GPU
        notes["liger fused linear CE"] = f"{type(e).__name__}: {e}"
    times = {k: [] for k in steps}
    for f in steps.values():
        f(); sync()
    for _ in range(rounds):
        for k, f in steps.items():
            sync(); t0 = time.perf_counter(); f(); sync(); times[k].append(time.perf_counter() - t0)
    peak = torch.cuda.max_memory_allocated() if dev == "cuda" else None
    print(json.dumps({"device": dev, "torch": torch.__version__, "times": times, "notes": notes, "cuda_peak_bytes": peak}))
""")


def interleaved(fns: dict, rounds: int) -> dict:
    "{label: median seconds} over `rounds` rounds, each running every callable once (after one warm-up call)."
    for f in fns.values():
        f()
    times = {k: [] for k in fns}
    for _ in range(rounds):
        for k, f in fns.items():
            t0 = time.perf_counter()
            f()
            times[k].append(time.perf_counter() - t0)
    return {k: {"median_s": statistics.median(v), "min_s": min(v), "max_s": max(v), "rounds": len(v)} for k, v in times.items()}


def case_inputs(B, T, seed=0):
    "Seeded float32 inputs of one [B, T] shape, as tools/bench_common.inputs makes them (padding, holes, an empty row)."
    import bench_common
    key = f"{B}x{T}"
    bench_common.SHAPES.setdefault(key, (B, T))
    return bench_common.inputs(key)


def compiled_case(case, data):
    "(blocking callable, bytes read + written once) for one of dew_rl_side's cases."
    import jax
    import jax.numpy as jnp
    import dew_rl_side
    fn, names, _ = dew_rl_side.spec(case)
    args = [jax.device_put(jnp.asarray(data[n])) for n in names]
    compiled = jax.jit(fn).lower(*args).compile()
    outs = jax.eval_shape(fn, *args)
    moved = sum(a.nbytes for a in args) + sum(int(np.prod(o.shape)) * o.dtype.itemsize for o in jax.tree.leaves(outs))
    return (lambda: jax.block_until_ready(compiled(*args))), moved, fn, args


def nominal_gbps(kinds):
    for kind in kinds:
        for k, v in NOMINAL_GBPS.items():
            if k in kind:
                return k, v
    return None, None


def bandwidth_rows(cfg, kinds):
    B, T = cfg["bw_shape"]
    data = case_inputs(B, T)
    built = {c: compiled_case(c, data) for c in BW_CASES}
    stats = interleaved({c: b[0] for c, b in built.items()}, cfg["rounds"])
    name, peak = nominal_gbps(kinds)
    copy_gbps = built["primitive:copy"][1] / stats["primitive:copy"]["median_s"] / 1e9
    rows = []
    for c, (_, moved, _, _) in built.items():
        gbps = moved / stats[c]["median_s"] / 1e9
        rows.append({"case": f"{c}@{B}x{T}", "bytes": moved, **stats[c], "GBps": gbps,
                     "of_nominal": None if peak is None else gbps / peak, "of_copy": gbps / copy_gbps})
    return {"shape": [B, T], "nominal": {"kind": name, "GBps": peak}, "copy_GBps": copy_gbps, "rows": rows}


def gae_rows(cfg):
    import jax
    import jax.numpy as jnp
    out = []
    for B, T in cfg["gae_shapes"]:
        data = case_inputs(B, T)
        built = {f: compiled_case(f"{f}@{B}x{T}", data) for f in GAE_FORMS}
        want = jax.jit(built["gae"][2])(*built["gae"][3])
        err = {}
        for f, (_, _, fn, args) in built.items():   # the same outputs as gae, or no row
            got = jax.jit(fn)(*args)
            err[f] = max(float(jnp.max(jnp.abs(g - w))) for g, w in zip(got, want))
            assert err[f] < 1e-3, (f, B, T, err[f])
        stats = interleaved({f: b[0] for f, b in built.items()}, cfg["rounds"])
        scan = stats["gae"]["median_s"]
        out.append({"shape": [B, T], "forms": {f: {**stats[f], "max_abs_diff_to_gae": err[f], "over_scan": stats[f]["median_s"] / scan}
                                               for f in GAE_FORMS}})
    return out


def vocab_rows(cfg):
    import bench_logits
    from dew_rl._logits import VOCAB_CHUNK
    N, D, V = cfg["vocab"]
    cases = bench_logits.jax_cases(N, D, V, VOCAB_CHUNK)
    stats = interleaved({f"jax {k}": fn for k, (fn, _) in cases.items()}, cfg["rounds"])
    res = {"N": N, "D": D, "V": V, "chunk_size": VOCAB_CHUNK,
           "contestants": {k: {**s, "temp_bytes": cases[k.split()[1]][1]} for k, s in stats.items()}, "notes": {}}
    del cases
    py, why = torch_python()
    if py is None:
        res["notes"]["torch"] = why
        return res
    proc = subprocess.run([py, "-c", TORCH_CHILD, str(N), str(D), str(V), str(cfg["rounds"])], capture_output=True, text=True)
    if proc.returncode:
        res["notes"]["torch"] = (proc.stderr.strip().splitlines() or ["failed"])[-1]
        return res
    t = json.loads(proc.stdout.strip().splitlines()[-1])
    res["torch"] = {"device": t["device"], "version": t["torch"], "cuda_peak_bytes": t["cuda_peak_bytes"]}
    for k, v in t["times"].items():
        res["contestants"][k] = {"median_s": statistics.median(v), "min_s": min(v), "max_s": max(v), "rounds": len(v)}
    res["notes"].update(t["notes"])
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="tiny shapes, any backend: checks the code, not a figure")
    ap.add_argument("--if-accelerator", action="store_true", help="do nothing on a CPU backend")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    import jax
    backend = jax.default_backend()
    if a.if_accelerator and backend == "cpu" and not a.smoke:
        print("[bench_accel] backend cpu: no accelerator, no accelerator rows (python tools/bench_accel.py --smoke "
              "runs their code at tiny shapes)")
        return 0
    cfg = SMOKE if a.smoke else FULL
    out = a.out or ROOT / "data" / ("bench_accel_smoke.json" if a.smoke else "bench_accel.json")
    kinds = sorted({d.device_kind for d in jax.devices()})
    t0 = time.time()
    print(f"[bench_accel] backend {backend}, devices {kinds}, {'smoke shapes' if a.smoke else 'full shapes'}", flush=True)
    result = {"date": time.strftime("%Y-%m-%d", time.gmtime()), "smoke": a.smoke, "backend": backend, "jax": jax.__version__,
              "devices": sorted({f"{d.platform}: {d.device_kind}" for d in jax.devices()}), "rounds": cfg["rounds"]}
    result["bandwidth"] = bandwidth_rows(cfg, kinds)
    print(f"[bench_accel] bandwidth rows done ({time.time() - t0:.0f} s)", flush=True)
    result["gae"] = gae_rows(cfg)
    print(f"[bench_accel] gae rows done ({time.time() - t0:.0f} s)", flush=True)
    result["vocab"] = vocab_rows(cfg)
    result["wall_s"] = round(time.time() - t0, 1)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    bw = result["bandwidth"]
    print(f"[bench_accel] wrote {out}; copy {bw['copy_GBps']:.1f} GB/s, nominal {bw['nominal']}")
    for r in bw["rows"]:
        frac = "-" if r["of_nominal"] is None else f"{r['of_nominal']:.2f}"
        print(f"  {r['case']:<48}{r['median_s'] * 1e3:>10.3f} ms {r['GBps']:>9.1f} GB/s  of nominal {frac}, of copy {r['of_copy']:.2f}")
    for g in result["gae"]:
        print(f"  gae {g['shape']}: " + ", ".join(f"{f} {v['median_s'] * 1e3:.3f} ms ({v['over_scan']:.2f} x scan)"
                                                 for f, v in g["forms"].items()))
    v = result["vocab"]
    print(f"  vocab N={v['N']} D={v['D']} V={v['V']}: " + ", ".join(f"{k} {s['median_s']:.4f} s" for k, s in v["contestants"].items()))
    for k, n in v["notes"].items():
        print(f"    {k}: {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
