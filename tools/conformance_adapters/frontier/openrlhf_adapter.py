"""Frontier conformance adapter for OpenRLHF 0.11.2 (tools/conformance_frontier.py): length shaping, the raw reward.

Runs in the `openrlhf` environment of tools/refenvs.py and loads the wheel's files by path exactly as
tools/conformance_adapters/general/openrlhf_adapter.py does (tools/stubs/openrlhf_lite.py). Float32, one process. Calls:

* `apply_overlong_penalty` and `apply_stop_properly_penalty` of openrlhf/trainer/ppo_utils/length_penalty.py on
  stand-in experiences carrying the rewards, `response_length` (the mask's row sums) and `truncated` (the sampler's
  finish_reason == "length" flag); the rewards are recorded after the call;
* `RemoteExperienceMaker.compute_advantages_and_returns`, unbound, with `advantage.estimator="reinforce"`, the KL
  coefficient 0 and zero KL (`--algo.kl.use_loss`: the KL is not in the reward), gamma 1: the raw reward on every
  token, whitened over the batch.

OpenRLHF's dynamic filtering (`--algo.dynamic_filtering_enable`, keep a prompt when the mean of its scores is
strictly inside `dynamic_filtering_range`) is a loop over Ray object references in
`SamplesGenerator._generate_vllm`; it is recorded as not run.

    <openrlhf-python> tools/conformance_adapters/frontier/openrlhf_adapter.py INPUTS.npz OUTPUTS.npz OUTPUTS.json
"""
import sys
import types
from importlib.metadata import version
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent / "stubs"))
from openrlhf_lite import load_openrlhf  # noqa: E402

from _common import Recorder, load_inputs  # noqa: E402

VERSION = version("openrlhf")
assert VERSION == "0.11.2", VERSION
mu, loss_mod, em, ROOT = load_openrlhf()
lp_mod = sys.modules["openrlhf.trainer.ppo_utils.length_penalty"]
rec = Recorder("openrlhf", f"OpenRLHF {VERSION}")
LP = "openrlhf/trainer/ppo_utils/length_penalty.py"
EM = "openrlhf/trainer/ppo_utils/experience_maker.py:RemoteExperienceMaker.compute_advantages_and_returns"
ns = types.SimpleNamespace


def t(a, dtype=torch.float32):
    return torch.tensor(np.asarray(a), dtype=dtype)


def experiences(x):
    "The batch as two micro-batch experiences (rows split unevenly), as the trainer hands them over."
    B, cut = x["mask"].shape[0], x["mask"].shape[0] // 2 + 1
    return [ns(rewards=t(x["rewards"][lo:hi]), response_length=t(x["mask"][lo:hi].sum(1)),
               truncated=t(x["truncated"][lo:hi] > 0, torch.bool), info={}) for lo, hi in ((0, cut), (cut, B))]


def length_shaping(case, x):
    for L, buf, fac in x["overlong"]:
        L, buf = int(L), int(buf)
        exps = experiences(x)
        lp_mod.apply_overlong_penalty(exps, max_new_tokens=L, overlong_buffer_len=buf, overlong_penalty_factor=fac)
        rec.put(case, "overlong_reward", torch.cat([e.rewards for e in exps]), f"{LP}:apply_overlong_penalty",
                f"max_new_tokens={L}, overlong_buffer_len={buf}, overlong_penalty_factor={fac}; rewards after the call",
                max_response_length=L, overlong_buffer_len=buf, overlong_penalty_factor=float(fac))
    for c in x["stop_properly"]:
        exps = experiences(x)
        lp_mod.apply_stop_properly_penalty(exps, stop_properly_penalty_coef=float(c))
        rec.put(case, "stop_properly", torch.cat([e.rewards for e in exps]), f"{LP}:apply_stop_properly_penalty",
                f"stop_properly_penalty_coef={float(c)}, experience.truncated = the sampler's flag; rewards after the call",
                coef=float(c))


def raw_reward(case, x):
    m, B = x["mask"], x["mask"].shape[0]
    G = int(x["G"])
    args = ns(rollout=ns(n_samples_per_prompt=G), reward=ns(clip_range=(-10, 10)),
              algo=ns(advantage=ns(estimator="reinforce", gamma=1.0, lambd=1.0, no_std_norm=False)))
    me = ns(strategy=ns(args=args), args=args, kl_ctl=ns(value=0.0), advantage_estimator="reinforce")
    cls = em.RemoteExperienceMaker  # the helpers it calls on self are the real (unbound) methods
    me.get_cumulative_returns = lambda *a: cls.get_cumulative_returns(me, *a)
    me.get_advantages_and_returns = lambda *a: cls.get_advantages_and_returns(me, *a)
    cut = B // 2 + 1
    exps = [ns(index=list(range(lo, hi)), rewards=t(x["rewards"][lo:hi]), kl=torch.zeros(hi - lo, m.shape[1]),
               action_mask=t(m[lo:hi], torch.bool), info={}, values=None, truncated=None,
               response_length=t(m[lo:hi].sum(1))) for lo, hi in ((0, cut), (cut, B))]
    out = cls.compute_advantages_and_returns(me, exps)
    rec.put(case, "raw_reward", torch.cat([e.advantages for e in out]), EM,
            "advantage.estimator='reinforce', gamma=1, kl_coef=0 and kl = 0 (the KL as a loss, --algo.kl.use_loss), "
            "reward clip_range=(-10, 10), two micro-batch experiences; the whitened advantages")


for case, x in load_inputs(sys.argv[1]).items():
    rec.attempt(f"{case}: length shaping", lambda: length_shaping(case, x))
    rec.attempt(f"{case}: raw reward", lambda: raw_reward(case, x))
rec.unavailable("openrlhf/trainer/ppo_utils/samples_generator.py:SamplesGenerator._generate_vllm", "dynamic_sampling_mask",
                "dynamic filtering is inline in a loop over Ray object references (keep a prompt when min_r < mean score "
                "< max_r); with scores in {0, 1} and the default range (0, 1) it is the not-all-equal rule")
rec.save(sys.argv[2], sys.argv[3], dict(torch=torch.__version__))
print(f"[openrlhf] {len(rec.records)} outputs, {len(rec.failed)} failures")
