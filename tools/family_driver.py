"""The machinery of a conformance family driver: run each adapter in its framework's interpreter, keep the last
results of the frameworks not re-run, compare with dew_rl's side, write the data file.

A family driver (tools/conformance_<family>.py) supplies what is its own: the inputs (`make_inputs`), dew_rl's side of
each comparison (`dew_rl_side(framework, kind, params, case_inputs) -> {function, conv, convention, where}`), the
known differences (`documented: {(framework, kind): note}`) and the adapters in tools/conformance_adapters/<family>/.
The drivers written before this module keep their own copies of these steps: each driver's bytes are hashed into its
data file, so moving them here would stale every data file until a live re-run of every family.

    family = Family("frontier", frameworks=("verl", "trl"), data=..., outputs=..., hashed=[...])
    family.main(argv, make_inputs, dew_rl_side, documented, about=..., extra=...)
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
ADAPTERS = ROOT / "tools" / "conformance_adapters"


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


conf = _load("dew_rl_conformance_driver", ROOT / "tools" / "conformance.py")   # compare, agrees, ROUNDOFF, cases_of


@dataclass
class Family:
    name: str                    # the adapters' folder under tools/conformance_adapters/
    frameworks: tuple            # refenvs names, run in this order
    data: Path                   # data/conformance_<name>.json
    outputs: Path                # data/conformance_<name>_outputs.npz
    hashed: list = field(default_factory=list)   # the driver's own files (this module and the adapters are added)

    def adapter(self, framework: str) -> Path:
        return ADAPTERS / self.name / f"{framework}_adapter.py"

    def hashed_files(self) -> list[Path]:
        return [*self.hashed, ROOT / "tools" / "family_driver.py", ADAPTERS / "_common.py",
                *(self.adapter(f) for f in self.frameworks)]

    def input_hash(self) -> str:
        "Covers the hashed files and the pins of this family's frameworks in tools/refenvs.py."
        h = hashlib.sha256()
        for f in self.hashed_files():
            h.update(f.relative_to(ROOT).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
        pins = {k: v for k, v in conf._refenvs().ENVS.items() if k in self.frameworks}
        h.update(json.dumps(pins, sort_keys=True).encode())
        return h.hexdigest()

    def evaluate(self, records, arrays, cases, dew_rl_side, documented) -> list[dict]:
        "Each framework output against dew_rl's side on the same case: exact, round-off (conf.agrees) or DIFFERS."
        rows = []
        for rec in records:
            side = dew_rl_side(rec["framework"], rec["kind"], rec["params"], cases[rec["case"]])
            c = conf.compare(side["conv"], arrays[rec["key"]], side["where"])
            exact = c["max_abs"] == 0 and not c["special_mismatch"]
            status = "exact" if exact else ("round-off" if conf.agrees(c) else "DIFFERS")
            rows.append(dict(key=rec["key"], framework=rec["framework"], case=rec["case"], kind=rec["kind"],
                             params=rec["params"], dew_rl=side["function"], framework_function=rec["framework_function"],
                             framework_settings=rec["settings"], dew_rl_convention=side["convention"],
                             max_abs=c["max_abs"], max_rel=c["max_rel"], special_mismatch=c["special_mismatch"],
                             scale=c["scale"], n=c["n"], status=status,
                             note=documented.get((rec["framework"], rec["kind"]), "") if status == "DIFFERS" else ""))
        return rows

    def run_adapter(self, framework, inputs, work, refenvs) -> dict:
        "One adapter in its framework's interpreter; returns its metadata with the output arrays under 'arrays'."
        t0 = time.time()
        py = refenvs.build(framework)
        out_npz, out_json = work / f"{framework}.npz", work / f"{framework}.json"
        env = refenvs.env_for(framework)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), str(ADAPTERS)) if p)
        proc = subprocess.run([str(py), str(self.adapter(framework)), str(inputs), str(out_npz), str(out_json)],
                              env=env, cwd=str(work), capture_output=True, text=True)
        if proc.returncode:
            tail = (proc.stderr or proc.stdout).splitlines()[-15:]
            raise RuntimeError(f"the {framework} {self.name} adapter failed:\n" + "\n".join(tail))
        print(proc.stdout.strip(), flush=True)
        meta = json.loads(out_json.read_text())
        with np.load(out_npz) as f:
            meta["arrays"] = {k: f[k] for k in f.files}
        print(f"[conformance_{self.name}] {framework}: {len(meta['records'])} outputs in {time.time() - t0:.0f} s", flush=True)
        return meta

    def main(self, argv, make_inputs, dew_rl_side, documented, about: str, extra: dict) -> int:
        """Run the named frameworks (default: all), keep the others' last results, write the data and outputs files."""
        try:
            import dew_rl  # noqa: F401
        except ImportError:
            venv = ROOT / ".venv" / "bin" / "python"
            if venv.exists() and Path(sys.prefix).resolve() != venv.parent.parent.resolve():
                driver = ROOT / "tools" / f"conformance_{self.name}.py"
                os.execv(str(venv), [str(venv), str(driver), *argv])
            raise
        names = [a for a in argv if not a.startswith("-")] or list(self.frameworks)
        unknown = set(names) - set(self.frameworks)
        if unknown:
            raise SystemExit(f"conformance_{self.name}: unknown framework(s) {sorted(unknown)}; "
                             f"this family runs {list(self.frameworks)}")
        refenvs = conf._refenvs()
        inputs = make_inputs()
        previous = json.loads(self.data.read_text()) if self.data.exists() else {}
        old_arrays = {}
        if self.outputs.exists():
            with np.load(self.outputs) as f:
                old_arrays = {k: f[k] for k in f.files}
        metas = {}
        with tempfile.TemporaryDirectory(prefix=f"dew_rl_conformance_{self.name}_") as tmp:
            work = Path(tmp)
            np.savez(work / "inputs.npz", **inputs)
            for name in names:
                metas[name] = self.run_adapter(name, work / "inputs.npz", work, refenvs)
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
                records += [dict(key=r["key"], framework=name, case=r["case"], kind=r["kind"], params=r["params"],
                                 framework_function=r["framework_function"], settings=r["framework_settings"])
                            for r in previous["results"] if r["framework"] == name]
        rows = self.evaluate(records, arrays, conf.cases_of(inputs), dew_rl_side, documented)
        data = dict(about=about, input_hash=self.input_hash(),
                    hashed_files=[f.relative_to(ROOT).as_posix() for f in self.hashed_files()] + ["tools/refenvs.py:ENVS"],
                    **extra, roundoff=conf.ROUNDOFF, frameworks=frameworks, results=rows)
        self.data.write_text(json.dumps(data, indent=1) + "\n")
        np.savez_compressed(self.outputs, **arrays)
        bad = [r for r in rows if r["status"] == "DIFFERS"]
        print(f"[conformance_{self.name}] {len(rows)} comparisons, {len(bad)} not at round-off; "
              f"wrote {self.data.relative_to(ROOT)}")
        for r in bad:
            print(f"  DIFFERS {r['key']}: max abs {r['max_abs']:.3g} (scale {r['scale']:.3g}) {r['note']}")
        return 0
