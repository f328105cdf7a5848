"""Advantage-frontier conformance adapter for TRL 1.16.0: its GRPO advantages, computed inline, on the shared inputs.

Runs in the `trl` environment of tools/refenvs.py. TRL computes the advantages inside
`GRPOTrainer._generate_and_score_completions` (trl/trainer/grpo_trainer.py), between generation and the loss; there
is no function to call. The adapter calls that method unbound, with a stand-in `self`: `_generate` returns the given
completions (token ids with the given lengths) instead of sampling, `_calculate_rewards` returns the given reward
components (one column per reward function) instead of scoring, the accelerator is one process (gather is the
identity; tools/conformance_adapters/_trl.py), beta = 0 (no reference model) and the generation and optimisation
steps are aligned (no old log-probs).
Everything from the padding of the completions to the advantages, including `scale_rewards`,
`multi_objective_aggregation`, `reward_weights` and the `nanstd` statistics, is TRL's own code; nothing is copied.

    <trl-python> tools/conformance_adapters/advantages/trl_adapter.py INPUTS.npz OUTPUTS.npz OUTPUTS.json
"""
import sys
import types
from collections import defaultdict
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _trl import OneProcess, load_inputs, rec  # noqa: E402
from trl.trainer.grpo_trainer import GRPOTrainer  # noqa: E402

FN = "trl/trainer/grpo_trainer.py:GRPOTrainer._generate_and_score_completions"


class _Model:
    training = True
    is_gradient_checkpointing = False


def stand_in(lengths, rewards_per_func, G, scale_rewards, aggregation, weights):
    B = len(lengths)
    completions = [[7] * int(n) for n in lengths]
    K = rewards_per_func.shape[1]

    def generate(prompts):
        return ([[1, 2]] * B, completions, None, ["c"] * B, None, {}, None, None)

    me = types.SimpleNamespace(
        accelerator=OneProcess(), model=_Model(), environment_factories=None, tools=None, environments=None,
        _generate=generate, _tokenizer=types.SimpleNamespace(pad_token_id=0), pad_to_multiple_of=None,
        mask_truncated_completions=False, eos_token_ids=[0], num_iterations=1, use_vllm=False,
        vllm_importance_sampling_correction=False, beta=0.0, ref_model=None, num_generations=G,
        num_generations_eval=G, multi_objective_aggregation=aggregation, scale_rewards=scale_rewards,
        reward_weights=torch.tensor(weights, dtype=torch.float32), reward_funcs=[None] * K,
        reward_func_names=[f"r{k}" for k in range(K)], _metrics=defaultdict(lambda: defaultdict(list)),
        _logs=defaultdict(list), _pending_extra_logs={}, _pending_metrics={}, log_multimodal=False,
        _is_vlm=False, chat_template_kwargs={}, processing_class=None,
        args=types.SimpleNamespace(per_device_train_batch_size=B, per_device_eval_batch_size=B, steps_per_generation=1,
                                   gradient_accumulation_steps=1, gradient_checkpointing_kwargs=None),
        _calculate_rewards=lambda *a, **k: torch.tensor(rewards_per_func, dtype=torch.float32))
    me._logs["rewards"] = defaultdict(list)
    me._logs["extra"] = defaultdict(list)
    return me


def advantages(x, scale_rewards, aggregation, components, weights):
    G = int(x["G"])
    lengths = x["mask"].sum(1).astype(int)
    me = stand_in(lengths, components, G, scale_rewards, aggregation, weights)
    inputs = [{"prompt": "p"} for _ in lengths]
    out = GRPOTrainer._generate_and_score_completions(me, inputs)
    return out["advantages"]


for case, x in load_inputs(sys.argv[1]).items():
    if not int(x["G"]) or (x["mask"][:, :-1] < x["mask"][:, 1:]).any():
        continue  # TRL groups contiguous blocks of num_generations rows, and its completions are right-padded
    m = torch.tensor(x["mask"])

    def batch_std(case=case, x=x):
        adv = advantages(x, "batch", "sum_then_normalize", x["rewards"][:, None], [1.0])
        rec.put(case, "batch_std", adv[:, None] * m, FN, "one reward function, scale_rewards='batch', "
                "multi_objective_aggregation='sum_then_normalize' (default), one process; shown at the kept tokens")
    rec.attempt(f"{case}: scale_rewards=batch", batch_std)

    def grpo(case=case, x=x):
        adv = advantages(x, "group", "sum_then_normalize", x["rewards"][:, None], [1.0])
        rec.put(case, "grpo", adv[:, None] * m, FN, "one reward function, scale_rewards='group' (default), one "
                "process; shown at the kept tokens")
    rec.attempt(f"{case}: scale_rewards=group", grpo)

    def gdpo(case=case, x=x):
        for weights in (None, [1.0, 0.5, 2.0]):
            adv = advantages(x, "group", "normalize_then_sum", x["components"], weights or [1.0, 1.0, 1.0])
            rec.put(case, "gdpo", adv[:, None] * m, FN, f"three reward functions, multi_objective_aggregation="
                    f"'normalize_then_sum', reward_weights={weights}, one process; shown at the kept tokens",
                    weights=weights)
    rec.attempt(f"{case}: normalize_then_sum", gdpo)
rec.save(sys.argv[2], sys.argv[3], dict(torch=torch.__version__))
print(f"[trl] {len(rec.records)} outputs, {len(rec.failed)} failures")
