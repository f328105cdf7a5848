"""Policy-loss conformance adapter for TRL 1.16.0: TRL's own losses (vespo, luspo, delta, GMPO, RLOO) on the shared inputs.

Runs in the `trl` environment of tools/refenvs.py. TRL has no standalone losses: each is a trainer method
(`GRPOTrainer._compute_loss`, `experimental.gmpo.GMPOTrainer._compute_loss`, `RLOOTrainer._compute_loss`), called
unbound with a stand-in `self` that holds the loss fields, an identity accelerator (one process) and a
`_get_per_token_logps_and_entropies` that returns the given per-token log-probs (requiring a gradient) instead of
running a model. Everything after the log-probs is TRL's code; nothing is copied. The loss and d loss / d log-probs
(autograd) are recorded. float32; one process, no gradient accumulation, training mode.

    <trl-python> tools/conformance_adapters/policyloss/trl_adapter.py INPUTS.npz OUTPUTS.npz OUTPUTS.json
"""
import sys
import types
from collections import defaultdict
from importlib.metadata import version

import numpy as np
import torch

from _common import Recorder, load_inputs

VERSION = version("trl")
assert VERSION == "1.16.0", VERSION
from trl.experimental.gmpo.gmpo_trainer import GMPOTrainer  # noqa: E402
from trl.trainer.grpo_trainer import GRPOTrainer  # noqa: E402
from trl.trainer.rloo_trainer import RLOOTrainer  # noqa: E402

rec = Recorder("trl", f"TRL {VERSION}")
GRPO = "trl/trainer/grpo_trainer.py:GRPOTrainer._compute_loss"


def t(a):
    return torch.tensor(np.asarray(a, np.float32))


class _Accelerator:  # one process: gather and reduce are the identity
    num_processes = 1
    sync_gradients = True

    def gather(self, x):
        return x

    gather_for_metrics = gather

    def reduce(self, x, reduction="sum"):
        return x


def stand_in(x, lp, **fields):
    B, T = x["mask"].shape
    args = types.SimpleNamespace(use_bias_correction_kl=True, delta=None, sapo_temperature_pos=1.0,
                                 sapo_temperature_neg=1.05, steps_per_generation=1, vespo_k_pos=2.0,
                                 vespo_lambda_pos=3.0, vespo_k_neg=3.0, vespo_lambda_neg=2.0)
    for k in list(fields):
        if hasattr(args, k):
            setattr(args, k, fields.pop(k))
    me = dict(loss_type="grpo", epsilon_low=0.2, epsilon_high=0.2, importance_sampling_level="token", beta=0.0, args=args,
              top_entropy_quantile=1.0, off_policy_mask_threshold=None, use_vllm=False,
              vllm_importance_sampling_correction=False, model=types.SimpleNamespace(training=True),
              current_gradient_accumulation_steps=1, max_completion_length=T, accelerator=_Accelerator(),
              _entropy_bonus_enabled=False, aux_loss_enabled=False, _metrics=defaultdict(lambda: defaultdict(list)),
              _get_per_token_logps_and_entropies=lambda *a, **k: (lp, torch.zeros_like(lp), None),
              get_gamma_weights=GRPOTrainer.get_gamma_weights)  # a staticmethod: TRL's own
    me.update(fields)
    return types.SimpleNamespace(**me)


def inputs(x, advantages, **extra):
    B, T = x["mask"].shape
    d = dict(prompt_ids=torch.zeros((B, 1), dtype=torch.long), prompt_mask=torch.ones((B, 1), dtype=torch.long),
             completion_ids=torch.zeros((B, T), dtype=torch.long), completion_mask=t(x["mask"]), advantages=advantages,
             old_per_token_logps=t(x["old"]), num_items_in_batch=t(x["mask"].sum()))
    d.update(extra)
    return d


def run_case(case, x):
    m = x["mask"]

    def record(fn, method, settings, inputs_of, metrics=(), **params):
        lp = t(x["lp"]).requires_grad_(True)
        me = stand_in(x, lp, **params.pop("fields", {}))
        loss = method(me, None, inputs_of(x))
        loss.backward()
        rec.put(case, "loss", loss, fn, settings, **params)
        rec.put(case, "grad", lp.grad, fn + " (d loss / d log-probs, autograd)", settings, **params)
        for k in metrics:
            rec.put(case, "metric", me._metrics["train"][k][0], fn + f" (metric {k})", settings, metric=k, **params)

    tok_adv = lambda x: inputs(x, t(x["adv"]))  # noqa: E731
    seq_adv = lambda x: inputs(x, t(x["adv_seq"]))  # noqa: E731  (B,): one advantage per completion
    rec.attempt(f"{case}: vespo", lambda: record(
        GRPO, GRPOTrainer._compute_loss, "loss_type='vespo', importance_sampling_level='token', vespo_k_pos=2.0, "
        "vespo_lambda_pos=3.0, vespo_k_neg=3.0, vespo_lambda_neg=2.0 (defaults), num_items_in_batch = valid tokens",
        tok_adv, loss="vespo", fields=dict(loss_type="vespo")))
    for lo, hi in ((3e-4, 4e-4), (0.2, 0.2)):
        rec.attempt(f"{case}: luspo {lo}", lambda lo=lo, hi=hi: record(
            GRPO, GRPOTrainer._compute_loss, f"loss_type='luspo', importance_sampling_level='sequence', epsilon={lo}, "
            f"epsilon_high={hi}", seq_adv, loss="luspo", lo=lo, hi=hi,
            fields=dict(loss_type="luspo", importance_sampling_level="sequence", epsilon_low=lo, epsilon_high=hi)))
    for delta in (4.0, 1.5):
        rec.attempt(f"{case}: delta {delta}", lambda delta=delta: record(
            GRPO, GRPOTrainer._compute_loss, f"loss_type='bnpo' (token mean), epsilon=0.2, epsilon_high=0.28, "
            f"delta={delta}", tok_adv, loss="delta", delta=delta,
            fields=dict(loss_type="bnpo", epsilon_low=0.2, epsilon_high=0.28, delta=delta)))
    rec.attempt(f"{case}: gmpo", lambda: record(
        "trl/experimental/gmpo/gmpo_trainer.py:GMPOTrainer._compute_loss", GMPOTrainer._compute_loss,
        "GMPOConfig defaults epsilon=0.4, epsilon_high=0.4 (log space), beta=0, advantages (B,)", seq_adv,
        metrics=("clip_ratio/region_mean",), loss="gmpo", lo=0.4, hi=0.4, fields=dict(epsilon_low=0.4, epsilon_high=0.4)))

    def rloo_inputs(x):
        d = inputs(x, t(x["adv_seq"]))
        d["old_logps"] = (t(x["old"]) * t(m)).sum(1)
        return d
    rec.attempt(f"{case}: rloo", lambda: record(
        "trl/trainer/rloo_trainer.py:RLOOTrainer._compute_loss", RLOOTrainer._compute_loss,
        "epsilon=0.2, epsilon_high=0.2, advantages (B,), old_logps = sum over the completion of old log-probs",
        rloo_inputs, metrics=("clip_ratio/region_mean",), loss="rloo", lo=0.2, hi=0.2))


for case, x in load_inputs(sys.argv[1]).items():
    run_case(case, x)
rec.save(sys.argv[2], sys.argv[3], dict(torch=torch.__version__))
print(f"[trl] {len(rec.records)} outputs, {len(rec.failed)} failures")
