"""Shared by the TRL 1.16.0 conformance adapters (tools/conformance_adapters/<suite>/trl_adapter.py): the version
check and the recorder, float32 tensors, accelerate seen from one process, and the stand-in `self` and batch with
which they call `GRPOTrainer._compute_loss` unbound.

TRL has no standalone loss function: the GRPO loss is the method `GRPOTrainer._compute_loss`
(trl/trainer/grpo_trainer.py). `grpo_self` is a namespace holding the loss fields that `GRPOConfig` and
`GRPOTrainer.__init__` would set (at the defaults below unless an adapter says otherwise), an accelerator of one
process and a `_get_per_token_logps_and_entropies` that returns the given per-token log-probs instead of running a
model, so that everything after the log-probs is TRL's code. Nothing of TRL is copied. A suite whose adapter imports
this file has it in its staleness hash (tools/conformance_harness.py: `Suite.hashed_files`).
"""
import sys
import types
from collections import defaultdict
from importlib.metadata import version
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Recorder, load_inputs  # noqa: E402,F401  (load_inputs: for the adapters)

VERSION = version("trl")
assert VERSION == "1.16.0", VERSION
GT = "trl/trainer/grpo_trainer.py"
rec = Recorder("trl", f"TRL {VERSION}")


def t(a, dtype=torch.float32):
    "`a` as a torch tensor (float32 unless `dtype` says otherwise)."
    return torch.tensor(np.asarray(a), dtype=dtype)


class OneProcess:
    "accelerate's Accelerator of one CPU process: gather, reduce and padding across processes are the identity."
    device, process_index, num_processes = torch.device("cpu"), 0, 1

    def __init__(self):
        self.sync_gradients = True   # the last micro-batch of an optimizer step (an adapter may clear it)

    def gather(self, x):
        return x

    gather_for_metrics = gather

    def reduce(self, x, reduction="sum"):
        return x

    def pad_across_processes(self, x, dim=0, pad_index=0):
        return x


def grpo_args(**fields):
    "The `GRPOConfig` fields that `_compute_loss` reads from `self.args`, at TRL 1.16.0's defaults unless given."
    return types.SimpleNamespace(**{**dict(use_bias_correction_kl=True, delta=None, sapo_temperature_pos=1.0,
                                           sapo_temperature_neg=1.05, steps_per_generation=1), **fields})


def grpo_self(T, lp, **fields):
    """A stand-in `self` for `GRPOTrainer._compute_loss` on completions of width T whose per-token log-probs are `lp`:
    loss_type 'grpo', epsilon 0.2, token level, beta 0, one process, no gradient accumulation, training mode, no
    entropy bonus; `fields` replace any of these (and `args`, `grpo_args()` by default)."""
    me = dict(loss_type="grpo", epsilon_low=0.2, epsilon_high=0.2, importance_sampling_level="token", beta=0.0,
              args=grpo_args(), top_entropy_quantile=1.0, off_policy_mask_threshold=None, use_vllm=False,
              vllm_importance_sampling_correction=False, model=types.SimpleNamespace(training=True),
              current_gradient_accumulation_steps=1, max_completion_length=T, accelerator=OneProcess(),
              _entropy_bonus_enabled=False, aux_loss_enabled=False, _metrics=defaultdict(lambda: defaultdict(list)),
              _get_per_token_logps_and_entropies=lambda *a, **k: (lp, torch.zeros_like(lp), None))
    me.update(fields)
    return types.SimpleNamespace(**me)


def grpo_inputs(mask, advantages, old_per_token_logps, **extra):
    """The batch `_compute_loss` reads: one prompt token, completion ids 0, the completion mask, the advantages, the
    old log-probs, `num_items_in_batch` = the valid tokens; `extra` adds keys (reference or sampling log-probs)."""
    B, T = mask.shape
    return dict(prompt_ids=torch.zeros((B, 1), dtype=torch.long), prompt_mask=torch.ones((B, 1), dtype=torch.long),
                completion_ids=torch.zeros((B, T), dtype=torch.long), completion_mask=t(mask), advantages=advantages,
                old_per_token_logps=old_per_token_logps, num_items_in_batch=t(mask.sum()), **extra)
