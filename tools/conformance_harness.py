"""The one conformance harness: a suite is a record, and hashing, running, merging and comparing are done here once.

    python tools/conformance_harness.py                    # every suite, every framework (`make conformance`)
    python tools/conformance_harness.py policyloss         # one suite (the same as python tools/conformance_policyloss.py)
    python tools/conformance_harness.py policyloss verl    # one suite, only these frameworks (the others keep their
                                                           # last results)
    python tools/conformance_harness.py distill --no-live  # re-evaluate the stored outputs

A suite (`Suite`, one per tools/conformance*.py module: `SUITES` names them) holds what is its own: its inputs
(`make_inputs`), dew_rl's side of each framework output (`side(record, case_inputs)`: `conv`, `convention`,
`function`, `where`, optionally `default` / `default_call` and `keys` for a vector of named metrics), the
frameworks it runs live, the ones it reads from a frozen fixture (`frozen`), the notes of its known differences
(`note`), and the columns and header fields it adds to its data file (`extra`, `header`). Its adapters are, for
every suite, ``tools/conformance_adapters/<suite>/<framework>_adapter.py``; each runs in its framework's own
interpreter (tools/refenvs.py), reads the inputs and writes the framework's outputs (.npz) and what it called (.json)
with the `Recorder` of tools/conformance_adapters/_common.py; the TRL adapters share their set-up (the stand-in
`self` of TRL's trainer methods, accelerate of one process) in tools/conformance_adapters/_trl.py.

For each suite the harness writes its data file (``data/conformance*.json``: the tables the chapters print) and its
outputs (``..._outputs.npz``: the inputs and every framework output, so that tests/test_conformance.py recomputes
dew_rl's side without any framework installed), and records in ``data/conformance_hashes.json`` the suite's
staleness hash (`Suite.input_hash`) with the sha256 of the two files it vouches for. The hash covers what decides the
framework outputs, and nothing else: the input arrays themselves (not the code that draws them), the bytes of the
suite's adapters, of the shared adapter helper (and of _trl.py where an adapter imports it) and of the stubs they
load, the frozen fixtures read, and the pins of the suite's environments in tools/refenvs.py. dew_rl's side is not in it: the tests recompute it on every run.
"""
from __future__ import annotations

import hashlib
import importlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

TOOLS = Path(__file__).resolve().parent
ROOT = TOOLS.parent
if str(TOOLS) not in sys.path:  # the suites and tools/refenvs.py import as modules, loaded from here or a test
    sys.path.insert(0, str(TOOLS))
ADAPTERS = TOOLS / "conformance_adapters"
STUBS = TOOLS / "stubs"
MANIFEST = ROOT / "data" / "conformance_hashes.json"
ADAPTER_HELPERS = (ADAPTERS / "_trl.py",)   # one framework's set-up shared by its adapters (Suite.helpers)
# suite name -> its module in tools/ (also the order `make conformance` runs them in)
SUITES = {"general": "conformance", "advantages": "conformance_advantages", "policyloss": "conformance_policyloss",
          "entropy": "conformance_entropy", "offpolicy": "conformance_offpolicy",
          "preference": "conformance_preference", "distill": "conformance_distill", "frontier": "conformance_frontier"}
# Agreement "to float32 round-off": |ours - theirs| <= ROUNDOFF * max(1, max |theirs|) at every compared position.
ROUNDOFF = 1e-5
REL_FLOOR = 1e-3  # the relative difference divides by max(|theirs|, REL_FLOOR * max |theirs|)


# --------------------------------------------------------------------------------------------------------
# Comparing
# --------------------------------------------------------------------------------------------------------
def compare(ours, theirs, where=None) -> dict:
    """max |ours - theirs|, the max relative difference (to max(|theirs|, REL_FLOOR * max|theirs|)), and
    positions whose NaN/inf pattern differs, over the compared positions."""
    o, t = np.broadcast_arrays(np.asarray(ours, np.float64), np.asarray(theirs, np.float64))
    if where is not None:
        w = np.broadcast_to(np.asarray(where, bool), o.shape)
        o, t = o[w], t[w]
    o, t = o.ravel(), t.ravel()
    same_special = (np.isnan(o) & np.isnan(t)) | (np.isinf(o) & (o == t))
    finite = np.isfinite(o) & np.isfinite(t)
    mismatch = int((~finite & ~same_special).sum())
    if not finite.any():
        return dict(max_abs=0.0, max_rel=0.0, special_mismatch=mismatch, scale=0.0, n=int(o.size))
    d = np.abs(o[finite] - t[finite])
    scale = float(np.abs(t[finite]).max())
    rel = d / np.maximum(np.abs(t[finite]), max(REL_FLOOR * scale, 1e-30))
    return dict(max_abs=float(d.max()), max_rel=float(rel.max()), special_mismatch=mismatch, scale=scale,
                n=int(o.size))


def agrees(c: dict) -> bool:
    return c["special_mismatch"] == 0 and c["max_abs"] <= ROUNDOFF * max(1.0, c["scale"])


def status(c: dict, ok: bool) -> str:
    return ("exact" if c["max_abs"] == 0 and not c["special_mismatch"] else "round-off") if ok else "DIFFERS"


def cases_of(arrays: dict) -> dict[str, dict[str, np.ndarray]]:
    "The inputs ``in/<case>/<name>`` of an arrays dict, by case."
    cases = sorted({k.split("/")[1] for k in arrays if k.startswith("in/")})
    return {c: {k.split("/", 2)[2]: arrays[k] for k in arrays if k.startswith(f"in/{c}/")} for c in cases}


def drawn_cases(cases: dict, seed: int):
    "(case, its spec, its generator) for each case of a suite's inputs: case k draws from default_rng(seed + k)."
    for k, (case, spec) in enumerate(cases.items()):
        yield case, spec, np.random.default_rng(seed + k)


def ragged_mask(rng, B: int, T: int, shortest: int, dtype=np.float32):
    "Rows of random lengths in [shortest, T], the first row full, right-padded: (lengths, mask)."
    lengths = rng.integers(shortest, T + 1, size=B)
    lengths[0] = T  # one full row
    return lengths, (np.arange(T)[None, :] < lengths[:, None]).astype(dtype)


def note_by_param(documented: dict, key: str) -> str:
    """The note of a row from {(framework, kind, param or 'case=<case>'): note}, its key being
    framework/case/kind/param/...; '' where none applies."""
    fw, case, kind, *params = key.split("/")
    return next((v for (f, k, p), v in documented.items() if f == fw and k == kind and p in (*params, f"case={case}")),
                "")


def load_npz(path) -> dict[str, np.ndarray]:
    with np.load(path) as f:
        return {k: f[k] for k in f.files}


def check_fixture_inputs(fixture: Path, fixture_arrays: dict, inputs: dict, keys=None, script: str = "") -> None:
    "A frozen fixture must have been made from these very inputs (every input key, or `keys`), bit for bit."
    for k in inputs if keys is None else keys:
        if k not in inputs or k not in fixture_arrays or not np.array_equal(fixture_arrays[k], inputs[k]):
            raise SystemExit(f"{fixture.name} was made from other inputs ({k}); run {script or 'its fixture script'}")


def frozen_fixture(npz: Path, name: str, inputs: dict, script: str) -> tuple[list, dict, dict]:
    """A framework run once from a source checkout by `script` and frozen in `npz` (with its metadata and records in
    the .json next to it): its records, its output arrays and {name: metadata}, after checking its inputs."""
    meta = json.loads(npz.with_suffix(".json").read_text())
    arrays = load_npz(npz)
    check_fixture_inputs(npz, arrays, inputs, script=script)
    records = meta.pop("records")
    return records, {k: v for k, v in arrays.items() if not k.startswith("in/")}, {name: meta}


def records_of(rows: list[dict]) -> list[dict]:
    "The framework records behind data-file rows (what `Suite.evaluate` takes)."
    return [dict(key=r["key"], framework=r["framework"], case=r["case"], kind=r["kind"], params=r["params"],
                 framework_function=r["framework_function"], settings=r["framework_settings"]) for r in rows]


def refenvs():
    return importlib.import_module("refenvs")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --------------------------------------------------------------------------------------------------------
# The suite record
# --------------------------------------------------------------------------------------------------------
@dataclass
class Suite:
    name: str                                   # its adapters' folder under tools/conformance_adapters/
    data: str                                   # data/<data>.json and data/<data>_outputs.npz
    frameworks: tuple                           # run live, in this order (refenvs names)
    make_inputs: Callable[[], dict]             # -> {"in/<case>/<name>": array}
    side: Callable[[dict, dict], dict]          # (record, case inputs) -> dew_rl's side
    about: str = ""
    note: Callable[[dict], str] = lambda rec: ""    # why a DIFFERS row differs (a chapter explains it)
    extra: Callable | None = None               # (record, side, theirs, case inputs, comparison) -> row columns
    header: Callable | None = None              # (context) -> the data file's fields before `frameworks`
    frozen: Callable | None = None              # (inputs) -> (records, arrays, framework metadata) of fixtures
    frozen_names: tuple = ()                    # the frameworks `frozen` reads
    store_frozen: bool = True                   # keep the frozen outputs in the outputs file too
    stubs: tuple = ()                           # tools/stubs files the adapters load
    fixtures: tuple = ()                        # frozen fixture files read (paths relative to the root)
    default_where: bool = False                 # compare dew_rl's default where the convention is compared
    env: dict = field(default_factory=dict)     # extra environment variables of the adapters' processes
    log: str = ""                               # the prefix of the progress lines

    @property
    def data_file(self) -> Path:
        return ROOT / "data" / f"{self.data}.json"

    @property
    def outputs_file(self) -> Path:
        return ROOT / "data" / f"{self.data}_outputs.npz"

    def adapter(self, framework: str) -> Path:
        return ADAPTERS / self.name / f"{framework}_adapter.py"

    # ---- the staleness hash ---------------------------------------------------------------------------
    def helpers(self) -> list[Path]:
        "The adapter helpers besides _common.py (one framework's shared set-up) that this suite's adapters import."
        texts = [self.adapter(f).read_text() for f in self.frameworks]
        return [h for h in ADAPTER_HELPERS if any(re.search(rf"^from {h.stem} import", t, re.M) for t in texts)]

    def hashed_files(self) -> list[Path]:
        return [ADAPTERS / "_common.py", *self.helpers(), *(self.adapter(f) for f in self.frameworks),
                *(STUBS / s for s in self.stubs), *(ROOT / f for f in self.fixtures)]

    def hashed(self) -> list[str]:
        return ["inputs (make_inputs, the arrays)"] + [f.relative_to(ROOT).as_posix() for f in self.hashed_files()] \
            + [f"tools/refenvs.py:ENVS[{', '.join(self.frameworks)}]"]

    def input_hash(self, inputs: dict | None = None) -> str:
        """sha256 over the input arrays (name, dtype, shape, bytes), the hashed files (path, bytes) and the pins."""
        inputs = self.make_inputs() if inputs is None else inputs
        h = hashlib.sha256()
        for k in sorted(inputs):
            v = np.ascontiguousarray(inputs[k])
            h.update(f"{k}\0{v.dtype.str}\0{v.shape}\0".encode() + v.tobytes() + b"\0")
        for f in self.hashed_files():
            h.update(f.relative_to(ROOT).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
        envs = refenvs().ENVS
        h.update(json.dumps({k: envs[k] for k in self.frameworks}, sort_keys=True).encode())
        return h.hexdigest()

    def manifest_entry(self, inputs: dict | None = None) -> dict:
        return dict(input_hash=self.input_hash(inputs), hashed=self.hashed(),
                    data=sha256(self.data_file), outputs=sha256(self.outputs_file))

    # ---- comparing ------------------------------------------------------------------------------------
    def row(self, rec: dict, x: dict, theirs) -> dict:
        side = self.side(rec, x)
        c = compare(side["conv"], theirs, side.get("where"))
        keys = side.get("keys")
        differing = [k for k, o, t in zip(keys, side["conv"], theirs) if not agrees(compare(np.array([o]), np.array([t])))] \
            if keys else []
        st = status(c, (not differing and c["special_mismatch"] == 0) if keys else agrees(c))
        row = dict(key=rec["key"], framework=rec["framework"], case=rec["case"], kind=rec["kind"], params=rec["params"],
                   dew_rl=side["function"], framework_function=rec["framework_function"],
                   framework_settings=rec["settings"], dew_rl_convention=side["convention"])
        if self.extra:
            row.update(self.extra(rec, side, theirs, x, c))
        row.update(max_abs=c["max_abs"], max_rel=c["max_rel"], special_mismatch=c["special_mismatch"], scale=c["scale"],
                   n=c["n"])
        if "default" in side:
            d = compare(side["default"], theirs, side.get("where") if self.default_where else None)
            row.update(dew_rl_default=side["default_call"], default_max_abs=d["max_abs"], default_max_rel=d["max_rel"],
                       default_special_mismatch=d["special_mismatch"])
        if "keys" in side:
            row["differing"] = differing
        row.update(status=st, note=self.note(rec) if st == "DIFFERS" else "")
        return row

    def evaluate(self, records: list[dict], arrays: dict, cases: dict | None = None) -> list[dict]:
        "Each framework output against dew_rl's side on the same case: exact, round-off (`agrees`) or DIFFERS."
        cases = cases_of(arrays) if cases is None else cases
        return [self.row(rec, cases[rec["case"]], arrays[rec["key"]]) for rec in records]

    def frozen_outputs(self, inputs: dict) -> tuple[list, dict, dict]:
        return self.frozen(inputs) if self.frozen else ([], {}, {})

    # ---- running --------------------------------------------------------------------------------------
    def run_adapter(self, framework: str, inputs: Path, work: Path, envs) -> dict:
        "One adapter in its framework's interpreter; its metadata, with the output arrays under 'arrays'."
        t0 = time.time()
        py = envs.build(framework)
        out_npz, out_json = work / f"{framework}.npz", work / f"{framework}.json"
        env = envs.env_for(framework)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), str(ADAPTERS), str(STUBS)) if p)
        env.update(self.env)
        print(f"[{self.log}] {framework}: running its adapter in {envs.ENVS[framework]['version']}", flush=True)
        proc = subprocess.run([str(py), str(self.adapter(framework)), str(inputs), str(out_npz), str(out_json)],
                              env=env, cwd=str(work), capture_output=True, text=True)
        if proc.returncode:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-20:]
            raise RuntimeError(f"the {framework} adapter of suite {self.name} failed:\n" + "\n".join(tail))
        print(proc.stdout.strip(), flush=True)
        meta = json.loads(out_json.read_text())
        meta["arrays"] = load_npz(out_npz)
        print(f"[{self.log}] {framework}: {len(meta['records'])} outputs in {time.time() - t0:.0f} s", flush=True)
        return meta

    def main(self, argv: list[str]) -> int:
        """Run the named frameworks (default: all; none with --no-live), keep the others' last results, read the
        frozen fixtures, compare, and write the data file, the outputs file and the suite's manifest entry."""
        names = [] if "--no-live" in argv else [a for a in argv if not a.startswith("-")] or list(self.frameworks)
        unknown = sorted(set(names) - set(self.frameworks))
        if unknown:
            raise SystemExit(f"suite {self.name}: unknown framework(s) {unknown}; it runs {list(self.frameworks)}")
        t0, envs = time.time(), refenvs()
        inputs = self.make_inputs()
        previous = json.loads(self.data_file.read_text()) if self.data_file.exists() else {}
        old_arrays = load_npz(self.outputs_file) if self.outputs_file.exists() else {}
        metas = {}
        with tempfile.TemporaryDirectory(prefix=f"dew_rl_conformance_{self.name}_") as tmp:
            work = Path(tmp)
            np.savez(work / "inputs.npz", **inputs)
            for name in names:
                metas[name] = self.run_adapter(name, work / "inputs.npz", work, envs)
        arrays, frameworks, records = dict(inputs), {}, []
        for name in self.frameworks:
            if name in metas:
                meta = metas[name]
                arrays.update(meta.pop("arrays"))
                records += meta.pop("records")
                frameworks[name] = meta
            elif name in previous.get("frameworks", {}):   # not re-run: its last results, unchanged
                frameworks[name] = previous["frameworks"][name]
                arrays.update({k: v for k, v in old_arrays.items() if k.startswith(f"{name}/")})
                records += records_of([r for r in previous["results"] if r["framework"] == name])
        frozen_records, frozen_arrays, frozen_meta = self.frozen_outputs(inputs)
        records += frozen_records
        frameworks.update(frozen_meta)
        rows = self.evaluate(records, {**arrays, **frozen_arrays})
        ctx = dict(inputs=inputs, cases=cases_of(inputs), frameworks=frameworks, rows=rows)
        data = dict(about=f"{self.about}; written by tools/conformance_harness.py (suite {self.name})",
                    **(self.header(ctx) if self.header else {}), roundoff=ROUNDOFF, rel_floor=REL_FLOOR,
                    frameworks=frameworks, results=rows)
        self.data_file.parent.mkdir(exist_ok=True)
        self.data_file.write_text(json.dumps(data, indent=1) + "\n")
        np.savez_compressed(self.outputs_file, **(arrays if not self.store_frozen else {**arrays, **frozen_arrays}))
        manifest = json.loads(MANIFEST.read_text()) if MANIFEST.exists() else dict(about=MANIFEST_ABOUT, suites={})
        manifest["suites"][self.name] = self.manifest_entry(inputs)
        MANIFEST.write_text(json.dumps(manifest, indent=1) + "\n")
        bad = [r for r in rows if r["status"] == "DIFFERS"]
        print(f"[{self.log}] {len(rows)} comparisons, {len(bad)} not at round-off under the framework's convention; "
              f"wrote {self.data_file.relative_to(ROOT)} and {self.outputs_file.relative_to(ROOT)} "
              f"({self.outputs_file.stat().st_size // 1024} KiB) in {time.time() - t0:.0f} s")
        for r in bad:
            print(f"  DIFFERS {r['key']}: max abs {r['max_abs']:.3g} (scale {r['scale']:.3g}) {r.get('differing', '')} "
                  f"{r['note'][:80] or 'NO NOTE'}")
        return 0


MANIFEST_ABOUT = ("the staleness hash of each conformance suite (tools/conformance_harness.py: Suite.input_hash) and the "
                  "sha256 of the data and outputs files it vouches for; checked by tests/test_conformance.py")


def load(name: str) -> Suite:
    "The suite record `name` (one of SUITES)."
    return importlib.import_module(SUITES[name]).SUITE


def run(module_name: str, argv: list[str]) -> int:
    "A suite module's `python tools/<module>.py [frameworks] [--no-live]`, in the project's environment."
    try:
        import dew_rl  # noqa: F401
    except ImportError:  # run as `python3 tools/...`: continue in the project's environment
        venv = ROOT / ".venv" / "bin" / "python"
        if venv.exists() and Path(sys.prefix).resolve() != venv.parent.parent.resolve():
            os.execv(str(venv), [str(venv), str(TOOLS / f"{module_name}.py"), *argv])
        raise
    return importlib.import_module(module_name).SUITE.main(argv)


def main(argv: list[str]) -> int:
    names = [a for a in argv if a in SUITES] or list(SUITES)
    rest = [a for a in argv if a not in SUITES]
    for name in names:
        print(f"== conformance: {name}", flush=True)
        run(SUITES[name], rest)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
