"""Every conformance suite of tools/conformance_harness.py is current, and its recorded agreements and differences hold.

No framework is needed: each suite stored its inputs and every framework output it ran live in its
data/<suite>_outputs.npz, and the outputs of the frameworks run once from source checkouts are frozen in
tests/fixtures/. For every suite these tests

- recompute its staleness hash (the input arrays, its adapters, the shared adapter helper and _trl.py where an
  adapter imports it, the stubs and frozen fixtures it reads, the pins of its environments) and check it, and the sha256 of its two data files, against
  data/conformance_hashes.json: a mismatch means the data are stale (run `python tools/conformance_harness.py
  <suite>`) or were edited by hand;
- regenerate the inputs and check they are the stored ones, and the frozen fixtures' inputs;
- recompute dew_rl's side of every comparison against the stored framework outputs, and fail when one that agreed
  (exactly or to float32 round-off) no longer does, when a recorded difference changes size (or, for a vector of
  metrics, which metrics differ), when the difference from dew_rl's default changes, or when a difference has no
  note: a dew_rl regression against the real frameworks.

The tests after those are the suites' own: what each must have compared, and comparisons that must fail.
"""
import functools
import hashlib
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import conformance_harness as H  # noqa: E402

MANIFEST = json.loads(H.MANIFEST.read_text())
SUITES = list(H.SUITES)
OUTPUT_LIMITS = {"general": 2 * 2 ** 20}   # bytes; every other suite 1 MiB


@functools.cache
def suite(name) -> H.Suite:
    return H.load(name)


@functools.cache
def data(name) -> dict:
    return json.loads(suite(name).data_file.read_text())


@functools.cache
def stored(name) -> dict:
    return H.load_npz(suite(name).outputs_file)


def stored_inputs(name) -> dict:
    return {k: v for k, v in stored(name).items() if k.startswith("in/")}


@functools.cache
def frozen(name) -> tuple:
    "The frozen fixtures' records, arrays and metadata (checked against the stored inputs)."
    return suite(name).frozen_outputs(stored_inputs(name))


def arrays(name) -> dict:
    return {**stored(name), **frozen(name)[1]}


def cases(name) -> dict:
    return H.cases_of(arrays(name))


def rows(name, framework=None) -> list[dict]:
    return [r for r in data(name)["results"] if framework in (None, r["framework"])]


def row(name, **match) -> dict:
    return next(r for r in rows(name) if all(r.get(k, r["params"].get(k)) == v for k, v in match.items()))


# --------------------------------------------------------------------------------------------------------
# Every suite
# --------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", SUITES)
def test_data_is_current(name):
    s, entry = suite(name), MANIFEST["suites"][name]
    assert entry["input_hash"] == s.input_hash(stored_inputs(name)), (
        f"{s.data_file.relative_to(ROOT)} is stale: an adapter, a stub, a frozen fixture or a pin of suite {name} "
        f"changed since it was written; run `python tools/conformance_harness.py {name}` and commit data/")
    assert entry["hashed"] == s.hashed()
    for key, f in (("data", s.data_file), ("outputs", s.outputs_file)):
        assert entry[key] == hashlib.sha256(f.read_bytes()).hexdigest(), f"{f.name} is not the file the hash vouches for"


def test_every_suite_has_one_adapter_layout():
    assert set(MANIFEST["suites"]) == set(SUITES)
    for name in SUITES:
        s = suite(name)
        assert s.name == name
        assert sorted(p.name for p in (H.ADAPTERS / name).glob("*.py")) == sorted(f"{f}_adapter.py" for f in s.frameworks)
    assert sorted(p.name for p in H.ADAPTERS.glob("*.py")) == sorted(["_common.py", *(h.name for h in H.ADAPTER_HELPERS)])


@pytest.mark.parametrize("name", SUITES)
def test_every_helper_an_adapter_imports_is_hashed(name):
    """An adapter that imports a helper module of tools/conformance_adapters/ (`_trl`) has it in its suite's
    staleness hash, and a suite whose adapters import none does not hash it."""
    s = suite(name)
    imported = {m for f in s.frameworks for m in re.findall(r"^(?:from|import) (_\w+)", s.adapter(f).read_text(), re.M)}
    helpers = {p.stem for p in s.hashed_files() if p.parent == H.ADAPTERS}
    assert helpers == imported | {"_common"}, (name, sorted(imported), sorted(helpers))


@pytest.mark.parametrize("name", SUITES)
def test_outputs_are_small(name):
    assert suite(name).outputs_file.stat().st_size < OUTPUT_LIMITS.get(name, 2 ** 20)


@pytest.mark.parametrize("name", SUITES)
def test_inputs_are_the_stored_ones(name):
    inputs = suite(name).make_inputs()
    assert sorted(stored_inputs(name)) == sorted(inputs)
    def scale(key):   # the largest finite magnitude among the float arrays of the same case ("in/b/...")
        case = key.rsplit("/", 1)[0]
        vals = [np.abs(np.asarray(a, np.float64)) for kk, a in inputs.items()
                if kk.rsplit("/", 1)[0] == case and np.issubdtype(np.asarray(a).dtype, np.floating)]
        return max([1.0] + [float(a[np.isfinite(a)].max(initial=0.0)) for a in vals])

    for k, v in inputs.items():
        if np.issubdtype(np.asarray(v).dtype, np.floating):
            # A float32 matmul (NumPy's BLAS picks its kernel by CPU) may round a last bit differently on
            # another machine (seen: the distill suite's logits, 1 ulp, and the log-probs of the case whose
            # logits reach 1e4, ~1e-3): the draw is the same to a few float32 ulps of the case's largest value.
            np.testing.assert_allclose(stored(name)[k], v, rtol=1e-6, atol=4 * np.finfo(np.float32).eps * scale(k),
                                       err_msg=k)
        else:
            np.testing.assert_array_equal(stored(name)[k], v, err_msg=k)
    stored_arrays = {k: stored(name)[k] for k in inputs}
    suite(name).frozen_outputs(stored_arrays)   # the frozen fixtures were made from these inputs (else SystemExit)


@pytest.mark.parametrize("name", SUITES)
def test_every_framework_output_is_stored(name):
    s = suite(name)
    assert {r["key"] for r in rows(name)} <= set(arrays(name))
    assert {r["framework"] for r in rows(name)} == set(data(name)["frameworks"]) | set(s.frozen_names)
    assert set(s.frameworks) <= set(data(name)["frameworks"])
    recorded = {r["key"]: r for r in H.records_of(rows(name))}
    for rec in frozen(name)[0]:   # the frozen records are the ones the data file compared
        assert recorded[rec["key"]] == {k: rec[k] for k in recorded[rec["key"]]}, rec["key"]


def _recheck(old_rows, new_rows) -> list[str]:
    problems = []
    for old, new in zip(old_rows, new_rows):
        assert old["key"] == new["key"]
        if new["status"] != old["status"] and "DIFFERS" in (new["status"], old["status"]):
            problems.append(f"{old['key']}: {old['status']} -> {new['status']} (max abs {new['max_abs']:.3g})")
        elif old["status"] == "DIFFERS" and not (np.isclose(new["max_abs"], old["max_abs"], rtol=1e-3, atol=1e-6)
                                                 and new.get("differing") == old.get("differing")):
            problems.append(f"{old['key']}: the recorded difference {old['max_abs']:.4g} {old.get('differing', '')} is "
                            f"now {new['max_abs']:.4g} {new.get('differing', '')}")
        elif "default_max_abs" in old and not np.isclose(new["default_max_abs"], old["default_max_abs"], rtol=1e-3,
                                                          atol=1e-5):
            problems.append(f"{old['key']}: difference from dew_rl's default {old['default_max_abs']:.4g} -> "
                            f"{new['default_max_abs']:.4g}")
        if old["status"] == "DIFFERS" and not (old.get("note") and new["note"]):
            problems.append(f"{old['key']}: a difference without an explanation")
    return problems


@pytest.mark.parametrize("name, framework", [(n, f) for n in SUITES for f in sorted({r["framework"] for r in rows(n)})])
def test_recorded_results_still_hold(name, framework):
    old = rows(name, framework)
    assert old
    problems = _recheck(old, suite(name).evaluate(H.records_of(old), arrays(name), cases(name)))
    assert not problems, "\n".join(problems)


# --------------------------------------------------------------------------------------------------------
# general: verl, OpenRLHF, Tunix, rlax, TRL
# --------------------------------------------------------------------------------------------------------
def test_general_comparison_can_fail():
    """A wrong convention (token-mean for a sequence mode) is far outside round-off."""
    import dew_rl as rl
    r = row("general", framework="verl", kind="aggregate", mode="seq-mean-token-mean")
    x = cases("general")[r["case"]]
    theirs = stored("general")[r["key"]]
    assert not H.agrees(H.compare(rl.aggregate(x["loss"], x["mask"], "token-mean"), theirs))
    assert H.agrees(H.compare(rl.aggregate(x["loss"], x["mask"], "seq-mean-token-mean"), theirs))


# --------------------------------------------------------------------------------------------------------
# advantages
# --------------------------------------------------------------------------------------------------------
def test_advantages_every_framework_and_estimator_is_compared():
    d = data("advantages")
    assert set(d["frameworks"]) == {"verl", "trl", "areal", "nemo_rl"}
    kinds = {(r["framework"], r["kind"]) for r in d["results"]}
    assert {("verl", k) for k in ("gdpo", "passk", "opo", "gpg", "remax", "otb")} <= kinds
    assert {("trl", "batch_std"), ("trl", "gdpo"), ("areal", "levels")} <= kinds
    assert {("nemo_rl", k) for k in ("grpo_loo", "gdpo", "gae_advantages", "gae_returns")} <= kinds
    # the one failure recorded is a finding: verl's Pass@k refuses a group of one
    failed = [f for m in d["frameworks"].values() for f in m["failed"]]
    assert [f["framework"] for f in failed] == ["verl"] and "Pass@k requires at least 2" in failed[0]["error"]


def test_advantages_comparison_can_fail():
    """AReaL's group-mean, batch-std normalisation is not TRL's batch std, and OPO's unweighted baseline is not verl's."""
    import dew_rl as rl
    x = cases("advantages")["c"]
    keep = x["mask"] > 0
    r = next(r for r in rows("advantages", "areal") if r["case"] == "c"
             and r["params"] == dict(mean_level="group", std_level="batch", leave1out=False, unbiased=True))
    trl_form = np.asarray(rl.batch_std_advantage(x["rewards"], 4, eps=1e-5))[:, None] * keep
    assert not H.agrees(H.compare(trl_form, stored("advantages")[r["key"]], keep))
    r = row("advantages", framework="verl", case="c", kind="opo")
    plain = np.asarray(rl.group_advantage(x["rewards"], 4, normalise_by_std=False))[:, None] * keep
    assert not H.agrees(H.compare(plain, stored("advantages")[r["key"]], keep))


# --------------------------------------------------------------------------------------------------------
# policyloss
# --------------------------------------------------------------------------------------------------------
def test_policyloss_every_framework_is_compared():
    d = data("policyloss")
    assert set(d["frameworks"]) == {"verl", "trl", "openrlhf", "areal", "roll"}
    assert not any(m["failed"] for m in d["frameworks"].values())
    losses = {r["params"].get("loss") for r in d["results"]}
    assert {"gpg", "reinforce_is", "dro", "dppo_tv", "dppo_kl", "geo_mean", "clip_cov", "kl_cov", "vespo", "luspo",
            "delta", "gmpo", "rloo", "dual_clip", "m2po_mask", "topr_terms", "vanilla_terms", "kimi15_terms"} <= losses


def test_policyloss_comparison_can_fail():
    """A DPPO-TV with its thresholds swapped, and a GMPO clipped on both sides, are far outside round-off."""
    import jax.numpy as jnp

    import dew_rl as rl
    x = cases("policyloss")["a"]
    m = x["mask"]
    r = row("policyloss", framework="verl", kind="loss", loss="dppo_tv", lo=0.05, case="a")
    swapped = rl.token_mean(rl.dppo_tv_terms(x["lp"], x["old"], x["adv"], m, 0.1, 0.05, 3.0)[0], m)
    assert not H.agrees(H.compare(swapped, stored("policyloss")[r["key"]]))
    r = row("policyloss", framework="trl", kind="loss", loss="gmpo", case="a")
    both = rl.aggregate(rl.gmpo_terms(jnp.clip(x["lp"] - x["old"], -0.4, 0.4), x["adv_row"], m)[0], m,
                        "seq-mean-token-mean")
    assert not H.agrees(H.compare(both, stored("policyloss")[r["key"]]))


# --------------------------------------------------------------------------------------------------------
# entropy
# --------------------------------------------------------------------------------------------------------
def test_entropy_both_frameworks_ran_everything():
    d = data("entropy")
    assert set(d["frameworks"]) == {"verl", "trl"}
    assert d["frameworks"]["verl"]["failed"] == []
    # the one recorded failure is the finding: torch.quantile refuses more than 2**24 values
    (failure,) = d["frameworks"]["trl"]["failed"]
    assert "quantile() input tensor is too large" in failure["error"]
    kinds = {(r["framework"], r["kind"]) for r in d["results"]}
    assert {("verl", "kl_penalty"), ("verl", "kl_penalty_grad"), ("verl", "kl_reward"), ("trl", "top_entropy_mask"),
            ("trl", "top_entropy_threshold"), ("trl", "entropy_coef"), ("trl", "entropy_bonus_loss")} <= kinds
    assert all(r["status"] != "DIFFERS" for r in d["results"])
    assert all(r["status"] == "exact" for r in rows("entropy", "trl") if r["kind"].startswith("top_entropy"))


def test_entropy_comparison_can_fail():
    """The unfused lerp, numpy's float64 quantile and a strict inequality each miss TRL somewhere."""
    import dew_rl as rl
    st = stored("entropy")
    keys = [r["key"] for r in rows("entropy") if r["kind"] == "top_entropy_threshold"]
    misses = 0
    for key in keys:
        case, rho = key.split("/")[1], float(key.split("rho=")[1])
        H_, m = st[f"in/{case}/H"], st[f"in/{case}/mask"]
        v = np.quantile(H_[m > 0].astype(np.float64), 1 - rho)
        misses += np.float32(v) != np.float32(st[key])
    assert misses > 0
    strict = sum(int(((st[f"in/{k.split('/')[1]}/H"] > st[k]) & (st[f"in/{k.split('/')[1]}/mask"] > 0)).sum()
                     != st[k.replace("threshold", "mask")].sum()) for k in keys)
    assert strict > 0
    # abs's derivative at d = 0: torch's is 0; a naive sign-less abs gradient would be 1
    g = st["verl/a/kl_penalty_grad/estimator=abs"]
    assert g[0, 1] == 0.0 and np.asarray(rl.kl_penalty(st["in/a/lp"], st["in/a/ref"], "abs"))[0, 1] == 0.0


# --------------------------------------------------------------------------------------------------------
# offpolicy
# --------------------------------------------------------------------------------------------------------
def test_offpolicy_fixture_is_small_and_revisioned():
    import conformance_offpolicy as drv
    assert drv.FIXTURE.with_suffix(".npz").stat().st_size < 2 ** 20
    records, fixture_arrays, meta = drv.load_fixture()
    assert set(meta["sources"]) == set(drv.FROZEN)
    assert all(len(s["revision"]) == 40 for s in meta["sources"].values())
    live = [r for r in rows("offpolicy") if not r["frozen"]]
    assert {r["framework"] for r in live} == set(drv.FRAMEWORKS)
    assert {r["key"] for r in rows("offpolicy") if r["frozen"]} == {k for k in fixture_arrays if not k.startswith("in/")}


def test_offpolicy_presets_are_verls():
    import conformance_offpolicy as drv
    import dew_rl as rl
    checked = drv.check_presets(data("offpolicy")["frameworks"]["verl"]["presets"])
    assert len(checked) == 20 and all(p["agrees"] for p in checked), [p for p in checked if not p["agrees"]]
    assert set(rl.ROLLOUT_CORRECTION_PRESETS) == {p["name"] for p in checked}


def test_offpolicy_comparison_can_fail():
    """The token weights of verl's sequence-level TIS, and k1 rejection with the band read as a band of rho, are
    far outside round-off."""
    import dew_rl as rl
    st = stored("offpolicy")
    x = cases("offpolicy")["b"]
    theirs = st["verl/b/is_weights/level=sequence/norm=0/thr=2.0"]
    assert not H.agrees(H.compare(rl.rollout_is_weights(x["old"], x["rollout"], x["mask"], "token", 2.0)[0], theirs))
    assert H.agrees(H.compare(rl.rollout_is_weights(x["old"], x["rollout"], x["mask"], "sequence", 2.0)[0], theirs))
    x = cases("offpolicy")["a"]
    theirs = st["verl/a/rs_mask/opts=token_k1/thr=0.6_1.5"]
    flipped = rl.rollout_rejection_mask(x["old"], x["rollout"], x["mask"], "token_ratio", 1.5, 0.6)[0]
    assert not H.agrees(H.compare(flipped, theirs))
    same = rl.rollout_rejection_mask(x["old"], x["rollout"], x["mask"], "token_ratio", 1 / 0.6, 1 / 1.5)[0]
    assert H.agrees(H.compare(same, theirs))


# --------------------------------------------------------------------------------------------------------
# preference
# --------------------------------------------------------------------------------------------------------
def test_preference_frameworks_and_failures():
    """TRL 1.16.0 raises for `sft` with `use_weighting` (an in-place product on an expanded tensor): a finding."""
    import conformance_preference as drv
    assert drv.NEMO_FIXTURE.stat().st_size < 2 ** 18
    assert {r["framework"] for r in rows("preference")} == set(data("preference")["frameworks"]) == \
        {"trl", "openrlhf", "nemo-rl"}
    assert [f["what"].split(": ", 1)[1] for f in data("preference")["failed"]] == \
        ["dpo {'loss_type': 'sft', 'use_weighting': True}"] * 2


def test_preference_comparison_can_fail():
    """TRL's IPO (per-token means) against dew_rl's summed IPO, and TRL's paired AOT against the unpaired one."""
    import dew_rl as rl
    st = stored("preference")
    x = cases("preference")["a"]
    args = [x[k] for k in ("pc", "pr", "rc", "rr", "mc", "mr")]
    for wrong, key in ((rl.preference_ipo(*args, 0.1), "trl/a/dpo_loss/loss_type=ipo"),
                       (rl.dpo_loss(*args, loss_type="aot_unpaired")[0], "trl/a/dpo_loss/loss_type=aot")):
        assert not H.agrees(H.compare(wrong, st[key]))
    assert H.agrees(H.compare(rl.dpo_loss(*args, loss_type="ipo")[0], st["trl/a/dpo_loss/loss_type=ipo"]))


# --------------------------------------------------------------------------------------------------------
# distill
# --------------------------------------------------------------------------------------------------------
def test_distill_every_framework_is_present_with_its_revision():
    import conformance_distill as drv
    assert set(data("distill")["frameworks"]) == set(drv.FRAMEWORKS)
    meta = json.loads(drv.FIXTURE_META.read_text())
    for name in drv.FROZEN:
        assert data("distill")["frameworks"][name]["revision"] == meta["frameworks"][name]["revision"]
        assert len(data("distill")["frameworks"][name]["revision"]) == 40


def test_distill_headline_agreements():
    """What the chapters state: dew_rl reproduces each framework's default convention to float32 round-off (case a)."""
    ok = {(r["framework"], r["kind"]) for r in rows("distill") if r["case"] == "a" and r["status"] != "DIFFERS"}
    for want in [("verl", "topk_loss"), ("verl", "topk_loss_grad"), ("verl", "pg_loss_grad"),
                 ("verl", "estimator_loss_grad"), ("verl", "sum_pi_squared"), ("trl", "gkd_jsd_grad"),
                 ("trl", "chunked_divergence_grad_weight"), ("nemo_rl", "nemo_distill_grad"),
                 ("nemo_rl", "opd_advantage"), ("nemo_rl", "nemo_support_mask"), ("slime", "opd_advantage"),
                 ("slime", "slime_support_log_probs_grad")]:
        assert want in ok, want


def test_distill_comparison_can_fail():
    """A wrong convention (the tail rule instead of verl's truncated forward KL) is far outside round-off."""
    r = next(r for r in rows("distill") if r["key"].startswith("verl/a/topk_forward_tokens/"))
    side = suite("distill").side(H.records_of([r])[0], cases("distill")["a"])
    assert H.agrees(H.compare(side["conv"], stored("distill")[r["key"]]))
    assert not H.agrees(H.compare(side["default"], stored("distill")[r["key"]]))


# --------------------------------------------------------------------------------------------------------
# frontier
# --------------------------------------------------------------------------------------------------------
def test_frontier_every_framework_ran_everything():
    d = data("frontier")
    assert set(d["frameworks"]) == set(suite("frontier").frameworks)
    assert all(meta["failed"] == [] for meta in d["frameworks"].values())
    kinds = {(r["framework"], r["kind"]) for r in d["results"]}
    assert {("trl", "rloo_advantages"), ("trl", "completion_mask"), ("trl", "astar_loss"), ("trl", "astar_grad"),
            ("trl", "astar_value"), ("openrlhf", "overlong_reward"), ("openrlhf", "stop_properly"),
            ("openrlhf", "raw_reward"), ("areal", "overlong_reward"), ("verl", "kl_loss_term"),
            ("verl", "kl_loss_term_grad"), ("verl", "dynamic_sampling")} == kinds
    assert [r["key"] for r in d["results"] if r["status"] == "DIFFERS"] == ["verl/b/dynamic_sampling"]


def test_frontier_inputs_exercise_each_rule():
    """Truncated, EOS-ended and pad-ended rows; a cleared row changes TRL's KL sum; lengths reach the overlong zone."""
    st = stored("frontier")
    for c, x in cases("frontier").items():
        last = x["tokens"][np.arange(len(x["mask"])), x["mask"].sum(1).astype(int) - 1]
        assert (last == x["eos"]).any() and (last == x["pad"]).any()  # EOS-ended and pad-ended rows
        assert x["truncated"].sum() >= 2 and (x["truncated"] == 0).sum() >= 2
        keep = st[f"trl/{c}/completion_mask/mask_truncated=True"]
        assert (keep.sum(1) == 0).sum() == x["truncated"].sum()  # TRL cleared exactly the sampler's truncated rows
        a0, a1 = (st[f"trl/{c}/rloo_advantages/beta=0.05/mask_truncated={m}"] for m in (False, True))
        assert np.abs(a0 - a1).max() > 1e-3  # the cleared rows' KL left the reward
        for L, buf, _ in x["overlong"]:
            lengths = x["mask"].sum(1)
            assert ((lengths > L - buf) & (lengths < L)).any()  # inside the soft zone


def test_frontier_comparison_can_fail():
    """Plausible mistakes are caught: KL over the unmasked row, a mean instead of TRL's RLOO, a clip missing in
    OpenRLHF's overlong penalty read as AReaL's, V* as a plain mean, the KL loss summed instead of averaged."""
    import dew_rl as rl
    st = stored("frontier")
    x = cases("frontier")["a"]
    m, G = x["mask"], int(x["G"])
    # 1. the sequence KL over every kept token of a truncated row (mask_truncated_completions forgotten)
    wrong = rl.rloo_advantage(rl.kl_shaped_sequence_rewards(x["rewards"], x["old"], x["ref"], m, 0.05, "kl"), G)
    assert not H.agrees(H.compare(np.asarray(wrong), st["trl/a/rloo_advantages/beta=0.05/mask_truncated=True"]))
    # 2. V* as the plain mean of the rewards (the beta -> infinity limit)
    assert not H.agrees(H.compare(x["ref_rewards"].mean(1), st["trl/a/astar_value/beta1=0.5"]))
    # 3. the KL loss with token-sum instead of token-mean
    wrong = 0.1 * float(rl.aggregate(rl.kl_penalty(x["lp"], x["ref"], "low_var_kl"), m, "token-sum"))
    key = "verl/a/kl_loss_term/coef=0.1/kl_loss_type=low_var_kl/loss_agg_mode=token-mean"
    assert not H.agrees(H.compare(wrong, st[key]))
    # 4. the overlong penalty counted on the padded length T instead of the kept tokens
    L, buf, fac = x["overlong"][0]
    wrong = x["rewards"] - fac * np.clip((m.shape[1] - (L - buf)) / buf, 0, 1)
    key = (f"openrlhf/a/overlong_reward/max_response_length={int(L)}/overlong_buffer_len={int(buf)}/"
           f"overlong_penalty_factor={fac}")
    assert not H.agrees(H.compare(wrong, st[key]))
    # 5. stop-properly: scaling also below 0 instead of replacing
    wrong = np.where(x["truncated"] > 0, x["rewards"] * -0.5, x["rewards"])
    assert not H.agrees(H.compare(wrong, st["openrlhf/a/stop_properly/coef=-0.5"]))


def test_frontier_verl_keeps_a_group_of_one():
    """The recorded difference, pinned: verl's filter keeps uid 5 (one trajectory); dew_rl drops it; the rest agree."""
    import dew_rl as rl
    st = stored("frontier")
    theirs, uids, rewards = st["verl/b/dynamic_sampling"], st["in/b/uids"], st["in/b/rewards"]
    ours = np.asarray(rl.dynamic_sampling_mask(rewards, uids)[0])
    single = uids == 5
    assert theirs[single].all() and not ours[single].any()
    np.testing.assert_array_equal(theirs[~single], ours[~single])
    assert not theirs[uids == 1].any()  # the group tied at 0.7 is filtered by both (np.std of equal values is 0)
