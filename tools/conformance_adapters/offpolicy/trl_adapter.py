"""Off-policy family, conformance adapter for TRL 1.16.0: OPSM and the importance-weighted KL of GRPOTrainer.

Runs in the `trl` environment of tools/refenvs.py. TRL's off-policy sequence mask is the static method
`GRPOTrainer.get_off_policy_mask` (called directly); the loss is the method `GRPOTrainer._compute_loss`, called
unbound with a stand-in `self` (tools/conformance_adapters/_trl.py) whose
`_get_per_token_logps_and_entropies` returns the given per-token log-probs, so that every step after the
log-probs is TRL's code. TRL's vLLM importance-sampling ratio (`vllm_importance_sampling_mode`) is computed
inline in `_generate_and_score_completions`, which needs a model, a tokenizer and a generation engine: it is not
run here (listed as not run). float32, one process, no gradient accumulation.

    <trl-python> tools/conformance_adapters/offpolicy/trl_adapter.py INPUTS.npz OUTPUTS.npz OUTPUTS.json
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from _trl import GT, grpo_args, grpo_inputs, grpo_self, load_inputs, rec, t  # noqa: E402
from trl.trainer.grpo_trainer import GRPOTrainer  # noqa: E402


def compute_loss(x, lp, advantages, beta=0.0, threshold=None, bias_correction=True):
    "GRPOTrainer._compute_loss with loss_type='bnpo' (token mean), epsilon 0.2, the given advantages."
    me = grpo_self(x["mask"].shape[1], lp, loss_type="bnpo", beta=beta, off_policy_mask_threshold=threshold,
                   args=grpo_args(use_bias_correction_kl=bias_correction),
                   get_off_policy_mask=GRPOTrainer.get_off_policy_mask)
    inputs = grpo_inputs(x["mask"], advantages, t(x["old"]), ref_per_token_logps=t(x["ref"]),
                         sampling_per_token_logps=t(x["rollout"]))
    return GRPOTrainer._compute_loss(me, None, inputs)


def run_case(case, x):
    m = x["mask"]

    def opsm():
        for delta in (0.0, 0.05, 0.2):
            keep = GRPOTrainer.get_off_policy_mask(t(x["adv_row"][:, :1]), t(x["lp"]), t(x["rollout"]), t(m), delta)
            rec.put(case, "opsm_rows", keep[:, 0], f"{GT}:GRPOTrainer.get_off_policy_mask",
                    f"advantages [B, 1] (one per row), per_token_logps = lp, sampling_per_token_logps = rollout, "
                    f"off_policy_threshold={delta}", delta=delta)
            keep = GRPOTrainer.get_off_policy_mask(t(x["adv"]), t(x["lp"]), t(x["rollout"]), t(m), delta)
            rec.put(case, "opsm_tokens", keep, f"{GT}:GRPOTrainer.get_off_policy_mask",
                    f"advantages [B, T] (per token), per_token_logps = lp, sampling_per_token_logps = rollout, "
                    f"off_policy_threshold={delta}", delta=delta)
    rec.attempt(f"{case}: get_off_policy_mask", opsm)

    def opsm_loss():
        lp = t(x["lp"]).requires_grad_(True)
        loss = compute_loss(x, lp, t(x["adv_row"][:, 0]), threshold=0.05)
        loss.backward()
        s = ("loss_type='bnpo', epsilon=0.2, beta=0.0, off_policy_mask_threshold=0.05, advantages [B], "
             "sampling_per_token_logps = rollout, old_per_token_logps = old")
        rec.put(case, "opsm_loss", loss, f"{GT}:GRPOTrainer._compute_loss", s)
        rec.put(case, "opsm_grad", lp.grad, f"{GT}:GRPOTrainer._compute_loss (d loss / d log-probs)", s)
    rec.attempt(f"{case}: GRPO loss with OPSM", opsm_loss)

    def kl():
        for corrected in (True, False):
            lp = t(x["lp"]).requires_grad_(True)
            loss = compute_loss(x, lp, torch.zeros(m.shape[0]), beta=1.0, bias_correction=corrected)
            loss.backward()
            s = (f"loss_type='bnpo', beta=1.0, use_bias_correction_kl={corrected}, advantages 0 (so the loss is the "
                 "KL term alone), old_per_token_logps = old, ref_per_token_logps = ref")
            rec.put(case, "kl_loss", loss, f"{GT}:GRPOTrainer._compute_loss", s, corrected=int(corrected))
            rec.put(case, "kl_grad", lp.grad, f"{GT}:GRPOTrainer._compute_loss (d loss / d log-probs)", s,
                    corrected=int(corrected))
    rec.attempt(f"{case}: KL with use_bias_correction_kl", kl)


cases = load_inputs(sys.argv[1])
for case, x in cases.items():
    run_case(case, x)
rec.unavailable(f"{GT}:GRPOTrainer._generate_and_score_completions (vllm_importance_sampling_mode)",
                "rollout_is_weights", "the IS ratio is computed inline during generation (needs a model, a tokenizer "
                "and a vLLM engine), not a callable function; read at lines 2660-2706 of TRL 1.16.0")
rec.save(sys.argv[2], sys.argv[3], dict(torch=torch.__version__))
print(f"[trl] {len(rec.records)} outputs, {len(rec.failed)} failures")
