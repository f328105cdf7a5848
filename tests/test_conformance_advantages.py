"""data/conformance_advantages.json (written by tools/conformance_advantages.py) is current, and its findings still hold.

No framework is needed: the driver stored the inputs and every framework output (verl 0.9.1, TRL 1.16.0, AReaL 1.0.4
live; NeMo-RL@7ea279abfbeb from its frozen fixture) in data/conformance_advantages_outputs.npz. These tests recompute
the hash of everything that decides those outputs, regenerate the inputs, and recompute dew_rl's side of every
comparison: a comparison that agreed to float32 round-off must still agree, and a recorded difference must keep its
size.
"""
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("dew_rl_advantages_driver", ROOT / "tools" / "conformance_advantages.py")
drv = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(drv)
DATA = json.loads(drv.DATA.read_text())
FRAMEWORKS = ["verl", "trl", "areal", "nemo_rl"]


@pytest.fixture(scope="module")
def stored():
    with np.load(drv.OUTPUTS) as f:
        return {k: f[k] for k in f.files}


def test_data_file_is_current():
    assert DATA["input_hash"] == drv.input_hash(), (
        "data/conformance_advantages.json is stale: the driver, an adapter, a stub, the NeMo-RL fixture script or a "
        "pin changed; run `python tools/conformance_advantages.py` and commit data/")
    assert DATA["hashed_files"] == [f.relative_to(ROOT).as_posix() for f in drv.hashed_files()]


def test_inputs_are_the_stored_ones(stored):
    inputs = drv.make_inputs()
    assert sorted(k for k in stored if k.startswith("in/")) == sorted(inputs)
    for k, v in inputs.items():
        np.testing.assert_array_equal(stored[k], v, err_msg=k)
    with np.load(drv.NEMO_FIXTURE) as f:  # the frozen NeMo-RL outputs were made from these inputs
        for k, v in inputs.items():
            np.testing.assert_array_equal(f[k], v, err_msg=f"NeMo-RL fixture {k}")


def test_every_framework_and_estimator_is_compared():
    assert set(DATA["frameworks"]) == set(FRAMEWORKS)
    kinds = {(r["framework"], r["kind"]) for r in DATA["results"]}
    assert {("verl", k) for k in ("gdpo", "passk", "opo", "gpg", "remax", "otb")} <= kinds
    assert {("trl", "batch_std"), ("trl", "gdpo"), ("areal", "levels")} <= kinds
    assert {("nemo_rl", k) for k in ("grpo_loo", "gdpo", "gae_advantages", "gae_returns")} <= kinds
    # the one failure recorded is a finding: verl's Pass@k refuses a group of one
    failed = [f for m in DATA["frameworks"].values() for f in m["failed"]]
    assert [f["framework"] for f in failed] == ["verl"] and "Pass@k requires at least 2" in failed[0]["error"]


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_recorded_findings_still_hold(stored, framework):
    rows = [r for r in DATA["results"] if r["framework"] == framework]
    records = [dict(key=r["key"], framework=r["framework"], case=r["case"], kind=r["kind"], params=r["params"],
                    framework_function=r["framework_function"], settings=r["framework_settings"]) for r in rows]
    problems = []
    for old, new in zip(rows, drv.evaluate(records, stored, drv.cases_of(stored))):
        if new["status"] != old["status"] and "DIFFERS" in (new["status"], old["status"]):
            problems.append(f"{old['key']}: {old['status']} -> {new['status']} (max abs {new['max_abs']:.3g})")
        elif old["status"] == "DIFFERS" and not np.isclose(new["max_abs"], old["max_abs"], rtol=1e-3, atol=1e-6):
            problems.append(f"{old['key']}: the recorded difference {old['max_abs']:.4g} is now {new['max_abs']:.4g}")
    assert not problems, "\n".join(problems)


def test_only_documented_differences():
    bad = [r["key"] for r in DATA["results"] if r["status"] == "DIFFERS" and not r["note"]]
    assert not bad, bad


def test_the_comparison_can_fail(stored):
    """AReaL's group-mean, batch-std normalisation is not TRL's batch std, and OPO's unweighted baseline is not verl's."""
    import dew_rl as rl
    x = drv.cases_of(stored)["c"]
    keep = x["mask"] > 0
    row = next(r for r in DATA["results"] if r["framework"] == "areal" and r["case"] == "c"
               and r["params"] == dict(mean_level="group", std_level="batch", leave1out=False, unbiased=True))
    trl_form = np.asarray(rl.batch_std_advantage(x["rewards"], 4, eps=1e-5))[:, None] * keep
    assert not drv.conf.agrees(drv.conf.compare(trl_form, stored[row["key"]], keep))
    row = next(r for r in DATA["results"] if r["framework"] == "verl" and r["case"] == "c" and r["kind"] == "opo")
    plain = np.asarray(rl.group_advantage(x["rewards"], 4, normalise_by_std=False))[:, None] * keep
    assert not drv.conf.agrees(drv.conf.compare(plain, stored[row["key"]], keep))
