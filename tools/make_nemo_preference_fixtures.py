"""Freeze NeMo-RL's DPO loss (`DPOLossFn`: DPO + SFT) on the preference conformance inputs (tests/fixtures/nemo_rl_dpo.npz).

NeMo-RL is not on the package index, so it is run from a git snapshot of NVIDIA-NeMo/RL (a bare repository, for
example the one the project's `fetch` tool brings to /work/.mirror/NVIDIA-NeMo+RL/repo):

    <trl-python> tools/make_nemo_preference_fixtures.py GIT_DIR [REVISION]

in tools/refenvs.py's `trl` environment (torch 2.13.0 CPU, pydantic, transformers). The script reads four source
files of the revision with `git show` into a temporary directory (nothing is copied into this repository) and
loads them by path: nemo_rl/algorithms/loss/{loss_functions,interfaces}.py and nemo_rl/algorithms/utils.py (its
`masked_mean`). The package `__init__`s and the modules the DPO loss never calls (distributed collectives, the
cross-tokenizer helpers, DTensor parallelisation, the chat templates, the logger, `BatchedDataDict`) are registered
as stub modules whose attributes refuse to be used. Then, for cases a and b of tools/conformance_preference.py's
inputs, it calls `DPOLossFn(DPOLossConfig(...))(next_token_logprobs, data, global_valid_seqs, global_valid_toks)`
as NeMo-RL's DPO trainer does: chosen and rejected rows interleaved, a one-token prompt (`token_mask[:, 0] = 0`,
the log-probs of token t+1 at column t), `sample_mask` all ones, `global_valid_seqs = 2P`, one process; and records
the loss and its gradient w.r.t. the per-token log-probs (torch autograd), with the inputs and the revision.
tools/conformance_preference.py reads the fixture; tests/test_conformance.py re-checks it.
"""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import tempfile
import types
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "nemo_rl_dpo.npz"
FILES = ("nemo_rl/algorithms/loss/interfaces.py", "nemo_rl/algorithms/utils.py",
         "nemo_rl/algorithms/loss/loss_functions.py")
FN = "nemo_rl/algorithms/loss/loss_functions.py:DPOLossFn"


class _Refuse(types.ModuleType):
    "A stub module: any attribute not set explicitly is a loud error, so nothing silently uses the stub."

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _refusing(f"{self.__name__}.{name}")


def _refusing(what):
    class _R:
        def __init__(self, *a, **k):
            raise RuntimeError(f"stub {what}: not part of the DPO loss")

        def __class_getitem__(cls, item):
            return cls
    _R.__name__ = what.rsplit(".", 1)[-1]
    return _R


def load_nemo(git_dir: str, rev: str):
    tmp = Path(tempfile.mkdtemp(prefix="nemo_rl_"))
    for f in FILES:
        text = subprocess.run(["git", f"--git-dir={git_dir}", "show", f"{rev}:{f}"], check=True, capture_output=True,
                              text=True).stdout
        (tmp / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp / f).write_text(text)
    for pkg in ("nemo_rl", "nemo_rl.algorithms", "nemo_rl.algorithms.loss"):
        mod = types.ModuleType(pkg)
        mod.__path__ = [str(tmp.joinpath(*pkg.split(".")))]
        sys.modules[pkg] = mod
    for name in ("nemo_rl.distributed", "nemo_rl.distributed.batched_data_dict", "nemo_rl.distributed.model_utils",
                 "nemo_rl.algorithms.x_token", "nemo_rl.algorithms.x_token.loss_utils", "nemo_rl.models",
                 "nemo_rl.models.dtensor", "nemo_rl.models.dtensor.parallelize", "nemo_rl.models.policy",
                 "nemo_rl.data", "nemo_rl.data.chat_templates", "nemo_rl.utils", "nemo_rl.utils.fastokens",
                 "nemo_rl.utils.logger"):
        sys.modules[name] = _Refuse(name)
    sys.modules["nemo_rl.distributed.batched_data_dict"].BatchedDataDict = dict  # a mapping of tensors, as used here
    sys.modules["nemo_rl.data.chat_templates"].COMMON_CHAT_TEMPLATES = {}
    mods = {}
    for f in FILES:
        name = f[:-3].replace("/", ".")
        spec = importlib.util.spec_from_file_location(name, tmp / f)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        mods[name] = mod
    return mods["nemo_rl.algorithms.loss.loss_functions"]


def main(argv):
    git_dir = argv[0]
    rev = subprocess.run(["git", f"--git-dir={git_dir}", "rev-parse", argv[1] if len(argv) > 1 else "HEAD"],
                         check=True, capture_output=True, text=True).stdout.strip()
    lf = load_nemo(git_dir, rev)
    import conformance_preference as drv  # tools/ is on the path when this script runs
    inputs = drv.make_inputs()
    cases = drv.cases_of(inputs)
    store, records = {}, []
    grid = [dict(), dict(sft_loss_weight=0.5), dict(preference_average_log_probs=True),
            dict(sft_loss_weight=1.0, sft_average_log_probs=True),
            dict(reference_policy_kl_penalty=0.1, preference_loss_weight=0.5, sft_loss_weight=0.2,
                 preference_average_log_probs=True, sft_average_log_probs=True)]
    defaults = dict(reference_policy_kl_penalty=0.05, preference_loss_weight=1.0, sft_loss_weight=0.0,
                    preference_average_log_probs=False, sft_average_log_probs=False)
    assert lf.DPOLossConfig().model_dump() == defaults, lf.DPOLossConfig().model_dump()
    for case in ("a", "b"):
        x = cases[case]
        for k in ("pc", "pr", "rc", "rr", "mc", "mr"):
            store[f"in/{case}/{k}"] = inputs[f"in/{case}/{k}"]
        P, Tc = x["pc"].shape
        Tr = x["pr"].shape[1]
        T = max(Tc, Tr)
        pad = lambda a: np.pad(a, ((0, 0), (0, T - a.shape[1])))  # noqa: E731
        inter = lambda c, r: np.stack([pad(c), pad(r)], 1).reshape(2 * P, T)  # noqa: E731  c0, r0, c1, r1, ...
        for kw in grid:
            cfg = dict(defaults, **kw)
            lp = torch.tensor(inter(x["pc"], x["pr"]), dtype=torch.float32, requires_grad=True)
            tm = inter(x["mc"], x["mr"])
            data = dict(token_mask=torch.tensor(np.concatenate([np.zeros((2 * P, 1)), tm], 1), dtype=torch.float32),
                        reference_policy_logprobs=torch.tensor(np.concatenate([inter(x["rc"], x["rr"]),
                                                                               np.zeros((2 * P, 1))], 1),
                                                               dtype=torch.float32),
                        sample_mask=torch.ones(2 * P), input_ids=torch.zeros((2 * P, T + 1), dtype=torch.long))
            loss_fn = lf.DPOLossFn(lf.DPOLossConfig(**cfg))
            loss, metrics = loss_fn(lp, data, torch.tensor(2.0 * P), torch.tensor(float(tm.sum())))
            loss.backward()
            g = lp.grad.numpy().reshape(P, 2, T)
            settings = (", ".join(f"{k}={v!r}" for k, v in kw.items()) or "DPOLossConfig() defaults") + \
                "; chosen and rejected rows interleaved, a one-token prompt, sample_mask all ones, " \
                "global_valid_seqs = 2P, float32, one process"
            for kind, value in (("nemo_loss", loss.detach().numpy()), ("nemo_grad_chosen", g[:, 0, :Tc]),
                                ("nemo_grad_rejected", g[:, 1, :Tr])):
                key = "/".join(["nemo-rl", case, kind] + [f"{k}={cfg[k]}" for k in sorted(cfg)])
                store[key] = np.asarray(value, np.float64)
                records.append(dict(key=key, framework="nemo-rl", case=case, kind=kind, params=cfg,
                                    framework_function=f"NVIDIA-NeMo/RL@{rev[:12]}:{FN}" + (
                                        " (torch autograd)" if "grad" in kind else ""), settings=settings))
    meta = dict(framework="nemo-rl", version=f"NeMo-RL @{rev[:12]} (frozen)", revision=rev, files=list(FILES),
                config_defaults=dict(DPOLossConfig=lf.DPOLossConfig().model_dump()),
                torch=torch.__version__, records=records,
                how="tools/make_nemo_preference_fixtures.py, run once from a git snapshot; outputs frozen")
    store["meta/json"] = np.array(json.dumps(meta))
    np.savez_compressed(OUT, **store)
    print(f"wrote {OUT.relative_to(ROOT)}: {len(records)} NeMo-RL outputs at {rev[:12]}")


if __name__ == "__main__":
    main(sys.argv[1:])
