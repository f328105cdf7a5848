"""Freeze NeMo-RL's advantage estimators' outputs on the advantage-frontier inputs: tests/fixtures/advantages_nemo_rl.npz.

NeMo-RL is not on the package index. This script runs its estimators from a source checkout of
NVIDIA-NeMo/RL at REVISION (a git directory given as the first argument, e.g. the one the `fetch` tool brings),
in the `trl` environment of tools/refenvs.py (it has torch 2.13.0):

    ~/.cache/dew_rl/refenvs/trl/bin/python tools/make_nemo_rl_advantage_fixtures.py /path/to/NVIDIA-NeMo+RL/repo

nemo_rl/algorithms/advantage_estimator.py and nemo_rl/algorithms/utils.py import NeMo-RL's whole stack
(transformers tokenizers, chat templates, the loss configs) at their top, none of which the estimators use. So the
script reads the two files at REVISION (`git show`), takes the definitions it needs from their syntax trees (`ast`):
`calculate_baseline_and_std_per_prompt`, `masked_mean`, `masked_var`, `calculate_kl` from utils.py and
`GRPOAdvantageEstimator`, `GDPOAdvantageEstimator`, `GeneralizedAdvantageEstimator` from advantage_estimator.py,
and executes them unchanged in a namespace holding torch. NeMo-RL's own code, run; nothing is copied into this
repository: the outputs go to the fixture, with the revision, the files and the settings in the .json next to it.
"""
from __future__ import annotations

import ast
import json
import subprocess
import sys
import types
from pathlib import Path
from typing import Optional

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
REVISION = "7ea279abfbeb698b092856d0dab61e7cf39bc909"
OUT = ROOT / "tests" / "fixtures" / "advantages_nemo_rl.npz"
WANTED = {"nemo_rl/algorithms/utils.py": {"calculate_baseline_and_std_per_prompt", "masked_mean", "masked_var",
                                          "calculate_kl"},
          "nemo_rl/algorithms/advantage_estimator.py": {"GRPOAdvantageEstimator", "GDPOAdvantageEstimator",
                                                        "GeneralizedAdvantageEstimator"}}


def load_nemo(git_dir: str) -> dict:
    ns = {"torch": torch, "Optional": Optional, "ClippedPGLossConfig": object, "BaseModel": object,
          "get_gdpo_reward_component_keys": lambda batch: sorted(k for k in batch if k.startswith("reward/"))}
    for path, names in WANTED.items():
        src = subprocess.run(["git", "--git-dir", git_dir, "show", f"{REVISION}:{path}"], check=True,
                             capture_output=True, text=True).stdout
        tree = ast.parse(src)
        body = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name in names]
        assert {n.name for n in body} == names, (path, names - {n.name for n in body})
        exec(compile(ast.Module(body=body, type_ignores=[]), f"NVIDIA-NeMo/RL@{REVISION[:12]}:{path}", "exec"), ns)
    ns["get_gdpo_reward_component_keys"] = ns["get_gdpo_reward_component_keys"]
    return ns


def main(argv: list[str]) -> int:
    git_dir = argv[0]
    import conformance_advantages as drv  # tools/ is on the path when this script runs
    inputs = drv.make_inputs()
    nemo = load_nemo(git_dir)
    arrays, records = dict(inputs), []
    loss_cfg = types.SimpleNamespace(use_kl_in_reward=False, reference_policy_kl_penalty=0.0,
                                     reference_policy_kl_type="k3")

    def put(case, kind, value, function, settings, **params):
        key = "/".join(["nemo_rl", case, kind] + [f"{k}={params[k]}" for k in sorted(params)])
        arrays[key] = np.asarray(value.detach().numpy(), np.float64)
        records.append(dict(key=key, framework="nemo_rl", case=case, kind=kind, params=params,
                            framework_function=function, settings=settings, dtype=str(value.dtype)))

    for case, x in drv.cases_of(inputs).items():
        prompt_ids = torch.tensor(x["ids"])[:, None]  # NeMo-RL compares prompt rows: one id column per row
        mask = torch.tensor(x["mask"])
        rewards = torch.tensor(x["rewards"])
        for loo in (True, False):
            est = nemo["GRPOAdvantageEstimator"](types.SimpleNamespace(use_leave_one_out_baseline=loo,
                                                                       normalize_rewards=True), loss_cfg)
            put(case, "grpo_loo" if loo else "grpo", est.compute_advantage(prompt_ids, rewards, mask) * mask,
                "nemo_rl/algorithms/advantage_estimator.py:GRPOAdvantageEstimator",
                f"use_leave_one_out_baseline={loo}, normalize_rewards=True (grpo_math_1B.yaml: both True)",
                **({"normalize": True} if loo else {}))
        batch = {f"reward/c{k}": torch.tensor(x["components"][:, k]) for k in range(x["components"].shape[1])}
        for loo in (False, True):
            for weights in (None, [1.0, 0.5, 2.0]):
                est = nemo["GDPOAdvantageEstimator"](types.SimpleNamespace(
                    use_leave_one_out_baseline=loo, normalize_rewards=True, reward_weights=weights), loss_cfg)
                put(case, "gdpo", est.compute_advantage(prompt_ids, rewards, mask, batch) * mask,
                    "nemo_rl/algorithms/advantage_estimator.py:GDPOAdvantageEstimator",
                    f"use_leave_one_out_baseline={loo} (gdpo_math_1B.yaml: False), normalize_rewards=True, "
                    f"reward_weights={weights}; components reward/c0, reward/c1, reward/c2",
                    leave_one_out=loo, weights=weights)
        for lam_v, lam_p, alpha in ((0.95, None, 0.0), (1.0, 0.9, 0.0), (1.0, None, 0.5)):
            cfg = dict(gae_lambda=0.95, gae_gamma=0.99, normalize_advantages=True, gae_lambda_value=lam_v,
                       gae_lambda_policy=lam_p, length_adaptive_alpha=alpha)
            est = nemo["GeneralizedAdvantageEstimator"](cfg, loss_cfg)
            adv, ret = est.compute_advantage(prompt_ids, rewards, mask, torch.tensor(x["values"]))
            lam_policy = 0.95 if lam_p is None else lam_p
            settings = (f"gae_gamma=0.99, gae_lambda=0.95, gae_lambda_value={lam_v}, gae_lambda_policy={lam_p}, "
                        f"length_adaptive_alpha={alpha}, normalize_advantages=True, no KL in the reward")
            params = dict(gamma=0.99, lam_policy=lam_policy, lam_value=lam_v, alpha=alpha)
            fn = "nemo_rl/algorithms/advantage_estimator.py:GeneralizedAdvantageEstimator"
            put(case, "gae_advantages", adv, fn, settings, **params)
            put(case, "gae_returns", ret, fn, settings, **params)
    np.savez_compressed(OUT, **arrays)
    OUT.with_suffix(".json").write_text(json.dumps(dict(
        framework="nemo_rl", version=f"NeMo-RL NVIDIA-NeMo/RL@{REVISION}", revision=REVISION,
        files=sorted(WANTED), how="source checkout; the definitions above executed from the files at the revision "
        "(tools/make_nemo_rl_advantage_fixtures.py), torch " + torch.__version__, records=records, failed=[],
        not_run=[dict(framework="nemo_rl", framework_function="ReinforcePlusPlusAdvantageEstimator",
                      dew_rl="reinforce_plus_plus_baseline", why="not part of this family (chapter 02e)")]),
        indent=1) + "\n")
    print(f"[nemo_rl] {len(records)} outputs frozen in {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
