"""Shared by the conformance adapters: read the inputs, record each framework output with its settings.

Each adapter runs inside its framework's own interpreter (see tools/refenvs.py), so this file needs
nothing but NumPy and the standard library. It holds no framework code and no dew_rl code.

    <framework-python> tools/conformance_adapters/<framework>_adapter.py INPUTS.npz OUTPUTS.npz OUTPUTS.json
"""
from __future__ import annotations

import json
import sys
import traceback

import numpy as np


def load_inputs(path):
    with np.load(path) as f:
        data = {k: f[k] for k in f.files}
    cases = sorted({k.split("/")[1] for k in data if k.startswith("in/")})
    return {c: {k.split("/", 2)[2]: v for k, v in data.items() if k.startswith(f"in/{c}/")} for c in cases}


class Recorder:
    """Collects (output array, what was called, with which settings) and the counterparts that failed."""

    def __init__(self, framework, version):
        self.framework, self.version = framework, version
        self.arrays, self.records, self.failed, self.not_run = {}, [], [], []

    def put(self, case, kind, value, function, settings, **params):
        "One framework output: `kind` names the dew_rl comparison, `params` its parameters."
        key = "/".join([self.framework, case, kind] + [f"{k}={params[k]}" for k in sorted(params)])
        arr = np.asarray(value.detach().cpu().numpy() if hasattr(value, "detach") else value)
        self.arrays[key] = arr.astype(np.float64) if arr.dtype.kind in "fc" or arr.dtype == bool else arr
        self.records.append(dict(key=key, framework=self.framework, case=case, kind=kind, params=params,
                                 framework_function=function, settings=settings, dtype=str(arr.dtype)))

    def attempt(self, label, fn):
        "Run one framework call; an exception is recorded (a finding), not fatal."
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - every failure is reported in the data file
            tb = traceback.format_exception_only(type(e), e)[-1].strip()
            self.failed.append(dict(framework=self.framework, what=label, error=tb[:300]))
            print(f"[{self.framework}] {label}: {tb[:200]}", file=sys.stderr)

    def unavailable(self, function, dew_rl, why):
        "A counterpart that exists in the framework but is not run, and why."
        self.not_run.append(dict(framework=self.framework, framework_function=function, dew_rl=dew_rl, why=why))

    def save(self, out_npz, out_json, extra=None):
        np.savez(out_npz, **self.arrays)
        meta = dict(framework=self.framework, version=self.version, records=self.records, failed=self.failed,
                    not_run=self.not_run, **(extra or {}))
        with open(out_json, "w") as f:
            json.dump(meta, f, indent=1, sort_keys=True)
