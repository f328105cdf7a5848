"""data/conformance_policyloss.json (written by tools/conformance_policyloss.py) is current, and its findings still hold.

No framework is needed: the driver stored the inputs and every framework output (verl 0.9.1, TRL 1.16.0,
OpenRLHF 0.11.2, AReaL 1.0.4 live; alibaba/ROLL from its frozen fixture) in data/conformance_policyloss_outputs.npz.
These tests recompute the hash of everything that decides those outputs, regenerate the inputs, and recompute
dew_rl's side of every comparison: a comparison that agreed to float32 round-off must still agree, and a recorded
difference must keep its size.
"""
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("dew_rl_policyloss_driver", ROOT / "tools" / "conformance_policyloss.py")
drv = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(drv)
DATA = json.loads(drv.DATA.read_text())


@pytest.fixture(scope="module")
def stored():
    with np.load(drv.OUTPUTS) as f:
        return {k: f[k] for k in f.files}


def test_data_file_is_current():
    assert DATA["input_hash"] == drv.input_hash(), (
        "data/conformance_policyloss.json is stale: the driver, an adapter, a stub, the ROLL fixture script or a "
        "pin changed; run `python tools/conformance_policyloss.py` and commit data/")
    assert DATA["hashed_files"] == [f.relative_to(ROOT).as_posix() for f in drv.hashed_files()]


def test_inputs_are_the_stored_ones(stored):
    inputs = drv.make_inputs()
    assert sorted(k for k in stored if k.startswith("in/")) == sorted(inputs)
    for k, v in inputs.items():
        np.testing.assert_array_equal(stored[k], v, err_msg=k)
    with np.load(drv.ROLL_FIXTURE) as f:   # the frozen ROLL outputs were made from these inputs
        for k, v in inputs.items():
            np.testing.assert_array_equal(f[k], v, err_msg=f"ROLL fixture {k}")


def test_every_framework_is_compared():
    assert set(DATA["frameworks"]) == {"verl", "trl", "openrlhf", "areal", "roll"}
    assert not any(m["failed"] for m in DATA["frameworks"].values())
    losses = {r["params"].get("loss") for r in DATA["results"]}
    assert {"gpg", "reinforce_is", "dro", "dppo_tv", "dppo_kl", "geo_mean", "clip_cov", "kl_cov", "vespo", "luspo",
            "delta", "gmpo", "rloo", "dual_clip", "m2po_mask", "topr_terms", "vanilla_terms", "kimi15_terms"} <= losses


@pytest.mark.parametrize("framework", ["verl", "trl", "openrlhf", "areal", "roll"])
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
    """A DPPO-TV with its thresholds swapped, and a GMPO clipped on both sides, are far outside round-off."""
    import jax.numpy as jnp
    import dew_rl as rl
    x = drv.cases_of(stored)["a"]
    row = next(r for r in DATA["results"] if r["framework"] == "verl" and r["kind"] == "loss"
               and r["params"].get("loss") == "dppo_tv" and r["params"]["lo"] == 0.05 and r["case"] == "a")
    m = x["mask"]
    swapped = rl.token_mean(rl.dppo_tv_terms(x["lp"], x["old"], x["adv"], m, 0.1, 0.05, 3.0)[0], m)
    assert not drv.conf.agrees(drv.conf.compare(swapped, stored[row["key"]]))
    row = next(r for r in DATA["results"] if r["framework"] == "trl" and r["kind"] == "loss"
               and r["params"].get("loss") == "gmpo" and r["case"] == "a")
    both = rl.aggregate(rl.gmpo_terms(jnp.clip(x["lp"] - x["old"], -0.4, 0.4), x["adv_row"], m)[0], m, "seq-mean-token-mean")
    assert not drv.conf.agrees(drv.conf.compare(both, stored[row["key"]]))
