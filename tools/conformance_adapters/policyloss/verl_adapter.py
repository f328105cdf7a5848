"""Policy-loss conformance adapter for verl 0.9.1: verl's own `compute_policy_loss_*` on the shared inputs.

Runs in the `verl` environment of tools/refenvs.py (as tools/conformance_adapters/general/verl_adapter.py does). Every
number is verl's code (verl/trainer/ppo/core_algos.py of the wheel); nothing is copied. Each loss is called with
`log_prob` requiring a gradient, and both the loss and d loss / d log_prob are recorded. float32; one process,
the global counts passed explicitly (dp_size=1, batch_num_tokens = the valid tokens, global_batch_size = every row).

    <verl-python> tools/conformance_adapters/policyloss/verl_adapter.py INPUTS.npz OUTPUTS.npz OUTPUTS.json
"""
import sys

import numpy as np
import torch
import verl
from verl.trainer.ppo import core_algos as ca
from verl.workers.config.actor import ActorConfig, PolicyLossConfig

from _common import Recorder, load_inputs

assert verl.__version__ == "0.9.1", verl.__version__
CA = "verl/trainer/ppo/core_algos.py"
rec = Recorder("verl", f"verl {verl.__version__}")


def t(a):
    return torch.tensor(np.asarray(a, np.float32))


def actor(gbi, loss_mode, lo=0.2, hi=0.2, c=3.0, **policy_loss):
    return ActorConfig(strategy="fsdp", rollout_n=1, ppo_micro_batch_size_per_gpu=1, clip_ratio=0.2, clip_ratio_low=lo,
                       clip_ratio_high=hi, clip_ratio_c=c, loss_agg_mode="token-mean", global_batch_info=gbi,
                       policy_loss=PolicyLossConfig(loss_mode=loss_mode, **policy_loss))


def run_case(case, x):
    m = x["mask"]
    B = m.shape[0]
    gbi = dict(dp_size=1, batch_num_tokens=int(m.sum()), global_batch_size=B)
    gbi_s = "dp_size=1, batch_num_tokens = the valid tokens, global_batch_size = every row"

    def call(fn_name, cfg, settings, mode="token-mean", metrics=(), old=None, **params):
        lp = t(x["lp"]).requires_grad_(True)
        fn = getattr(ca, fn_name)
        loss, met = fn(t(x["old"] if old is None else old), lp, t(x["adv"]), t(m), mode, cfg)
        loss.backward()
        s = f"{settings}, loss_agg_mode={mode!r}, {gbi_s}"
        rec.put(case, "loss", loss, f"{CA}:{fn_name}", s, **params)
        rec.put(case, "grad", lp.grad, f"{CA}:{fn_name} (d loss / d log_prob, autograd)", s, **params)
        for k in metrics:
            rec.put(case, "metric", met[f"actor/{k}"], f"{CA}:{fn_name} (metric actor/{k})", s, metric=k, **params)

    rec.attempt(f"{case}: gpg", lambda: call("compute_policy_loss_gpg", actor(gbi, "gpg"), "loss_mode='gpg'", loss="gpg"))
    rec.attempt(f"{case}: dro", lambda: call("compute_policy_loss_dro", actor(gbi, "dro", dro_beta=0.1),
                                             "loss_mode='dro', policy_loss.dro_beta=0.1", loss="dro", beta=0.1))
    for mode_name, lo, hi in (("dppo_tv", 0.2, 0.2), ("dppo_tv", 0.05, 0.1), ("dppo_kl", 0.05, 0.05), ("dppo_kl", 0.01, 0.02)):
        rec.attempt(f"{case}: {mode_name} {lo}/{hi}", lambda mode_name=mode_name, lo=lo, hi=hi: call(
            f"compute_policy_loss_{mode_name}", actor(gbi, mode_name, lo, hi, 3.0),
            f"loss_mode={mode_name!r}, clip_ratio_low={lo}, clip_ratio_high={hi}, clip_ratio_c=3.0 (ActorConfig default)",
            metrics=("pg_clipfrac", "pg_clipfrac_lower"), loss=mode_name, lo=lo, hi=hi))
    for lo, hi in ((0.4, 0.4), (0.2, 0.2)):
        rec.attempt(f"{case}: geo_mean {lo}", lambda lo=lo, hi=hi: call(
            "compute_policy_loss_geo_mean", actor(gbi, "geo_mean", lo, hi),
            f"loss_mode='geo_mean', clip_ratio_low={lo}, clip_ratio_high={hi} (loss_agg_mode is not read: a mean over rows)",
            metrics=("pg_clipfrac", "pg_clipfrac_lower"), loss="geo_mean", lo=lo, hi=hi))
    # clip_cov draws an unseeded torch.randperm; with clip_cov_ratio = 1 it keeps every candidate, so it is deterministic
    for lb, ub in ((0.1, 5.0), (-1.0, 0.5)):
        rec.attempt(f"{case}: clip_cov {lb}/{ub}", lambda lb=lb, ub=ub: call(
            "compute_policy_loss_clip_cov", actor(gbi, "clip_cov", clip_cov_ratio=1.0, clip_cov_lb=lb, clip_cov_ub=ub),
            f"loss_mode='clip_cov', clip_ratio_low=clip_ratio_high=0.2, clip_cov_ratio=1.0 (every candidate: the "
            f"unseeded randperm cannot matter), clip_cov_lb={lb}, clip_cov_ub={ub}",
            metrics=("pg_clipfrac",), loss="clip_cov", lb=lb, ub=ub))
    for ratio, coef in ((0.05, 0.1), (0.2, 1.0)):
        rec.attempt(f"{case}: kl_cov {ratio}", lambda ratio=ratio, coef=coef: call(
            "compute_policy_loss_kl_cov", actor(gbi, "kl_cov", kl_cov_ratio=ratio, ppo_kl_coef=coef),
            f"loss_mode='kl_cov', kl_cov_ratio={ratio}, ppo_kl_coef={coef}", loss="kl_cov", ratio=ratio, coef=coef))

    def reinforce():  # bypass mode's REINFORCE, with a detached IS weight (the rollout correction it computes)
        lp = t(x["lp"]).requires_grad_(True)
        w = t(x["weights"])
        loss, _ = ca.compute_policy_loss_reinforce(t(x["behavior"]), lp, t(x["adv"]), t(m), "token-mean",
                                                   actor(gbi, "bypass_mode"), rollout_is_weights=w)
        loss.backward()
        s = f"rollout_is_weights = the given detached weights, loss_agg_mode='token-mean', {gbi_s}"
        rec.put(case, "loss", loss, f"{CA}:compute_policy_loss_reinforce", s, loss="reinforce_is")
        rec.put(case, "grad", lp.grad, f"{CA}:compute_policy_loss_reinforce (d loss / d log_prob)", s, loss="reinforce_is")
    rec.attempt(f"{case}: bypass reinforce", reinforce)


for case, x in load_inputs(sys.argv[1]).items():
    run_case(case, x)
rec.save(sys.argv[2], sys.argv[3], dict(torch=torch.__version__))
print(f"[verl] {len(rec.records)} outputs, {len(rec.failed)} failures")
