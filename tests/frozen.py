"""Shared by the tests that compare dew_rl with a framework's frozen outputs (tests/fixtures/*.npz written by a
tools/make_*_fixtures.py script): load the fixture, load its script without torch, compare at float32 round-off."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np

RTOL, ATOL = 1e-5, 1e-6


def load_fixture(path: Path) -> dict:
    with np.load(path) as f:
        return {k: f[k] for k in f.files}


def load_script(path: Path):
    "Import a fixture script by path; it must import torch only when it runs (its inputs are drawn without it)."
    torch_before = "torch" in sys.modules
    spec = importlib.util.spec_from_file_location(Path(path).stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert torch_before or "torch" not in sys.modules, f"{Path(path).name} must import torch only in main()"
    return mod


def close(ours, theirs, rtol=RTOL, atol=ATOL) -> bool:
    "float32 round-off: |ours - theirs| <= atol + rtol * scale, scale the largest |theirs| (shapes must agree)."
    ours, theirs = np.asarray(ours, np.float64), np.asarray(theirs, np.float64)
    if ours.shape != theirs.shape:
        return False
    scale = float(np.abs(theirs).max(initial=0.0))
    return bool(np.all(np.abs(ours - theirs) <= atol + rtol * scale))


def assert_close(ours, theirs, what, framework):
    assert close(ours, theirs), (f"{what}: max |dew_rl - {framework}| = "
                                 f"{np.abs(np.asarray(ours, np.float64) - np.asarray(theirs, np.float64)).max():.3g}")


def npz_fixture(path: Path):
    "A module-scoped pytest fixture holding the arrays of a frozen fixture: `fx = npz_fixture(FIXTURE)`."
    import pytest

    @pytest.fixture(scope="module")
    def fx():
        return load_fixture(path)
    return fx


def comparer(framework: str):
    "`assert_close(ours, theirs, what)` naming `framework` in its message."
    def assert_close_to(ours, theirs, what):
        assert_close(ours, theirs, what, framework)
    return assert_close_to


def assert_inputs_are_the_scripts(fx: dict, inputs: dict, dtype_of) -> None:
    "The fixture's inputs ``in/...`` are exactly the script's `inputs`, each of the dtype `dtype_of(key)` in both."
    assert sorted(k for k in fx if k.startswith("in/")) == sorted(inputs)
    for k, v in inputs.items():
        assert fx[k].dtype == v.dtype == dtype_of(k), k
        np.testing.assert_array_equal(fx[k], v, err_msg=k)


def relax_meta(fixture: Path, script: Path, repository: str, fx: dict) -> tuple:
    """A Relax fixture's script (imported) and .json, after checking that the json names `repository` at the script's
    revision with no failure, records exactly the fixture's ``relax/...`` arrays, and (a one-file script) its file."""
    mod = load_script(script)
    meta = json.loads(fixture.with_suffix(".json").read_text())
    assert meta["framework"] == "relax" and meta["revision"] == mod.REVISION and not meta["failed"]
    assert meta["version"] == f"Relax {repository}@{mod.REVISION}"
    assert sorted(r["key"] for r in meta["records"]) == sorted(k for k in fx if k.startswith("relax/"))
    if hasattr(mod, "FILE"):
        assert meta["file"] == mod.FILE and meta["sha256"] == mod.SHA256
    return mod, meta


def case_arrays(fx: dict, case: str, names) -> tuple:
    "The fixture's inputs ``in/<case>/<name>`` for `names`, as JAX arrays of their stored dtype."
    import jax.numpy as jnp

    return tuple(jnp.asarray(fx[f"in/{case}/{n}"]) for n in names)


def relax_output(fx: dict, case: str, kind: str, **params):
    "A Relax fixture's frozen output ``relax/<case>/<kind>[/<param>=<value>...]``, the parameters in sorted order."
    return fx["/".join([f"relax/{case}/{kind}"] + [f"{k}={params[k]}" for k in sorted(params)])]
