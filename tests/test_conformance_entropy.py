"""data/conformance_entropy.json (written by `python tools/conformance_entropy.py`) is current and still holds.

No framework is needed: the inputs and verl's and TRL's outputs are stored in
data/conformance_entropy_outputs.npz. These tests recompute the staleness hash, regenerate the inputs,
recompute dew_rl's side of every comparison and fail when a comparison that agreed (exactly, or to float32
round-off) no longer does: a dew_rl regression against the real frameworks. The top-entropy thresholds
must stay bit-identical to TRL's.
"""
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("dew_rl_conformance_entropy", ROOT / "tools" / "conformance_entropy.py")
drv = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(drv)

DATA = json.loads(drv.DATA.read_text())


@pytest.fixture(scope="module")
def stored():
    with np.load(drv.OUTPUTS) as f:
        return {k: f[k] for k in f.files}


def test_data_file_is_current():
    assert DATA["input_hash"] == drv.input_hash(), (
        "data/conformance_entropy.json is stale: the driver, an adapter or a pin changed; run "
        "`python tools/conformance_entropy.py` and commit data/")


def test_outputs_file_is_small():
    assert drv.OUTPUTS.stat().st_size < 2 ** 20


def test_inputs_are_the_stored_ones(stored):
    inputs = drv.make_inputs()
    assert sorted(k for k in stored if k.startswith("in/")) == sorted(inputs)
    for k, v in inputs.items():
        np.testing.assert_array_equal(stored[k], v, err_msg=k)


def test_both_frameworks_ran_everything():
    assert set(DATA["frameworks"]) == {"verl", "trl"}
    assert DATA["frameworks"]["verl"]["failed"] == []
    # the one recorded failure is the finding: torch.quantile refuses more than 2**24 values
    (failure,) = DATA["frameworks"]["trl"]["failed"]
    assert "quantile() input tensor is too large" in failure["error"]
    kinds = {(r["framework"], r["kind"]) for r in DATA["results"]}
    assert {("verl", "kl_penalty"), ("verl", "kl_penalty_grad"), ("verl", "kl_reward"), ("trl", "top_entropy_mask"),
            ("trl", "top_entropy_threshold"), ("trl", "entropy_coef"), ("trl", "entropy_bonus_loss")} <= kinds


@pytest.mark.parametrize("framework", ["verl", "trl"])
def test_recorded_agreement_still_holds(stored, framework):
    rows = [r for r in DATA["results"] if r["framework"] == framework]
    cases = {c: {k.split("/", 2)[2]: v for k, v in stored.items() if k.startswith(f"in/{c}/")} for c in DATA["cases"]}
    records = [dict(key=r["key"], framework=r["framework"], case=r["case"], kind=r["kind"], params=r["params"],
                    framework_function=r["framework_function"], settings=r["framework_settings"]) for r in rows]
    problems = [f"{old['key']}: {old['status']} -> {new['status']} (max abs {new['max_abs']:.3g})"
                for old, new in zip(rows, drv.evaluate(records, stored, cases))
                if new["status"] != old["status"] and not {new["status"], old["status"]} <= {"exact", "round-off"}]
    assert not problems, "\n".join(problems)
    assert all(r["status"] != "DIFFERS" for r in rows)
    if framework == "trl":
        assert all(r["status"] == "exact" for r in rows if r["kind"].startswith("top_entropy"))


def test_the_comparison_can_fail(stored):
    """The unfused lerp, numpy's float64 quantile and a strict inequality each miss TRL somewhere."""
    import dew_rl as rl
    keys = [r["key"] for r in DATA["results"] if r["kind"] == "top_entropy_threshold"]
    misses = 0
    for key in keys:
        case, rho = key.split("/")[1], float(key.split("rho=")[1])
        H, m = stored[f"in/{case}/H"], stored[f"in/{case}/mask"]
        v = np.quantile(H[m > 0].astype(np.float64), 1 - rho)
        misses += np.float32(v) != np.float32(stored[key])
    assert misses > 0
    strict = sum(int(((stored[f"in/{k.split('/')[1]}/H"] > stored[k]) & (stored[f"in/{k.split('/')[1]}/mask"] > 0)).sum()
                     != stored[k.replace("threshold", "mask")].sum()) for k in keys)
    assert strict > 0
    # abs's derivative at d = 0: torch's is 0; a naive sign-less abs gradient would be 1
    g = stored["verl/a/kl_penalty_grad/estimator=abs"]
    assert g[0, 1] == 0.0 and np.asarray(rl.kl_penalty(stored["in/a/lp"], stored["in/a/ref"], "abs"))[0, 1] == 0.0
