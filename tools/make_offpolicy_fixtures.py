"""Freeze the off-policy corrections of NeMo-RL, slime and AReaL, run from source checkouts (not on the package index).

    <trl-refenv-python> tools/make_offpolicy_fixtures.py \
        --source nemo_rl=/path/to/NVIDIA-NeMo/RL@<revision> \
        --source slime=/path/to/THUDM/slime@<revision> \
        --source areal=/path/to/inclusionAI/AReaL@<revision>

Each PATH is a directory holding the framework's package (a `git archive` of the repository at REVISION, kept
outside this repository; none of its code is copied here). The script runs in the `trl` environment of
tools/refenvs.py (torch 2.13.0 CPU), with `TORCHDYNAMO_DISABLE=1` so that `torch.compile` decorators run eagerly.
The frameworks' packages import heavy dependencies their loss code never uses (Ray, vLLM clients, loggers,
Megatron); those are registered as inert stub modules below (every attribute of a stub is an inert placeholder
class: nothing of the loss math goes through them). Every number written comes from the frameworks' own
functions:

* NeMo-RL: `nemo_rl/algorithms/loss/loss_functions.py:ClippedPGLossFn` (importance weights of each
  `truncated_importance_sampling_type`, read per token as the gradient of the loss with `disable_ppo_ratio=True`
  and advantages -1; its mismatch metrics; the KL term with and without `use_on_policy_kl_approximation`);
* slime: `slime/utils/ppo_utils.py` (`compute_approx_kl` with `importance_ratio`, `compute_opsm_mask`),
  `slime/backends/megatron_utils/loss.py` (`vanilla_tis_function`, `icepop_function`) and
  `examples/train_infer_mismatch_helper/mis.py` (`compute_mis_weights`, levels token / sequence / geometric,
  modes truncate / clip / mask);
* AReaL: `areal/utils/functional/functional.py` (`apply_rejection_sampling`, `ppo_actor_loss_fn`) and
  `areal/trainer/ppo/actor.py` (`compute_prox_logp_approximations`, log-linear).

Writes tests/fixtures/offpolicy_frameworks.npz (inputs and outputs) and tests/fixtures/offpolicy_frameworks.json
(revisions, settings, scalar results), which tests/test_conformance.py and the chapters 03i-03k read.
"""
from __future__ import annotations

import argparse
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
import types
from pathlib import Path

os.environ["TORCHDYNAMO_DISABLE"] = "1"
ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "offpolicy_frameworks"

# Third-party modules the frameworks import at module level and the loss code never calls.
STUBBED = ["requests", "PIL", "ray", "zmq", "pynvml", "uvicorn", "fastapi", "transformers", "mlflow", "swanlab", "wandb",
           "matplotlib", "prometheus_client", "tensorboard", "google", "hydra", "megatron", "httpx", "aiohttp",
           "colorlog", "tenacity", "flask", "torchdata", "werkzeug", "lark", "uvloop", "omegaconf", "numba", "orjson",
           "einops", "aiofiles", "openai", "trackio", "tensorboardX", "pybase64"]


class _Meta(type):
    def __getattr__(cls, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _placeholder(name)

    def __getitem__(cls, item):
        return cls

    def __or__(cls, other):
        return cls

    def __ror__(cls, other):
        return cls


def _placeholder(name):
    return _Meta(name, (), {"__init__": lambda s, *a, **k: None, "__call__": lambda s, *a, **k: None,
                            "__getattr__": lambda s, n: None})


class _Stub(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        value = _placeholder(name)
        setattr(self, name, value)
        return value


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path, target=None):
        if fullname.split(".")[0] in STUBBED:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        mod = _Stub(spec.name)
        mod.__path__ = []
        mod.__version__ = "5.0.0"
        return mod

    def exec_module(self, module):
        pass


sys.meta_path.insert(0, _StubFinder())
_tab = importlib.util.module_from_spec(importlib.machinery.ModuleSpec("tabulate", None))  # AReaL imports it;
_tab.tabulate = lambda *a, **k: ""                                                          # a string will do
sys.modules.setdefault("tabulate", _tab)

import numpy as np  # noqa: E402
import torch  # noqa: E402


def _inputs():
    import conformance_offpolicy  # tools/ is on the path when this script runs
    arrays = conformance_offpolicy.make_inputs()
    # case "c": case "b" with one token whose log ratio is 100 (exp overflows float32)
    for name in ("mask", "old", "rollout", "lp", "ref", "adv", "adv_row"):
        arrays[f"in/c/{name}"] = arrays[f"in/b/{name}"].copy()
    arrays["in/c/rollout"][1, 2] = arrays["in/c/old"][1, 2] - 100.0
    rng = np.random.default_rng(1818)
    for case in ("a", "b", "c"):
        arrays[f"in/{case}/versions"] = rng.integers(-1, 6, size=arrays[f"in/{case}/mask"].shape).astype(np.int64)
    return arrays


def t(a, grad=False):
    x = torch.tensor(np.asarray(a, np.float32))
    return x.requires_grad_(True) if grad else x


class Out:
    def __init__(self):
        self.arrays, self.meta = {}, {}

    def put(self, key, value, settings):
        arr = value.detach().cpu().numpy() if hasattr(value, "detach") else np.asarray(value)
        self.arrays[key] = np.asarray(arr, np.float64)
        self.meta[key] = settings


def run_nemo(o, cases):
    from nemo_rl.algorithms.loss.loss_functions import ClippedPGLossConfig, ClippedPGLossFn
    from nemo_rl.distributed.batched_data_dict import BatchedDataDict
    LF = "nemo_rl/algorithms/loss/loss_functions.py:ClippedPGLossFn"

    def data(x, adv):
        pad = lambda a: torch.cat([torch.zeros(a.shape[0], 1), t(a)], dim=1)  # noqa: E731  (NeMo drops column 0)
        B = x["mask"].shape[0]
        return BatchedDataDict(input_ids=torch.zeros(B, x["mask"].shape[1] + 1, dtype=torch.long), advantages=pad(adv),
                               prev_logprobs=pad(x["old"]), generation_logprobs=pad(x["rollout"]),
                               reference_policy_logprobs=pad(x["ref"]), token_mask=pad(x["mask"]),
                               sample_mask=torch.ones(B))

    for case, x in cases.items():
        N = float(x["mask"].sum())
        B = x["mask"].shape[0]
        settings = [("tis", 2.0, None, False), ("tis", 2.0, 0.5, False), ("icepop", 5.0, 0.5, False),
                    ("seq-mask-tis", 1.1, 0.9, False), ("tis", 2.0, None, True), (None, None, None, True)]
        for typ, hi, lo, seq in settings:
            cfg = ClippedPGLossConfig(disable_ppo_ratio=True, reference_policy_kl_penalty=0.0, token_level_loss=not seq,
                                      sequence_level_importance_ratios=seq, use_importance_sampling_correction=True,
                                      truncated_importance_sampling_type=typ, truncated_importance_sampling_ratio=hi,
                                      truncated_importance_sampling_ratio_min=lo)
            lp = t(x["old"], grad=True)
            loss, met = ClippedPGLossFn(cfg)(lp, data(x, -np.ones_like(x["mask"])), torch.tensor(float(B)), torch.tensor(N))
            loss.backward()
            n_i = x["mask"].sum(1, keepdims=True)
            scale = (n_i + 1e-8) * (B + 1e-8) if seq else (N + 1e-8)
            key = f"nemo_rl/{case}/weights/type={typ}/hi={hi}/lo={lo}/seq={int(seq)}"
            s = (f"truncated_importance_sampling_type={typ!r}, truncated_importance_sampling_ratio={hi}, "
                 f"truncated_importance_sampling_ratio_min={lo}, sequence_level_importance_ratios={seq}, "
                 f"use_importance_sampling_correction=True; disable_ppo_ratio=True, advantages -1, read as "
                 f"d loss / d log-probs x (valid tokens{' per row x rows' if seq else ''} + 1e-8)")
            o.put(key, lp.grad.numpy() * scale, dict(function=LF, settings=s))
            o.put(f"nemo_rl/{case}/metrics/type={typ}/hi={hi}/lo={lo}/seq={int(seq)}",
                  np.array([met.get(k, np.nan) for k in NEMO_METRICS]),
                  dict(function=LF + " (metrics)", settings=s, keys=NEMO_METRICS))
        for onpolicy in (True, False):
            cfg = ClippedPGLossConfig(reference_policy_kl_penalty=1.0, reference_policy_kl_type="k3",
                                      use_on_policy_kl_approximation=onpolicy, use_importance_sampling_correction=False)
            lp = t(x["lp"], grad=True)
            loss, _ = ClippedPGLossFn(cfg)(lp, data(x, np.zeros_like(x["mask"])), torch.tensor(float(B)), torch.tensor(N))
            loss.backward()
            s = (f"reference_policy_kl_penalty=1.0, reference_policy_kl_type='k3', kl_input_clamp_value=20, "
                 f"kl_output_clamp_value=10, use_on_policy_kl_approximation={onpolicy}; advantages 0 (the loss is the "
                 "KL term), curr_logprobs = lp, generation_logprobs = rollout")
            o.put(f"nemo_rl/{case}/kl_loss/onpolicy={int(onpolicy)}", loss, dict(function=LF, settings=s))
            o.put(f"nemo_rl/{case}/kl_grad/onpolicy={int(onpolicy)}", lp.grad, dict(function=LF + " (d loss / d lp)",
                                                                                   settings=s))


NEMO_METRICS = ["is_oob_ratio", "token_mult_prob_error", "gen_kl_error", "policy_kl_error", "js_divergence_error",
                "sampling_importance_ratio"]


def run_slime(o, cases):
    from examples.train_infer_mismatch_helper import mis
    from slime.backends.megatron_utils import loss as slime_loss
    from slime.utils import ppo_utils
    for case, x in cases.items():
        m = x["mask"]
        rows = lambda a: [t(r) for r in np.asarray(a)]  # noqa: E731
        for level, mode, lo, hi, norm in (("token", "truncate", None, 2.0, False), ("token", "clip", 0.5, 2.0, False),
                                          ("token", "mask", 0.5, 2.0, False), ("sequence", "truncate", None, 2.0, False),
                                          ("sequence", "mask", 0.5, 2.0, False), ("geometric", "truncate", None, 1.1, False),
                                          ("geometric", "mask", 0.9, 1.1, False), ("token", "clip", 0.5, 2.0, True),
                                          ("sequence", "truncate", None, 2.0, True)):
            args = types.SimpleNamespace(use_tis=True, use_rs=False, tis_level=level, tis_mode=mode, tis_lower_bound=lo,
                                         tis_upper_bound=hi, rs_lower_bound=None, rs_upper_bound=None,
                                         rs_veto_threshold=None, tis_batch_normalize=norm)
            w, masks, _ = mis.compute_mis_weights(args, train_log_probs=rows(x["old"]), rollout_log_probs=rows(x["rollout"]),
                                                  loss_masks=rows(m))
            s = (f"tis_level={level!r}, tis_mode={mode!r}, tis_lower_bound={lo}, tis_upper_bound={hi}, "
                 f"tis_batch_normalize={norm}, use_rs=False; train = old, rollout = rollout")
            key = f"slime/{case}/mis/level={level}/mode={mode}/lo={lo}/hi={hi}/norm={int(norm)}"
            F = "examples/train_infer_mismatch_helper/mis.py:compute_mis_weights"
            o.put(key + "/weights", torch.stack(w), dict(function=F, settings=s))
            o.put(key + "/mask", torch.stack(masks), dict(function=F + " (modified_response_masks)", settings=s))
        for fn, name in ((slime_loss.vanilla_tis_function, "tis"), (slime_loss.icepop_function, "icepop")):
            for lo, hi in ((0.0, 2.0), (0.5, 2.0)):
                args = types.SimpleNamespace(tis_clip=hi, tis_clip_low=lo)
                out, _, _ = fn(args, pg_loss=torch.ones(m.size), train_log_probs=rows(x["old"]),
                               rollout_log_probs=rows(x["rollout"]), loss_masks=rows(m))
                o.put(f"slime/{case}/{name}/lo={lo}/hi={hi}", out.reshape(m.shape),
                      dict(function=f"slime/backends/megatron_utils/loss.py:{fn.__name__}",
                           settings=f"--tis-clip {hi} --tis-clip-low {lo}; pg_loss = ones, so the output is the weight"))
        for kind in ("k3", "low_var_kl"):
            lp = t(x["lp"], grad=True)
            kl = ppo_utils.compute_approx_kl(lp, t(x["ref"]), kind, importance_ratio=torch.exp(lp - t(x["old"])))
            kl.sum().backward()
            s = (f"kl_loss_type={kind!r}, importance_ratio = exp(lp - old) (--use-unbiased-kl, the gradient flows "
                 "through it)")
            o.put(f"slime/{case}/unbiased_kl/kind={kind}", kl, dict(function="slime/utils/ppo_utils.py:compute_approx_kl",
                                                                   settings=s))
            o.put(f"slime/{case}/unbiased_kl_grad/kind={kind}", lp.grad,
                  dict(function="slime/utils/ppo_utils.py:compute_approx_kl (d sum / d lp)", settings=s))
        for delta in (0.0, 0.05):
            args = types.SimpleNamespace(opsm_delta=delta)
            keep, clipfrac = ppo_utils.compute_opsm_mask(args, rows(x["lp"]), rows(x["rollout"]), rows(x["adv"]), rows(m))
            s = (f"--opsm-delta {delta}; full_log_probs = lp, full_old_log_probs = rollout (--use-rollout-logprobs), "
                 "per-token advantages")
            o.put(f"slime/{case}/opsm/delta={delta}", keep.reshape(m.shape),
                  dict(function="slime/utils/ppo_utils.py:compute_opsm_mask", settings=s))
            o.put(f"slime/{case}/opsm_clipfrac/delta={delta}", clipfrac,
                  dict(function="slime/utils/ppo_utils.py:compute_opsm_mask (opsm_clipfrac)", settings=s))


def run_areal(o, cases):
    from areal.api.cli_args import RejectionSamplingConfig
    from areal.trainer.ppo.actor import compute_prox_logp_approximations
    from areal.utils.functional import functional as F
    RS = "areal/utils/functional/functional.py:apply_rejection_sampling"
    configs = [("token", "clamp", "ratio", "mean", 2.0, None), ("token", "clamp", "ratio", "mean", 5.0, 0.5),
               ("token", "mask", "ratio", "mean", 5.0, 0.5), ("sequence", "mask", "ratio", "mean", 1.1, 0.9),
               ("sequence", "clamp", "ratio", "mean", 1.1, 0.9), ("sequence", "mask", "ratio", "sum", 2.0, 0.5),
               ("token", "mask", "kl_k2", "mean", 0.05, None), ("sequence", "mask", "kl_k1", "sum", 0.5, -0.5),
               ("sequence", "mask", "kl_k3", "mean", 0.06, None), ("sequence", "mask", "kl_k3", "max", 0.5, None)]
    for case, x in cases.items():
        m = torch.tensor(x["mask"] != 0)
        for level, action, metric, agg, upper, lower in configs:
            cfg = RejectionSamplingConfig(level=level, action=action, metric=metric, agg=agg, upper=upper, lower=lower)
            res = F.apply_rejection_sampling(t(x["old"]), t(x["rollout"]), m, None, cfg)
            s = (f"RejectionSamplingConfig(level={level!r}, action={action!r}, metric={metric!r}, agg={agg!r}, "
                 f"upper={upper}, lower={lower}); proximal_logprobs = old, old_logprobs (behaviour) = rollout")
            key = f"areal/{case}/rs/level={level}/action={action}/metric={metric}/agg={agg}/upper={upper}/lower={lower}"
            o.put(key + "/mask", res.loss_mask.float(), dict(function=RS + " (loss_mask)", settings=s))
            o.put(key + "/weight", res.behave_imp_weight, dict(function=RS + " (behave_imp_weight)", settings=s))
            o.put(key + "/filtered_fraction", np.array(res.filtered_fraction), dict(function=RS + " (filtered_fraction)",
                                                                                   settings=s))
        for level, action, agg, upper, lower in (("token", "clamp", "mean", 5.0, 0.5), ("token", "mask", "mean", 5.0, 0.5),
                                                 ("sequence", "mask", "mean", 1.1, 0.9)):
            cfg = RejectionSamplingConfig(level=level, action=action, metric="ratio", agg=agg, upper=upper, lower=lower)
            lp = t(x["lp"], grad=True)
            loss, _ = F.ppo_actor_loss_fn(lp, t(x["old"]), t(x["rollout"]), t(x["adv"]), 0.2, m.clone(),
                                          eps_clip_higher=0.28, c_clip=3.0, rejection_sampling=cfg)
            loss.backward()
            s = (f"eps_clip=0.2, eps_clip_higher=0.28, c_clip=3.0, rejection_sampling=RejectionSamplingConfig(level="
                 f"{level!r}, action={action!r}, metric='ratio', agg={agg!r}, upper={upper}, lower={lower}); logprobs = lp, "
                 "proximal_logprobs = old, old_logprobs = rollout")
            key = f"areal/{case}/ppo_actor_loss/level={level}/action={action}"
            o.put(key + "/loss", loss, dict(function="areal/utils/functional/functional.py:ppo_actor_loss_fn", settings=s))
            o.put(key + "/grad", lp.grad, dict(function="areal/utils/functional/functional.py:ppo_actor_loss_fn "
                                                        "(d loss / d logprobs)", settings=s))
        for cur in (3, 5, 6):
            prox = compute_prox_logp_approximations(t(x["rollout"]), t(x["lp"]), torch.tensor(x["versions"]), cur,
                                                    method="loglinear")["loglinear"]
            o.put(f"areal/{case}/prox_loglinear/current={cur}", prox,
                  dict(function="areal/trainer/ppo/actor.py:compute_prox_logp_approximations",
                       settings=f"method='loglinear', old_logp = rollout (behaviour), logprobs = lp, versions, "
                                f"current_version={cur}"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", action="append", required=True, help="NAME=PATH@REVISION (nemo_rl, slime, areal)")
    args = ap.parse_args()
    sources = {}
    for spec in args.source:
        name, rest = spec.split("=", 1)
        path, rev = rest.rsplit("@", 1)
        sources[name] = dict(path=path, revision=rev)
        sys.path.insert(0, path)
    arrays = _inputs()
    cases = {c: {k.split("/", 2)[2]: v for k, v in arrays.items() if k.startswith(f"in/{c}/")} for c in ("a", "b", "c")}
    o = Out()
    runners = dict(nemo_rl=run_nemo, slime=run_slime, areal=run_areal)
    for name in sources:
        runners[name](o, cases)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(OUT.with_suffix(".npz"), **arrays, **o.arrays)
    repos = dict(nemo_rl="NVIDIA-NeMo/RL", slime="THUDM/slime", areal="inclusionAI/AReaL")
    meta = dict(about="frozen outputs of NeMo-RL, slime and AReaL off-policy corrections, run from source checkouts by "
                      "tools/make_offpolicy_fixtures.py", torch=torch.__version__,
                sources={k: dict(repository=repos[k], revision=v["revision"]) for k, v in sources.items()},
                stubbed_modules=STUBBED, outputs=o.meta)
    OUT.with_suffix(".json").write_text(json.dumps(meta, indent=1) + "\n")
    print(f"wrote {OUT.with_suffix('.npz').relative_to(ROOT)} ({len(o.arrays)} outputs) and "
          f"{OUT.with_suffix('.json').relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
