"""Conformance adapter for OpenRLHF 0.11.2: runs OpenRLHF's own loss and advantage code on the shared inputs.

Runs in the `openrlhf` environment of tools/refenvs.py (torch 2.13.0 CPU, `openrlhf==0.11.2` with
--no-deps). The package `__init__` needs CUDA-only and distributed packages, so, as in
tools/make_openrlhf_fixtures.py, nothing is imported through it: empty package modules are
registered for the packages on the way, in-memory stubs for `deepspeed`, `ray`, the experience
module and the Ray launcher (made here at run time), and the six needed source files of the
installed wheel are loaded by path. Every number below comes from the wheel's own code
(openrlhf/models/utils.py, openrlhf/models/loss.py, openrlhf/trainer/ppo_utils/experience_maker.py);
nothing is copied. Inputs are float32; the losses run in float32 and the advantage pipeline in
OpenRLHF's own dtypes (k1 and the whitening in float32).

    <openrlhf-python> tools/conformance_adapters/general/openrlhf_adapter.py INPUTS.npz OUTPUTS.npz OUTPUTS.json
"""
import sys
import types
from importlib.metadata import version
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "stubs"))
from openrlhf_lite import load_openrlhf  # noqa: E402

from _common import Recorder, load_inputs

VERSION = version("openrlhf")
assert VERSION == "0.11.2", VERSION


mu, loss_mod, em, ROOT = load_openrlhf()


rec = Recorder("openrlhf", f"OpenRLHF {VERSION}")
EM = "openrlhf/trainer/ppo_utils/experience_maker.py:RemoteExperienceMaker.compute_advantages_and_returns"
LOSS = "openrlhf/models/loss.py"


def t(a, dtype=torch.float32):
    return torch.tensor(np.asarray(a), dtype=dtype)


def ns(**kw):
    return types.SimpleNamespace(**kw)


def run_estimator(estimator, rewards, kl, mask, G, gamma, kl_coef, values=None, lambd=1.0, both=False):
    """compute_advantages_and_returns, unbound, on the rows split into two micro-batch experiences (one step)."""
    B = mask.shape[0]
    args = ns(rollout=ns(n_samples_per_prompt=G), reward=ns(clip_range=(-10, 10)),
              algo=ns(advantage=ns(estimator=estimator, gamma=gamma, lambd=lambd, no_std_norm=False)))
    fake_self = ns(strategy=ns(args=args), args=args, kl_ctl=ns(value=kl_coef), advantage_estimator=estimator)
    cls = em.RemoteExperienceMaker  # the helpers it calls on self are the real (unbound) methods
    fake_self.get_cumulative_returns = lambda *a: cls.get_cumulative_returns(fake_self, *a)
    fake_self.get_advantages_and_returns = lambda *a: cls.get_advantages_and_returns(fake_self, *a)
    cut = B // 2 + 1  # cuts a prompt group in two: the grouping goes through experience.index
    exps = []
    for lo, hi in ((0, cut), (cut, B)):
        exps.append(ns(index=list(range(lo, hi)), rewards=t(rewards[lo:hi]), kl=kl[lo:hi],
                       action_mask=t(mask[lo:hi], torch.bool), info={},
                       values=None if values is None else t(values[lo:hi]), truncated=None,
                       response_length=t(mask[lo:hi].sum(1))))
    out = cls.compute_advantages_and_returns(fake_self, exps)
    adv = torch.cat([e.advantages for e in out])
    return (adv, torch.cat([e.returns for e in out])) if both else adv


def run_case(case, x):
    m, B, G = x["mask"], x["mask"].shape[0], int(x["G"])
    N = float(m.sum())
    put = lambda *a, **k: rec.put(case, *a, **k)  # noqa: E731
    rew = x["scores"].astype(np.float64)

    def estimators():
        k1 = mu.compute_approx_kl(t(x["old"]), t(x["ref"]), kl_estimator="k1")
        for gamma, beta in ((1.0, 0.01), (0.9, 0.1)):
            put("rfpp_advantages", run_estimator("reinforce", rew, k1, m, G, gamma, beta), EM,
                f"estimator='reinforce', gamma={gamma}, kl_coef={beta}, kl = compute_approx_kl(old, ref, 'k1'), "
                "reward clip_range=(-10, 10), two micro-batch experiences", gamma=gamma, beta=beta)
        zeros = torch.zeros(m.shape, dtype=torch.float32)
        s = "kl = 0 (the KL as a loss, --algo.kl.use_loss), reward clip_range=(-10, 10), two micro-batch experiences"
        put("rfpp_baseline_advantages", run_estimator("reinforce_baseline", rew, zeros, m, G, 1.0, 0.01), EM,
            f"estimator='reinforce_baseline', {s}")
        put("group_advantage", run_estimator("group_norm", rew, zeros, m, G, 1.0, 0.01), EM,
            f"estimator='group_norm' (std ddof=1, + 1e-9, no whitening), {s}", std=True)
        put("group_advantage", run_estimator("dr_grpo", rew, zeros, m, G, 1.0, 0.01), EM,
            f"estimator='dr_grpo' (mean only), {s}", std=False)
        put("rloo_advantage", run_estimator("rloo", rew, zeros, m, G, 1.0, 0.01), EM, f"estimator='rloo', {s}")
        for gamma, lam in ((1.0, 0.95), (0.9, 0.8)):
            adv, ret = run_estimator("gae", rew, zeros, m, G, gamma, 0.01, values=x["values"], lambd=lam, both=True)
            g = f"estimator='gae', gamma={gamma}, lambd={lam}, experience.values = the given values, {s}"
            put("gae_advantages", adv, EM, g, gamma=gamma, lam=lam)
            put("gae_returns", ret, EM, g, gamma=gamma, lam=lam)
    rec.attempt(f"{case}: advantage estimators", estimators)

    def kl():
        for k in ("k1", "k2", "k3"):
            put("kl", mu.compute_approx_kl(t(x["lp"]), t(x["ref"]), kl_estimator=k),
                "openrlhf/models/utils.py:compute_approx_kl", f"kl_estimator={k!r} (float32)", k=k)
    rec.attempt(f"{case}: compute_approx_kl", kl)

    def agg():
        for level, kw, mode in ((True, dict(batch_num_tokens=N), "token-mean"),
                                (False, dict(global_batch_size=float(B)), "seq-mean-token-mean"),
                                (False, {}, "seq-mean-token-mean-local")):
            put("aggregate", loss_mod.aggregate_loss(t(x["loss"]), t(m), token_level_loss=level, **kw),
                f"{LOSS}:aggregate_loss", f"token_level_loss={level}, " + {"token-mean": "batch_num_tokens = the valid "
                "tokens", "seq-mean-token-mean": "global_batch_size = every row"}.get(mode, "no global counts (local)"),
                mode=mode)
    rec.attempt(f"{case}: aggregate_loss", agg)

    def ppo():
        for lo, hi, c in ((0.2, 0.2, 3.0), (0.2, 0.28, 3.0), (0.2, 0.2, None)):
            crit = loss_mod.PolicyLoss(clip_eps_low=lo, clip_eps_high=hi, dual_clip=c)
            loss, clip_ratio, ppo_kl, _, _ = crit(t(x["lp"]), t(x["old"]), t(x["adv"]), action_mask=t(m),
                                                  batch_num_tokens=N)
            s = f"policy_loss_type='ppo', clip_eps_low={lo}, clip_eps_high={hi}, dual_clip={c}, batch_num_tokens = the valid tokens"
            put("ppo_loss", loss, f"{LOSS}:PolicyLoss", s, lo=lo, hi=hi, c=c)
            put("ppo_pg_clipfrac", clip_ratio, f"{LOSS}:PolicyLoss (clip_ratio)", s, lo=lo, hi=hi, c=c)
            put("ppo_ppo_kl", ppo_kl, f"{LOSS}:PolicyLoss (ppo_kl)", s, lo=lo, hi=hi, c=c)
        crit = loss_mod.PolicyLoss(clip_eps_low=0.2, clip_eps_high=0.2, dual_clip=3.0, token_level_loss=False)
        put("ppo_loss", crit(t(x["lp"]), t(x["old"]), t(x["adv"]), action_mask=t(m), global_batch_size=float(B))[0],
            f"{LOSS}:PolicyLoss", f"policy_loss_type='ppo', token_level_loss=False (seq-mean-token-mean), "
            "dual_clip=3.0, global_batch_size = every row", lo=0.2, hi=0.2, c=3.0, mode="seq-mean-token-mean")
    rec.attempt(f"{case}: PolicyLoss ppo", ppo)

    def gspo():
        crit = loss_mod.PolicyLoss(clip_eps_low=3e-4, clip_eps_high=4e-4, policy_loss_type="gspo")
        loss, clip_ratio, *_ = crit(t(x["lp"]), t(x["old"]), t(x["adv"]), action_mask=t(m), global_batch_size=float(B))
        s = "policy_loss_type='gspo', clip_eps_low=3e-4, clip_eps_high=4e-4, global_batch_size = every row"
        put("gspo_loss", loss, f"{LOSS}:PolicyLoss", s, mode="seq-mean-token-mean", lo=3e-4, hi=4e-4)
    rec.attempt(f"{case}: PolicyLoss gspo", gspo)

    def dpo():
        summed = {k: t((x[k] * x["m" + k[1]]).sum(1)) for k in ("pc", "pr", "rc", "rr")}
        for kind, kw in (("dpo_loss", {}), ("ipo_loss", {"ipo": True})):
            loss, _, _ = loss_mod.DPOLoss(beta=0.1, label_smoothing=0.0, **kw)(summed["pc"], summed["pr"], summed["rc"],
                                                                               summed["rr"])
            put(kind, loss, f"{LOSS}:DPOLoss", f"beta=0.1, label_smoothing=0.0, ipo={bool(kw)}, on the masked sums of "
                "the per-token log-probs (as the trainer passes them)")
    rec.attempt(f"{case}: DPOLoss", dpo)

    def value():
        loss = loss_mod.ValueLoss(clip_eps=0.2)(t(x["vpred"]), t(x["vold"]), t(x["returns"]), action_mask=t(m),
                                               batch_num_tokens=N)
        put("value_loss", loss, f"{LOSS}:ValueLoss", "clip_eps=0.2, token_level_loss=True, batch_num_tokens = the valid tokens")
    rec.attempt(f"{case}: ValueLoss", value)


cases = load_inputs(sys.argv[1])
for case, x in cases.items():
    run_case(case, x)
rec.save(sys.argv[2], sys.argv[3], dict(torch=torch.__version__))
print(f"[openrlhf] {len(rec.records)} outputs, {len(rec.failed)} failures")
