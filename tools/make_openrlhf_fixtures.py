"""Freeze OpenRLHF 0.11.2's outputs on seeded inputs as a test fixture (tests/fixtures/openrlhf_0_11_2.npz).

OpenRLHF is a reference framework, not a dependency: this script runs in a separate environment that
has it (`pip install torch==2.13.0 numpy`, then
`pip install --no-deps openrlhf==0.11.2`). Its package `__init__` needs CUDA-only and distributed
packages, so the script imports nothing through it: it registers empty package modules for the
packages on the way, in-memory stubs for `deepspeed`, `ray`, the experience module and the Ray
launcher, and loads the six needed source files of the installed wheel by path (tools/stubs/openrlhf_lite.py). It stores only inputs and OpenRLHF's outputs; no OpenRLHF code is
copied. tests/test_openrlhf_oracle.py compares dew_rl with the stored outputs on every `make test`.

    <oracle-python> tools/make_openrlhf_fixtures.py

What is run (all in the wheel's own code):
- `RemoteExperienceMaker.compute_advantages_and_returns`, called unbound with a namespace `self`, for
  the `reinforce` and `reinforce_baseline` estimators (two micro-batch experiences, so the
  normalisation is over the whole step);
- `compute_approx_kl` k1/k2/k3; `PolicyLoss` ("ppo"); `DPOLoss` (sigmoid and IPO).
"""
import sys
import types
from importlib.metadata import version
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent / "stubs"))
from openrlhf_lite import load_openrlhf  # noqa: E402

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "openrlhf_0_11_2.npz"
VERSION = version("openrlhf")
assert VERSION == "0.11.2", VERSION


mu, loss_mod, em, ROOT = load_openrlhf()

# --- inputs --------------------------------------------------------------------------------------------
rng = np.random.default_rng(20261130)
store = {"meta/openrlhf_version": np.array(VERSION)}


def put(name, value):
    store[name] = np.asarray(value.detach().numpy() if torch.is_tensor(value) else value, dtype=np.float64)


def f32(a):
    "Round to values that float32 holds exactly: OpenRLHF's KL casts log-probs to float32."
    return np.asarray(a, np.float64).astype(np.float32).astype(np.float64)


def t(a, dtype=torch.float64):
    return torch.tensor(np.asarray(a), dtype=dtype)


def ns(**kw):
    return types.SimpleNamespace(**kw)


B, T, G = 12, 10, 4
lengths = rng.integers(3, T + 1, size=B)
mask = (np.arange(T)[None, :] < lengths[:, None]).astype(np.float64)
mask[1, 1] = mask[4, 2] = mask[9, 3] = 0.0  # interior holes (observation spans)
mask[6] = 0.0  # one fully masked row: it still belongs to its prompt group
put("mask", mask)


# --- REINFORCE++ and REINFORCE++-baseline through the real advantage pipeline ----------------------------
def run_estimator(estimator, rewards, kl, gamma, kl_coef, micro=(0, 5, B)):
    """compute_advantages_and_returns, unbound, on the rows split into micro-batch experiences (one step).

    The split at row 5 cuts a prompt group in two, so the grouping goes through `experience.index`."""
    args = ns(rollout=ns(n_samples_per_prompt=G), reward=ns(clip_range=(-10, 10)),
              algo=ns(advantage=ns(estimator=estimator, gamma=gamma, lambd=1.0, no_std_norm=False)))
    fake_self = ns(strategy=ns(args=args), args=args, kl_ctl=ns(value=kl_coef), advantage_estimator=estimator)
    cls = em.RemoteExperienceMaker  # the helpers it calls on self are the real (unbound) methods
    fake_self.get_cumulative_returns = lambda *a: cls.get_cumulative_returns(fake_self, *a)
    fake_self.get_advantages_and_returns = lambda *a: cls.get_advantages_and_returns(fake_self, *a)
    exps = []
    for lo, hi in zip(micro[:-1], micro[1:]):
        exps.append(ns(index=list(range(lo, hi)), rewards=t(rewards[lo:hi]), kl=kl[lo:hi],
                       action_mask=t(mask[lo:hi], torch.bool), info={}, values=None, truncated=None,
                       response_length=t(mask[lo:hi].sum(1))))
    out = em.RemoteExperienceMaker.compute_advantages_and_returns(fake_self, exps)
    adv = torch.cat([e.advantages for e in out]).double()
    ret = torch.cat([e.returns for e in out]).double()
    return adv, ret


old = f32(rng.normal(-1.2, 0.8, size=(B, T)))
ref = f32(old + rng.normal(0.0, 0.6, size=(B, T)))
scores = rng.normal(0.0, 1.5, size=B).round(2)
scores[4:8] = [0.5, 0.5, -3.0, 0.5]  # the group holding the empty row
put("rf/old_log_probs", old); put("rf/ref_log_probs", ref); put("rf/rewards", scores)
k1 = mu.compute_approx_kl(t(old), t(ref), kl_estimator="k1")  # what the pipeline stores as experience.kl (fp32)
assert k1.dtype == torch.float32
put("rf/kl", k1)
for gamma, beta in [(1.0, 0.01), (0.9, 0.1)]:
    adv, ret = run_estimator("reinforce", scores, k1, gamma, beta)
    put(f"rf/reinforce_{gamma}_{beta}/advantages", adv); put(f"rf/reinforce_{gamma}_{beta}/returns", ret)
# The baseline variant with the KL as a loss (--algo.kl.use_loss): the pipeline's kl is then zeros.
zeros = torch.zeros(B, T, dtype=torch.float32)
adv, ret = run_estimator("reinforce_baseline", scores, zeros, 1.0, 0.01)
put("rf/baseline/advantages", adv); put("rf/baseline/returns", ret)

# The clamps: reward 24 in row 2 (baselined to > 10) and a k1 of 12 at row 3, position 0.
scores_c = scores.copy(); scores_c[2] = 24.0
ref_c = ref.copy(); ref_c[3, 0] = old[3, 0] - 12.0
put("clamp/rewards", scores_c); put("clamp/ref_log_probs", ref_c)
k1_c = mu.compute_approx_kl(t(old), t(ref_c), kl_estimator="k1")
put("clamp/kl", k1_c)
adv, _ = run_estimator("reinforce", scores_c, k1_c, 1.0, 0.1)
put("clamp/reinforce/advantages", adv)
adv, _ = run_estimator("reinforce_baseline", scores_c, zeros, 1.0, 0.01)
put("clamp/baseline/advantages", adv)

# --- KL estimators (float32 inside OpenRLHF) -----------------------------------------------------------
lp = f32(rng.normal(-1.0, 1.0, size=(6, 8)))
rf = f32(lp + rng.normal(0.0, 1.0, size=(6, 8)))
# outside: |d| = 30 (k1, k2 clamp), d = -12 and +15 (k3 above 10), and infinite log-probs
lp_out = np.array([0.0, -30.0, -1.0, -16.0, -np.inf, -1.0, 0.0, -0.5])
rf_out = np.array([-30.0, 0.0, 11.0, -1.0, -1.0, -np.inf, 3.0, -0.5])
put("kl/log_probs", lp); put("kl/ref_log_probs", rf); put("kl/out/log_probs", lp_out); put("kl/out/ref_log_probs", rf_out)
for k in ("k1", "k2", "k3"):
    put(f"kl/{k}", mu.compute_approx_kl(t(lp), t(rf), kl_estimator=k))
    put(f"kl/out/{k}", mu.compute_approx_kl(t(lp_out), t(rf_out), kl_estimator=k))

# --- PolicyLoss ("ppo"), float64 ---------------------------------------------------------------------
Bp, Tp = 8, 12
lens = rng.integers(3, Tp + 1, size=Bp)
pmask = (np.arange(Tp)[None, :] < lens[:, None]).astype(np.float64)
pmask[2, 1] = 0.0
pmask[5] = 0.0  # an empty row
plp = rng.normal(-1.0, 0.8, size=(Bp, Tp))
pold = plp + rng.normal(0.0, 0.35, size=(Bp, Tp))
padv = rng.normal(0.0, 1.0, size=(Bp, Tp))
padv[[0, 1, 3], 2] = [-1.0, -0.5, 0.8]  # ratios e^1.5 > 3: the dual clip binds on the two negative ones
pold[[0, 1, 3], 2] = plp[[0, 1, 3], 2] - 1.5
put("ppo/mask", pmask); put("ppo/log_probs", plp); put("ppo/old_log_probs", pold); put("ppo/advantages", padv)


for lo, hi, c in [(0.2, 0.2, 3.0), (0.2, 0.28, 3.0), (0.2, 0.2, None)]:
    crit = loss_mod.PolicyLoss(clip_eps_low=lo, clip_eps_high=hi, dual_clip=c)
    loss, clip_ratio, ppo_kl, vllm_kl, is_filter = crit(t(plp), t(pold), t(padv), action_mask=t(pmask))
    assert vllm_kl is None and is_filter is None
    key = f"ppo/{lo}_{hi}_{c}"
    put(f"{key}/loss", loss); put(f"{key}/clip_ratio", clip_ratio); put(f"{key}/ppo_kl", ppo_kl)
    loss_g, *_ = crit(t(plp), t(pold), t(padv), action_mask=t(pmask), batch_num_tokens=float(pmask.sum()))
    put(f"{key}/loss_global_tokens", loss_g)
# per-sample mode (0.11.2 `seq-mean-token-mean`): global_batch_size given (B rows) and local (None)
crit = loss_mod.PolicyLoss(clip_eps_low=0.2, clip_eps_high=0.2, dual_clip=3.0, token_level_loss=False)
put("ppo/sample/loss_global_rows", crit(t(plp), t(pold), t(padv), action_mask=t(pmask), global_batch_size=float(Bp))[0])
put("ppo/sample/loss_local", crit(t(plp), t(pold), t(padv), action_mask=t(pmask))[0])
# two tokens with |lp - old| > 20 (+25, -30): the loss clamps them, ppo_kl does not
plp_far = plp.copy(); plp_far[0, 0] = pold[0, 0] + 25.0; plp_far[3, 1] = pold[3, 1] - 30.0
put("ppo/far/log_probs", plp_far)
crit = loss_mod.PolicyLoss(clip_eps_low=0.2, clip_eps_high=0.2, dual_clip=3.0)
loss, clip_ratio, ppo_kl, *_ = crit(t(plp_far), t(pold), t(padv), action_mask=t(pmask))
put("ppo/far/loss", loss); put("ppo/far/clip_ratio", clip_ratio); put("ppo/far/ppo_kl", ppo_kl)

# --- DPOLoss on summed masked log-probs (the trainer sums before the loss), float64 ----------------------
P, Td = 8, 9
dm = {s: (np.arange(Td)[None, :] < rng.integers(2, Td + 1, size=P)[:, None]).astype(np.float64) for s in ("c", "r")}
dlp = {k: rng.normal(-1.5, 0.7, size=(P, Td)) for k in ("pc", "pr")}
dlp["rc"] = dlp["pc"] + rng.normal(0.0, 0.4, size=(P, Td))
dlp["rr"] = dlp["pr"] + rng.normal(0.0, 0.4, size=(P, Td))
put("dpo/mask_chosen", dm["c"]); put("dpo/mask_rejected", dm["r"])
for k, v in dlp.items():
    put(f"dpo/{k}", v)
summed = {k: t((v * dm[k[1]]).sum(1)) for k, v in dlp.items()}
for name, kw in [("sigmoid", {}), ("ipo", {"ipo": True})]:
    loss, ch, rj = loss_mod.DPOLoss(beta=0.1, label_smoothing=0.0, **kw)(summed["pc"], summed["pr"], summed["rc"], summed["rr"])
    put(f"dpo/{name}/loss", loss); put(f"dpo/{name}/chosen_rewards", ch); put(f"dpo/{name}/rejected_rewards", rj)

np.savez_compressed(OUT, **store)
print(f"wrote {len(store)} arrays ({OUT.stat().st_size} bytes) to {OUT.relative_to(OUT.parent.parent.parent)}")
