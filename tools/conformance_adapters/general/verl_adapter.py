"""Conformance adapter for verl 0.9.1: runs verl's own loss functions on the shared inputs.

Runs in the `verl` environment of tools/refenvs.py (torch 2.13.0 CPU, verl with --no-deps, and the
`ray` stub of tools/stubs/ray_only first on PYTHONPATH; `VERL_USE_EXTERNAL_PLUGINS=none`). Every
call below is verl's code (verl/trainer/ppo/core_algos.py, verl/trainer/ppo/rollout_corr_helper.py,
verl/workers/config/actor.py of the wheel); nothing is copied. Inputs are float32 and the calls run
in float32. Settings are production-like: one process, the global counts passed explicitly
(`dp_size=1`, `batch_num_tokens` = valid tokens, `global_batch_size` = every row, as the trainer does).

    <verl-python> tools/conformance_adapters/general/verl_adapter.py INPUTS.npz OUTPUTS.npz OUTPUTS.json
"""
import sys

import numpy as np
import torch
import verl
from verl.trainer.ppo import core_algos as ca
from verl.trainer.ppo import rollout_corr_helper as rc
from verl.workers.config.actor import ActorConfig, PolicyLossConfig

from _common import Recorder, load_inputs

assert verl.__version__ == "0.9.1", verl.__version__
CA = "verl/trainer/ppo/core_algos.py"
rec = Recorder("verl", f"verl {verl.__version__}")
MODES = ("token-mean", "token-sum", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")


def t(a):
    return torch.tensor(np.asarray(a, np.float32))


def actor(lo, hi, c, loss_mode, gbi):
    return ActorConfig(strategy="fsdp", rollout_n=1, ppo_micro_batch_size_per_gpu=1, clip_ratio=0.2, clip_ratio_low=lo,
                       clip_ratio_high=hi, clip_ratio_c=c, loss_agg_mode="token-mean", global_batch_info=gbi,
                       policy_loss=PolicyLossConfig(loss_mode=loss_mode))


class Cfg:  # the algorithm config of the RF++ estimators: only `gamma` is read
    def __init__(self, gamma):
        self.gamma = gamma

    def get(self, key, default=None):
        return getattr(self, key, default)


def run_case(case, x):
    m, B, G = x["mask"], x["mask"].shape[0], int(x["G"])
    N = int(m.sum())
    gbi = dict(dp_size=1, batch_num_tokens=N, global_batch_size=B)
    gbi_s = "dp_size=1, batch_num_tokens = the valid tokens, global_batch_size = every row"
    index = np.array([f"p{i // G}" for i in range(B)], dtype=object)
    put = lambda *a, **k: rec.put(case, *a, **k)  # noqa: E731

    def agg():
        for mode in MODES:
            put("aggregate", ca.agg_loss(t(x["loss"]), t(m), mode, **gbi), f"{CA}:agg_loss",
                f"loss_agg_mode={mode!r}, {gbi_s}", mode=mode)
    rec.attempt(f"{case}: agg_loss", agg)

    def gae():
        for gamma, lam in [(1.0, 0.95), (0.9, 0.8)]:
            adv, ret = ca.compute_gae_advantage_return(t(x["token_rewards"]), t(x["values"]), t(m),
                                                       torch.tensor(gamma), torch.tensor(lam))
            s = f"gamma={gamma}, lam={lam}; every position compared"
            put("gae_advantages", adv, f"{CA}:compute_gae_advantage_return", s, gamma=gamma, lam=lam)
            put("gae_returns", ret, f"{CA}:compute_gae_advantage_return", s, gamma=gamma, lam=lam)
    rec.attempt(f"{case}: gae", gae)

    def group():
        for norm in (True, False):
            adv, _ = ca.compute_grpo_outcome_advantage(t(x["token_scores"]), t(m), index, norm_adv_by_std_in_grpo=norm)
            put("group_advantage", adv, f"{CA}:compute_grpo_outcome_advantage",
                f"norm_adv_by_std_in_grpo={norm}, epsilon=1e-6 (default), groups of {G} by uid", std=norm)
        adv, _ = ca.compute_rloo_outcome_advantage(t(x["token_scores"]), t(m), index)
        put("rloo_advantage", adv, f"{CA}:compute_rloo_outcome_advantage", f"groups of {G} by uid")
    rec.attempt(f"{case}: grpo/rloo", group)

    def rfpp():
        for gamma in (1.0, 0.9):
            adv, _ = ca.compute_reinforce_plus_plus_outcome_advantage(t(x["token_scores"]), t(m), config=Cfg(gamma))
            put("rfpp_advantages", adv, f"{CA}:compute_reinforce_plus_plus_outcome_advantage",
                f"gamma={gamma}, token_level_rewards = outcome on the last valid token (no KL in the reward)",
                gamma=gamma)
        adv, _ = ca.compute_reinforce_plus_plus_baseline_outcome_advantage(t(x["token_scores"]), t(m), index)
        put("rfpp_baseline_advantages", adv, f"{CA}:compute_reinforce_plus_plus_baseline_outcome_advantage",
            f"groups of {G} by uid")
    rec.attempt(f"{case}: reinforce++", rfpp)

    def kl():
        for name, ours in (("k1", "k1"), ("mse", "k2"), ("low_var_kl", "k3")):
            put("kl", ca.kl_penalty(t(x["lp"]), t(x["ref"]), name), f"{CA}:kl_penalty", f"kl_penalty={name!r}", k=ours)
    rec.attempt(f"{case}: kl_penalty", kl)

    def ppo():
        for lo, hi, c in [(0.2, 0.2, 3.0), (0.2, 0.28, 3.0)]:
            for mode in ("token-mean", "seq-mean-token-mean"):
                loss, met = ca.compute_policy_loss_vanilla(t(x["old"]), t(x["lp"]), t(x["adv"]), t(m), mode,
                                                           actor(lo, hi, c, "vanilla", gbi))
                s = f"loss_mode='vanilla', clip_ratio_low={lo}, clip_ratio_high={hi}, clip_ratio_c={c}, " \
                    f"loss_agg_mode={mode!r}, {gbi_s}"
                kw = dict(lo=lo, hi=hi, c=c, mode=mode)
                put("ppo_loss", loss, f"{CA}:compute_policy_loss_vanilla", s, **kw)
                if mode == "token-mean":
                    for k in ("pg_clipfrac", "ppo_kl", "pg_clipfrac_lower"):
                        put(f"ppo_{k}", met[f"actor/{k}"], f"{CA}:compute_policy_loss_vanilla (metric actor/{k})", s,
                            lo=lo, hi=hi, c=c)
    rec.attempt(f"{case}: vanilla policy loss", ppo)

    def gspo():
        for mode in ("token-mean", "seq-mean-token-mean"):
            loss, met = ca.compute_policy_loss_gspo(t(x["old"]), t(x["lp"]), t(x["adv"]), t(m), mode,
                                                    actor(3e-4, 4e-4, 3.0, "gspo", gbi))
            s = f"loss_mode='gspo', clip_ratio_low=3e-4, clip_ratio_high=4e-4, loss_agg_mode={mode!r}, {gbi_s}"
            put("gspo_loss", loss, f"{CA}:compute_policy_loss_gspo", s, mode=mode)
            if mode == "token-mean":
                put("gspo_clipfrac", met["actor/pg_clipfrac"], f"{CA}:compute_policy_loss_gspo (metric actor/pg_clipfrac)", s)
    rec.attempt(f"{case}: gspo", gspo)

    def sapo():
        loss, _ = ca.compute_policy_loss_sapo(t(x["old"]), t(x["lp"]), t(x["adv"]), t(m), "token-mean",
                                              actor(0.2, 0.2, 3.0, "sapo", gbi))
        put("sapo_loss", loss, f"{CA}:compute_policy_loss_sapo",
            f"tau_pos=1.0, tau_neg=1.05 (ActorConfig defaults); loss_agg_mode='token-mean' passed, verl "
            f"aggregates SAPO with seq-mean-token-mean regardless; {gbi_s}")
    rec.attempt(f"{case}: sapo", sapo)

    def cispo():
        loss, met = ca.compute_policy_loss_cispo(t(x["old"]), t(x["lp"]), t(x["adv"]), t(m), "token-mean",
                                                 actor(0.2, 0.2, 3.0, "cispo", gbi))
        s = f"clip_ratio_low=0.2, clip_ratio_high=0.2 (ActorConfig defaults), loss_agg_mode='token-mean', {gbi_s}"
        put("cispo_loss", loss, f"{CA}:compute_policy_loss_cispo", s)
        put("cispo_clipfrac", met["actor/pg_clipfrac"], f"{CA}:compute_policy_loss_cispo (metric actor/pg_clipfrac)", s)
    rec.attempt(f"{case}: cispo", cispo)

    def value():
        vl, vclip = ca.compute_value_loss(t(x["vpred"]), t(x["returns"]), t(x["vold"]), t(m), 0.2, "token-mean", **gbi)
        s = f"cliprange_value=0.2, loss_agg_mode='token-mean', {gbi_s}"
        put("value_loss", vl, f"{CA}:compute_value_loss", s)
        put("value_clipfrac", vclip, f"{CA}:compute_value_loss (vf_clipfrac)", s)
    rec.attempt(f"{case}: value loss", value)

    def tis():
        lr = t(x["old"]) - t(x["rollout"])
        for level in ("token", "sequence"):
            w, _ = rc.compute_rollout_correction_weights(lr, t(m), rollout_is=level, rollout_is_threshold=2.0)
            put("is_weights", w, "verl/trainer/ppo/rollout_corr_helper.py:compute_rollout_correction_weights",
                f"rollout_is={level!r}, rollout_is_threshold=2.0, log_ratio = old - rollout", level=level)
    rec.attempt(f"{case}: rollout correction", tis)

    def grpo_objective():  # the GRPO pipeline of the trainer: outcome advantage, then the vanilla loss
        adv, _ = ca.compute_grpo_outcome_advantage(t(x["token_scores"]), t(m), index, norm_adv_by_std_in_grpo=True)
        loss, _ = ca.compute_policy_loss_vanilla(t(x["old"]), t(x["lp"]), adv, t(m), "seq-mean-token-mean",
                                                 actor(0.2, 0.2, 3.0, "vanilla", gbi))
        put("objective_grpo", loss, f"{CA}:compute_grpo_outcome_advantage + compute_policy_loss_vanilla",
            f"GRPO: norm_adv_by_std_in_grpo=True, clip 0.2/0.2, clip_ratio_c=3.0, "
            f"loss_agg_mode='seq-mean-token-mean', {gbi_s}")
    rec.attempt(f"{case}: GRPO objective", grpo_objective)


cases = load_inputs(sys.argv[1])
for case, x in cases.items():
    run_case(case, x)
rec.unavailable(f"{CA}:compute_policy_loss_* with DPO", "preference_logsigmoid / preference_ipo",
                "verl core has no DPO loss (online DPO lives in the separate verl-recipe repository, spin/)")
rec.save(sys.argv[2], sys.argv[3], dict(torch=torch.__version__))
print(f"[verl] {len(rec.records)} outputs, {len(rec.failed)} failures")
