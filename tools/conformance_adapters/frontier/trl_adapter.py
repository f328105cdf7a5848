"""Frontier conformance adapter for TRL 1.16.0 (tools/conformance_frontier.py): RLOO's reward pipeline, A*-PO.

Runs in the `trl` environment of tools/refenvs.py, float32, one process. Calls TRL's own trainer methods, unbound,
with a stand-in `self` that holds what each method reads; nothing of TRL is copied:

* `RLOOTrainer._generate_and_score_completions`. The stand-in's `_generate` returns the given completion ids (each
  row cut at its length: EOS-ended, pad-ended or truncated), `_get_per_token_logps_and_entropies` returns the given
  old and reference log-probs (by the model it is called with), `_calculate_rewards` the given rewards (one reward
  function, weight 1); accelerate's `gather` / `gather_object` of one process are the identity (set on the module).
  Recorded: the advantages it returns (`beta` 0 and 0.05: the sequence-summed k1 in the reward, then leave-one-out)
  and the completion mask with `mask_truncated_completions=True` (a row whose last id is neither EOS nor pad is
  cleared, and then contributes no KL).
* `A2POTrainer.compute_loss`, with `_get_sequence_logps` the trainer's own method and a model whose logits are a
  parameter (prompt of one token, so that position t's logits predict completion token t); recorded: the loss and
  its gradient with respect to the logits, for `beta2` 1e-3 (the default) and 0.1.
* `A2POTrainer._estimate_optimal_values` (stage 1): N completions per prompt from a stand-in reference model, scored
  by a reward function that returns the given binary rewards; V* per prompt read from `_optimal_values`, for `beta1`
  0.5 (the default) and 2.0. accelerate's `gather_object` and `unwrap_model_for_generation` of one process are the
  identity (set on the module), the tokenizer a stand-in that maps each prompt to an id.

    <trl-python> tools/conformance_adapters/frontier/trl_adapter.py INPUTS.npz OUTPUTS.npz OUTPUTS.json
"""
import contextlib
import sys
import types
from collections import defaultdict
from importlib.metadata import version

import numpy as np
import torch

from _common import Recorder, load_inputs

VERSION = version("trl")
assert VERSION == "1.16.0", VERSION
from accelerate import PartialState  # noqa: E402
import trl.experimental.a2po.a2po_trainer as a2po_mod  # noqa: E402
import trl.trainer.rloo_trainer as rloo_mod  # noqa: E402
from trl.experimental.a2po.a2po_trainer import A2POTrainer  # noqa: E402
from trl.trainer.rloo_trainer import RLOOTrainer  # noqa: E402

rec = Recorder("trl", f"TRL {VERSION}")
RT, AT = "trl/trainer/rloo_trainer.py", "trl/experimental/a2po/a2po_trainer.py"
ns = types.SimpleNamespace
identity = lambda v: v  # noqa: E731  accelerate's gather / gather_object with one process
for mod in (rloo_mod, a2po_mod):
    mod.gather, mod.gather_object = identity, identity
a2po_mod.unwrap_model_for_generation = lambda model, accelerator, **k: contextlib.nullcontext(model)
PartialState()  # accelerate's logger (used by stage 1) needs a state: one CPU process


def t(a):
    return torch.tensor(np.asarray(a, np.float32))


class OneProcess:
    device, process_index, num_processes = torch.device("cpu"), 0, 1

    def gather(self, v):
        return v

    def reduce(self, v, reduction="sum"):
        return v

    def prepare(self, v):
        return v


def rloo(case, x, beta, mask_truncated):
    m, tokens = x["mask"], x["tokens"]
    B, G = m.shape[0], int(x["G"])
    lengths = m.sum(1).astype(int)
    completion_ids = [[int(v) for v in tokens[i, :lengths[i]]] for i in range(B)]
    model, ref_model = ns(training=True, is_gradient_checkpointing=False), ns(is_gradient_checkpointing=False)
    given = {id(model): t(x["old"]), id(ref_model): t(x["ref"])}
    me = ns(accelerator=OneProcess(), model=model, ref_model=ref_model, beta=beta, num_generations=G,
            mask_truncated_completions=mask_truncated, eos_token_ids=[int(x["eos"])],
            _tokenizer=ns(pad_token_id=int(x["pad"])), pad_to_multiple_of=None,
            args=ns(per_device_train_batch_size=B, gradient_checkpointing_kwargs=None),
            reward_weights=torch.ones(1), reward_clip_range=None, normalize_advantages=False,
            reward_func_names=["given"], _metrics=defaultdict(lambda: defaultdict(list)),
            _logs=dict(prompt=[], completion=[], rewards=defaultdict(list), advantages=[], extra=defaultdict(list)),
            _pending_extra_logs={}, _pending_metrics={}, log_multimodal=False, processing_class=None,
            chat_template_kwargs={})
    me._generate = lambda prompts: ([[1] for _ in prompts], completion_ids, [f"c{i}" for i in range(B)])
    me._get_per_token_logps_and_entropies = lambda mdl, *a, **k: (given[id(mdl)], None, None)
    me._calculate_rewards = lambda inputs, prompts, completions, ids: t(x["rewards"])[:, None]
    out = RLOOTrainer._generate_and_score_completions(me, [{"prompt": f"p{i // G}"} for i in range(B)])
    s = (f"beta={beta}, mask_truncated_completions={mask_truncated}, num_generations={G}, normalize_advantages=False, "
         f"eos_token_id={int(x['eos'])}, pad_token_id={int(x['pad'])}; old/ref per-token log-probs given")
    rec.put(case, "rloo_advantages", out["advantages"], f"{RT}:RLOOTrainer._generate_and_score_completions", s,
            beta=beta, mask_truncated=mask_truncated)
    if mask_truncated and beta == 0.0:
        rec.put(case, "completion_mask", out["completion_mask"].float(),
                f"{RT}:RLOOTrainer._generate_and_score_completions", s + "; the completion_mask it returns",
                mask_truncated=mask_truncated)


class GivenLogits(torch.nn.Module):
    "A model whose logits are a parameter: [B, 1 + T, V], the last row predicting past the sequence (dropped by TRL)."

    def __init__(self, logits):
        super().__init__()
        self.logits = torch.nn.Parameter(torch.cat([logits, torch.zeros_like(logits[:, :1])], dim=1))

    def forward(self, input_ids, attention_mask):
        return ns(logits=self.logits)


def astar_loss(case, x, beta2):
    m, tokens = x["mask"], x["tokens"]
    B, T = m.shape
    model = GivenLogits(t(x["logits"]))
    me = ns(model=ns(training=True), args=ns(beta2=beta2), model_kwarg_keys=[],
            _metrics=defaultdict(lambda: defaultdict(list)))
    me._get_sequence_logps = lambda *a: A2POTrainer._get_sequence_logps(me, *a)
    inputs = dict(input_ids=torch.cat([torch.ones(B, 1, dtype=torch.long), torch.tensor(tokens)], dim=1),
                  attention_mask=torch.cat([torch.ones(B, 1), t(m)], dim=1).long(), logits_to_keep=T,
                  ref_logps=(t(x["ref"]) * t(m)).sum(1), rewards=t(x["rewards"]), v_star=t(x["v_star"]))
    loss = A2POTrainer.compute_loss(me, model, inputs)
    loss.backward()
    s = (f"beta2={beta2}; ref_logps = sum over the mask of the given reference log-probs, rewards and v_star given, "
         "model logits given (one prompt token)")
    rec.put(case, "astar_loss", loss, f"{AT}:A2POTrainer.compute_loss", s, beta2=beta2)
    rec.put(case, "astar_grad", model.logits.grad[:, :T], f"{AT}:A2POTrainer.compute_loss",
            s + "; d loss / d logits", beta2=beta2)


def astar_value(case, x, beta1):
    R = x["ref_rewards"]
    P, N = R.shape
    prompts = [f"prompt {j}" for j in range(P)]

    class Tokenizer:
        def __call__(self, texts, **kw):
            ids = torch.tensor([[prompts.index(s)] for s in texts])
            return _Encoded(input_ids=ids, attention_mask=torch.ones_like(ids))

        def batch_decode(self, ids, skip_special_tokens=True):
            return [f"{v // N}:{v % N}" for (v,) in ids.tolist()]  # one token per completion: "prompt:sample"

    ref_model = ns(generate=lambda input_ids, attention_mask, generation_config: torch.cat([
        input_ids.repeat_interleave(N, dim=0),
        (input_ids.repeat_interleave(N, dim=0) * N + torch.arange(N).repeat(input_ids.shape[0])[:, None])], dim=1))

    def reward(prompts, completions, **kw):
        return [float(R[int(c.split(":")[0]), int(c.split(":")[1])]) for c in completions]

    me = ns(args=ns(beta1=beta1, num_value_samples=N, per_device_train_batch_size=2, max_prompt_length=None,
                    filter_all_incorrect=False),
            train_dataset=[{"prompt": p} for p in prompts], eval_dataset=None, accelerator=OneProcess(),
            processing_class=Tokenizer(), ref_model=ref_model, value_generation_config=None,
            reward_funcs=[reward], reward_weights=torch.ones(1))
    me._calculate_rewards = lambda *a, **k: A2POTrainer._calculate_rewards(me, *a, **k)
    A2POTrainer._estimate_optimal_values(me)
    v = torch.tensor([me._optimal_values[p] for p in prompts])
    rec.put(case, "astar_value", v, f"{AT}:A2POTrainer._estimate_optimal_values",
            f"beta1={beta1}, num_value_samples={N}; the reference samples' rewards given (binary)", beta1=beta1)


class _Encoded(dict):
    "What a tokenizer call returns: a mapping with `.to(device)`."

    def __init__(self, **kw):
        super().__init__(**kw)

    def to(self, device):
        return self

    def __getattr__(self, name):
        return self[name]


for case, x in load_inputs(sys.argv[1]).items():
    for beta in (0.0, 0.05):
        for mt in (False, True):
            rec.attempt(f"{case}: rloo beta={beta} mask_truncated={mt}", lambda: rloo(case, x, beta, mt))
    for beta2 in (1e-3, 0.1):
        rec.attempt(f"{case}: a2po loss {beta2}", lambda: astar_loss(case, x, beta2))
    for beta1 in (0.5, 2.0):
        rec.attempt(f"{case}: a2po V* {beta1}", lambda: astar_value(case, x, beta1))
rec.save(sys.argv[2], sys.argv[3], dict(torch=torch.__version__))
print(f"[trl] {len(rec.records)} outputs, {len(rec.failed)} failures")
