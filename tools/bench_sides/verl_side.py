"""`make bench`, the verl 0.9.1 side: verl's own functions on float32 torch CPU tensors (eager).

The `primitive:*` rows are plain torch 2.13.0 eager (a copy, a masked sum, a masked sum and count), the
baseline a torch user has for one pass over the data.

Runs in verl's environment (tools/refenvs.py). GAE, GRPO, KL, aggregation and the policy loss are
verl's functions, called as a trainer calls them; the objectives row is verl's actor loss for the
same preset: `compute_policy_loss_vanilla` plus, for REINFORCE++-baseline, `kl_coef * agg_loss(kl_penalty)`
(verl's vanilla loss always applies the dual clip c = 3, so that row does slightly more work than ours).
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from verl.trainer.ppo import core_algos as ca  # noqa: E402
from verl.utils import torch_functional as vf  # noqa: E402
from verl.workers.config.actor import ActorConfig, PolicyLossConfig  # noqa: E402

from bench_common import GROUP, serve  # noqa: E402

torch.set_grad_enabled(False)
KL = {"k1": "kl", "k2": "mse", "k3": "low_var_kl"}
MODES = {"token_mean": "token-mean", "response_mean": "seq-mean-token-mean"}


def config(mode):
    return ActorConfig(strategy="fsdp", rollout_n=1, ppo_micro_batch_size_per_gpu=1, clip_ratio=0.2,
                       clip_ratio_low=0.2, clip_ratio_high=0.2, clip_ratio_c=3.0, loss_agg_mode=mode,
                       policy_loss=PolicyLossConfig(loss_mode="vanilla"))


def build(case, data):
    name = case.split("@")[0]
    x = {k: torch.tensor(v) for k, v in data.items()}
    if name == "gae":
        g, lam = torch.tensor(1.0), torch.tensor(0.95)
        return lambda: ca.compute_gae_advantage_return(x["token_rewards"], x["values"], x["mask"], g, lam)
    if name == "group_advantage":
        s = x["scores"]
        B = s.shape[0]
        tok = torch.zeros(B, 1); tok[:, 0] = s  # one token per response: the outcome reward on it
        m1 = torch.ones(B, 1)
        index = np.array([str(i // GROUP) for i in range(B)], dtype=object)
        return lambda: ca.compute_grpo_outcome_advantage(tok, m1, index)
    if name in ("global_normalize", "masked_whiten"):
        return lambda: vf.masked_whiten(x["advantages"], x["mask"])
    if name == "masked_mean":
        return lambda: vf.masked_mean(x["advantages"], x["mask"])
    if name.startswith("aggregate:"):
        mode = name.split(":", 1)[1]
        B = x["mask"].shape[0]
        return lambda: ca.agg_loss(x["advantages"], x["mask"], mode, global_batch_size=B)
    if name in KL:
        return lambda: ca.kl_penalty(x["log_probs"], x["ref_log_probs"], KL[name])
    if name.startswith("ppo_dual_clip+") or name.startswith("objective:"):
        if name.startswith("ppo_dual_clip+"):
            red, _, pass_ = name.split("+", 1)[1].partition(":")
            mode, kl_coef, kl_type = MODES[red], 0.0, None
        else:
            est, pass_ = name.split(":")[1:]
            mode = "seq-mean-token-mean"
            kl_coef, kl_type = (0.01, "mse") if est == "reinforce_plus_plus_baseline" else (0.0, None)
        cfg = config(mode)
        B = x["mask"].shape[0]

        def loss(lp):
            pg = ca.compute_policy_loss_vanilla(x["old_log_probs"], lp, x["advantages"], x["mask"], mode, cfg)[0]
            if kl_coef:
                kl = ca.kl_penalty(lp, x["ref_log_probs"], kl_type)
                pg = pg + kl_coef * ca.agg_loss(kl, x["mask"], mode, global_batch_size=B)
            return pg

        if pass_ == "fwd":
            return lambda: loss(x["log_probs"])

        def fwd_bwd():
            with torch.enable_grad():
                lp = x["log_probs"].clone().requires_grad_(True)
                loss(lp).backward()
                return lp.grad
        return fwd_bwd
    if name == "primitive:copy":
        return lambda: x["advantages"] + 1
    if name == "primitive:masked_sum":
        return lambda: (x["advantages"] * x["mask"]).sum()
    if name == "primitive:masked_whiten":
        return lambda: vf.masked_whiten(x["advantages"], x["mask"])
    if name == "primitive:masked_sum+count":
        return lambda: ((x["advantages"] * x["mask"]).sum(), x["mask"].sum())
    raise KeyError(case)


def has(case):
    name = case.split("@")[0]
    if name in ("gae_two_level", "gae_associative", "gae_blocked8", "primitive:scan", "primitive:gather",
                "primitive:blocked_matmul", "primitive:masked_row_sums", "primitive:variadic_row",
                "primitive:variadic_slices32", "primitive:exp_masked_sum+count", "primitive:exp_masked_row_sums"):
        return False
    return not (name.startswith("aggregate:") and name.split(":", 1)[1] not in
                ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"))


if __name__ == "__main__":
    torch.set_num_threads(torch.get_num_threads())
    serve(build, has)
