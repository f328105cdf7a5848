"""data/conformance_frontier.json (written by `python tools/conformance_frontier.py`) is current and still holds.

No framework is needed: the inputs and the outputs of verl, TRL, OpenRLHF and AReaL are stored in
data/conformance_frontier_outputs.npz. These tests recompute the staleness hash, regenerate the inputs, recompute
dew_rl's side of every comparison, and fail when a comparison that agreed (exactly, or to float32 round-off) no
longer does: a dew_rl regression against the real frameworks. The one recorded difference (verl keeps a group of
one trajectory) must stay the only one, and each comparison is shown able to fail on a plausible mistake.
"""
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("dew_rl_conformance_frontier", ROOT / "tools" / "conformance_frontier.py")
drv = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(drv)

DATA = json.loads(drv.DATA.read_text())


@pytest.fixture(scope="module")
def stored():
    with np.load(drv.OUTPUTS) as f:
        return {k: f[k] for k in f.files}


def _cases(stored):
    return {c: {k.split("/", 2)[2]: v for k, v in stored.items() if k.startswith(f"in/{c}/")} for c in DATA["cases"]}


def test_data_file_is_current():
    assert DATA["input_hash"] == drv.input_hash(), (
        "data/conformance_frontier.json is stale: the driver, an adapter or a pin changed; run "
        "`python tools/conformance_frontier.py` and commit data/")


def test_outputs_file_is_small():
    assert drv.OUTPUTS.stat().st_size < 2 ** 20


def test_inputs_are_the_stored_ones(stored):
    inputs = drv.make_inputs()
    assert sorted(k for k in stored if k.startswith("in/")) == sorted(inputs)
    for k, v in inputs.items():
        np.testing.assert_array_equal(stored[k], v, err_msg=k)


def test_every_framework_ran_everything():
    assert set(DATA["frameworks"]) == set(drv.FRAMEWORKS)
    assert all(meta["failed"] == [] for meta in DATA["frameworks"].values())
    kinds = {(r["framework"], r["kind"]) for r in DATA["results"]}
    assert {("trl", "rloo_advantages"), ("trl", "completion_mask"), ("trl", "astar_loss"), ("trl", "astar_grad"),
            ("trl", "astar_value"), ("openrlhf", "overlong_reward"), ("openrlhf", "stop_properly"),
            ("openrlhf", "raw_reward"), ("areal", "overlong_reward"), ("verl", "kl_loss_term"),
            ("verl", "kl_loss_term_grad"), ("verl", "dynamic_sampling")} == kinds


@pytest.mark.parametrize("framework", drv.FRAMEWORKS)
def test_recorded_agreement_still_holds(stored, framework):
    rows = [r for r in DATA["results"] if r["framework"] == framework]
    records = [dict(key=r["key"], framework=r["framework"], case=r["case"], kind=r["kind"], params=r["params"],
                    framework_function=r["framework_function"], settings=r["framework_settings"]) for r in rows]
    problems = [f"{old['key']}: {old['status']} -> {new['status']} (max abs {new['max_abs']:.3g})"
                for old, new in zip(rows, drv.evaluate(records, stored, _cases(stored)))
                if new["status"] != old["status"] and not {new["status"], old["status"]} <= {"exact", "round-off"}]
    assert not problems, "\n".join(problems)
    differs = [r["key"] for r in rows if r["status"] == "DIFFERS"]
    assert differs == (["verl/b/dynamic_sampling"] if framework == "verl" else []), differs


def test_the_inputs_exercise_each_rule(stored):
    """Truncated, EOS-ended and pad-ended rows; a cleared row changes TRL's KL sum; lengths reach the overlong zone."""
    for c, x in _cases(stored).items():
        last = x["tokens"][np.arange(len(x["mask"])), x["mask"].sum(1).astype(int) - 1]
        assert (last == x["eos"]).any() and (last == x["pad"]).any()  # EOS-ended and pad-ended rows
        assert x["truncated"].sum() >= 2 and (x["truncated"] == 0).sum() >= 2
        keep = stored[f"trl/{c}/completion_mask/mask_truncated=True"]
        assert (keep.sum(1) == 0).sum() == x["truncated"].sum()  # TRL cleared exactly the sampler's truncated rows
        a0, a1 = (stored[f"trl/{c}/rloo_advantages/beta=0.05/mask_truncated={m}"] for m in (False, True))
        assert np.abs(a0 - a1).max() > 1e-3  # the cleared rows' KL left the reward
        for L, buf, _ in x["overlong"]:
            lengths = x["mask"].sum(1)
            assert ((lengths > L - buf) & (lengths < L)).any()  # inside the soft zone


def test_the_comparison_can_fail(stored):
    """Plausible mistakes are caught: KL over the unmasked row, a mean instead of TRL's RLOO, a clip missing in
    OpenRLHF's overlong penalty read as AReaL's, V* as a plain mean, the KL loss summed instead of averaged."""
    import dew_rl as rl

    x = _cases(stored)["a"]
    m, G = x["mask"], int(x["G"])
    # 1. the sequence KL over every kept token of a truncated row (mask_truncated_completions forgotten)
    wrong = rl.rloo_advantage(rl.kl_shaped_sequence_rewards(x["rewards"], x["old"], x["ref"], m, 0.05, "kl"), G)
    theirs = stored["trl/a/rloo_advantages/beta=0.05/mask_truncated=True"]
    assert not drv.conf.agrees(drv.conf.compare(np.asarray(wrong), theirs))
    # 2. V* as the plain mean of the rewards (the beta -> infinity limit)
    R = x["ref_rewards"]
    assert not drv.conf.agrees(drv.conf.compare(R.mean(1), stored["trl/a/astar_value/beta1=0.5"]))
    # 3. the KL loss with token-sum instead of token-mean
    wrong = 0.1 * float(rl.aggregate(rl.kl_penalty(x["lp"], x["ref"], "low_var_kl"), m, "token-sum"))
    key = "verl/a/kl_loss_term/coef=0.1/kl_loss_type=low_var_kl/loss_agg_mode=token-mean"
    assert not drv.conf.agrees(drv.conf.compare(wrong, stored[key]))
    # 4. the overlong penalty counted on the padded length T instead of the kept tokens
    L, buf, fac = x["overlong"][0]
    wrong = x["rewards"] - fac * np.clip((m.shape[1] - (L - buf)) / buf, 0, 1)
    key = f"openrlhf/a/overlong_reward/max_response_length={int(L)}/overlong_buffer_len={int(buf)}/overlong_penalty_factor={fac}"
    assert not drv.conf.agrees(drv.conf.compare(wrong, stored[key]))
    # 5. stop-properly: scaling also below 0 instead of replacing
    wrong = np.where(x["truncated"] > 0, x["rewards"] * -0.5, x["rewards"])
    assert not drv.conf.agrees(drv.conf.compare(wrong, stored["openrlhf/a/stop_properly/coef=-0.5"]))


def test_verl_keeps_a_group_of_one():
    """The recorded difference, pinned: verl's filter keeps uid 5 (one trajectory); dew_rl drops it; the rest agree."""
    with np.load(drv.OUTPUTS) as f:
        theirs, uids, rewards = f["verl/b/dynamic_sampling"], f["in/b/uids"], f["in/b/rewards"]
    import dew_rl as rl
    ours = np.asarray(rl.dynamic_sampling_mask(rewards, uids)[0])
    single = uids == 5
    assert theirs[single].all() and not ours[single].any()
    np.testing.assert_array_equal(theirs[~single], ours[~single])
    assert not theirs[uids == 1].any()  # the group tied at 0.7 is filtered by both (np.std of equal values is 0)
