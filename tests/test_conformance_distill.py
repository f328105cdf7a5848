"""data/conformance_distill.json is current, and its recorded agreements and differences still hold.

No framework is needed: tools/conformance_distill.py stored the shared inputs and every framework output
(verl 0.9.1 and TRL 1.16.0 run live, NeMo-RL and slime frozen in tests/fixtures/distill_frameworks.npz) in
data/conformance_distill_outputs.npz. These tests recompute the hash of what decides those outputs, check the
inputs, and recompute dew_rl's side of every comparison: a comparison that agreed to float32 round-off must
still agree, and a recorded difference must keep its size.
"""
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("dew_rl_conformance_distill", ROOT / "tools" / "conformance_distill.py")
drv = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(drv)

DATA = json.loads(drv.DATA.read_text())


@pytest.fixture(scope="module")
def stored():
    with np.load(drv.OUTPUTS) as f:
        return {k: f[k] for k in f.files}


def test_data_file_is_current():
    assert DATA["input_hash"] == drv.input_hash(), (
        "data/conformance_distill.json is stale: the driver, an adapter, the fixture script or a pin changed since it "
        "was written; run `python tools/conformance_distill.py` and commit data/")
    assert DATA["hashed_files"] == [f.relative_to(ROOT).as_posix() for f in drv.hashed_files()]


def test_inputs_are_the_stored_ones_and_the_fixtures(stored):
    inputs = drv.make_inputs()
    assert sorted(k for k in stored if k.startswith("in/")) == sorted(inputs)
    with np.load(drv.FIXTURE) as f:
        for k, v in inputs.items():
            np.testing.assert_array_equal(stored[k], v, err_msg=k)
            np.testing.assert_array_equal(f[k], v, err_msg=f"fixture {k}")


def test_every_framework_is_present_with_its_revision(stored):
    assert set(DATA["frameworks"]) == set(drv.FRAMEWORKS)
    assert {r["key"] for r in DATA["results"]} <= set(stored)
    meta = json.loads(drv.FIXTURE_META.read_text())
    for name in drv.FROZEN:
        assert DATA["frameworks"][name]["revision"] == meta["frameworks"][name]["revision"]
        assert len(DATA["frameworks"][name]["revision"]) == 40


@pytest.mark.parametrize("framework", drv.FRAMEWORKS)
def test_recorded_results_still_hold(stored, framework):
    rows = [r for r in DATA["results"] if r["framework"] == framework]
    assert rows
    cases = drv.cases_of(stored)
    records = [dict(key=r["key"], framework=r["framework"], case=r["case"], kind=r["kind"], params=r["params"],
                    framework_function=r["framework_function"], settings=r["framework_settings"]) for r in rows]
    problems = []
    for old, new in zip(rows, drv.evaluate(records, stored, cases)):
        if new["status"] != old["status"] and "DIFFERS" in (new["status"], old["status"]):
            problems.append(f"{old['key']}: {old['status']} -> {new['status']} (max abs {new['max_abs']:.3g})")
        elif old["status"] == "DIFFERS" and not np.isclose(new["max_abs"], old["max_abs"], rtol=1e-3, atol=1e-6):
            problems.append(f"{old['key']}: the recorded difference {old['max_abs']:.4g} is now {new['max_abs']:.4g}")
        if old["status"] == "DIFFERS" and not old["note"]:
            problems.append(f"{old['key']}: a difference without an explanation")
    assert not problems, "\n".join(problems)


def test_the_headline_agreements():
    """What the chapters state: dew_rl reproduces each framework's default convention to float32 round-off (case a)."""
    ok = {(r["framework"], r["kind"]) for r in DATA["results"] if r["case"] == "a" and r["status"] != "DIFFERS"}
    for want in [("verl", "topk_loss"), ("verl", "topk_loss_grad"), ("verl", "pg_loss_grad"), ("verl", "estimator_loss_grad"),
                 ("verl", "sum_pi_squared"), ("trl", "gkd_jsd_grad"), ("trl", "chunked_divergence_grad_weight"),
                 ("nemo_rl", "nemo_distill_grad"), ("nemo_rl", "opd_advantage"), ("nemo_rl", "nemo_support_mask"),
                 ("slime", "opd_advantage"), ("slime", "slime_support_log_probs_grad")]:
        assert want in ok, want


def test_the_comparison_can_fail(stored):
    """A wrong convention (the tail rule instead of verl's truncated forward KL) is far outside round-off."""
    row = next(r for r in DATA["results"] if r["key"].startswith("verl/a/topk_forward_tokens/"))
    x = drv.cases_of(stored)["a"]
    side = drv.dew_rl_side("verl", row["kind"], row["params"], x)
    assert drv.conf.agrees(drv.conf.compare(side["conv"], stored[row["key"]]))
    assert not drv.conf.agrees(drv.conf.compare(side["default"], stored[row["key"]]))
