"""data/crosswalk.json (nbs/06c_crosswalk) and `dew_rl.objectives.from_verl`.

The table's validation is tools/crosswalk.py's; each test below also feeds it a broken copy, so that a
check that stopped checking fails here. `from_verl` is checked against realistic verl configs (the
expected configurations written by hand with the entry points) and against every verl row of the
crosswalk: each option is honoured (set away from verl's default, it moves the field the row names),
refused with a message that names it, or ignored because it is no loss setting.
"""
import copy
import math
from pathlib import Path

import pytest

import dew_rl
import dew_rl.objectives as obj

from validated_tables import load_tool, rejects

ROOT = Path(__file__).resolve().parent.parent
cw = load_tool("crosswalk")

EXPECTED = {"verl": 54, "TRL": 51, "OpenRLHF": 26}


@pytest.fixture(scope="module")
def rows():
    return cw.load()


def _fails(rows, mutate, match):
    rejects(cw.validate, rows, mutate, match)


def _row(rows, option):
    return next(i for i, r in enumerate(rows) if r["option"] == option)


def test_the_table_validates(rows):
    assert cw.validate(rows) == EXPECTED
    for fw, n in EXPECTED.items():   # every row is rendered on the page, in its framework's tables
        rendered = "\n".join(cw.render_section(rows, fw, s) for s in cw.sections(rows, fw))
        assert rendered.count("\n| [`") == n, fw


def test_validation_catches_a_target_that_does_not_exist(rows):
    i = _row(rows, "actor_rollout_ref.actor.clip_ratio_low")
    _fails(rows, lambda b: b[i]["dew_rl"].append("ObjectiveConfig.clip_ratio_lower"), r"has no field 'clip_ratio_lower'")
    _fails(rows, lambda b: b[i]["dew_rl"].append("dew_rl.no_such_function"), r"not in dew_rl.__all__")
    _fails(rows, lambda b: b[i]["dew_rl"].append("dew_rl.objectives.no_such_entry"), r"not in dew_rl.objectives.__all__")
    _fails(rows, lambda b: b[i]["dew_rl"].append("Rollout.no_such_array"), r"Rollout has no field")


def test_validation_catches_a_chapter_that_does_not_name_the_option(rows):
    i = _row(rows, "GRPOConfig.vllm_importance_sampling_correction")
    _fails(rows, lambda b: b[i].__setitem__("chapter", "02a_gae"), r"chapter 02a_gae never names 'vllm_importance_sampling_correction'")
    _fails(rows, lambda b: b[i].__setitem__("chapter", "no_such_chapter"), r"no chapter nbs/no_such_chapter.ipynb")


def test_validation_catches_a_source_at_another_revision(rows):
    i = _row(rows, "algorithm.adv_estimator")
    src = rows[i]["source"]
    _fails(rows, lambda b: b[i].__setitem__("source", src.replace("1dda039b9c63", "483b8a009aaa")), r"is not verl-project/verl@1dda039b9c63")
    _fails(rows, lambda b: b[i].__setitem__("source", src.rsplit(":", 1)[0]), r"path:line")


def test_validation_catches_a_wrong_status(rows):
    same = _row(rows, "actor_rollout_ref.actor.entropy_coeff")
    _fails(rows, lambda b: b[same]["dew_rl"].__setitem__(0, "ObjectiveConfig.kl_coef"), r"no dew_rl target is spelled 'entropy_coeff'")
    none = next(i for i, r in enumerate(rows) if r["status"] == "none")
    _fails(rows, lambda b: b[none]["dew_rl"].append("ObjectiveConfig.gamma"), r"status 'none' but names")
    _fails(rows, lambda b: b[none].__setitem__("note", " "), r"needs a note")
    _fails(rows, lambda b: b[none].__setitem__("status", "maybe"), r"status 'maybe'")
    _fails(rows, lambda b: b.append(copy.deepcopy(b[none])), r"duplicate option")


def test_every_same_row_is_the_field_of_that_name(rows):
    for r in rows:
        if r["status"] == "same" and r["dew_rl"][0].startswith("ObjectiveConfig."):
            assert r["dew_rl"][0] == f"ObjectiveConfig.{r['name'].rpartition('.')[2]}", r["option"]


# --------------------------------------------------------------------------- from_verl on realistic configs
AC = "actor_rollout_ref.actor."

REALISTIC = [
    ("grpo", {"algorithm": {"adv_estimator": "grpo"},
              "actor_rollout_ref": {"rollout": {"n": 5}, "actor": {"use_kl_loss": True, "kl_loss_coef": 0.001,
                                                                   "kl_loss_type": "low_var_kl", "entropy_coeff": 0,
                                                                   "ppo_mini_batch_size": 256, "optim": {"lr": 1e-6}}}},
     lambda: obj.grpo(n_samples_per_prompt=5, loss_agg_mode="token-mean", clip_ratio_c=3.0, use_kl_loss=True,
                      kl_loss_coef=0.001, kl_loss_type="low_var_kl")),
    ("dr_grpo", {"algorithm.adv_estimator": "grpo", "algorithm.norm_adv_by_std_in_grpo": False,
                 "actor_rollout_ref.rollout.n": 4, AC + "loss_agg_mode": "seq-mean-token-sum-norm", AC + "loss_scale_factor": 4096},
     lambda: obj.grpo(n_samples_per_prompt=4, norm_adv_by_std_in_grpo=False, loss_agg_mode="seq-mean-token-sum-norm",
                      loss_agg_norm=4096.0)),
    ("dapo", {"algorithm": {"adv_estimator": "grpo", "filter_groups": {"enable": True, "metric": "acc", "max_num_gen_batches": 10}},
              "actor_rollout_ref": {"rollout": {"n": 16}, "actor": {"clip_ratio_low": 0.2, "clip_ratio_high": 0.28,
                                                                    "clip_ratio_c": 10.0, "loss_agg_mode": "token-mean"}},
              "reward": {"reward_kwargs": {"max_resp_len": 20480,
                                           "overlong_buffer_cfg": {"enable": True, "len": 4096, "penalty_factor": 1.0}}}},
     lambda: obj.dapo(n_samples_per_prompt=16, clip_ratio_low=0.2, clip_ratio_high=0.28, clip_ratio_c=10.0,
                      dynamic_sampling=True, overlong_buffer_len=4096, overlong_penalty_factor=1.0,
                      max_response_length=20480, loss_agg_mode="token-mean")),
    ("ppo_gae", {"algorithm": {"adv_estimator": "gae", "gamma": 1.0, "lam": 0.95, "use_kl_in_reward": True,
                               "kl_ctrl": {"type": "fixed", "kl_coef": 0.002}},
                 "critic": {"cliprange_value": 0.5, "optim": {"lr": 1e-5}}, "trainer": {"n_gpus_per_node": 8}},
     lambda: obj.ppo(gamma=1.0, lam=0.95, kl_coef=0.002, kl_penalty="kl", cliprange_value=0.5, vf_coef=1.0,
                     clip_ratio_c=3.0, loss_agg_mode="token-mean")),
    ("gspo", {"algorithm.adv_estimator": "grpo", "actor_rollout_ref.rollout.n": 8, AC + "policy_loss.loss_mode": "gspo",
              AC + "clip_ratio_low": 3e-4, AC + "clip_ratio_high": 4e-4, AC + "loss_agg_mode": "token-mean"},
     # verl's gspo ignores loss_agg_mode (seq-mean-token-mean) and has no dual clip
     lambda: obj.gspo(n_samples_per_prompt=8, clip_ratio_low=3e-4, clip_ratio_high=4e-4, clip_ratio_c=None,
                      loss_agg_mode="seq-mean-token-mean")),
    ("token_tis", {"algorithm": {"adv_estimator": "grpo", "rollout_correction": {"rollout_is": "token", "rollout_is_threshold": 2.0}},
                   "actor_rollout_ref": {"rollout": {"n": 8}}},
     lambda: obj.grpo(n_samples_per_prompt=8, loss_agg_mode="token-mean", rollout_is="token", rollout_is_threshold=2.0)),
    ("seq_tis_k1_rs", {"algorithm": {"adv_estimator": "rloo", "rollout_correction": {
                           "rollout_is": "sequence", "rollout_is_threshold": "2.0", "rollout_is_batch_normalize": True,
                           "rollout_rs": "token_k1,seq_max_k3", "rollout_rs_threshold": "0.5_2.0,0.01"}},
                       "actor_rollout_ref": {"rollout": {"n": 4}}},
     lambda: obj.rloo(n_samples_per_prompt=4, loss_agg_mode="token-mean", rollout_is="sequence", rollout_is_threshold=2.0,
                      rollout_is_batch_normalize=True, rollout_rs="token_k1,seq_max_k3",
                      rollout_rs_threshold=(2.0, 0.01), rollout_rs_threshold_lower=(0.5, None))),
    ("bypass_pg_is", {"algorithm.adv_estimator": "grpo", "actor_rollout_ref.rollout.n": 8,
                      "algorithm.rollout_correction.rollout_is": "sequence", "algorithm.rollout_correction.bypass_mode": True,
                      "algorithm.rollout_correction.loss_type": "reinforce"},
     lambda: obj.grpo(n_samples_per_prompt=8, loss_agg_mode="token-mean", loss_mode="reinforce", bypass_mode=True,
                      rollout_is="sequence", rollout_is_threshold=2.0)),
    ("cispo", {"algorithm.adv_estimator": "grpo", "actor_rollout_ref.rollout.n": 8, "actor.policy_loss.loss_mode": "cispo",
               "actor.clip_ratio": 0.3, "actor.clip_ratio_low": None, "actor.clip_ratio_high": 4.0},
     lambda: obj.cispo(n_samples_per_prompt=8, cispo_epsilon_low=0.3, cispo_epsilon_high=4.0, loss_agg_mode="token-mean")),
]


@pytest.mark.parametrize("name, verl, expected", REALISTIC, ids=[c[0] for c in REALISTIC])
def test_from_verl_gives_the_hand_written_config(name, verl, expected):
    assert obj.from_verl(verl) == expected()


def test_nested_and_dotted_keys_are_the_same_config():
    nested = REALISTIC[2][1]
    dotted = {"algorithm.adv_estimator": "grpo", "algorithm.filter_groups.enable": True,
              "actor_rollout_ref.rollout.n": 16, "actor_rollout_ref.actor.clip_ratio_high": 0.28,
              "actor_rollout_ref.actor.clip_ratio_c": 10.0, "reward.reward_kwargs.max_resp_len": 20480,
              "reward.reward_kwargs.overlong_buffer_cfg.enable": True, "reward.reward_kwargs.overlong_buffer_cfg.len": 4096}
    assert obj.from_verl(nested) == obj.from_verl(dotted)


def test_verl_defaults_not_the_recipe_defaults():
    cfg = obj.from_verl({"algorithm.adv_estimator": "gae"})
    assert (cfg.lam, cfg.cliprange_value, cfg.vf_coef, cfg.loss_agg_mode) == (1.0, 0.5, 1.0, "token-mean")
    assert cfg != obj.ppo()
    assert obj.from_verl({"algorithm.adv_estimator": "grpo", "actor_rollout_ref.rollout.n": 8}).loss_agg_mode == "token-mean"


# --------------------------------------------------------------------------- from_verl against every verl row
BASE = {"algorithm.adv_estimator": "grpo", "actor_rollout_ref.rollout.n": 4}
GAE = {"algorithm.adv_estimator": "gae"}
RC = "algorithm.rollout_correction."
IS = {**BASE, RC + "rollout_is": "token"}
# option -> (base, value, the field that moves, its value); the row's dew_rl targets must name that field
HONOURED = {
    "algorithm.adv_estimator": (BASE, "rloo", "advantage_estimator", "rloo"),
    "algorithm.gamma": (GAE, 0.9, "gamma", 0.9),
    "algorithm.lam": (GAE, 0.9, "lam", 0.9),
    "algorithm.norm_adv_by_std_in_grpo": (BASE, False, "norm_adv_by_std_in_grpo", False),
    "algorithm.use_kl_in_reward": (GAE, True, "kl_coef", 0.001),
    "algorithm.kl_penalty": ({**GAE, "algorithm.use_kl_in_reward": True}, "low_var_kl", "kl_penalty", "low_var_kl"),
    "algorithm.kl_ctrl.kl_coef": ({**GAE, "algorithm.use_kl_in_reward": True}, 0.05, "kl_coef", 0.05),
    "algorithm.filter_groups.enable": (BASE, True, "dynamic_sampling", True),
    "algorithm.gdpo_reward_weights": ({**BASE, "algorithm.adv_estimator": "gdpo"}, [1.0, 0.5], "gdpo_reward_weights", (1.0, 0.5)),
    RC + "rollout_is": (BASE, "sequence", "rollout_is", "sequence"),
    RC + "rollout_is_threshold": (IS, "0.5_3.0", "rollout_is_threshold_lower", 0.5),
    RC + "rollout_is_batch_normalize": (IS, True, "rollout_is_batch_normalize", True),
    RC + "rollout_rs": ({**BASE, RC + "rollout_rs_threshold": 0.01}, "token_k3", "rollout_rs", "token_k3"),
    RC + "rollout_rs_threshold": ({**BASE, RC + "rollout_rs": "token_k2"}, 0.02, "rollout_rs_threshold", 0.02),
    RC + "bypass_mode": (BASE, True, "bypass_mode", True),
    RC + "loss_type": ({**BASE, RC + "bypass_mode": True}, "reinforce", "loss_mode", "reinforce"),
    AC + "clip_ratio": ({**BASE, AC + "clip_ratio_low": None, AC + "clip_ratio_high": None}, 0.3, "clip_ratio_low", 0.3),
    AC + "clip_ratio_low": (BASE, 0.1, "clip_ratio_low", 0.1),
    AC + "clip_ratio_high": (BASE, 0.28, "clip_ratio_high", 0.28),
    AC + "clip_ratio_c": (BASE, 10.0, "clip_ratio_c", 10.0),
    AC + "loss_agg_mode": (BASE, "seq-mean-token-sum", "loss_agg_mode", "seq-mean-token-sum"),
    AC + "loss_scale_factor": ({**BASE, AC + "loss_agg_mode": "seq-mean-token-sum-norm"}, 512, "loss_agg_norm", 512.0),
    AC + "entropy_coeff": (BASE, 0.01, "entropy_coeff", 0.01),
    AC + "tau_pos": ({**BASE, AC + "policy_loss.loss_mode": "sapo", AC + "loss_agg_mode": "seq-mean-token-mean"}, 2.0, "tau_pos", 2.0),
    AC + "tau_neg": ({**BASE, AC + "policy_loss.loss_mode": "sapo"}, 2.0, "tau_neg", 2.0),
    AC + "use_kl_loss": (BASE, True, "use_kl_loss", True),
    AC + "kl_loss_coef": ({**BASE, AC + "use_kl_loss": True}, 0.01, "kl_loss_coef", 0.01),
    AC + "kl_loss_type": ({**BASE, AC + "use_kl_loss": True}, "k2", "kl_loss_type", "k2"),
    AC + "policy_loss.loss_mode": (BASE, "dppo_tv", "loss_mode", "dppo_tv"),
    AC + "policy_loss.clip_cov_ratio": ({**BASE, AC + "policy_loss.loss_mode": "clip_cov"}, 0.001, "clip_cov_ratio", 0.001),
    AC + "policy_loss.clip_cov_lb": ({**BASE, AC + "policy_loss.loss_mode": "clip_cov"}, 0.5, "clip_cov_lb", 0.5),
    AC + "policy_loss.clip_cov_ub": ({**BASE, AC + "policy_loss.loss_mode": "clip_cov"}, 4.0, "clip_cov_ub", 4.0),
    AC + "policy_loss.kl_cov_ratio": ({**BASE, AC + "policy_loss.loss_mode": "kl_cov"}, 0.001, "kl_cov_ratio", 0.001),
    AC + "policy_loss.ppo_kl_coef": ({**BASE, AC + "policy_loss.loss_mode": "kl_cov"}, 0.5, "ppo_kl_coef", 0.5),
    AC + "policy_loss.dro_beta": ({**BASE, AC + "policy_loss.loss_mode": "dro"}, 0.2, "dro_beta", 0.2),
    "critic.cliprange_value": (GAE, 0.2, "cliprange_value", 0.2),
    "actor_rollout_ref.rollout.n": (BASE, 16, "n_samples_per_prompt", 16),
    "reward.reward_kwargs.overlong_buffer_cfg.enable": ({**BASE, "reward.reward_kwargs.overlong_buffer_cfg.len": 64,
                                                        "reward.reward_kwargs.max_resp_len": 512}, True, "overlong_buffer_len", 64),
    "reward.reward_kwargs.overlong_buffer_cfg.len": ({**BASE, "reward.reward_kwargs.overlong_buffer_cfg.enable": True,
                                                     "reward.reward_kwargs.max_resp_len": 512}, 128, "overlong_buffer_len", 128),
    "reward.reward_kwargs.overlong_buffer_cfg.penalty_factor": (
        {**BASE, "reward.reward_kwargs.overlong_buffer_cfg.enable": True, "reward.reward_kwargs.overlong_buffer_cfg.len": 64,
         "reward.reward_kwargs.max_resp_len": 512}, 0.5, "overlong_penalty_factor", 0.5),
    "reward.reward_kwargs.max_resp_len": ({**BASE, "reward.reward_kwargs.overlong_buffer_cfg.enable": True,
                                          "reward.reward_kwargs.overlong_buffer_cfg.len": 64}, 1024, "max_response_length", 1024),
}
# option -> (base, value): refused, with a message that names the option
REFUSED = {
    "algorithm.kl_ctrl.type": ({**GAE, "algorithm.use_kl_in_reward": True}, "adaptive"),
    "algorithm.use_pf_ppo": (BASE, True),
    "critic.loss_agg_mode": (GAE, "seq-mean-token-mean"),
}
# option -> why from_verl reads nothing from it (verl's own reading is the same: a loop setting, logging, an input)
IGNORED = {
    "algorithm.kl_ctrl.horizon": "read by verl's adaptive controller only, which is refused",
    "algorithm.kl_ctrl.target_kl": "read by verl's adaptive controller only, which is refused",
    "algorithm.pf_ppo": "read with use_pf_ppo only, which is refused",
    "algorithm.filter_groups.metric": "the groups are filtered on Rollout.rewards",
    "algorithm.filter_groups.max_num_gen_batches": "the sampling loop",
    "algorithm.filter_groups.max_inflight_gen_batches": "the sampling loop",
    "algorithm.gdpo_reward_keys": "names arrays of verl's batch",
    AC + "calculate_entropy": "logging",
    AC + "calculate_sum_pi_squared": "an input of the optimal token baseline",
    AC + "use_rollout_log_probs": "the caller passes the sampler's log-probs as old_log_probs",
}
OTHER_REFUSALS = [   # (config, the option the message must name)
    ({"algorithm.adv_estimator": "reinforce_plus_plus"}, "algorithm.adv_estimator"),
    ({"algorithm.adv_estimator": "reinforce_plus_plus_baseline", "actor_rollout_ref.rollout.n": 4}, "algorithm.adv_estimator"),
    ({"algorithm.adv_estimator": "tir_optimal_token_baseline"}, "algorithm.adv_estimator"),
    ({"algorithm.adv_estimator": "grpo"}, "actor_rollout_ref.rollout.n"),
    ({**BASE, "algorithm.use_kl_in_reward": True}, "algorithm.use_kl_in_reward"),
    ({**BASE, "algorithm.adv_estimator": "gdpo", "algorithm.norm_adv_by_std_in_grpo": False}, "algorithm.norm_adv_by_std_in_grpo"),
    ({**BASE, AC + "policy_loss.loss_mode": "sapo", AC + "use_kl_loss": True}, AC + "loss_agg_mode"),
    ({**BASE, AC + "policy_loss.loss_mode": "gspo", AC + "entropy_coeff": 0.01}, AC + "loss_agg_mode"),
    ({**BASE, AC + "policy_loss.loss_mode": "dro"}, AC + "policy_loss.dro_beta"),
    ({**BASE, AC + "policy_loss.loss_mode": "bypass_mode"}, AC + "policy_loss.loss_mode"),
    ({**BASE, AC + "policy_loss.loss_mode": "gspo", RC + "bypass_mode": True}, AC + "policy_loss.loss_mode"),
    ({**BASE, AC + "policy_loss.loss_mode": "no_such_loss"}, AC + "policy_loss.loss_mode"),
    ({**BASE, AC + "use_kl_loss": True, AC + "kl_loss_type": "full"}, AC + "kl_loss_type"),
    ({**GAE, "algorithm.use_kl_in_reward": True, "algorithm.kl_penalty": "full"}, "algorithm.kl_penalty"),
    ({**BASE, "algorithm.filter_groups.enable": True, "algorithm.adv_estimator": "rloo"}, "algorithm.filter_groups.enable"),
    ({**BASE, RC + "rollout_is_threshold": 5.0}, RC + "rollout_is_threshold"),
    ({**BASE, RC + "rollout_rs": "token_k3"}, RC + "rollout_rs_threshold"),
    ({**BASE, RC + "rollout_rs": "token_k9", RC + "rollout_rs_threshold": 1.0}, RC + "rollout_rs"),
    ({**BASE, RC + "rollout_rs": "token_k3", RC + "rollout_rs_threshold": "0.1_0.2"}, RC + "rollout_rs_threshold"),
    ({**BASE, "algorithm.adv_estimater": "grpo"}, "algorithm.adv_estimater"),
    ({**BASE, AC + "clip_ratio_lowest": 0.1}, AC + "clip_ratio_lowest"),
    ({**BASE, "reward.reward_kwargs.overlong_buffer_cfg.enable": True, "reward.reward_kwargs.overlong_buffer_cfg.len": 64},
     "reward.reward_kwargs.max_resp_len"),
]


def test_every_verl_row_is_honoured_refused_or_ignored(rows):
    verl = {r["option"]: r for r in rows if r["framework"] == "verl"}
    covered = set(HONOURED) | set(REFUSED) | set(IGNORED)
    assert set(verl) == covered, f"not covered: {sorted(set(verl) - covered)}; not rows: {sorted(covered - set(verl))}"
    for option, (_, _, field, _) in HONOURED.items():   # the field that moves is one the row names
        targets = {t.rpartition(".")[2] for t in verl[option]["dew_rl"]}
        assert field in targets or option.endswith("adv_estimator") and field == "advantage_estimator", (option, targets)
    for option in IGNORED:
        assert verl[option]["status"] in ("partial", "renamed", "none", "not loss math"), option


@pytest.mark.parametrize("option", sorted(HONOURED))
def test_from_verl_honours(option):
    base, value, field, expected = HONOURED[option]
    got = getattr(obj.from_verl({**base, option: value}), field)
    assert got == expected, (option, got)
    try:   # where the base alone is a valid verl config, the option moved the field
        before = getattr(obj.from_verl(base), field)
    except ValueError:   # e.g. loss_mode dro without dro_beta: verl refuses it too
        return
    assert got != before, (option, before, got)


@pytest.mark.parametrize("option", sorted(REFUSED))
def test_from_verl_refuses_naming_the_option(option):
    base, value = REFUSED[option]
    with pytest.raises(ValueError, match=f"`{option}`"):
        obj.from_verl({**base, option: value})


@pytest.mark.parametrize("config, option", OTHER_REFUSALS, ids=[o for _, o in OTHER_REFUSALS])
def test_other_refusals_name_the_option(config, option):
    with pytest.raises(ValueError, match=f"from_verl: `{option}`"):
        obj.from_verl(config)


@pytest.mark.parametrize("option", sorted(IGNORED))
def test_ignored_options_change_nothing(option):
    base = {**BASE, "algorithm.adv_estimator": "gdpo"} if "gdpo" in option else BASE
    value = {"algorithm.pf_ppo": {"reweight_method": "pow"}, "algorithm.gdpo_reward_keys": ["acc", "format"]}.get(option, 7)
    if option.startswith(AC) or option.endswith("metric"):
        value = True if not option.endswith("metric") else "acc"
    assert obj.from_verl({**base, option: value}) == obj.from_verl(base)


def test_non_loss_settings_are_ignored_and_unknown_loss_keys_refused():
    noise = {"trainer": {"total_epochs": 3}, "data": {"train_batch_size": 1024},
             "actor_rollout_ref": {"model": {"path": "Qwen/Qwen3-8B"}, "actor": {"fsdp_config": {"param_offload": True},
                                                                                 "ppo_epochs": 2, "_target_": "x"}},
             "critic": {"optim": {"lr": 1e-5}}}
    assert obj.from_verl({**noise, **BASE}) == obj.from_verl(BASE)
    with pytest.raises(ValueError, match="must be a dict"):
        obj.from_verl([("algorithm.adv_estimator", "grpo")])


def test_a_round_trip_computes_the_same_loss():
    """The config from_verl gives and the hand-written one give the same loss on a batch (a float64 NumPy
    check of the token-mean dual-clip GRPO loss, independent of the library)."""
    import numpy as np
    rng = np.random.default_rng(0)
    B, T, G = 8, 6, 4
    mask = (rng.random((B, T)) < 0.8).astype(np.float32)
    mask[:, 0] = 1
    old = rng.normal(-1.0, 0.3, (B, T)).astype(np.float32)
    lp = (old + rng.normal(0, 0.3, (B, T))).astype(np.float32)
    r = rng.normal(size=B).astype(np.float32)
    cfg = obj.from_verl({"algorithm.adv_estimator": "grpo", "actor_rollout_ref.rollout.n": G,
                         AC + "clip_ratio_high": 0.28})
    ro, _ = obj.advantages(cfg, obj.Rollout(mask=mask, old_log_probs=old, rewards=r))
    val, _ = obj.loss(cfg, lp, ro)
    rr = r.astype(np.float64).reshape(-1, G)
    a = ((rr - rr.mean(1, keepdims=True)) / (rr.std(1, ddof=1, keepdims=True) + 1e-6)).reshape(-1)[:, None] * np.ones((1, T))
    rho = np.exp(lp.astype(np.float64) - old)
    l1, l2 = -a * rho, -a * np.clip(rho, 0.8, 1.28)
    term = np.maximum(l1, l2)
    term = np.where(a < 0, np.minimum(term, -a * 3.0), term)
    expected = (term * mask).sum() / mask.sum()
    assert math.isclose(float(val), expected, rel_tol=1e-5, abs_tol=1e-6)
