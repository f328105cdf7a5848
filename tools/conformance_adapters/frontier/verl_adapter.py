"""Frontier conformance adapter for verl 0.9.1 (tools/conformance_frontier.py): the KL loss term, the DAPO group filter.

Runs in the `verl` environment of tools/refenvs.py, float32. Two functions of verl's trainer, each compiled from the
installed wheel's own source text (`ast`) in a namespace holding only what it uses, because their modules import
verl's whole training stack (datasets, Ray, the transfer queue) at their top; their code is verl's, read at run time,
nothing is copied into this repository:

* `ppo_loss` of verl/workers/utils/losses.py, with `use_kl_loss=True`, `policy_loss.loss_mode="vanilla"` and zero
  advantages, so that the returned loss is `kl_loss_coef * agg_loss(kl_penalty(log_prob, ref_log_prob,
  kl_loss_type), response_mask, loss_agg_mode)` alone; value and gradient with respect to the log-probs, for several
  `kl_loss_type` and `loss_agg_mode`. The batch is a plain mapping already in the padded layout (so the
  `no_padding_2_padding` conversion is the identity), one data-parallel rank, no global batch info.
* `_dapo_filtered_keys` of the v1 replay buffer (verl/trainer/ppo/v1/replay_buffer.py, `algorithm.filter_groups`
  with `metric="reward"`), unbound, with a stand-in `self` holding every trajectory as finished and a transfer-queue
  stand-in returning each trajectory's `rm_scores` (the reward on the last response token); the rows of the groups it
  does not filter are recorded as kept.

    <verl-python> tools/conformance_adapters/frontier/verl_adapter.py INPUTS.npz OUTPUTS.npz OUTPUTS.json
"""
import ast
import inspect
import sys
import types
from collections import Counter, defaultdict

import numpy as np
import torch
import verl
from verl.trainer.ppo import core_algos as ca
from verl.utils.metric import AggregationType, Metric

from _common import Recorder, load_inputs

assert verl.__version__ == "0.9.1", verl.__version__
rec = Recorder("verl", f"verl {verl.__version__}")
PKG = inspect.getfile(ca).rsplit("/trainer/ppo/core_algos.py", 1)[0]
LOSSES, REPLAY = "verl/workers/utils/losses.py", "verl/trainer/ppo/v1/replay_buffer.py"


def from_source(rel, name, namespace, cls=None):
    "Compile one function (or one method of class `cls`) of an installed verl file from its own source text."
    path = f"{PKG}/{rel.split('/', 1)[1]}"
    body = ast.parse(open(path).read()).body
    if cls is not None:
        body = next(n for n in body if isinstance(n, ast.ClassDef) and n.name == cls).body
    node = next(n for n in body if isinstance(n, ast.FunctionDef) and n.name == name)
    node.decorator_list = []
    exec(compile(ast.Module(body=[node], type_ignores=[]), path, "exec"), namespace)
    return namespace[name]


ppo_loss = from_source(LOSSES, "ppo_loss", dict(
    torch=torch, agg_loss=ca.agg_loss, kl_penalty=ca.kl_penalty, get_policy_loss_fn=ca.get_policy_loss_fn, Metric=Metric,
    AggregationType=AggregationType, no_padding_2_padding=lambda x, data: x, ActorConfig=object, TensorDict=object))


class Batch(dict):
    "The padded batch ppo_loss reads: `select(...).to_padded_tensor()` on a layout that is already padded."

    def select(self, *fields):
        return Batch({k: self[k] for k in fields})

    def to_padded_tensor(self):
        return self


class Config(types.SimpleNamespace):
    def get(self, key, default=None):
        return getattr(self, key, default)


def t(a):
    return torch.tensor(np.asarray(a, np.float32))


def kl_loss_terms(case, x):
    m = t(x["mask"])
    for kind in ("low_var_kl", "k1", "k2", "abs"):
        for mode in ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"):
            coef = 0.1
            lp = t(x["lp"]).requires_grad_(True)
            cfg = Config(global_batch_info={}, loss_scale_factor=None, loss_agg_mode=mode,
                         policy_loss={"loss_mode": "vanilla"}, use_kl_loss=True, kl_loss_type=kind, kl_loss_coef=coef,
                         clip_ratio=0.2, clip_ratio_low=0.2, clip_ratio_high=0.2, clip_ratio_c=3.0)
            data = Batch(response_mask=m, old_log_probs=t(x["old"]), advantages=torch.zeros_like(m),
                         ref_log_prob=t(x["ref"]), dp_size=1, batch_num_tokens=None, global_batch_size=None)
            loss, metrics = ppo_loss(cfg, {"log_probs": lp}, data)
            loss.backward()
            s = (f"ppo_loss: actor.use_kl_loss=True, kl_loss_type={kind!r}, kl_loss_coef={coef}, loss_agg_mode={mode!r}, "
                 "policy_loss.loss_mode='vanilla', advantages = 0 (the loss is the KL term alone), dp_size=1")
            p = dict(kl_loss_type=kind, loss_agg_mode=mode, coef=coef)
            rec.put(case, "kl_loss_term", loss, f"{LOSSES}:ppo_loss", s, **p)
            rec.put(case, "kl_loss_term_grad", lp.grad, f"{LOSSES}:ppo_loss", s + "; d loss / d log_prob", **p)


def dapo_filter(case, x):
    uids = [f"u{int(u)}" for u in x["uids"]]
    keys = [f"{u}_{i}" for i, u in enumerate(uids)]
    m = x["mask"]
    last = m.shape[1] - 1 - np.argmax(m[:, ::-1] > 0, axis=1)
    scores = np.zeros(m.shape, np.float32)
    scores[np.arange(m.shape[0]), last] = x["rewards"]
    by_key = dict(zip(keys, scores))
    tq = types.SimpleNamespace(kv_batch_get=lambda keys, partition_id, select_fields: {
        "rm_scores": [torch.tensor(by_key[k]) for k in keys]})
    fn = from_source(REPLAY, "_dapo_filtered_keys", dict(np=np, Counter=Counter, defaultdict=defaultdict, tq=tq,
                                                         FILTER_GROUPS_REWARD_METRIC="reward"), cls="ReplayBuffer")
    me = types.SimpleNamespace(filter_groups_metric="reward", finished_keys={"train": set(uids)},
                               _dapo_classification_cache={"train": {}}, partitions={"train": {k: None for k in keys}})
    filtered, _ = fn(me, "train")
    kept = np.array([u not in filtered for u in uids], np.float32)
    rec.put(case, "dynamic_sampling", kept, f"{REPLAY}:ReplayBuffer._dapo_filtered_keys",
            "algorithm.filter_groups.enable=True, metric='reward' (rm_scores summed per trajectory); a row is kept when "
            "its uid is not returned as filtered")


for case, x in load_inputs(sys.argv[1]).items():
    rec.attempt(f"{case}: kl loss term", lambda: kl_loss_terms(case, x))
    rec.attempt(f"{case}: dapo filter", lambda: dapo_filter(case, x))
rec.save(sys.argv[2], sys.argv[3], dict(torch=torch.__version__))
print(f"[verl] {len(rec.records)} outputs, {len(rec.failed)} failures")
