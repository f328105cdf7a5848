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

import torch

from _trl import grpo_args, grpo_inputs, grpo_self, load_inputs, rec, t
from trl.experimental.gmpo.gmpo_trainer import GMPOTrainer
from trl.trainer.grpo_trainer import GRPOTrainer
from trl.trainer.rloo_trainer import RLOOTrainer

GRPO = "trl/trainer/grpo_trainer.py:GRPOTrainer._compute_loss"


def stand_in(x, lp, **fields):
    "`_trl.grpo_self` with VESPO's defaults in `args`; a field `args` holds goes there, the others to `self`."
    args = grpo_args(vespo_k_pos=2.0, vespo_lambda_pos=3.0, vespo_k_neg=3.0, vespo_lambda_neg=2.0)
    for k in list(fields):
        if hasattr(args, k):
            setattr(args, k, fields.pop(k))
    return grpo_self(x["mask"].shape[1], lp, args=args, get_gamma_weights=GRPOTrainer.get_gamma_weights,  # TRL's own
                     **fields)


def inputs(x, advantages, **extra):
    return grpo_inputs(x["mask"], advantages, t(x["old"]), **extra)


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
