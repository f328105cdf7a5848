"""Tunix's own GRPOLearner (its RL cluster, vanilla sampler and trainer) training a shrunk Qwen3 with a dew_rl loss.

    python examples/tunix_grpo.py --estimator grpo --steps 3            # a smoke run (what the test does)
    python examples/tunix_grpo.py --estimator grpo --steps 300 --prompts 8 --curve data/tunix_grpo_curve.json
    python examples/tunix_grpo.py --estimator dapo --steps 300 --prompts 8 --curve data/tunix_grpo_curve.json

The model is `tunix.models.qwen3.Qwen3`, shrunk to two layers, a 24-word vocabulary and width 32, and
randomly initialised (nothing is downloaded); the tokenizer is Tunix's own word-level `MockVocab` with
that vocabulary. The verifiable task: a prompt `say <word>` names one of eight words, and the reward
of a completion is the fraction of its words equal to the named word (a three-line verifier).

The estimator is chosen by `--estimator`:

- `grpo`: `obj.grpo(...)`, its advantage estimator and policy loss both from `dew_rl.tunix.register`;
- `dapo`: `obj.dapo(..., dynamic_sampling=False)` (clip-higher 0.2/0.28, token mean) with its estimator;
- `dapo_rejected`: DAPO whose first batch has reward 0 for every completion, so every group is tied
  and every advantage 0 (the rejected batch): that step must be a normal event with finite metrics and
  a zero gradient, and the next ones train;
- `tis`: GRPO with token TIS against the sampler (`tis_cap=2.0`): `dew_rl.tunix.GRPOLearner` keeps the
  sampler's log-probs (`RolloutConfig(return_logprobs=True)`), which the sampler computes at temperature
  `--temperature` while the trainer recomputes them, so the weights are live;
- `tunix_grpo`: Tunix's own `"grpo"` loss and estimator, for comparison.

It prints one JSON line per step (the rewards Tunix logs, `rewards/train/...`, and the actor's metrics,
`actor/train/...`, dew_rl's `train/*` among them, as Tunix's MetricsLogger reports them through
`jax.monitoring`) and, at the end,
a JSON summary: steps, seconds per step after the first, whether every logged metric is finite, and
the largest parameter change.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
import warnings

warnings.filterwarnings("ignore", message="IProgress not found")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from absl import logging  # noqa: E402
from flax import nnx  # noqa: E402
from tunix.models.qwen3 import model as qwen3  # noqa: E402
from tunix.rl import rl_cluster as rl_cluster_lib  # noqa: E402
from tunix.rl.grpo import grpo_learner  # noqa: E402
from tunix.rl.rollout import base_rollout  # noqa: E402
from tunix.tests import test_common  # noqa: E402  (Tunix's word-level MockVocab)

import dew_rl.objectives as obj  # noqa: E402
import dew_rl.tunix as dt  # noqa: E402

logging.set_verbosity(logging.ERROR)
WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven"]
FILLER = ["say", "a", "the", "and", "of", "to", "is", "it", "ok", "no", "yes", "we", "go"]
MAPPING = {"<pad>": 0, "<s>": 1, "</s>": 2, **{w: i + 3 for i, w in enumerate(WORDS + FILLER)}}
G = 4


def reward(prompts, completions, **kwargs):
    """Fraction of the completion's words equal to the word the prompt names."""
    out = []
    for p, c in zip(prompts, completions):
        words = c.split()
        out.append(sum(w == p.split()[-1] for w in words) / max(1, len(words)))
    return out


def first_batch_rejected():
    """The task's reward, but 0 for every completion of the first batch: every group tied, every advantage 0."""
    calls = []

    def reward_rejecting_first(prompts, completions, **kwargs):
        calls.append(1)
        return [0.0] * len(completions) if len(calls) == 1 else reward(prompts, completions)
    return reward_rejecting_first


def build(estimator, lr, temperature, seed):
    vocab = test_common.MockVocab(MAPPING)
    config = qwen3.ModelConfig(num_layers=2, vocab_size=len(MAPPING), embed_dim=32, hidden_dim=64, num_heads=2,
                               head_dim=16, num_kv_heads=1, rope_theta=10_000, norm_eps=1e-6)
    actor = qwen3.Qwen3(config, rngs=nnx.Rngs(seed))
    reference = qwen3.Qwen3(config, rngs=nnx.Rngs(seed))
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]).reshape(1, 1), ("fsdp", "tp"))
    rollout = base_rollout.RolloutConfig(max_tokens_to_generate=4, max_prompt_length=4, kv_cache_size=16,
                                         temperature=temperature, top_p=1.0, top_k=None,
                                         return_logprobs=estimator == "tis")
    cluster_config = rl_cluster_lib.ClusterConfig(
        role_to_mesh={r: mesh for r in (rl_cluster_lib.Role.ACTOR, rl_cluster_lib.Role.REFERENCE,
                                        rl_cluster_lib.Role.ROLLOUT)},
        rollout_engine="vanilla", offload_to_cpu=False,
        training_config=rl_cluster_lib.RLTrainingConfig(actor_optimizer=optax.adam(lr), eval_every_n_steps=10**6,
                                                        max_steps=10**6),
        rollout_config=rollout)
    cluster = rl_cluster_lib.RLCluster(actor=actor, reference=reference, tokenizer=vocab, cluster_config=cluster_config)
    if estimator == "tunix_grpo":
        algo = grpo_learner.GRPOConfig(num_generations=G, beta=0.0, epsilon=0.2)
        return grpo_learner.GRPOLearner(cluster, algo, reward), None, actor
    ours = {"grpo": obj.grpo(n_samples_per_prompt=G),
            "dapo": obj.dapo(n_samples_per_prompt=G, dynamic_sampling=False),
            "dapo_rejected": obj.dapo(n_samples_per_prompt=G, dynamic_sampling=False),
            "tis": obj.grpo(n_samples_per_prompt=G, tis_cap=2.0)}[estimator]
    name = dt.register(ours, f"dew_rl_example_{estimator}")                           # the three lines
    algo = grpo_learner.GRPOConfig(num_generations=G, beta=0.0, policy_loss_fn=name, advantage_estimator=name)
    learner_cls = dt.GRPOLearner if estimator == "tis" else grpo_learner.GRPOLearner
    learner = learner_cls(cluster, algo, first_batch_rejected() if estimator == "dapo_rejected" else reward)
    dt.log_metrics(learner, ours)
    return learner, ours, actor


def prompts(steps, batch, seed):
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        yield {"prompts": np.array([f"say {WORDS[i]}" for i in rng.integers(0, len(WORDS), batch)])}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--estimator", default="grpo", choices=["grpo", "dapo", "dapo_rejected", "tis", "tunix_grpo"])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--prompts", type=int, default=4, help="prompts per step (each sampled G=4 times)")
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, help="write the per-step log and the summary here")
    parser.add_argument("--curve", default=None, help="add this run's reward curve to a JSON file (nbs/05t_tunix reads it)")
    args = parser.parse_args(argv)

    learner, ours, actor = build(args.estimator, args.lr, args.temperature, args.seed)
    trained = learner.rl_cluster.actor_trainer.model  # the cluster's copy of the actor, which the trainer updates
    before = jax.tree.map(np.array, nnx.state(trained, nnx.Param))
    steps, times = [], []
    logged = {}

    def record(name, value, **kwargs):  # Tunix's MetricsLogger reports every scalar through jax.monitoring
        if name.startswith(("actor/train/", "rewards/train/")):
            logged[name] = float(np.mean(value))

    jax.monitoring.register_scalar_listener(record)
    for i, batch in enumerate(prompts(args.steps, args.prompts, args.seed)):
        start = time.perf_counter()
        logged.clear()
        learner.train([batch])
        jax.block_until_ready(nnx.state(trained, nnx.Param))
        times.append(time.perf_counter() - start)
        row = {"step": i, "global_step": int(learner.rl_cluster.global_steps), "seconds": round(times[-1], 3),
               **{k: logged[k] for k in sorted(logged)}}
        steps.append(row)
        print(json.dumps(row), flush=True)
    after = jax.tree.map(np.array, nnx.state(trained, nnx.Param))
    change = max(float(np.max(np.abs(a - b))) for a, b in zip(jax.tree.leaves(before), jax.tree.leaves(after)))
    finite = all(np.isfinite(v) for row in steps for k, v in row.items() if k not in ("step", "global_step", "seconds"))
    summary = {"estimator": args.estimator, "steps": len(steps), "finite": bool(finite), "param_change": change,
               "seconds_per_step": float(np.mean(times[1:])) if len(times) > 1 else times[0],
               "first_step_seconds": times[0],
               "metric_names": sorted({k for row in steps for k in row if k not in ("step", "global_step", "seconds")})}
    print(json.dumps({"summary": summary}), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"steps": steps, "summary": summary}, f, indent=1)
    if args.curve:
        path = Path(args.curve)
        curves = json.loads(path.read_text()) if path.exists() else {}
        keep = ("rewards/train/score/mean", "actor/train/train/loss", "actor/train/train/entropy",
                "actor/train/train/pg_clipfrac", "seconds")
        curves[args.estimator] = {"command": "python examples/tunix_grpo.py " + " ".join(argv or sys.argv[1:]),
                                  "summary": {k: v for k, v in summary.items() if k != "metric_names"},
                                  "steps": {k: [row.get(k) for row in steps] for k in keep}}
        path.write_text(json.dumps(curves, indent=1) + "\n")
    return summary


if __name__ == "__main__":
    main()
