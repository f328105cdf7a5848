"""Tunix's own GRPOLearner (its RL cluster, vanilla sampler and trainer) training a shrunk Qwen3 with a dew_rl loss.

    python examples/tunix_grpo.py --estimator grpo --steps 3            # a smoke run (what the test does)
    python examples/tunix_grpo.py --estimator grpo --steps 300 --prompts 8 --curve data/tunix_grpo_curve.json
    python examples/tunix_grpo.py --estimator dapo --steps 300 --prompts 8 --curve data/tunix_grpo_curve.json
    python examples/tunix_grpo.py --estimator ppo --steps 300 --prompts 8 --curve data/tunix_grpo_curve.json

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
- `ppo`: Tunix's `PPOLearner` with a critic (the same shrunk Qwen3 with a one-unit score head on its last
  hidden state, as Tunix's own `GemmaWithScoreHead`; random init), `obj.ppo(...)` registered as its
  policy loss, GAE advantage estimator and value loss (one name for all three), one completion per prompt,
  and an integer reward (`count_reward`: Tunix's PPOLearner truncates a fractional one, see there);
- `tunix_grpo`: Tunix's own `"grpo"` loss and estimator, for comparison.

It prints one JSON line per step (the rewards Tunix logs, `rewards/train/...`; dew_rl's stage-1 metrics,
`rollout/train/...`; the actor's metrics, `actor/train/...`, dew_rl's `train/*` among them; for PPO the
critic's, `critic/train/...`; all as Tunix's MetricsLogger reports them through `jax.monitoring`) and, at
the end, a JSON summary: steps, seconds per step after the first, whether every logged metric is finite,
and the largest parameter change of the actor (and of the critic).
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
from tunix.rl.ppo import ppo_learner  # noqa: E402
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


def count_reward(prompts, completions, **kwargs):
    """The number of the completion's words equal to the word the prompt names: an integer, for PPO.

    Tunix's PPOLearner (0.1.7, and google/tunix@c7d8950f) builds its token rewards as
    `jnp.zeros_like(completion_ids)`, an int32 array, and adds the score at the last token with `.at[].add`,
    which truncates a fractional score toward zero (JAX warns about the cast): `reward` above, a fraction,
    would reach its GAE as 0 almost always. The count keeps the task and survives the cast."""
    return [float(sum(w == p.split()[-1] for w in c.split())) for p, c in zip(prompts, completions)]


def first_batch_rejected():
    """The task's reward, but 0 for every completion of the first batch: every group tied, every advantage 0."""
    calls = []

    def reward_rejecting_first(prompts, completions, **kwargs):
        calls.append(1)
        return [0.0] * len(completions) if len(calls) == 1 else reward(prompts, completions)
    return reward_rejecting_first


class Qwen3Critic(nnx.Module):
    """A value model: the shrunk Qwen3 with a one-unit score head on its final hidden state, `[B, L, 1]` (the
    layout of Tunix's `GemmaWithScoreHead`; `tunix.models.qwen3` has no score head of its own)."""

    def __init__(self, config, rngs):
        self.transformer = qwen3.Qwen3(config, rngs=rngs)
        self.score = nnx.Linear(config.embed_dim, 1, use_bias=False, rngs=rngs)

    def __call__(self, *args, **kwargs):
        self.transformer(*args, **kwargs, output_hidden_states=True)
        hidden = nnx.pop(self.transformer, nnx.Intermediate)["all_hidden_states"]
        return self.score(hidden.get_value()[-1])


def objective(estimator):
    """The dew_rl configuration the flag selects (None for Tunix's own loss)."""
    return {"grpo": obj.grpo(n_samples_per_prompt=G),
            "dapo": obj.dapo(n_samples_per_prompt=G, dynamic_sampling=False),
            "dapo_rejected": obj.dapo(n_samples_per_prompt=G, dynamic_sampling=False),
            "tis": obj.grpo(n_samples_per_prompt=G, tis_cap=2.0),
            "ppo": obj.ppo()}.get(estimator)


def build(estimator, lr, temperature, seed):
    vocab = test_common.MockVocab(MAPPING)
    config = qwen3.ModelConfig(num_layers=2, vocab_size=len(MAPPING), embed_dim=32, hidden_dim=64, num_heads=2,
                               head_dim=16, num_kv_heads=1, rope_theta=10_000, norm_eps=1e-6)
    actor = qwen3.Qwen3(config, rngs=nnx.Rngs(seed))
    reference = qwen3.Qwen3(config, rngs=nnx.Rngs(seed))
    critic = Qwen3Critic(config, nnx.Rngs(seed + 1)) if estimator == "ppo" else None
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]).reshape(1, 1), ("fsdp", "tp"))
    rollout = base_rollout.RolloutConfig(max_tokens_to_generate=4, max_prompt_length=4, kv_cache_size=16,
                                         temperature=temperature, top_p=1.0, top_k=None,
                                         return_logprobs=estimator == "tis")
    roles = (rl_cluster_lib.Role.ACTOR, rl_cluster_lib.Role.REFERENCE, rl_cluster_lib.Role.ROLLOUT,
             rl_cluster_lib.Role.CRITIC)
    cluster_config = rl_cluster_lib.ClusterConfig(
        role_to_mesh={r: mesh for r in roles}, rollout_engine="vanilla", offload_to_cpu=False,
        training_config=rl_cluster_lib.RLTrainingConfig(
            actor_optimizer=optax.adam(lr), critic_optimizer=optax.adam(lr) if critic is not None else None,
            eval_every_n_steps=10**6, max_steps=10**6),
        rollout_config=rollout)
    cluster = rl_cluster_lib.RLCluster(actor=actor, critic=critic, reference=reference, tokenizer=vocab,
                                       cluster_config=cluster_config)
    if estimator == "tunix_grpo":
        algo = grpo_learner.GRPOConfig(num_generations=G, beta=0.0, epsilon=0.2)
        return grpo_learner.GRPOLearner(cluster, algo, reward), None, actor
    ours = objective(estimator)
    name = dt.register(ours, f"dew_rl_example_{estimator}")                           # the three lines
    if estimator == "ppo":
        algo = ppo_learner.PPOConfig(beta=0.0, gamma=ours.gamma, gae_lambda=ours.lam, clip_range_value=ours.cliprange_value,
                                     policy_loss_fn=name, advantage_estimator=name, value_loss_fn=name)
        learner = dt.PPOLearner(cluster, algo, count_reward)
    else:
        algo = grpo_learner.GRPOConfig(num_generations=G, beta=0.0, policy_loss_fn=name, advantage_estimator=name)
        learner = dt.GRPOLearner(cluster, algo, first_batch_rejected() if estimator == "dapo_rejected" else reward)
    dt.log_metrics(learner, ours)
    return learner, ours, actor


def prompts(steps, batch, seed):
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        yield {"prompts": np.array([f"say {WORDS[i]}" for i in rng.integers(0, len(WORDS), batch)])}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--estimator", default="grpo", choices=["grpo", "dapo", "dapo_rejected", "tis", "ppo",
                                                                     "tunix_grpo"])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--prompts", type=int, default=4,
                        help="prompts per step (each sampled G=4 times; PPO: once, so it gets 4x as many prompts)")
    parser.add_argument("--lr", type=float, default=None, help="Adam's rate; default 3e-3, for PPO 1e-3 (actor and critic)")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, help="write the per-step log and the summary here")
    parser.add_argument("--curve", default=None, help="add this run's reward curve to a JSON file (nbs/05t_tunix reads it)")
    args = parser.parse_args(argv)

    lr = args.lr if args.lr is not None else (1e-3 if args.estimator == "ppo" else 3e-3)
    learner, ours, actor = build(args.estimator, lr, args.temperature, args.seed)
    trained = learner.rl_cluster.actor_trainer.model  # the cluster's copy of the actor, which the trainer updates
    critic = learner.rl_cluster.critic_trainer.model if args.estimator == "ppo" else None
    params = lambda m: jax.tree.map(np.array, nnx.state(m, nnx.Param))  # noqa: E731
    before, critic_before = params(trained), critic and params(critic)
    steps, times = [], []
    logged = {}

    def record(name, value, **kwargs):  # Tunix's MetricsLogger reports every scalar through jax.monitoring
        if name.startswith(("actor/train/", "critic/train/", "rewards/train/", "rollout/train/", "completions/train/",
                            "generation/train/")):
            logged[name] = float(np.mean(value))

    jax.monitoring.register_scalar_listener(record)
    per_step = args.prompts * (G if args.estimator == "ppo" else 1)  # PPO samples each prompt once
    for i, batch in enumerate(prompts(args.steps, per_step, args.seed)):
        start = time.perf_counter()
        logged.clear()
        learner.train([batch])
        jax.block_until_ready(nnx.state(trained, nnx.Param))
        times.append(time.perf_counter() - start)
        row = {"step": i, "global_step": int(learner.rl_cluster.global_steps), "seconds": round(times[-1], 3),
               **{k: logged[k] for k in sorted(logged)}}
        steps.append(row)
        print(json.dumps(row), flush=True)
    gap = lambda x, y: max(float(np.max(np.abs(a - b))) for a, b in zip(jax.tree.leaves(x), jax.tree.leaves(y)))  # noqa: E731
    change = gap(before, params(trained))
    finite = all(np.isfinite(v) for row in steps for k, v in row.items() if k not in ("step", "global_step", "seconds"))
    summary = {"estimator": args.estimator, "steps": len(steps), "finite": bool(finite), "param_change": change,
               "critic_param_change": None if critic is None else gap(critic_before, params(critic)),
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
