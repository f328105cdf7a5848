"""data/conformance_preference.json (written by tools/conformance_preference.py) is current, and its differences hold.

No reference framework is needed: the driver stored the shared inputs and TRL's and OpenRLHF's outputs in
data/conformance_preference_outputs.npz, and NeMo-RL's frozen outputs are in tests/fixtures/nemo_rl_dpo.npz, so
these tests

- recompute the hash of everything that decides those outputs (the driver with its input generation and seed,
  the preference adapters, the shared adapter helpers and stubs they load, the pins of the two environments) and
  fail when it differs from the recorded one: run `python tools/conformance_preference.py` again;
- regenerate the inputs and check they are the stored ones, and the NeMo-RL fixture's;
- recompute dew_rl's side of every comparison (losses, metrics and gradients) against the stored framework
  outputs, and fail when one that agreed to float32 round-off no longer does, or a recorded difference changed.
"""
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("dew_rl_conformance_preference", ROOT / "tools" / "conformance_preference.py")
drv = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(drv)

DATA = json.loads(drv.DATA.read_text())


@pytest.fixture(scope="module")
def stored():
    with np.load(drv.OUTPUTS) as f:
        arrays = {k: f[k] for k in f.files}
    nemo_arrays, _, _ = drv.nemo_records()
    arrays.update(nemo_arrays)
    return arrays


def test_data_file_is_current():
    assert DATA["input_hash"] == drv.input_hash(), (
        "data/conformance_preference.json is stale: the driver, an adapter, a stub or a pin changed since it was "
        "written; run `python tools/conformance_preference.py` and commit data/")
    assert DATA["hashed_files"][:-1] == [f.relative_to(ROOT).as_posix() for f in drv.hashed_files()]


def test_outputs_file_is_small():
    assert drv.OUTPUTS.stat().st_size < 2 ** 20
    assert drv.NEMO_FIXTURE.stat().st_size < 2 ** 18


def test_inputs_are_the_stored_ones(stored):
    inputs = drv.make_inputs()
    assert sorted(k for k in stored if k.startswith("in/")) == sorted(inputs)
    for k, v in inputs.items():
        np.testing.assert_array_equal(stored[k], v, err_msg=k)
    _, _, meta = drv.nemo_records()
    for k, v in meta["inputs"].items():
        np.testing.assert_array_equal(inputs[k], v, err_msg=f"tests/fixtures/nemo_rl_dpo.npz {k}")


def test_every_framework_output_is_stored(stored):
    assert {r["key"] for r in DATA["results"]} <= set(stored)
    assert {r["framework"] for r in DATA["results"]} == set(DATA["frameworks"]) == {"trl", "openrlhf", "nemo-rl"}


@pytest.mark.parametrize("framework", ["trl", "openrlhf", "nemo-rl"])
def test_recorded_differences_still_hold(stored, framework):
    rows = [r for r in DATA["results"] if r["framework"] == framework]
    assert rows
    cases = drv.cases_of({k: v for k, v in stored.items() if k.startswith("in/")})
    records = [dict(key=r["key"], framework=r["framework"], case=r["case"], kind=r["kind"], params=r["params"],
                    framework_function=r["framework_function"], settings=r["framework_settings"]) for r in rows]
    problems = []
    for old, new in zip(rows, drv.evaluate(records, stored, cases)):
        if new["status"] != old["status"] and "DIFFERS" in (new["status"], old["status"]):
            problems.append(f"{old['key']}: {old['status']} -> {new['status']} (max abs {new['max_abs']:.3g})")
        elif old["status"] == "DIFFERS" and not np.isclose(new["max_abs"], old["max_abs"], rtol=1e-3, atol=1e-6):
            problems.append(f"{old['key']}: the recorded difference {old['max_abs']:.4g} is now {new['max_abs']:.4g}")
        elif not np.isclose(new["default_max_abs"], old["default_max_abs"], rtol=1e-3, atol=1e-5):
            problems.append(f"{old['key']}: difference from dew_rl's default {old['default_max_abs']:.4g} -> "
                            f"{new['default_max_abs']:.4g}")
    assert not problems, "\n".join(problems)


def test_the_comparison_can_fail(stored):
    """TRL's IPO (per-token means) against dew_rl's summed IPO, and TRL's paired AOT against the unpaired one."""
    import dew_rl as rl

    x = drv.cases_of({k: v for k, v in stored.items() if k.startswith("in/")})["a"]
    args = [x[k] for k in ("pc", "pr", "rc", "rr", "mc", "mr")]
    for wrong, key in ((rl.preference_ipo(*args, 0.1), "trl/a/dpo_loss/loss_type=ipo"),
                       (rl.dpo_loss(*args, loss_type="aot_unpaired")[0], "trl/a/dpo_loss/loss_type=aot")):
        assert not drv.conf.agrees(drv.conf.compare(wrong, stored[key]))
    assert drv.conf.agrees(drv.conf.compare(rl.dpo_loss(*args, loss_type="ipo")[0], stored["trl/a/dpo_loss/loss_type=ipo"]))


def test_framework_failures_are_the_recorded_ones():
    """TRL 1.16.0 raises for `sft` with `use_weighting` (an in-place product on an expanded tensor): a finding."""
    assert [f["what"].split(": ", 1)[1] for f in DATA["failed"]] == ["dpo {'loss_type': 'sft', 'use_weighting': True}"] * 2
