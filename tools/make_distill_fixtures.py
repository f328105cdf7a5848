"""Freeze NeMo-RL's and slime's distillation and sampler-support outputs on the shared distillation inputs.

    python tools/make_distill_fixtures.py --nemo-rl PATH --slime PATH

PATH is a git directory of each repository (NVIDIA-NeMo/RL and THUDM/slime, not on the package index; a
bare clone or a snapshot works). The script reads the files below at the revisions pinned in REVISIONS with
`git show` into a temporary directory, and runs them in TRL's environment of tools/refenvs.py (torch 2.13.0
CPU and pydantic, which NeMo-RL's configs need). It writes tests/fixtures/distill_frameworks.npz (the inputs
of tools/conformance_distill.py and every output) and distill_frameworks.json (what was called, with which
settings, at which revision). No framework code is kept in this repository.

What runs, and the stand-ins it needs:

* NeMo-RL: `OPDAdvantageEstimator.compute_advantage` (nemo_rl/algorithms/advantage_estimator.py),
  `DistillationLossFn` with `get_distillation_topk_logprobs_from_logits` (nemo_rl/algorithms/loss/
  loss_functions.py, nemo_rl/distributed/model_utils.py), and `apply_top_k_top_p` with
  `get_next_token_logprobs_from_logits` (nemo_rl/algorithms/logits_sampling_utils.py, model_utils.py).
  The modules these files import for other features (tokenizers, chat templates, the batched data
  dict, cross-tokenizer utilities, DTensor parallelisation, the logger) are import-time stubs; the
  non-distributed path of `get_next_token_logprobs_from_logits` calls `.cuda()` on the token ids, which
  is the identity here (CPU).
* slime: `apply_opd_kl_to_advantages` (slime/backends/megatron_utils/loss.py; megatron and slime's
  other utilities are import-time stubs) and `calculate_log_probs_and_entropy` with the rollout's
  top-p keep-mask (slime/utils/ppo_utils.py, torch only).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "distill_frameworks.npz"
REVISIONS = {"nemo_rl": "7ea279abfbeb698b092856d0dab61e7cf39bc909", "slime": "624b824a898ab0ec1fcb4d373004c7f3852bf515"}
REPOS = {"nemo_rl": "NVIDIA-NeMo/RL", "slime": "THUDM/slime"}
FILES = {
    "nemo_rl": ["nemo_rl/algorithms/advantage_estimator.py", "nemo_rl/algorithms/loss/loss_functions.py",
                "nemo_rl/algorithms/loss/interfaces.py", "nemo_rl/algorithms/utils.py",
                "nemo_rl/algorithms/logits_sampling_utils.py", "nemo_rl/distributed/model_utils.py"],
    "slime": ["slime/backends/megatron_utils/loss.py", "slime/utils/ppo_utils.py"],
}

CHILD = textwrap.dedent(r'''
    import importlib.machinery, importlib.util, json, sys, types
    from pathlib import Path
    import numpy as np, torch
    from _common import Recorder, load_inputs

    SRC, INPUTS, OUT_NPZ, OUT_JSON = (Path(a) for a in sys.argv[1:5])
    REV = json.loads(sys.argv[5])

    class Stub(types.ModuleType):
        "An import-time stand-in: every attribute is another stand-in; nothing of it is ever called here."
        def __getattr__(self, name):
            if name.startswith("__"):
                raise AttributeError(name)
            return Stub(f"{self.__name__}.{name}")
        def __getitem__(self, key):  # a type annotation such as BatchedDataDict[...]
            return self
        def __or__(self, other):
            return self
        __ror__ = __or__

    def package(name):
        m = types.ModuleType(name); m.__path__ = []; sys.modules[name] = m; return m

    def stub(name):
        sys.modules[name] = Stub(name); sys.modules[name].__spec__ = importlib.machinery.ModuleSpec(name, None)

    def load(name, rel):
        spec = importlib.util.spec_from_file_location(name, SRC / rel)
        mod = importlib.util.module_from_spec(spec); sys.modules[name] = mod; spec.loader.exec_module(mod)
        return mod

    t = lambda a, dtype=torch.float32: torch.tensor(np.asarray(a), dtype=dtype)
    pad1 = lambda a: np.concatenate([np.asarray(a), np.zeros_like(np.asarray(a)[:, :1])], 1)  # one more position at the end
    cases = load_inputs(INPUTS)
    recs = {}

    # ------------------------------------------------------------------ NeMo-RL
    for p in ("nemo_rl", "nemo_rl.algorithms", "nemo_rl.algorithms.loss", "nemo_rl.distributed", "nemo_rl.models",
              "nemo_rl.models.dtensor", "nemo_rl.algorithms.x_token", "nemo_rl.utils", "nemo_rl.data"):
        package(p)
    for s in ("nemo_rl.data.chat_templates", "nemo_rl.models.policy", "nemo_rl.utils.fastokens", "nemo_rl.utils.logger",
              "nemo_rl.distributed.batched_data_dict", "nemo_rl.algorithms.x_token.loss_utils",
              "nemo_rl.models.dtensor.parallelize"):
        stub(s)
    lsu = load("nemo_rl.algorithms.logits_sampling_utils", "nemo_rl/algorithms/logits_sampling_utils.py")
    mu = load("nemo_rl.distributed.model_utils", "nemo_rl/distributed/model_utils.py")
    load("nemo_rl.algorithms.utils", "nemo_rl/algorithms/utils.py")
    load("nemo_rl.algorithms.loss.interfaces", "nemo_rl/algorithms/loss/interfaces.py")
    lf = load("nemo_rl.algorithms.loss.loss_functions", "nemo_rl/algorithms/loss/loss_functions.py")
    sys.modules["nemo_rl.algorithms.loss"].ClippedPGLossConfig = lf.ClippedPGLossConfig
    ae = load("nemo_rl.algorithms.advantage_estimator", "nemo_rl/algorithms/advantage_estimator.py")
    torch.Tensor.cuda = lambda self, *a, **k: self  # the CPU stand-in for the one .cuda() of the non-distributed path
    rec = Recorder("nemo_rl", f"NeMo-RL @ {REV['nemo_rl'][:12]}")
    AE, LF, MU, LSU = ("nemo_rl/algorithms/advantage_estimator.py", "nemo_rl/algorithms/loss/loss_functions.py",
                       "nemo_rl/distributed/model_utils.py", "nemo_rl/algorithms/logits_sampling_utils.py")
    for case, x in cases.items():
        B, T = x["mask"].shape
        def opd():
            for poisoned in (False, True):
                valid = x["mask"] > 0
                lp = np.where(valid | (not poisoned), x["lp"], np.nan)
                tlp = np.where(valid | (not poisoned), x["tlp"], np.inf)
                adv = ae.OPDAdvantageEstimator({}, {}).compute_advantage(None, None, t(x["mask"]), teacher_logprobs=t(tlp),
                                                                         prev_logprobs=t(lp))
                rec.put(case, "opd_advantage", adv, f"{AE}:OPDAdvantageEstimator.compute_advantage",
                        "sg(teacher_logprobs - prev_logprobs) * mask" + (" (NaN / inf stored at the masked positions)" if poisoned else ""),
                        poisoned=poisoned)
        rec.attempt(f"{case}: OPDAdvantageEstimator", opd)
        def distill():
            for zot in (False, True):
                for kl_type in ("forward", "reverse", "mixed"):
                    fn = lf.DistillationLossFn(lf.DistillationLossConfig(kl_type=kl_type, mixed_kl_weight=0.5, zero_outside_topk=zot))
                    z = t(pad1(x["logits"])).requires_grad_(True)
                    s_lp, t_lp, H = mu.get_distillation_topk_logprobs_from_logits(
                        z, t(pad1(x["teacher_topk"])), t(pad1(x["teacher_ids"]), torch.long), zot, zot and kl_type != "forward")
                    data = {"input_ids": torch.zeros(B, T + 1, dtype=torch.long),
                            "token_mask": t(np.concatenate([np.ones((B, 1)), x["mask"]], 1)), "sample_mask": torch.ones(B)}
                    loss, _ = fn(s_lp, t_lp, H, data, torch.tensor(float(B)), t(x["mask"].sum()))
                    loss.backward()
                    s = (f"DistillationLossFn(kl_type={kl_type!r}, mixed_kl_weight=0.5, zero_outside_topk={zot}) on "
                         "get_distillation_topk_logprobs_from_logits(student logits, the teacher's top-k log-probs as its top-k "
                         "logits, ids); masked mean over the valid tokens")
                    rec.put(case, "nemo_distill", loss, f"{LF}:DistillationLossFn", s, kl_type=kl_type, zero_outside_topk=zot)
                    rec.put(case, "nemo_distill_grad", z.grad[:, :T], f"{LF}:DistillationLossFn", s + "; gradient w.r.t. the logits",
                            kl_type=kl_type, zero_outside_topk=zot)
        rec.attempt(f"{case}: DistillationLossFn", distill)
        ids = np.concatenate([np.zeros((B, 1), np.int64), x["tokens"]], 1)
        for top_k, top_p in ((8, 1.0), (None, 0.7), (8, 0.8)):
            s = f"TrainingSamplingParams(top_k={top_k}, top_p={top_p})"
            def direct():
                sp = lsu.TrainingSamplingParams(top_k=top_k, top_p=top_p, temperature=1.0)
                lp = mu.get_next_token_logprobs_from_logits(t(ids, torch.long), t(pad1(x["logits"])), sampling_params=sp)
                rec.put(case, "nemo_support_log_probs", lp, f"{MU}:get_next_token_logprobs_from_logits",
                        s + ": log_softmax of the filtered logits at the sampled token", top_k=str(top_k), top_p=top_p)
            rec.attempt(f"{case}: get_next_token_logprobs_from_logits, {s}", direct)
            def mask():
                filtered, keep = lsu.apply_top_k_top_p(t(x["logits"]), top_k, top_p)  # contiguous [B, T, V] logits
                rec.put(case, "nemo_support_mask", keep.float(), f"{LSU}:apply_top_k_top_p", s + ": the keep-mask",
                        top_k=str(top_k), top_p=top_p)
                if not any(r["kind"] == "nemo_support_log_probs" and r["case"] == case and r["params"]["top_k"] == str(top_k)
                           and r["params"]["top_p"] == top_p for r in rec.records):
                    lp = torch.log_softmax(filtered, -1).gather(-1, t(x["tokens"], torch.long)[..., None])[..., 0]
                    rec.put(case, "nemo_support_log_probs", lp, f"{LSU}:apply_top_k_top_p",
                            s + " on the contiguous logits, then log_softmax and the sampled token (the two lines of "
                            "get_next_token_logprobs_from_logits, whose own call raised)", top_k=str(top_k), top_p=top_p)
            rec.attempt(f"{case}: apply_top_k_top_p, {s}", mask)
    recs["nemo_rl"] = rec

    # ------------------------------------------------------------------ slime
    for p in ("slime", "slime.utils", "slime.backends", "slime.backends.megatron_utils", "megatron"):
        package(p)
    for s in ("megatron.core", "slime.utils.distributed_utils", "slime.utils.misc", "slime.utils.types",
              "slime.backends.megatron_utils.cp_utils"):
        stub(s)
    pu = load("slime.utils.ppo_utils", "slime/utils/ppo_utils.py")
    sl = load("slime.backends.megatron_utils.loss", "slime/backends/megatron_utils/loss.py")
    rec = Recorder("slime", f"slime @ {REV['slime'][:12]}")
    SL, PU = "slime/backends/megatron_utils/loss.py", "slime/utils/ppo_utils.py"
    for case, x in cases.items():
        B, T = x["mask"].shape
        V = x["logits"].shape[-1]
        def opd():
            args = types.SimpleNamespace(opd_kl_coef=0.5, opd_type="sglang")
            adv = [t(x["adv"][b]) for b in range(B)]
            sl.apply_opd_kl_to_advantages(args, {"teacher_log_probs": [t(x["tlp"][b]) for b in range(B)]}, adv,
                                          [t(x["lp"][b]) for b in range(B)])
            rec.put(case, "opd_advantage", torch.stack(adv), f"{SL}:apply_opd_kl_to_advantages",
                    "opd_kl_coef=0.5: advantages - opd_kl_coef * (student - teacher), per response (compared at the valid tokens)",
                    coef=0.5, task=True)
        rec.attempt(f"{case}: apply_opd_kl_to_advantages", opd)
        def support():
            keep = np.zeros((B * T, V), bool)
            for n, row in enumerate(x["support"].reshape(B * T, -1)):
                keep[n, row[row >= 0]] = True
            z = t(x["logits"].reshape(B * T, V)).requires_grad_(True)
            lp, ent = pu.calculate_log_probs_and_entropy(z, t(x["tokens"].reshape(-1), torch.long), None, with_entropy=True,
                                                         chunk_size=-1, log_prob_keep_mask=t(keep, torch.bool))
            (lp[:, 0] * t(x["g"]).reshape(-1)).sum().backward()
            s = "calculate_log_probs_and_entropy(logits, tokens, tp_group=None, with_entropy=True, log_prob_keep_mask=the rollout's top-p ids)"
            rec.put(case, "slime_support_log_probs", lp[:, 0].reshape(B, T), f"{PU}:calculate_log_probs_and_entropy", s)
            rec.put(case, "slime_support_log_probs_grad", z.grad.reshape(B, T, V), f"{PU}:calculate_log_probs_and_entropy",
                    s + "; gradient of sum g * log-prob w.r.t. the logits")
            rec.put(case, "slime_support_entropy", ent.reshape(B, T), f"{PU}:calculate_log_probs_and_entropy", s + "; the entropy")
        rec.attempt(f"{case}: calculate_log_probs_and_entropy", support)
    recs["slime"] = rec

    arrays = {}
    meta = {"records": [], "frameworks": {}}
    for name, r in recs.items():
        arrays.update(r.arrays)
        meta["records"] += r.records
        meta["frameworks"][name] = dict(framework=name, version=r.version, failed=r.failed, not_run=r.not_run,
                                        revision=REV[name], torch=torch.__version__)
    np.savez(OUT_NPZ, **arrays)
    OUT_JSON.write_text(json.dumps(meta, indent=1, sort_keys=True))
''')


def _driver():
    import conformance_distill  # tools/ is on the path when this script runs
    return conformance_distill


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nemo-rl", type=Path, required=True, help="git directory of NVIDIA-NeMo/RL")
    ap.add_argument("--slime", type=Path, required=True, help="git directory of THUDM/slime")
    a = ap.parse_args(argv)
    gitdirs = {"nemo_rl": a.nemo_rl, "slime": a.slime}
    driver = _driver()
    import refenvs
    py = refenvs.build("trl")
    inputs = driver.make_inputs()
    with tempfile.TemporaryDirectory(prefix="dew_rl_distill_fixtures_") as tmp:
        src = Path(tmp) / "src"
        for name, files in FILES.items():
            for f in files:
                text = subprocess.run(["git", "--git-dir", str(gitdirs[name]), "show", f"{REVISIONS[name]}:{f}"],
                                      check=True, capture_output=True).stdout
                (src / f).parent.mkdir(parents=True, exist_ok=True)
                (src / f).write_bytes(text)
        np.savez(Path(tmp) / "inputs.npz", **inputs)
        env = refenvs.env_for("trl")
        env["PYTHONPATH"] = str(ROOT / "tools" / "conformance_adapters")
        child = Path(tmp) / "child.py"
        child.write_text(CHILD)
        out_npz, out_json = Path(tmp) / "out.npz", Path(tmp) / "out.json"
        proc = subprocess.run([str(py), str(child), str(src), str(Path(tmp) / "inputs.npz"), str(out_npz), str(out_json),
                               json.dumps(REVISIONS)], env=env, capture_output=True, text=True)
        if proc.returncode:
            raise SystemExit("the fixture run failed:\n" + "\n".join(proc.stderr.strip().splitlines()[-25:]))
        with np.load(out_npz) as f:
            arrays = {k: f[k] for k in f.files}
        meta = json.loads(out_json.read_text())
    for name in meta["frameworks"]:
        meta["frameworks"][name].update(repository=REPOS[name], files=FILES[name], how="run from a git snapshot by "
                                        "tools/make_distill_fixtures.py in TRL 1.16.0's environment (torch 2.13.0 CPU)")
        failed = meta["frameworks"][name]["failed"]
        if failed:
            print(f"[distill fixtures] {name}: {len(failed)} call(s) failed: {failed}", file=sys.stderr)
    np.savez_compressed(OUT, **inputs, **arrays)
    OUT.with_suffix(".json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
    print(f"[distill fixtures] wrote {OUT.relative_to(ROOT)} ({OUT.stat().st_size // 1024} KiB), "
          f"{len(meta['records'])} outputs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
