"""`make bench`: dew_rl against verl, rlax and Tunix, and against the memory floor, as ratios from one run.

(NumPy times the two primitives that need no framework, a copy and a masked sum, for scale.)

Each framework runs in its own interpreter (tools/bench_sides/*.py; environments from tools/refenvs.py,
built or reused here) on the same seeded float32 inputs (tools/bench_common.py: masks with padding,
interior holes and an empty row). The rounds are interleaved: in every round each case is timed in
every framework that has it, one after the other, so that a slow spell of the machine falls on all of
them alike. Per case and framework the run records the median, min and max of the per-call times
(compilation or the first eager call kept apart), and for JAX the compiled temporary memory.

The result goes to data/bench.json, which the benchmark chapter (nbs/07_benchmarks) reads. Absolute
times belong to this machine; the ratios are the claim. Nothing here is asserted: tests never time.

    python tools/bench.py                 # all frameworks (builds their environments once)
    python tools/bench.py --rounds 3      # fewer rounds
    python tools/bench.py --only gae      # cases whose name starts with "gae"
    python tools/bench.py --no-refs       # dew_rl and the floor only
    python tools/bench.py --baseline REV  # also the dew_rl of commit REV, as "dew_rl[before]" (before/after)
    python tools/bench.py --no-compile    # without the compile-time rows (tools/bench_compile.py)

The run records the backend and its devices (data/bench.json "machine"); on an accelerator the same command
runs unchanged, on whatever `jax.default_backend()` is. `make bench` then runs tools/bench_train.py (the training
step, data/bench_train.json) and tools/bench_accel.py --if-accelerator (the rows that only a GPU or TPU has,
data/bench_accel.json; nothing on a CPU).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import refenvs  # noqa: E402
from bench_common import CASES, XLA_VARIANTS  # noqa: E402

OUT = ROOT / "data" / "bench.json"
SIDES = ROOT / "tools" / "bench_sides"
TARGET_S = 0.03  # wall time of one request (repeat chosen from the previous round): short, so that a slow
# spell of the machine falls on every framework of a case, and on several cases, alike


class Side:
    def __init__(self, label, python, script, env, args=()):
        self.label = label
        self.proc = subprocess.Popen([str(python), str(SIDES / script), *args], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=env, cwd=str(ROOT))
        first = self.proc.stdout.readline()
        if not first:
            raise RuntimeError(f"bench side {label} did not start")
        self.cases = set(json.loads(first)["cases"])

    def run(self, case, repeat):
        self.proc.stdin.write(json.dumps({"case": case, "repeat": repeat}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"bench side {self.label} died on {case}")
        return json.loads(line)

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def machine():
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import jax
    devices = jax.devices()
    return {"cpu": cpu, "cores": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
            "jax": jax.__version__, "jax_backend": jax.default_backend(), "device_count": len(devices),
            "devices": sorted({f"{d.platform}: {d.device_kind}" for d in devices})}


def unpack_baseline(rev: str) -> str:
    "The dew_rl package of commit `rev`, unpacked into a temporary directory (for the dew_rl[before] side)."
    out = tempfile.mkdtemp(prefix="dew_rl_baseline_")
    tar = subprocess.run(["git", "archive", rev, "dew_rl"], cwd=str(ROOT), check=True, capture_output=True).stdout
    tarfile.open(fileobj=__import__("io").BytesIO(tar)).extractall(out, filter="data")
    return out


def compile_rows() -> dict:
    "tools/bench_compile.py in a fresh interpreter: the compile time of every estimator's and loss mode's stages."
    res = subprocess.run([sys.executable, str(ROOT / "tools" / "bench_compile.py"), "--json"], cwd=str(ROOT),
                         check=True, capture_output=True, text=True, env=dict(os.environ, PYTHONNOUSERSITE="1"))
    return json.loads(res.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--only", default="")
    ap.add_argument("--no-refs", action="store_true")
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--baseline", default="", help="a commit whose dew_rl also runs, as dew_rl[before]")
    ap.add_argument("--no-compile", action="store_true")
    a = ap.parse_args(argv)
    cases = [c for c in CASES if c.startswith(a.only)]
    own_env = dict(os.environ, PYTHONNOUSERSITE="1")
    print("[bench] starting the dew_rl side and the memory floor", flush=True)
    sides = [Side("dew_rl", sys.executable, "dew_rl_side.py", own_env),
             Side("floor", sys.executable, "dew_rl_side.py", own_env, ("--floor",)),
             Side("numpy", sys.executable, "numpy_side.py", own_env),
             *[Side(label, sys.executable, "dew_rl_side.py", dict(own_env, XLA_FLAGS=flags), ("--variant",))
               for label, flags in XLA_VARIANTS.items()]]
    versions = {"dew_rl": __import__("dew_rl").__version__, "floor": "-", "numpy": __import__("numpy").__version__,
                **{label: f"XLA_FLAGS={flags}" for label, flags in XLA_VARIANTS.items()}}
    if a.baseline:
        rev = subprocess.run(["git", "rev-parse", "--short=12", a.baseline], cwd=str(ROOT), check=True,
                             capture_output=True, text=True).stdout.strip()
        print(f"[bench] starting the dew_rl side of {rev} (dew_rl[before])", flush=True)
        sides.append(Side("dew_rl[before]", sys.executable, "dew_rl_side.py",
                          dict(own_env, DEW_RL_BENCH_BASELINE=unpack_baseline(rev)), ("--baseline",)))
        versions["dew_rl[before]"] = f"dew_rl at {rev}"
    if not a.no_refs:
        for name, script in (("verl", "verl_side.py"), ("rlax", "rlax_side.py"), ("tunix", "tunix_side.py")):
            python = refenvs.build(name)
            print(f"[bench] starting the {name} side", flush=True)
            sides.append(Side(name, python, script, refenvs.env_for(name)))
            versions[name] = refenvs.ENVS[name]["version"]
    times = {c: {s.label: [] for s in sides if c in s.cases} for c in cases}
    extra = {c: {} for c in cases}
    repeat = {(c, s.label): 3 for c in cases for s in sides}
    t_start = time.time()
    for rnd in range(a.rounds):
        print(f"[bench] round {rnd + 1}/{a.rounds} ({time.time() - t_start:.0f} s so far)", flush=True)
        for c in cases:
            for s in sides:
                if c not in s.cases:
                    continue
                res = s.run(c, repeat[(c, s.label)])
                times[c][s.label].extend(res["times"])
                info = extra[c].setdefault(s.label, {})
                if res.get("compile") is not None:
                    info["compile_s"] = res["compile"]
                if "temp_bytes" in res:
                    info["temp_bytes"] = res["temp_bytes"]
                med = statistics.median(res["times"])
                repeat[(c, s.label)] = max(1, min(50, int(TARGET_S / max(med, 1e-6))))
    for s in sides:
        s.close()
    rows = []
    for c in cases:
        row = {"case": c, "frameworks": {}}
        for label, ts in times[c].items():
            row["frameworks"][label] = {"median_ms": statistics.median(ts) * 1e3, "min_ms": min(ts) * 1e3,
                                        "max_ms": max(ts) * 1e3, "calls": len(ts), **extra[c].get(label, {})}
        fw = row["frameworks"]
        ours = fw["dew_rl"]["median_ms"]
        row["ratios"] = {f"dew_rl/{k}": ours / v["median_ms"] for k, v in fw.items() if k != "dew_rl"}
        rows.append(row)
    wall = round(time.time() - t_start, 1)
    compiled = None
    if not a.no_compile:
        print("[bench] compile-time rows (tools/bench_compile.py)", flush=True)
        compiled = compile_rows()
    result = {"machine": machine(), "versions": versions, "rounds": a.rounds,
              "date": time.strftime("%Y-%m-%d", time.gmtime()), "wall_s": wall, "cases": rows,
              **({"compile": compiled} if compiled else {})}
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"[bench] wrote {out} after {time.time() - t_start:.0f} s; machine: {result['machine']['cpu']}, "
          f"{result['machine']['cores']} cores")
    labels = [s.label for s in sides]
    labels = [l for l in labels if l not in XLA_VARIANTS]  # the variants are in the JSON and the chapter
    print(f"{'case':<52}" + "".join(f"{l + ' ms':>12}" for l in labels) + "   ratios (dew_rl / x)")
    for row in rows:
        fw = row["frameworks"]
        cells = "".join(f"{fw[l]['median_ms']:>12.3f}" if l in fw else f"{'-':>12}" for l in labels)
        ratios = ", ".join(f"{k.split('/')[1]} {v:.2f}" for k, v in row["ratios"].items() if k.split("/")[1] in labels)
        print(f"{row['case']:<52}{cells}   {ratios}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
