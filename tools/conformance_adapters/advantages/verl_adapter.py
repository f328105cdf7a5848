"""Advantage-frontier conformance adapter for verl 0.9.1: its own advantage estimators on the shared inputs.

Runs in the `verl` environment of tools/refenvs.py (torch 2.13.0 CPU, verl with --no-deps, the `ray` stub of
tools/stubs/ray_only first on PYTHONPATH). Every estimator called is registered in the wheel's
verl/trainer/ppo/core_algos.py (GDPO, grpo_passk, OPO, GPG, ReMax, optimal_token_baseline and
tir_optimal_token_baseline are all in verl 0.9.1, as at verl-project/verl@1dda039b9c63); nothing is copied. The group
index is verl's `uid` (a NumPy object array); float32 throughout.

    <verl-python> tools/conformance_adapters/advantages/verl_adapter.py INPUTS.npz OUTPUTS.npz OUTPUTS.json
"""
import sys

import numpy as np
import torch
import verl
from verl.trainer.ppo import core_algos as ca

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent.parent))
from _common import Recorder, load_inputs  # noqa: E402

assert verl.__version__ == "0.9.1", verl.__version__
CA = "verl/trainer/ppo/core_algos.py"
rec = Recorder("verl", f"verl {verl.__version__}")


def t(a):
    return torch.tensor(np.asarray(a, np.float32))


class Cfg(dict):  # verl's AlgoConfig is read with .get(key, default) and attribute access
    __getattr__ = dict.get


def run_case(case, x):
    m = x["mask"]
    B, T = m.shape
    index = np.array([f"p{u}" for u in x["ids"]], dtype=object)
    put = lambda *a, **k: rec.put(case, *a, **k)  # noqa: E731
    outcome, tr, mask = t(x["outcome"]), t(x["token_rewards"]), t(m)
    common = "token_level_rewards = the outcome on the last kept token, index = the prompt ids (uid)"

    def gdpo():
        P = 3
        batch = {"prompts": torch.zeros((B, P), dtype=torch.long),
                 "attention_mask": torch.cat([torch.ones((B, P)), mask], 1).long()}
        keys = ["c0", "c1", "c2"]
        ntb = {k: x["components"][:, j] for j, k in enumerate(keys)}
        for weights in (None, [1.0, 0.5, 2.0]):
            cfg = Cfg(gdpo_reward_keys=keys, gdpo_reward_weights=weights, norm_adv_by_std_in_grpo=True)
            adv, _ = ca.compute_gdpo_outcome_advantage(outcome, mask, index, config=cfg, non_tensor_batch=ntb, batch=batch)
            put("gdpo", adv, f"{CA}:compute_gdpo_outcome_advantage", f"algorithm.gdpo_reward_keys = 3 components, "
                f"gdpo_reward_weights={weights}, epsilon=1e-6, norm_adv_by_std_in_grpo=True; {common}", weights=weights)
    rec.attempt(f"{case}: gdpo", gdpo)

    def passk():
        for norm in (True, False):
            adv, _ = ca.compute_grpo_passk_outcome_advantage(outcome, mask, index, config=Cfg(norm_adv_by_std_in_grpo=norm))
            put("passk", adv, f"{CA}:compute_grpo_passk_outcome_advantage",
                f"norm_adv_by_std_in_grpo={norm}, epsilon=1e-6; {common}", norm=norm)
    rec.attempt(f"{case}: grpo_passk", passk)

    def opo():
        adv, _ = ca.compute_opo_outcome_advantage(outcome, mask, index, config=Cfg())
        put("opo", adv, f"{CA}:compute_opo_outcome_advantage", common)
    rec.attempt(f"{case}: opo", opo)

    def gpg():
        adv, _ = ca.compute_gpg_outcome_advantage(outcome, mask, index, config=Cfg())
        put("gpg", adv, f"{CA}:compute_gpg_outcome_advantage", f"f_norm=1.0 (default); {common}")
    rec.attempt(f"{case}: gpg", gpg)

    def remax():
        adv, _ = ca.compute_remax_outcome_advantage(tr, t(x["baselines"]), mask, config=Cfg())
        put("remax", adv, f"{CA}:compute_remax_outcome_advantage",
            "token_level_rewards = outcome + per-token shaping, reward_baselines = the greedy rewards")
    rec.attempt(f"{case}: remax", remax)

    def otb():
        for multi in (False, True):
            fn = ca.compute_multi_turn_optimal_token_baseline_advantage if multi else \
                ca.compute_optimal_token_baseline_advantage
            for is_w in (False, True):
                for zt in (True, False):
                    adv, _ = fn(tr, mask, index, t(x["old"]), t(x["sum_pi2"]),
                                rollout_is_weights=t(x["rho"]) if is_w else None, handle_zero_tail=zt)
                    put("otb", adv, f"{CA}:{fn.__name__}", f"token_level_rewards = outcome + shaping, old_log_probs, "
                        f"sum_pi_squared exact, rollout_is_weights={'rho' if is_w else None}, handle_zero_tail={zt}, "
                        "epsilon=1e-8", multi_turn=multi, zero_tail=zt, **{"is": is_w})
    rec.attempt(f"{case}: optimal_token_baseline", otb)


for case, x in load_inputs(sys.argv[1]).items():
    run_case(case, x)
rec.save(sys.argv[2], sys.argv[3], dict(torch=torch.__version__))
print(f"[verl] {len(rec.records)} outputs, {len(rec.failed)} failures")
