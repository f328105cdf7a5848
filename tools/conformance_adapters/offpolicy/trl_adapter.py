"""Off-policy family, conformance adapter for TRL 1.16.0: OPSM and the importance-weighted KL of GRPOTrainer.

Runs in the `trl` environment of tools/refenvs.py. TRL's off-policy sequence mask is the static method
`GRPOTrainer.get_off_policy_mask` (called directly); the loss is the method `GRPOTrainer._compute_loss`, called
unbound with a stand-in `self` (as in tools/conformance_adapters/general/trl_adapter.py) whose
`_get_per_token_logps_and_entropies` returns the given per-token log-probs, so that every step after the
log-probs is TRL's code. TRL's vLLM importance-sampling ratio (`vllm_importance_sampling_mode`) is computed
inline in `_generate_and_score_completions`, which needs a model, a tokenizer and a generation engine: it is not
run here (listed as not run). float32, one process, no gradient accumulation.

    <trl-python> tools/conformance_adapters/offpolicy/trl_adapter.py INPUTS.npz OUTPUTS.npz OUTPUTS.json
"""
import sys
import types
from collections import defaultdict
from importlib.metadata import version
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from _common import Recorder, load_inputs  # noqa: E402

VERSION = version("trl")
assert VERSION == "1.16.0", VERSION
from trl.trainer.grpo_trainer import GRPOTrainer  # noqa: E402

rec = Recorder("trl", f"TRL {VERSION}")
GT = "trl/trainer/grpo_trainer.py"


def t(a):
    return torch.tensor(np.asarray(a, np.float32))


class _Accelerator:
    num_processes = 1
    sync_gradients = True

    def gather(self, x):
        return x

    gather_for_metrics = gather

    def reduce(self, x, reduction="sum"):
        return x


def compute_loss(x, lp, advantages, beta=0.0, threshold=None, bias_correction=True):
    "GRPOTrainer._compute_loss with loss_type='bnpo' (token mean), epsilon 0.2, the given advantages."
    B, T = x["mask"].shape
    args = types.SimpleNamespace(use_bias_correction_kl=bias_correction, delta=None, sapo_temperature_pos=1.0,
                                 sapo_temperature_neg=1.05, steps_per_generation=1)
    me = types.SimpleNamespace(
        loss_type="bnpo", epsilon_low=0.2, epsilon_high=0.2, importance_sampling_level="token", beta=beta, args=args,
        top_entropy_quantile=1.0, off_policy_mask_threshold=threshold, use_vllm=False,
        vllm_importance_sampling_correction=False, model=types.SimpleNamespace(training=True),
        current_gradient_accumulation_steps=1, max_completion_length=T, accelerator=_Accelerator(),
        _entropy_bonus_enabled=False, aux_loss_enabled=False, _metrics=defaultdict(lambda: defaultdict(list)),
        _get_per_token_logps_and_entropies=lambda *a, **k: (lp, torch.zeros_like(lp), None),
        get_off_policy_mask=GRPOTrainer.get_off_policy_mask)
    inputs = dict(prompt_ids=torch.zeros((B, 1), dtype=torch.long), prompt_mask=torch.ones((B, 1), dtype=torch.long),
                  completion_ids=torch.zeros((B, T), dtype=torch.long), completion_mask=t(x["mask"]),
                  advantages=advantages, old_per_token_logps=t(x["old"]), ref_per_token_logps=t(x["ref"]),
                  sampling_per_token_logps=t(x["rollout"]), num_items_in_batch=t(x["mask"].sum()))
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
