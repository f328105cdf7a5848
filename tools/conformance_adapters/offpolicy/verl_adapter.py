"""Off-policy family, conformance adapter for verl 0.9.1: runs verl's rollout correction on the shared inputs.

Runs in the `verl` environment of tools/refenvs.py (torch CPU, verl with --no-deps, the `ray` stub of
tools/stubs/ray_only first on PYTHONPATH). Every call is verl's own code: rollout_corr_helper.py
(compute_rollout_correction_weights, compute_rollout_rejection_mask, compute_offpolicy_metrics,
compute_rollout_correction_and_rejection_mask), config/algorithm.py (RolloutCorrectionConfig and its
factories) and core_algos.py (compute_policy_loss_bypass_mode, compute_policy_loss_vanilla with
rollout_is_weights). Nothing is copied. float32 throughout.

    <verl-python> tools/conformance_adapters/offpolicy/verl_adapter.py INPUTS.npz OUTPUTS.npz OUTPUTS.json
"""
import dataclasses
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import verl  # noqa: E402
from verl.trainer.config.algorithm import RolloutCorrectionConfig  # noqa: E402
from verl.trainer.ppo import core_algos as ca  # noqa: E402
from verl.trainer.ppo import rollout_corr_helper as rc  # noqa: E402
from verl.workers.config.actor import ActorConfig, PolicyLossConfig  # noqa: E402

from _common import Recorder, load_inputs  # noqa: E402

assert verl.__version__ == "0.9.1", verl.__version__
RC = "verl/trainer/ppo/rollout_corr_helper.py"
CA = "verl/trainer/ppo/core_algos.py"
rec = Recorder("verl", f"verl {verl.__version__}")
FACTORIES = ["decoupled_token_is", "decoupled_seq_is", "decoupled_token_icepop", "decoupled_seq_is_rs",
             "decoupled_geo_rs", "decoupled_geo_rs_seq_tis", "decoupled_geo_rs_token_tis", "decoupled_k3_rs",
             "decoupled_k3_rs_seq_tis", "decoupled_k3_rs_token_tis", "bypass_ppo_clip", "bypass_ppo_clip_geo_rs",
             "bypass_ppo_clip_k3_rs", "bypass_pg_is", "bypass_pg_token_icepop", "bypass_pg_geo_rs",
             "bypass_pg_geo_rs_seq_tis", "bypass_pg_geo_rs_token_tis", "disabled"]
FIELDS = ["rollout_is", "rollout_is_threshold", "rollout_is_batch_normalize", "rollout_rs", "rollout_rs_threshold",
          "bypass_mode", "loss_type"]


def t(a):
    return torch.tensor(np.asarray(a, np.float32))


def preset(name):
    return RolloutCorrectionConfig() if name == "default" else getattr(RolloutCorrectionConfig, name)()


def put_metrics(case, kind, metrics, function, settings, **params):
    keys = sorted(metrics)
    vals = np.array([float(metrics[k]) for k in keys], np.float64)
    rec.put(case, kind, vals, function, json.dumps(dict(settings=settings, keys=keys)), **params)


def actor(gbi, policy_loss):
    return ActorConfig(strategy="fsdp", rollout_n=1, ppo_micro_batch_size_per_gpu=1, clip_ratio=0.2, clip_ratio_low=0.2,
                       clip_ratio_high=0.2, clip_ratio_c=3.0, loss_agg_mode="token-mean", global_batch_info=gbi,
                       policy_loss=policy_loss)


def run_case(case, x):
    m = x["mask"]
    lr = t(x["old"]) - t(x["rollout"])
    N, B = int(m.sum()), m.shape[0]
    gbi = dict(dp_size=1, batch_num_tokens=N, global_batch_size=B)

    def weights():
        for level in ("token", "sequence"):
            for thr in (2.0, "0.5_5.0", 1.5):
                for norm in (False, True):
                    w, met = rc.compute_rollout_correction_weights(lr, t(m), rollout_is=level, rollout_is_threshold=thr,
                                                                   rollout_is_batch_normalize=norm)
                    s = f"rollout_is={level!r}, rollout_is_threshold={thr!r}, rollout_is_batch_normalize={norm}"
                    kw = dict(level=level, thr=str(thr), norm=int(norm))
                    rec.put(case, "is_weights", w, f"{RC}:compute_rollout_correction_weights", s, **kw)
                    put_metrics(case, "is_metrics", met, f"{RC}:compute_rollout_correction_weights (metrics)", s, **kw)
    rec.attempt(f"{case}: compute_rollout_correction_weights", weights)

    def rejection():
        specs = [("token_k1", "0.6_1.5"), ("token_k2", "0.05"), ("token_k3", "0.05"), ("seq_sum_k1", "0.5_2.0"),
                 ("seq_sum_k2", "0.5"), ("seq_sum_k3", "0.5"), ("seq_mean_k1", "0.9_1.1"), ("seq_mean_k2", "0.06"),
                 ("seq_mean_k3", "0.06"), ("seq_max_k2", "0.5"), ("seq_max_k3", "0.5"), ("token_k1", "1.5"),
                 ("token_k1,seq_mean_k3", "0.6_1.5,0.06"), ("seq_sum_k1,token_k2,seq_max_k3", "2.0")]
        for opts, thr in specs:
            km, met = rc.compute_rollout_rejection_mask(lr, t(m), rollout_rs=opts, rollout_rs_threshold=thr)
            s = f"rollout_rs={opts!r}, rollout_rs_threshold={thr!r}"
            rec.put(case, "rs_mask", km, f"{RC}:compute_rollout_rejection_mask", s, opts=opts, thr=thr)
            put_metrics(case, "rs_metrics", met, f"{RC}:compute_rollout_rejection_mask (metrics)", s, opts=opts, thr=thr)
    rec.attempt(f"{case}: compute_rollout_rejection_mask", rejection)

    def offpolicy():
        met = rc.compute_offpolicy_metrics(t(x["old"]), t(x["rollout"]), t(m))
        put_metrics(case, "offpolicy_metrics", met, f"{RC}:compute_offpolicy_metrics", "old_log_prob=old, "
                    "rollout_log_prob=rollout")
    rec.attempt(f"{case}: compute_offpolicy_metrics", offpolicy)

    def presets():
        for name in ["default"] + FACTORIES:
            cfg = preset(name)
            w, km, met = rc.compute_rollout_correction_and_rejection_mask(
                t(x["old"]), t(x["rollout"]), t(m), rollout_is=cfg.rollout_is,
                rollout_is_threshold=cfg.rollout_is_threshold, rollout_is_batch_normalize=cfg.rollout_is_batch_normalize,
                rollout_rs=cfg.rollout_rs, rollout_rs_threshold=cfg.rollout_rs_threshold)
            s = f"RolloutCorrectionConfig.{name}() fields passed to compute_rollout_correction_and_rejection_mask"
            fn = f"{RC}:compute_rollout_correction_and_rejection_mask"
            if w is not None:
                rec.put(case, "preset_weights", w.batch["rollout_is_weights"], fn, s, name=name)
            rec.put(case, "preset_mask", km, fn, s, name=name)
            put_metrics(case, "preset_metrics", {k.split("/", 1)[1]: v for k, v in met.items()}, fn + " (metrics)", s,
                        name=name)
    rec.attempt(f"{case}: presets", presets)

    def bypass():
        for name in ("bypass_ppo_clip", "bypass_ppo_clip_k3_rs", "bypass_pg_is", "bypass_pg_token_icepop",
                     "bypass_pg_geo_rs_token_tis"):
            lp = t(x["lp"]).requires_grad_(True)
            cfg = actor(gbi, PolicyLossConfig(loss_mode="bypass_mode", rollout_correction=preset(name)))
            loss, _ = ca.compute_policy_loss_bypass_mode(t(x["rollout"]), lp, t(x["adv"]), t(m), "token-mean", cfg)
            loss.backward()
            s = (f"RolloutCorrectionConfig.{name}(); old_log_prob = rollout (bypass), log_prob = lp, loss_agg_mode="
                 f"'token-mean', clip 0.2/0.2, clip_ratio_c=3.0, batch_num_tokens = valid tokens before rejection")
            rec.put(case, "bypass_loss", loss, f"{CA}:compute_policy_loss_bypass_mode", s, name=name)
            rec.put(case, "bypass_grad", lp.grad, f"{CA}:compute_policy_loss_bypass_mode (d loss / d log_prob)", s,
                    name=name)
    rec.attempt(f"{case}: bypass mode", bypass)

    def decoupled():
        for level, thr in (("token", 2.0), ("sequence", 2.0), ("token", "0.5_5.0")):
            w, _ = rc.compute_rollout_correction_weights(lr, t(m), rollout_is=level, rollout_is_threshold=thr)
            lp = t(x["lp"]).requires_grad_(True)
            loss, _ = ca.compute_policy_loss_vanilla(t(x["old"]), lp, t(x["adv"]), t(m), "token-mean",
                                                     actor(gbi, PolicyLossConfig(loss_mode="vanilla")),
                                                     rollout_is_weights=w)
            loss.backward()
            s = (f"compute_rollout_correction_weights(old - rollout, rollout_is={level!r}, rollout_is_threshold={thr!r}) "
                 "passed as rollout_is_weights to compute_policy_loss_vanilla(old, lp, adv, token-mean, clip 0.2/0.2, "
                 "clip_ratio_c=3.0)")
            rec.put(case, "decoupled_loss", loss, f"{CA}:compute_policy_loss_vanilla", s, level=level, thr=str(thr))
            rec.put(case, "decoupled_grad", lp.grad, f"{CA}:compute_policy_loss_vanilla (d loss / d log_prob)", s,
                    level=level, thr=str(thr))
    rec.attempt(f"{case}: decoupled PPO", decoupled)


cases = load_inputs(sys.argv[1])
for case, x in cases.items():
    run_case(case, x)
fields = {}
for name in ["default"] + FACTORIES:
    cfg = preset(name)
    fields[name] = {f: getattr(cfg, f) for f in FIELDS}
assert {f.name for f in dataclasses.fields(RolloutCorrectionConfig)} - {"_target_"} == set(FIELDS)
rec.save(sys.argv[2], sys.argv[3], dict(torch=torch.__version__, presets=fields))
print(f"[verl] {len(rec.records)} outputs, {len(rec.failed)} failures")
