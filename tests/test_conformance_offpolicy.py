"""data/conformance_offpolicy.json (tools/conformance_offpolicy.py) is current, and its recorded differences still hold.

No framework is needed: the shared inputs and every framework output are stored in
data/conformance_offpolicy_outputs.npz (verl 0.9.1, TRL 1.16.0, OpenRLHF 0.11.2, run live by the driver) and
tests/fixtures/offpolicy_frameworks.npz (NeMo-RL, slime and AReaL, run from source checkouts by
tools/make_offpolicy_fixtures.py). These tests

- recompute the hash of what decides the live outputs (the driver with its inputs, its adapters, the shared
  adapter helper, the stubs, the refenv pins) and fail when it differs: run the driver again;
- regenerate the inputs and check they are the stored ones (the fixture's cases a and b included);
- recompute dew_rl's side of every comparison and fail when a status changes between agreement and
  difference, or a recorded difference changes: a regression of dew_rl against the frameworks;
- check verl's twenty RolloutCorrectionConfig presets, as verl stored them, against ROLLOUT_CORRECTION_PRESETS.
"""
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("dew_rl_conformance_offpolicy", ROOT / "tools" / "conformance_offpolicy.py")
drv = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(drv)

DATA = json.loads(drv.DATA.read_text())


@pytest.fixture(scope="module")
def stored():
    with np.load(drv.OUTPUTS) as f:
        return {k: f[k] for k in f.files}


@pytest.fixture(scope="module")
def frozen():
    return drv.load_fixture()


def test_data_file_is_current():
    assert DATA["input_hash"] == drv.input_hash(), (
        "data/conformance_offpolicy.json is stale: the driver, an adapter, a stub or a pin changed since it was "
        "written; run `python tools/conformance_offpolicy.py` and commit data/")
    assert DATA["hashed_files"][:-1] == [f.relative_to(ROOT).as_posix() for f in drv.hashed_files()]


def test_outputs_are_small():
    assert drv.OUTPUTS.stat().st_size < 2 ** 20
    assert drv.FIXTURE.with_suffix(".npz").stat().st_size < 2 ** 20


def test_inputs_are_the_stored_ones(stored, frozen):
    inputs = drv.make_inputs()
    assert sorted(k for k in stored if k.startswith("in/")) == sorted(inputs)
    _, fixture_arrays, meta = frozen
    for k, v in inputs.items():
        np.testing.assert_array_equal(stored[k], v, err_msg=k)
        np.testing.assert_array_equal(fixture_arrays[k], v, err_msg=f"fixture {k}")
    assert set(meta["sources"]) == set(drv.FROZEN)
    assert all(len(s["revision"]) == 40 for s in meta["sources"].values())


def test_every_framework_output_is_stored(stored, frozen):
    _, fixture_arrays, _ = frozen
    live = [r for r in DATA["results"] if not r["frozen"]]
    assert {r["key"] for r in live} <= set(stored)
    assert {r["framework"] for r in live} == set(drv.FRAMEWORKS)
    assert {r["key"] for r in DATA["results"] if r["frozen"]} == set(k for k in fixture_arrays if not k.startswith("in/"))


def _recheck(rows, arrays, cases, records):
    problems = []
    for old, new in zip(rows, drv.evaluate(records, arrays, cases)):
        assert old["key"] == new["key"]
        if new["status"] != old["status"] and "DIFFERS" in (new["status"], old["status"]):
            problems.append(f"{old['key']}: {old['status']} -> {new['status']} (max abs {new['max_abs']:.3g})")
        elif old["status"] == "DIFFERS" and not (np.isclose(new["max_abs"], old["max_abs"], rtol=1e-3, atol=1e-6)
                                                 and new["differing"] == old["differing"]):
            problems.append(f"{old['key']}: the recorded difference {old['max_abs']:.4g} {old['differing']} is now "
                            f"{new['max_abs']:.4g} {new['differing']}")
        elif old["status"] == "DIFFERS" and not new["note"]:
            problems.append(f"{old['key']}: a difference without an explanation")
    return problems


@pytest.mark.parametrize("framework", drv.FRAMEWORKS)
def test_live_differences_still_hold(stored, framework):
    rows = [r for r in DATA["results"] if r["framework"] == framework]
    assert rows
    records = [dict(key=r["key"], framework=r["framework"], case=r["case"], kind=r["kind"], params=r["params"],
                    framework_function=r["framework_function"], settings=r["framework_settings"]) for r in rows]
    problems = _recheck(rows, stored, drv.cases_of(stored), records)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("framework", drv.FROZEN)
def test_frozen_differences_still_hold(frozen, framework):
    records, arrays, _ = frozen
    records = [r for r in records if r["framework"] == framework]
    by_key = {r["key"]: r for r in DATA["results"]}
    rows = [by_key[r["key"]] for r in records]
    problems = _recheck(rows, arrays, drv.cases_of(arrays), records)
    assert not problems, "\n".join(problems)


def test_presets_are_verls():
    checked = drv.check_presets(DATA["frameworks"]["verl"]["presets"])
    assert len(checked) == 20 and all(p["agrees"] for p in checked), [p for p in checked if not p["agrees"]]
    import dew_rl as rl
    assert set(rl.ROLLOUT_CORRECTION_PRESETS) == {p["name"] for p in checked}


def test_the_comparison_can_fail(stored):
    """The token weights of verl's sequence-level TIS, and k1 rejection with the band read as a band of rho, are
    far outside round-off."""
    import dew_rl as rl
    x = drv.cases_of(stored)["b"]
    theirs = stored["verl/b/is_weights/level=sequence/norm=0/thr=2.0"]
    wrong = rl.rollout_is_weights(x["old"], x["rollout"], x["mask"], "token", 2.0)[0]
    assert not drv.agrees(drv.compare(wrong, theirs))
    right = rl.rollout_is_weights(x["old"], x["rollout"], x["mask"], "sequence", 2.0)[0]
    assert drv.agrees(drv.compare(right, theirs))
    x = drv.cases_of(stored)["a"]
    theirs = stored["verl/a/rs_mask/opts=token_k1/thr=0.6_1.5"]
    flipped = rl.rollout_rejection_mask(x["old"], x["rollout"], x["mask"], "token_ratio", 1.5, 0.6)[0]
    assert not drv.agrees(drv.compare(flipped, theirs))
    same = rl.rollout_rejection_mask(x["old"], x["rollout"], x["mask"], "token_ratio", 1 / 0.6, 1 / 1.5)[0]
    assert drv.agrees(drv.compare(same, theirs))
