"""Conformance adapter for TRL 1.16.0: runs TRL's own GRPO loss on the shared inputs.

Runs in the `trl` environment of tools/refenvs.py (torch 2.13.0 CPU, `trl==1.16.0` with
transformers, accelerate, datasets and pandas). TRL has no standalone loss function: the GRPO loss
is the method `GRPOTrainer._compute_loss` (trl/trainer/grpo_trainer.py). It is called unbound, with
a stand-in `self` (tools/conformance_adapters/_trl.py) that holds the loss fields of `GRPOConfig` and `GRPOTrainer`, an identity
accelerator (one process) and a `_get_per_token_logps_and_entropies` that returns the given
per-token log-probs instead of running a model. Everything after the log-probs is TRL's code;
nothing is copied. float32 throughout; one process, no gradient accumulation
(`current_gradient_accumulation_steps=1`, `steps_per_generation=1`), training mode.

    <trl-python> tools/conformance_adapters/general/trl_adapter.py INPUTS.npz OUTPUTS.npz OUTPUTS.json
"""
import sys

import torch

from _trl import grpo_inputs, grpo_self, load_inputs, rec, t
from trl.trainer.grpo_trainer import GRPOTrainer

FN = "trl/trainer/grpo_trainer.py:GRPOTrainer._compute_loss"


def call(x, loss_type, eps_low=0.2, eps_high=0.2, level="token", beta=0.0):
    me = grpo_self(x["mask"].shape[1], t(x["lp"]), loss_type=loss_type, epsilon_low=eps_low, epsilon_high=eps_high,
                   importance_sampling_level=level, beta=beta)
    inputs = grpo_inputs(x["mask"], t(x["adv"]), t(x["old"]), ref_per_token_logps=t(x["ref"]))
    loss = GRPOTrainer._compute_loss(me, None, inputs)
    return loss, me._metrics["train"]


def run_case(case, x):
    put = lambda *a, **k: rec.put(case, *a, **k)  # noqa: E731
    common = "advantages [B, T] given, one process, no accumulation, beta=0.0 (GRPOConfig default)"

    def losses():
        for loss_type, mode in (("grpo", "seq-mean-token-mean"), ("bnpo", "token-mean"),
                                ("dr_grpo", "seq-mean-token-sum-norm"), ("dapo", "token-mean")):
            for hi in (0.2, 0.28):
                loss, met = call(x, loss_type, 0.2, hi)
                s = f"loss_type={loss_type!r}, epsilon=0.2, epsilon_high={hi}, importance_sampling_level='token', " \
                    + ("max_completion_length = T, " if loss_type == "dr_grpo" else "") \
                    + ("num_items_in_batch = valid tokens, " if loss_type == "dapo" else "") + common
                put("ppo_loss", loss, FN, s, lo=0.2, hi=hi, c=None, mode=mode, loss_type=loss_type)
                if loss_type == "grpo":
                    put("ppo_pg_clipfrac", met["clip_ratio/region_mean"][0], FN + " (metric clip_ratio/region_mean)",
                        s, lo=0.2, hi=hi, c=None)
    rec.attempt(f"{case}: grpo/bnpo/dr_grpo/dapo", losses)

    def gspo():
        loss, _ = call(x, "grpo", 3e-4, 4e-4, "sequence")
        put("gspo_loss", loss, FN, f"loss_type='grpo', importance_sampling_level='sequence', epsilon=3e-4, "
            f"epsilon_high=4e-4, {common}", mode="seq-mean-token-mean", lo=3e-4, hi=4e-4)
    rec.attempt(f"{case}: gspo", gspo)

    def sapo():
        loss, _ = call(x, "sapo")
        put("sapo_loss", loss, FN, f"loss_type='sapo', sapo_temperature_pos=1.0, sapo_temperature_neg=1.05, {common}")
    rec.attempt(f"{case}: sapo", sapo)

    def cispo():
        loss, _ = call(x, "cispo", 0.2, 5.0)
        put("cispo_loss", loss, FN, "loss_type='cispo', epsilon_high=5.0 (the cap on the ratio; TRL's docs' value, the "
            f"default 0.2 would cap it at 0.2), num_items_in_batch = valid tokens, {common}",
            lo=1.0, hi=4.0, mode="token-mean")
    rec.attempt(f"{case}: cispo", cispo)


cases = load_inputs(sys.argv[1])
for case, x in cases.items():
    run_case(case, x)
rec.unavailable("trl/trainer/grpo_trainer.py:GRPOTrainer._generate_and_score_completions (advantages)",
                "group_advantage", "computed inline during generation (needs a model, a tokenizer and reward "
                "functions), not a callable function")
rec.unavailable(f"{FN} with beta > 0", "k3_kl", "not compared: TRL's k3 is unclamped and multiplied by the "
                "differentiable ratio (use_bias_correction_kl=True); dew_rl's k3_kl clamps like verl, and the "
                "objectives have no bias-corrected KL")
rec.unavailable("trl/trainer/dpo_trainer.py:DPOTrainer", "preference_logsigmoid / preference_ipo",
                "the loss is a trainer method that needs a model and a tokenizer; not wired into this adapter")
rec.save(sys.argv[2], sys.argv[3], dict(torch=torch.__version__))
print(f"[trl] {len(rec.records)} outputs, {len(rec.failed)} failures")
