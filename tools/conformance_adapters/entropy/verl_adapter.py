"""Conformance adapter of the entropy/KL-placement family for verl 0.9.1 (tools/conformance_entropy.py).

Runs in the `verl` environment of tools/refenvs.py. Calls, on the family's inputs, in float32:

* `verl.trainer.ppo.core_algos.kl_penalty` for every kind verl accepts, including `abs` and the `+`
  (straight-through) forms, recording the value and the gradient with respect to `logprob`;
* `apply_kl_penalty` of `verl/trainer/ppo/ray_trainer.py` (the KL in the reward, `algorithm.use_kl_in_reward`
  with `algorithm.kl_penalty`). That module imports the whole trainer (dataloaders, Ray); the function is
  therefore compiled from the installed wheel's own source text, in a namespace holding verl's
  `core_algos` and `masked_mean`, and called with a TensorDict batch and verl's `FixedKLController`. Its
  code is verl's, read at run time; nothing is copied into this repository.

    <verl-python> tools/conformance_adapters/entropy/verl_adapter.py INPUTS.npz OUTPUTS.npz OUTPUTS.json
"""
import ast
import inspect
import sys
import types

import numpy as np
import torch
import verl
from tensordict import TensorDict
from verl.trainer.ppo import core_algos as ca
from verl.utils.torch_functional import masked_mean

from _common import Recorder, load_inputs

assert verl.__version__ == "0.9.1", verl.__version__
CA = "verl/trainer/ppo/core_algos.py"
RT = "verl/trainer/ppo/ray_trainer.py"
rec = Recorder("verl", f"verl {verl.__version__}")
KINDS = ("kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3", "kl+", "k1+", "abs+", "mse+", "k2+", "low_var_kl+", "k3+")


def function_from_source(path, name, namespace):
    "Compile one top-level function of an installed verl file from its own source text."
    src = open(path).read()
    node = next(n for n in ast.parse(src).body if isinstance(n, ast.FunctionDef) and n.name == name)
    code = compile(ast.Module(body=[node], type_ignores=[]), path, "exec")
    exec(code, namespace)
    return namespace[name]


ray_trainer_path = inspect.getfile(ca).replace("core_algos.py", "ray_trainer.py")
apply_kl_penalty = function_from_source(ray_trainer_path, "apply_kl_penalty",
                                        dict(torch=torch, core_algos=ca, masked_mean=masked_mean, DataProto=object))


def t(a, grad=False):
    return torch.tensor(np.asarray(a, np.float32), requires_grad=grad)


def run_case(case, x):
    put = lambda *a, **k: rec.put(case, *a, **k)  # noqa: E731

    def kinds():
        for kind in KINDS:
            lp = t(x["lp"], grad=True)
            out = ca.kl_penalty(lp, t(x["ref"]), kind)
            out.sum().backward()
            put("kl_penalty", out, f"{CA}:kl_penalty", f"kl_penalty={kind!r}, logprob=lp, ref_logprob=ref", estimator=kind)
            put("kl_penalty_grad", lp.grad, f"{CA}:kl_penalty (gradient of the sum w.r.t. logprob)",
                f"kl_penalty={kind!r}", estimator=kind)
    rec.attempt(f"{case}: kl_penalty", kinds)

    def reward():
        B = x["mask"].shape[0]
        for kind in ("kl", "abs", "mse", "low_var_kl", "k3+"):
            batch = TensorDict(dict(response_mask=t(x["mask"]), token_level_scores=t(x["token_scores"]),
                                    old_log_probs=t(x["old"]), ref_log_prob=t(x["ref"])), batch_size=[B])
            data = types.SimpleNamespace(batch=batch)
            data, metrics = apply_kl_penalty(data, ca.FixedKLController(0.05), kl_penalty=kind)
            put("kl_reward", data.batch["token_level_rewards"], f"{RT}:apply_kl_penalty",
                f"algorithm.use_kl_in_reward=True, algorithm.kl_penalty={kind!r}, kl_ctrl.type='fixed', "
                "kl_ctrl.kl_coef=0.05; token_level_scores = the outcome score on the last valid token", estimator=kind,
                kl_coef=0.05)
            put("kl_reward_metric", np.float64(metrics["actor/reward_kl_penalty"]), f"{RT}:apply_kl_penalty "
                "(metric actor/reward_kl_penalty)", f"algorithm.kl_penalty={kind!r}", estimator=kind)
    rec.attempt(f"{case}: apply_kl_penalty", reward)


cases = load_inputs(sys.argv[1])
for case, x in cases.items():
    run_case(case, x)
rec.save(sys.argv[2], sys.argv[3], dict(torch=torch.__version__))
print(f"[verl] {len(rec.records)} outputs, {len(rec.failed)} failures")
