"""Freeze ROLL's, slime's and NeMo-RL's outputs for the per-sample weights and the reward-KL estimators.

None of the three is installable on a CPU machine from the package index (the `roll` 0.13.4 on the index is
an unrelated web framework; slime and NeMo-RL need Megatron / Ray). Their functions are run from a git
checkout of each repository at the revision below: the function's own source text is read from the
checkout (`git show REV:path`), compiled alone (its module imports the whole trainer), and called with
torch on fixed inputs. Nothing of theirs is copied into this repository; only their outputs are frozen, in
tests/fixtures/entropy_frameworks.npz, with the revisions in its `meta` entry.

    <python with torch> tools/make_entropy_fixtures.py ROLL_GIT_DIR SLIME_GIT_DIR NEMO_RL_GIT_DIR

(the `trl` environment of tools/refenvs.py has torch; the git directories are bare snapshots)
"""
import __future__
import ast
import json
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "entropy_frameworks.npz"
REVS = {"ROLL": "8eb27cc2dc34c4d1310b169d9b86d339004d811a", "slime": "624b824a898ab0ec1fcb4d373004c7f3852bf515",
        "NeMo-RL": "7ea279abfbeb698b092856d0dab61e7cf39bc909"}


def function(git_dir, rev, path, name, namespace, cls=None):
    "Compile one function (or method of `cls`) from the checkout's source text, without its decorators."
    src = subprocess.run(["git", "--git-dir", git_dir, "show", f"{rev}:{path}"], check=True, capture_output=True,
                         text=True).stdout
    body = ast.parse(src).body
    if cls:
        body = next(n for n in body if isinstance(n, ast.ClassDef) and n.name == cls).body
    node = next(n for n in body if isinstance(n, ast.FunctionDef) and n.name == name)
    node.decorator_list = []
    code = compile(ast.Module(body=[node], type_ignores=[]), f"{rev[:12]}:{path}", "exec",
                   flags=__future__.annotations.compiler_flag, dont_inherit=True)  # annotations stay unevaluated
    exec(code, namespace)
    return namespace[name]


def inputs():
    rng = np.random.default_rng(20261220)
    B, T = 6, 9
    lengths = np.array([9, 7, 1, 0, 4, 9])
    mask = (np.arange(T)[None, :] < lengths[:, None]).astype(np.float32)
    loss = rng.normal(size=(B, T)).astype(np.float32)
    difficulty = np.array([0.9, 0.1, 0.5, 1.3, -0.2, 0.7], np.float32)
    lp = rng.normal(-1.0, 0.8, size=(B, T)).astype(np.float32)
    ref = (lp + rng.normal(0, 0.7, size=(B, T))).astype(np.float32)
    ref[0, 0] = lp[0, 0] - 30.0
    ref[1, 0] = lp[1, 0] + 12.0
    return dict(mask=mask, loss=loss, difficulty=difficulty, lp=lp, ref=ref)


def main(roll_dir, slime_dir, nemo_dir):
    x = inputs()
    out = {f"in/{k}": v for k, v in x.items()}
    t = lambda a: torch.tensor(a)  # noqa: E731
    # ROLL: compute_sample_weights (a method of the RLVR ActorWorker) and agg_loss(weights=)
    ns = dict(torch=torch, np=np)
    ROLL = REVS["ROLL"]
    for name in ("masked_mean", "masked_sum", "agg_loss"):
        function(roll_dir, ROLL, "roll/utils/functionals.py", name, ns)
    csw = function(roll_dir, ROLL, "roll/pipeline/rlvr/actor_worker.py", "compute_sample_weights", ns, cls="ActorWorker")
    for dw in (False, True):
        for lw in (False, True):
            me = types.SimpleNamespace(pipeline_config=types.SimpleNamespace(difficulty_loss_weight=dw, length_loss_weight=lw),
                                       logger=None)
            data = types.SimpleNamespace(non_tensor_batch={"difficulty": x["difficulty"]})
            w = csw(me, data, t(x["mask"]).long())
            out[f"ROLL/sample_weights/difficulty={dw}/length={lw}"] = w.numpy().astype(np.float64)
            for mode in ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"):
                masked_loss = t(x["loss"]) * t(x["mask"])  # ROLL's token-mean does not mask: pass a masked loss
                v = ns["agg_loss"](masked_loss, t(x["mask"]), mode, weights=w)
                out[f"ROLL/agg_loss/{mode}/difficulty={dw}/length={lw}"] = np.float64(v)
    out["ROLL/agg_loss/token-mean/unmasked_loss"] = np.float64(ns["agg_loss"](t(x["loss"]), t(x["mask"]), "token-mean"))
    # slime: compute_approx_kl (the reward KL takes its kl_loss_type)
    ns = dict(torch=torch)
    kl = function(slime_dir, REVS["slime"], "slime/utils/ppo_utils.py", "compute_approx_kl", ns)
    for kind in ("k1", "k2", "k3", "low_var_kl"):
        out[f"slime/compute_approx_kl/{kind}"] = kl(t(x["lp"]), t(x["ref"]), kl_loss_type=kind).numpy().astype(np.float64)
    # NeMo-RL: calculate_kl with its defaults (reference_policy_kl_type)
    ns = dict(torch=torch)
    ck = function(nemo_dir, REVS["NeMo-RL"], "nemo_rl/algorithms/utils.py", "calculate_kl", ns)
    for kind in ("k1", "k2", "k3"):
        out[f"NeMo-RL/calculate_kl/{kind}"] = ck(t(x["lp"]), t(x["ref"]), kl_type=kind).numpy().astype(np.float64)
    meta = dict(revisions=REVS, torch=torch.__version__, files={
        "ROLL": ["roll/pipeline/rlvr/actor_worker.py:ActorWorker.compute_sample_weights", "roll/utils/functionals.py:agg_loss"],
        "slime": ["slime/utils/ppo_utils.py:compute_approx_kl"], "NeMo-RL": ["nemo_rl/algorithms/utils.py:calculate_kl"]})
    out["meta"] = np.array(json.dumps(meta))
    np.savez_compressed(OUT, **out)
    print(f"wrote {OUT.relative_to(ROOT)}: {len(out)} arrays")


if __name__ == "__main__":
    main(*sys.argv[1:4])
