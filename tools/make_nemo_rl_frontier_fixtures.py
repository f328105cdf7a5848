"""Freeze two NeMo-RL conventions of the frontier gaps (A16 raw-reward advantages, B19 VAPO positive-example NLL): tests/fixtures/frontier_nemo_rl.npz.

NeMo-RL is not on the package index. This script runs its code from a source checkout of NVIDIA-NeMo/RL at REVISION
(a git directory given as the first argument, e.g. the one the `fetch` tool brings), in the `trl` environment of
tools/refenvs.py (torch 2.13.0, pydantic):

    ~/.cache/dew_rl/refenvs/trl/bin/python tools/make_nemo_rl_frontier_fixtures.py /path/to/NVIDIA-NeMo+RL/repo

As tools/make_nemo_rl_advantage_fixtures.py does, it reads the files below at REVISION (`git show`), takes the
definitions it needs from their syntax trees (`ast`) and executes them unchanged in a namespace holding torch,
pydantic's BaseModel and the typing names they use:

* nemo_rl/algorithms/utils.py: `masked_mean`, `calculate_kl`;
* nemo_rl/algorithms/loss/interfaces.py: `LossType`, `MetricNormalizer`, `LossInputType`, `LossFunction`;
* nemo_rl/algorithms/loss/loss_functions.py: `Tensor` (its TypeVar), `ClippedPGLossConfig`, `ClippedPGLossDataDict`,
  `ClippedPGLossFn`;
* nemo_rl/algorithms/advantage_estimator.py: `RawRewardAdvantageEstimator`.

The one name stubbed is `BatchedDataDict` (nemo_rl.distributed): ClippedPGLossFn.__call__ only names it in an
annotation and indexes the batch like a mapping, so it is a subscriptable class that refuses to be instantiated, and
the batch is a plain dict of tensors. Nothing of NeMo-RL is copied into this repository: the outputs go to the
fixture, with the revision, the files and the settings in the .json next to it.

A16 (`raw_reward`): `RawRewardAdvantageEstimator({"normalize_advantages": n}, cfg).compute_advantage(prompt_ids,
rewards, mask)`, the [B, T] advantages as returned (NeMo-RL does not zero the masked positions). Cases ra, rb, rc:
B 6-12, T 5-9, lengths 1 to T, ties in the rewards, rb with a fully masked row; rd: every valid reward equal (the
zero-variance corner, where the 1e-8 variance floor decides the scale).

B19 (`positive_nll`): `ClippedPGLossFn(ClippedPGLossConfig(positive_example_nll_weight=w))(next_token_logprobs,
data, global_valid_seqs, global_valid_toks)` with w in (0.1, 0.5) and with w = 0, everything else identical (the
config's defaults: PPO clipping 0.2, k3 KL penalty 0.01, token-level loss), one process. Recorded: `positive_nll` =
(loss_w - loss_0) / w (the float32 losses subtracted in float64), `positive_nll_grad` = (d loss_w - d loss_0) / w
w.r.t. the per-token current log-probs (torch autograd; the loss takes log-probs, not logits), and
`positive_nll_metric`, the loss's own reported `positive_nll_loss`. The inputs (drawn here with a fixed seed, float32,
by the torch-free `make_inputs`) are stored under in/<case>/<name>. Cases pa (rewards > 0, = 0 and < 0, a positive
row cut by sample_mask), pb (no reward > 0: NeMo-RL adds 0), pc (a positive row with no valid token, another cut by
sample_mask, a reward 0.25 > 0). tests/test_frontier_nemo_rl.py compares dew_rl with the frozen outputs.
"""
from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
REVISION = "7ea279abfbeb698b092856d0dab61e7cf39bc909"
OUT = ROOT / "tests" / "fixtures" / "frontier_nemo_rl.npz"
SEED = 20260516
WEIGHTS = (0.1, 0.5)
WANTED = {"nemo_rl/algorithms/utils.py": {"masked_mean", "calculate_kl"},
          "nemo_rl/algorithms/loss/interfaces.py": {"LossType", "MetricNormalizer", "LossInputType", "LossFunction"},
          "nemo_rl/algorithms/loss/loss_functions.py": {"Tensor", "ClippedPGLossConfig", "ClippedPGLossDataDict",
                                                        "ClippedPGLossFn"},
          "nemo_rl/algorithms/advantage_estimator.py": {"RawRewardAdvantageEstimator"}}
RAW_CASES = ("ra", "rb", "rc", "rd")  # A16; rd: constant valid rewards
NLL_CASES = ("pa", "pb", "pc")  # B19


def _prefix_mask(lengths, T):
    return (np.arange(T)[None, :] < np.asarray(lengths)[:, None]).astype(np.float32)


def make_inputs() -> dict:
    """Every input, float32, under in/<case>/<name>; numpy only (tests/test_frontier_nemo_rl.py re-draws them)."""
    rng = np.random.default_rng(SEED)
    f32 = lambda a: np.asarray(a, np.float32)  # noqa: E731
    x = {}
    # A16: rewards [B], mask [B, T]; lengths from 1 to T, ties in the rewards
    lens_a = [1, 2, 3, 4, 5, 6, 6, 3]
    x["in/ra/rewards"] = f32([1.0, 0.0, 1.0, 0.5, 0.0, 1.0, -1.0, 0.5])
    x["in/ra/mask"] = _prefix_mask(lens_a, 6)
    lens_b = [9, 0, 1, 5, 7, 2, 9, 4, 3, 8, 6, 1]  # row 1 fully masked (its reward, 7.5, must not count)
    r = np.round(rng.normal(0.0, 1.0, 12), 2)
    r[[3, 9]] = r[0]  # ties
    r[1] = 7.5
    x["in/rb/rewards"] = f32(r)
    x["in/rb/mask"] = _prefix_mask(lens_b, 9)
    x["in/rc/rewards"] = f32(rng.choice([-0.25, 0.0, 0.25, 1.0], 6))
    x["in/rc/mask"] = _prefix_mask([5, 1, 3, 4, 2, 5], 5)
    # degenerate: every valid token has the same reward (zero variance, the 1e-8 floor); row 7 fully masked
    x["in/rd/rewards"] = f32([0.7] * 7 + [-3.0, 0.7])
    x["in/rd/mask"] = _prefix_mask([1, 2, 3, 4, 5, 6, 7, 0, 7], 7)
    # B19: the loss's batch [B, T + 1] (column 0 is the prompt; NeMo-RL slices [:, 1:]) and log-probs [B, T]
    # (B, T, rewards, response lengths, sample_mask)
    specs = {"pa": (8, 7, [1.0, 0.0, -1.0, 0.5, 1.0, 0.0, 2.0, -0.5], [7, 1, 4, 2, 6, 7, 3, 5],
                    [1, 1, 1, 1, 1, 1, 0, 1]),
             "pb": (6, 5, [0.0, -1.0, 0.0, -0.5, 0.0, -1.0], [5, 1, 3, 4, 2, 5], [1] * 6),  # no reward > 0
             "pc": (6, 6, [1.0, 1.0, 0.25, 0.0, -2.0, 1.0], [0, 6, 1, 4, 6, 3], [1, 1, 1, 1, 1, 0])}
    for case, (B, T, rewards, lens, smask) in specs.items():
        curr = -rng.gamma(1.5, 0.8, (B, T))
        prev = curr + rng.normal(0.0, 0.15, (B, T))
        gen = prev + rng.normal(0.0, 0.05, (B, T))
        ref = curr + rng.normal(0.0, 0.3, (B, T))
        pad = lambda a: np.concatenate([np.zeros((a.shape[0], 1)), a], 1)  # noqa: E731
        x[f"in/{case}/curr_logprobs"] = f32(curr)
        x[f"in/{case}/prev_logprobs"] = f32(pad(prev))
        x[f"in/{case}/generation_logprobs"] = f32(pad(gen))
        x[f"in/{case}/reference_policy_logprobs"] = f32(pad(ref))
        x[f"in/{case}/advantages"] = f32(rng.normal(0.0, 1.0, (B, T + 1)))
        x[f"in/{case}/token_mask"] = f32(pad(_prefix_mask(lens, T)))
        x[f"in/{case}/sample_mask"] = f32(smask)
        x[f"in/{case}/rewards"] = f32(rewards)
    return x


def load_nemo(git_dir: str) -> dict:
    import enum
    from typing import Any, NotRequired, Optional, Protocol, TypedDict, TypeVar

    import torch
    from pydantic import BaseModel

    class BatchedDataDict:  # stub: named only in an annotation of ClippedPGLossFn.__call__ (and of LossFunction)
        def __class_getitem__(cls, item):
            return cls

        def __init__(self, *a, **k):
            raise RuntimeError("stub nemo_rl.distributed.batched_data_dict.BatchedDataDict: not used on this path")

    ns = {"torch": torch, "enum": enum, "Any": Any, "NotRequired": NotRequired, "Optional": Optional,
          "Protocol": Protocol, "TypedDict": TypedDict, "TypeVar": TypeVar, "BaseModel": BaseModel,
          "BatchedDataDict": BatchedDataDict}
    for path, names in WANTED.items():
        src = subprocess.run(["git", "--git-dir", git_dir, "show", f"{REVISION}:{path}"], check=True,
                             capture_output=True, text=True).stdout
        tree = ast.parse(src)
        body = [n for n in tree.body if (isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name in names)
                or (isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)
                    and n.targets[0].id in names)]
        got = {n.name if hasattr(n, "name") else n.targets[0].id for n in body}
        assert got == names, (path, names - got)
        # dont_inherit: the code runs under its own file's future flags (none), not this script's `annotations`
        exec(compile(ast.Module(body=body, type_ignores=[]), f"NVIDIA-NeMo/RL@{REVISION[:12]}:{path}", "exec",
                     dont_inherit=True), ns)
    return ns


def lines_of(git_dir: str) -> dict:
    "name -> 'file:line' of each definition run, at REVISION."
    out = {}
    for path, names in WANTED.items():
        src = subprocess.run(["git", "--git-dir", git_dir, "show", f"{REVISION}:{path}"], check=True,
                             capture_output=True, text=True).stdout
        for n in ast.parse(src).body:
            name = getattr(n, "name", None) or (n.targets[0].id if isinstance(n, ast.Assign) and
                                                isinstance(n.targets[0], ast.Name) else None)
            if name in names:
                out[name] = f"{path}:{n.lineno}"
    return out


def main(argv: list[str]) -> int:
    import torch
    git_dir = argv[0]
    nemo = load_nemo(git_dir)
    where = lines_of(git_dir)
    inputs = make_inputs()
    arrays, records = dict(inputs), []

    def put(case, kind, value, function, settings, dtype, **params):
        key = "/".join(["nemo_rl", case, kind] + [f"{k}={params[k]}" for k in sorted(params)])
        arrays[key] = np.asarray(value, np.float64)
        records.append(dict(key=key, framework="nemo_rl", case=case, kind=kind, params=params,
                            framework_function=function, settings=settings, dtype=dtype))

    fn_raw = "nemo_rl/algorithms/advantage_estimator.py:RawRewardAdvantageEstimator"  # lines: the .json's "how"
    Cfg, Loss = nemo["ClippedPGLossConfig"], nemo["ClippedPGLossFn"]
    for case in RAW_CASES:
        rewards = torch.tensor(inputs[f"in/{case}/rewards"])
        mask = torch.tensor(inputs[f"in/{case}/mask"])
        prompt_ids = torch.zeros(rewards.shape[0], dtype=torch.long)  # unused by the estimator
        for norm in (True, False):
            est = nemo["RawRewardAdvantageEstimator"]({"normalize_advantages": norm}, Cfg())
            adv, ret = est.compute_advantage(prompt_ids, rewards, mask)
            assert ret is None
            put(case, "raw_reward", adv.detach().numpy(), fn_raw,
                f"estimator_config={{'normalize_advantages': {norm}}}; the [B, T] advantages as returned, masked "
                "positions included (not zeroed)", str(adv.dtype), normalize=norm)

    fn_loss = "nemo_rl/algorithms/loss/loss_functions.py:ClippedPGLossFn"
    for case in NLL_CASES:
        def run(w):
            lp = torch.tensor(inputs[f"in/{case}/curr_logprobs"], requires_grad=True)
            data = {k: torch.tensor(inputs[f"in/{case}/{k}"]) for k in
                    ("advantages", "prev_logprobs", "generation_logprobs", "reference_policy_logprobs",
                     "token_mask", "sample_mask", "rewards")}
            mask = data["token_mask"][:, 1:] * data["sample_mask"][:, None]
            loss, metrics = Loss(Cfg(positive_example_nll_weight=w))(
                lp, data, data["sample_mask"].sum(), mask.sum())
            loss.backward()
            return loss.detach(), lp.grad.detach(), metrics

        loss0, grad0, _ = run(0.0)
        for w in WEIGHTS:
            loss_w, grad_w, met = run(w)
            settings = (f"ClippedPGLossConfig(positive_example_nll_weight={w}) (other fields: defaults, "
                        f"{Cfg().model_dump()}) vs the same with weight 0.0; data: advantages, prev/generation/"
                        "reference_policy logprobs, token_mask [B, T+1] (column 0 the prompt), sample_mask [B], "
                        "rewards [B]; global_valid_seqs = sample_mask.sum(), global_valid_toks = (token_mask[:, 1:] "
                        "* sample_mask).sum(); one process")
            put(case, "positive_nll", (np.float64(loss_w.numpy()) - np.float64(loss0.numpy())) / w, fn_loss,
                settings + "; value (loss_w - loss_0) / w, the float32 losses subtracted in float64",
                str(loss_w.dtype), weight=w)
            put(case, "positive_nll_grad", (grad_w.numpy().astype(np.float64) - grad0.numpy()) / w, fn_loss,
                settings + "; value (d loss_w - d loss_0) / w w.r.t. next_token_logprobs [B, T] (torch autograd)",
                str(grad_w.dtype), weight=w)
            put(case, "positive_nll_metric", met["positive_nll_loss"], fn_loss,
                settings + "; value: the loss's own metrics['positive_nll_loss']", "python float", weight=w)
    np.savez_compressed(OUT, **arrays)
    OUT.with_suffix(".json").write_text(json.dumps(dict(
        framework="nemo_rl", version=f"NeMo-RL NVIDIA-NeMo/RL@{REVISION}", revision=REVISION,
        files=sorted(WANTED), how="source checkout; the definitions " + ", ".join(f"{k} ({v})" for k, v in
                                                                                 sorted(where.items()))
        + " executed unchanged from the files at the revision (tools/make_nemo_rl_frontier_fixtures.py), "
        "BatchedDataDict (an annotation) stubbed, torch " + torch.__version__, records=records, failed=[],
        not_run=[dict(framework="nemo_rl", framework_function="nemo_rl/algorithms/loss/utils.py:prepare_loss_input",
                      dew_rl="-", why="ClippedPGLossFn.input_type is LOGPROB: the loss takes per-token log-probs, so "
                      "the logits -> log-probs step is not part of the convention (the gradient is w.r.t. the "
                      "log-probs)")]),
        indent=1) + "\n")
    print(f"[nemo_rl] {len(records)} outputs frozen in {OUT.relative_to(ROOT)} ({OUT.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
