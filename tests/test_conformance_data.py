"""data/conformance.json (written by `make conformance`) is current, and its recorded differences still hold.

No reference framework is needed: `make conformance` stored the shared inputs and every framework
output in data/conformance_outputs.npz, so these tests

- recompute the hash of everything that decides those outputs (tools/conformance.py with its input
  generation and seed, tools/conformance_adapters/*.py, tools/stubs/, the pins of tools/refenvs.py)
  and fail when it differs from the recorded one: the data file is stale, run `make conformance`;
- regenerate the inputs and check they are the stored ones;
- recompute dew_rl's side of every comparison (configured to the framework's convention, and with
  dew_rl's defaults) against the stored framework outputs, and fail when a comparison that agreed to
  float32 round-off no longer does, or when a recorded difference changed: a dew_rl regression
  against the real frameworks.
"""
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("dew_rl_conformance_driver", ROOT / "tools" / "conformance.py")
conf = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(conf)

DATA = json.loads(conf.DATA.read_text())


@pytest.fixture(scope="module")
def stored():
    with np.load(conf.OUTPUTS) as f:
        return {k: f[k] for k in f.files}


def test_data_file_is_current():
    assert DATA["input_hash"] == conf.input_hash(), (
        "data/conformance.json is stale: the driver, an adapter, a stub or a pin in tools/refenvs.py changed "
        "since it was written; run `make conformance` and commit data/")
    assert DATA["hashed_files"][:-1] == [f.relative_to(ROOT).as_posix() for f in conf.hashed_files()]


def test_outputs_file_is_small():
    assert conf.OUTPUTS.stat().st_size < 2 * 2 ** 20


def test_inputs_are_the_stored_ones(stored):
    inputs = conf.make_inputs()
    assert sorted(k for k in stored if k.startswith("in/")) == sorted(inputs)
    for k, v in inputs.items():
        np.testing.assert_array_equal(stored[k], v, err_msg=k)


def test_every_framework_output_is_stored(stored):
    assert {r["key"] for r in DATA["results"]} <= set(stored)
    assert {r["framework"] for r in DATA["results"]} == set(DATA["frameworks"])


@pytest.mark.parametrize("framework", list(DATA["frameworks"]))
def test_recorded_differences_still_hold(stored, framework):
    rows = [r for r in DATA["results"] if r["framework"] == framework]
    assert rows
    cases = conf.cases_of(stored)
    records = [dict(key=r["key"], framework=r["framework"], case=r["case"], kind=r["kind"], params=r["params"],
                    framework_function=r["framework_function"], settings=r["framework_settings"]) for r in rows]
    problems = []
    for old, new in zip(rows, conf.evaluate(records, stored, cases)):
        if new["status"] != old["status"] and "DIFFERS" in (new["status"], old["status"]):
            problems.append(f"{old['key']}: {old['status']} -> {new['status']} (max abs {new['max_abs']:.3g})")
        elif old["status"] == "DIFFERS" and not np.isclose(new["max_abs"], old["max_abs"], rtol=1e-3, atol=1e-6):
            problems.append(f"{old['key']}: the recorded difference {old['max_abs']:.4g} is now {new['max_abs']:.4g}")
        elif not np.isclose(new["default_max_abs"], old["default_max_abs"], rtol=1e-3, atol=1e-5):
            problems.append(f"{old['key']}: difference from dew_rl's default {old['default_max_abs']:.4g} -> "
                            f"{new['default_max_abs']:.4g}")
    assert not problems, "\n".join(problems)


def test_the_comparison_can_fail(stored):
    """A wrong convention (ddof=0 group std; token-mean for a sequence mode) is far outside round-off."""
    row = next(r for r in DATA["results"] if r["framework"] == "verl" and r["kind"] == "aggregate"
               and r["params"]["mode"] == "seq-mean-token-mean")
    x = conf.cases_of(stored)[row["case"]]
    import dew_rl as rl
    wrong = conf.compare(rl.aggregate(x["loss"], x["mask"], "token-mean"), stored[row["key"]])
    assert not conf.agrees(wrong)
    assert conf.agrees(conf.compare(rl.aggregate(x["loss"], x["mask"], "seq-mean-token-mean"), stored[row["key"]]))
