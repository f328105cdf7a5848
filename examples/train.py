"""A complete RL trainer on top of `dew_rl.objectives`: a small Flax NNX transformer learns a verifiable task on a CPU.

    python examples/train.py --estimator grpo --steps 30 --seed 0

The task. A prompt is K digits (K=3, digits 0..D-1) followed by a separator; the answer is the prompt
reversed, then an end-of-sequence token: `2 0 3 |` -> `3 0 2 <eos>`. The verifier gives a response the
fraction of its K + 1 positions that are right, so 1 exactly when it is the reversed prompt followed by
EOS. The policy is a 2-layer causal transformer (d_model 32, vocabulary 16) trained from scratch.

The loop, once per step:

1. **Sample** G completions for each of P prompts with `jax.random` at temperature 1, recording the
   log-probability of each drawn token as it is drawn: the rollout's `old_log_probs`. A response ends
   at its EOS (which it includes); the positions after it are padding, outside the response mask.
2. **Score** each response with the verifier, and compute the frozen reference policy's log-probs
   of the same tokens when a KL term is on.
3. **Stage 1**, once per rollout batch: `obj.advantages(cfg, rollout)`. Advantages are statistics of
   the whole batch (a group baseline over every completion of a prompt, a global normalisation), so
   they are never computed per mini-batch. The rows are grouped by `group_ids`, the prompt of each
   row: the safe way, a wrong group size cannot pool two prompts.
4. **Stage 2**: `--epochs` passes over the rollout in `--mini-batches` shuffled mini-batches, one
   AdamW step per mini-batch, each mini-batch's gradient accumulated over `--micro-batches`
   micro-batches with the mini-batch's `obj.loss_counts`.
5. **Adapt the KL coefficient** with `rl.adaptive_kl_update`. The objective config is a JAX pytree
   whose coefficients are leaves and it is an *argument* of the jitted functions, so the new
   coefficient never recompiles them: the script counts how often JAX traces each one and asserts once.

The KL term: PPO and REINFORCE++ shape the reward with k1 to the reference (`kl_coef`, read in stage
1); the group estimators add a k3 KL loss (`use_kl_loss=True`, `kl_loss_coef`, read in stage 2).
`--kl-coef 0` turns the KL off (no reference forward pass at all).

Data parallel. `--devices N` splits the rows over N devices (on a CPU, simulate them with
`XLA_FLAGS=--xla_force_host_platform_device_count=N`) in one of two forms, `--dp`:

- `shard_map` (default): stage 1 and the gradient run inside `jax.shard_map` over a mesh axis "dp", rows
  split with `P("dp")`, parameters replicated with `P()`, and `axis_name="dp"` passed to
  `obj.advantages`, `obj.loss_counts` and `obj.loss`. The loss is then the global batch's on every device,
  and so is the gradient of the replicated parameters: shard_map's varying-axis checking (on by
  default) transposes the implicit broadcast of a replicated input into a sum over "dp", so the
  gradient needs NO further `psum` (a `psum` would make it N times too large). With `check_vma=False`
  that sum is not inserted for you: each device's gradient is then N times its share of the global one,
  and `jax.lax.pmean(grads, "dp")` gives the global gradient.
- `jit`: the single-device code, unchanged, with `axis_name=None`, jitted over inputs whose rows are
  sharded with `NamedSharding(mesh, P("dp"))`; XLA inserts the collectives and the gradient is the
  global one.

Either way the parameters after each step equal the single-device run's to float32 round-off
(`tests/test_example_data_parallel.py`, also across two processes with `jax.distributed`). The sampler
is not data parallel here: it runs on the whole batch, replicated, so that every form trains on the
same rollouts. A group's rows must sit on one device for stage 1 under `shard_map`: the rows are
ordered prompt by prompt and `--prompts` must divide by `--devices`.

Rollout correction. A real sampler (vLLM, SGLang) is not the trainer's policy: its log-probs of the drawn
tokens differ. `--rollout-correction token_tis_k3 --sampler-temperature 1.2` samples at another
temperature, records the sampler's log-probs as the rollout's `behavior_log_probs`, recomputes the
trainer's as `old_log_probs`, and corrects with token TIS (`rollout_is="token"`, truncated at 2) and
token-level k3 rejection (`rollout_rs="token_k3"`), verl's `algorithm.rollout_correction` options.

Estimators: grpo, dr_grpo, dapo, rloo, reinforce_plus_plus, gspo, cispo and ppo. PPO's critic is a
linear value head on the same trunk (`Policy.value_head`), trained by the value loss that `obj.loss`
adds when it is given `values`; the other estimators never read it.

Dependencies: jax, numpy, dew_rl, flax (NNX API; written against flax 0.12.8) and optax.
"""
import argparse
import collections
import dataclasses
import functools
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

import dew_rl as rl
import dew_rl.objectives as obj

# At this size a CPU run spends most of its time compiling, not training: XLA's backend optimisation level 0
# halves the compile time of the train step and costs nothing measurable here. Drop it for a real model.
jit = functools.partial(jax.jit, compiler_options={"xla_backend_optimization_level": 0})

ESTIMATORS = ("grpo", "dr_grpo", "dapo", "rloo", "reinforce_plus_plus", "gspo", "cispo", "ppo")
IN_REWARD_KL = ("reinforce_plus_plus", "ppo")   # these shape the reward with k1 (kl_coef); the rest add a KL loss

# ------------------------------------------------------------------------------------------------
# The task: reverse K digits, then stop
# ------------------------------------------------------------------------------------------------
VOCAB = 16                  # tokens 0..9 are digits, 10 the separator, 11 EOS, 12..15 unused
SEP, EOS = 10, 11


@dataclasses.dataclass(frozen=True)
class Task:
    n_digits: int = 3       # K: prompt length in digits
    base: int = 4           # D: the prompt's digits are drawn from 0..D-1

    @property
    def prompt_len(self):   # K digits and the separator
        return self.n_digits + 1

    @property
    def response_len(self):  # K digits and EOS: the longest response
        return self.n_digits + 1

    def prompts(self, rng, n):
        "n prompts [n, K + 1]: K random digits and the separator."
        digits = rng.integers(0, self.base, (n, self.n_digits))
        return np.concatenate([digits, np.full((n, 1), SEP)], axis=1).astype(np.int32)


def verify(task, prompts, responses, mask):
    """The verifier: the fraction of the K + 1 positions that hold the reversed prompt, then EOS.

    `responses` [B, R] are the sampled tokens, `mask` [B, R] the response tokens (EOS included). A
    response that stops early loses the positions it never wrote. Returns float32 rewards [B].
    """
    want = np.concatenate([prompts[:, task.n_digits - 1::-1], np.full((len(prompts), 1), EOS)], axis=1)
    written = np.where(np.asarray(mask) > 0, np.asarray(responses), -1)
    return (written == want).mean(axis=1).astype(np.float32)


# ------------------------------------------------------------------------------------------------
# The policy: a small causal transformer in Flax NNX, with a value head for PPO
# ------------------------------------------------------------------------------------------------
class Block(nnx.Module):
    def __init__(self, d_model, n_heads, rngs):
        self.ln1 = nnx.LayerNorm(d_model, rngs=rngs)
        self.attn = nnx.MultiHeadAttention(n_heads, d_model, decode=False, deterministic=True, keep_rngs=False,
                                           rngs=rngs)
        self.ln2 = nnx.LayerNorm(d_model, rngs=rngs)
        self.up = nnx.Linear(d_model, 4 * d_model, rngs=rngs)
        self.down = nnx.Linear(4 * d_model, d_model, rngs=rngs)

    def __call__(self, x, mask):
        x = x + self.attn(self.ln1(x), mask=mask)
        return x + self.down(jax.nn.gelu(self.up(self.ln2(x))))


class Policy(nnx.Module):
    "tokens [B, L] -> (next-token logits [B, L, V], values [B, L]); position t sees tokens 0..t."

    def __init__(self, max_len, d_model=32, n_layers=2, n_heads=2, *, rngs):
        self.embed = nnx.Embed(VOCAB, d_model, rngs=rngs)
        self.pos = nnx.Param(0.02 * jax.random.normal(rngs.params(), (max_len, d_model)))
        self.blocks = nnx.List([Block(d_model, n_heads, rngs) for _ in range(n_layers)])
        self.ln_f = nnx.LayerNorm(d_model, rngs=rngs)
        self.head = nnx.Linear(d_model, VOCAB, rngs=rngs)
        self.value_head = nnx.Linear(d_model, 1, kernel_init=nnx.initializers.zeros, rngs=rngs)  # PPO's critic

    def __call__(self, tokens):
        x = self.embed(tokens) + self.pos[:tokens.shape[1]]
        mask = nnx.make_causal_mask(tokens)
        for block in self.blocks:
            x = block(x, mask)
        x = self.ln_f(x)
        return self.head(x), self.value_head(x)[..., 0]


def response_outputs(model, seqs, prompt_len):
    """The logits [B, R, V] and values [B, R] at the positions that predict the response tokens.

    The token at position prompt_len + t is predicted from position prompt_len + t - 1.
    """
    logits, values = model(seqs)
    return logits[:, prompt_len - 1:-1], values[:, prompt_len - 1:-1]


# The sampler and the reference's log-probs take the model's graph definition as a static argument (it
# is hashable), so every run with the same architecture reuses their compilation.
@functools.partial(jit, static_argnums=(0, 4, 5))
def sample(graphdef, params, prompts, key, response_len, temperature=1.0):
    """One completion per row of `prompts` [B, K + 1], sampled token by token at `temperature`.

    Returns the full sequences [B, K + 1 + R], the response mask [B, R] (EOS included), the sampler's
    log-probs of the drawn tokens [B, R] (at temperature 1, the rollout's old_log_probs; otherwise its
    behavior_log_probs) and the values [B, R].
    """
    model = nnx.merge(graphdef, params)
    b, prompt_len = prompts.shape
    seqs = jnp.concatenate([prompts, jnp.full((b, response_len), EOS, prompts.dtype)], axis=1)
    done = jnp.zeros(b, bool)
    mask, log_probs, values = [], [], []
    for t, k in enumerate(jax.random.split(key, response_len)):
        # No KV cache: the whole (short) sequence is re-read; the causal mask hides the padding ahead.
        logits, value = model(seqs)
        logits, value = logits[:, prompt_len - 1 + t], value[:, prompt_len - 1 + t]
        logits = logits / temperature                                    # temperature 1: the policy itself
        token = jax.random.categorical(k, logits)
        log_probs.append(jnp.take_along_axis(jax.nn.log_softmax(logits), token[:, None], axis=1)[:, 0])
        values.append(value)
        mask.append(~done)                                               # EOS itself is a response token
        token = jnp.where(done, EOS, token)                              # after EOS: padding
        seqs = seqs.at[:, prompt_len + t].set(token)
        done = done | (token == EOS)
    mask = jnp.stack(mask, 1).astype(jnp.float32)
    stack = lambda xs: jnp.where(mask > 0, jnp.stack(xs, 1), 0.0)
    return seqs, mask, stack(log_probs), stack(values)


@functools.partial(jit, static_argnums=(0, 3))
def token_log_probs(graphdef, params, seqs, prompt_len):
    "Teacher-forced log-probs [B, R] of the response tokens (the reference policy's, here)."
    logits, _ = response_outputs(nnx.merge(graphdef, params), seqs, prompt_len)
    return rl.log_probs_from_logits(logits, seqs[:, prompt_len:])


# ------------------------------------------------------------------------------------------------
# The objective
# ------------------------------------------------------------------------------------------------
# --rollout-correction: the sampler's log-probs (behavior_log_probs) differ from the trainer's
# (old_log_probs), as a vLLM or SGLang sampler's do; here the sampler runs at --sampler-temperature.
ROLLOUT_CORRECTIONS = {
    "none": {},
    # token TIS (verl's rollout_is="token", truncated at 2) and token-level k3 rejection (rollout_rs="token_k3")
    "token_tis_k3": dict(rollout_is="token", rollout_is_threshold=2.0,
                         rollout_rs="token_k3", rollout_rs_threshold=0.05),
}


def make_objective(estimator, group_size, kl_coef, rollout_correction="none"):
    """The estimator's config with its recipe's defaults, and the name of its KL coefficient (or None).

    A KL coefficient that a controller will change is given as a JAX scalar from the start, as every
    later value of the controller is one (a coefficient's value, 0 included, never changes the config's
    structure, so neither recompiles).
    """
    if estimator not in ESTIMATORS:
        raise ValueError(f"unknown estimator {estimator!r}; choose from {ESTIMATORS}")
    entry = functools.partial(getattr(obj, estimator), **ROLLOUT_CORRECTIONS[rollout_correction])
    kl = jnp.float32(kl_coef)
    if estimator in IN_REWARD_KL:          # no groups: the baseline is a global normalisation (or a critic)
        return (entry(kl_coef=kl), "kl_coef") if kl_coef > 0 else (entry(kl_coef=0.0), None)
    if kl_coef > 0:
        return entry(n_samples_per_prompt=group_size, use_kl_loss=True, kl_loss_coef=kl), "kl_loss_coef"
    return entry(n_samples_per_prompt=group_size), None


def counted(name, fn, traces):
    "`fn`, counting in `traces[name]` each time JAX traces it: once per compilation, never on a cached call."
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        traces[name] += 1
        return fn(*args, **kwargs)
    return wrapper


def make_train_step(graphdef, tx, prompt_len, n_micro, traces, mesh=None, dp="shard_map"):
    """One optimiser step on one mini-batch, jitted; the objective config `cfg` is an argument.

    `data` is (seqs [B, L], rollout): the whole rollout batch that stage 1 returned; `idx` [M] picks the
    mini-batch's rows. `mesh` (a mesh with axis "dp", or None for one device) and `dp` ("shard_map" or
    "jit") choose the data-parallel form (see the module docstring).
    """
    axis_name = "dp" if mesh is not None and dp == "shard_map" else None

    def micro_loss(params, cfg, counts, seqs, rollout):
        logits, values = response_outputs(nnx.merge(graphdef, params), seqs, prompt_len)
        log_probs = rl.log_probs_from_logits(logits, seqs[:, prompt_len:])
        entropy = rl.entropy_from_logits(logits)          # reported as train/entropy (entropy_coeff is 0)
        return obj.loss(cfg, log_probs, rollout, axis_name=axis_name, counts=counts, entropy=entropy,
                        values=values if cfg.advantage_estimator == "ppo" else None)

    def gradient(params, cfg, batch):
        "The mini-batch's loss, metrics and gradient: of the device's rows under shard_map, summed over \"dp\"."
        _, rollout = batch
        # The mini-batch's denominators (rows, tokens), taken once and passed to every micro-batch: each
        # micro-batch's loss is then its share of the mini-batch loss, in every reduction mode. Under
        # shard_map they are summed over "dp": the global mini-batch's.
        counts = obj.loss_counts(rollout, axis_name=axis_name)
        micro = jax.tree.map(lambda a: a.reshape(n_micro, a.shape[0] // n_micro, *a.shape[1:]), batch)

        def accumulate(grads, micro_batch):
            (loss, metrics), g = jax.value_and_grad(micro_loss, has_aux=True)(params, cfg, counts, *micro_batch)
            return jax.tree.map(jnp.add, grads, g), (loss, metrics)

        grads, (losses, metrics) = jax.lax.scan(accumulate, jax.tree.map(jnp.zeros_like, params), micro)
        # SUM, not mean: every micro-batch loss is already divided by the mini-batch's counts, so the
        # micro-batch losses, gradients and train/* metrics add up to the mini-batch's. Averaging would
        # shrink the step by 1/n_micro; each micro-batch's own counts would weight tokens unequally.
        return grads, losses.sum(), jax.tree.map(jnp.sum, metrics), counts

    if axis_name is not None:
        # Rows split over "dp", parameters and config replicated. The outputs are replicated (P()): the
        # loss, the metrics and the counts are global sums, and the gradient of a replicated parameter is
        # already the global gradient (varying-axis checking turns the broadcast of `params` into a psum
        # over "dp" in the backward pass). No psum of the gradient here: it would multiply it by N.
        gradient = jax.shard_map(gradient, mesh=mesh, in_specs=(P(), P(), P("dp")), out_specs=P())

    def train_step(params, opt_state, cfg, data, idx):
        batch = jax.tree.map(lambda a: a[idx], data)
        if mesh is not None:   # the mini-batch's rows, split over the devices
            batch = jax.lax.with_sharding_constraint(batch, NamedSharding(mesh, P("dp")))
        grads, loss, metrics, counts = gradient(params, cfg, batch)
        updates, new_opt_state = tx.update(grads, opt_state, params)
        new_params = optax.apply_updates(params, updates)
        # A mini-batch with no kept token (DAPO when every group tied) has a zero gradient, but AdamW
        # would still move the weights by its momentum and weight decay: keep the old state instead.
        has_tokens = counts.tokens > 0
        new_params, new_opt_state = jax.tree.map(lambda new, old: jnp.where(has_tokens, new, old),
                                                 (new_params, new_opt_state), (params, opt_state))
        update_norm = optax.tree.norm(jax.tree.map(jnp.subtract, new_params, params))
        return new_params, new_opt_state, loss, {**metrics, "train/grad_norm": optax.tree.norm(grads),
                                                 "train/update_norm": update_norm}

    return jit(counted("train_step", train_step, traces))


def make_stage1(traces, mesh=None, dp="shard_map"):
    "Stage 1 jitted: `obj.advantages` of the whole rollout batch, on one device or data parallel."
    if mesh is None or dp == "jit":   # jit: the rollout's rows arrive sharded; XLA adds the collectives
        return jit(counted("stage1", lambda cfg, rollout: obj.advantages(cfg, rollout), traces))
    # shard_map: each device holds whole groups (the rows are ordered prompt by prompt); the moments of a
    # global normalisation, the counts and the metrics are summed over "dp".
    fn = jax.shard_map(lambda cfg, rollout: obj.advantages(cfg, rollout, axis_name="dp"), mesh=mesh,
                       in_specs=(P(), P("dp")), out_specs=(P("dp"), P()))
    return jit(counted("stage1", fn, traces))


def data_mesh(n_devices):
    "A one-axis mesh \"dp\" over the first `n_devices` devices (of every process), or None for one device."
    if n_devices == 1:
        return None
    devices = jax.devices()
    if len(devices) < n_devices:
        raise ValueError(f"--devices {n_devices}: JAX sees {len(devices)} device(s); on a CPU, set "
                         f"XLA_FLAGS=--xla_force_host_platform_device_count={n_devices} before starting Python")
    return Mesh(np.array(devices[:n_devices]), ("dp",))


def put(tree, mesh, spec):
    """`tree` as global arrays laid out by `spec` on `mesh` (from host copies, so that it also works when
    the mesh spans several processes, each holding the same values)."""
    if mesh is None:
        return tree
    sharding = NamedSharding(mesh, spec)
    return jax.tree.map(lambda a: jax.make_array_from_callback(np.shape(a), sharding, np.asarray(a).__getitem__),
                        tree)


# ------------------------------------------------------------------------------------------------
# The trainer
# ------------------------------------------------------------------------------------------------
@dataclasses.dataclass
class Args:
    estimator: str = "grpo"
    steps: int = 30
    seed: int = 0
    prompts: int = 16            # P prompts per rollout batch
    group_size: int = 8          # G completions per prompt
    epochs: int = 2              # passes over each rollout batch
    mini_batches: int = 2        # optimiser steps per epoch
    micro_batches: int = 2       # gradient accumulation within a mini-batch
    lr: float = 1e-3
    optimizer: str = "adamw"     # "adamw", or "sgd" (a weight moves by lr x its gradient: round-off stays round-off)
    adam_eps: float = 1e-8       # AdamW's epsilon (at 1e-8, a gradient entry of 1e-9 moves its weight by about lr)
    kl_coef: float = 0.01        # initial KL coefficient; 0: no KL, no reference model
    target_kl: float = 0.02      # the adaptive controller's target
    kl_horizon: float = 1000.0   # the adaptive controller's horizon
    d_model: int = 32
    n_layers: int = 2
    n_digits: int = 3
    base: int = 4
    rollout_correction: str = "none"   # "token_tis_k3": token TIS and token-k3 rejection against the sampler
    sampler_temperature: float = 1.0   # the sampler's temperature (a sampler that is not the trainer's policy)
    devices: int = 1             # data parallel over this many devices (1: none)
    dp: str = "shard_map"        # the data-parallel form: "shard_map" (axis_name="dp") or "jit" (axis_name=None)
    shuffle: int = 1             # 0: mini-batches take the rows in order (a test places masked rows on one device)


def train(args, reward_fn=verify, log=print, return_params=False):
    """Train for `args.steps` rollout batches; returns one dict of floats per step.

    `reward_fn(task, prompts, responses, mask) -> [B]` is the verifier (a test may swap it). With
    `return_params=True`, returns `(history, params)`: the trained parameters, as host arrays.
    """
    rows = args.prompts * args.group_size
    if rows % (args.mini_batches * args.micro_batches * args.devices):
        raise ValueError(f"{rows} rows do not split into {args.mini_batches} mini-batches x {args.devices} devices x "
                         f"{args.micro_batches} equal micro-batches")
    if args.optimizer not in ("adamw", "sgd"):
        raise ValueError(f"--optimizer {args.optimizer!r}: choose 'adamw' or 'sgd'")
    if args.dp not in ("shard_map", "jit"):
        raise ValueError(f"--dp {args.dp!r}: choose 'shard_map' or 'jit'")
    if args.prompts % args.devices:
        raise ValueError(f"--prompts {args.prompts} does not divide by --devices {args.devices}: a group's rows "
                         "must sit on one device")
    mesh = data_mesh(args.devices)
    task = Task(args.n_digits, args.base)
    rng, key = np.random.default_rng(args.seed), jax.random.key(args.seed)

    model = Policy(task.prompt_len + task.response_len, d_model=args.d_model, n_layers=args.n_layers,
                   rngs=nnx.Rngs(args.seed))
    graphdef, params = nnx.split(model, nnx.Param)        # the model holds parameters only
    ref_params = jax.tree.map(jnp.copy, params)           # the frozen reference: the initial policy
    tx = optax.adamw(args.lr, eps=args.adam_eps, weight_decay=0.01) if args.optimizer == "adamw" else optax.sgd(args.lr)
    opt_state = tx.init(params)
    params, opt_state, ref_params = put((params, opt_state, ref_params), mesh, P())   # replicated

    if args.rollout_correction not in ROLLOUT_CORRECTIONS:
        raise ValueError(f"--rollout-correction {args.rollout_correction!r}: choose from {tuple(ROLLOUT_CORRECTIONS)}")
    correcting = args.rollout_correction != "none"
    cfg, kl_field = make_objective(args.estimator, args.group_size, args.kl_coef, args.rollout_correction)
    cfg = put(cfg, mesh, P())       # data parallel: the coefficients, replicated like the parameters
    # Fresh jitted functions, each counting its traces: a trace is a compilation.
    traces = collections.Counter()
    stage1 = make_stage1(traces, mesh, args.dp)
    train_step = make_train_step(graphdef, tx, task.prompt_len, args.micro_batches, traces, mesh, args.dp)

    history = []
    for step in range(args.steps):
        t0 = time.perf_counter()
        # 1. Sample: P prompts, each tiled G times; the prompt index is the group id.
        prompts = task.prompts(rng, args.prompts)
        tiled = np.repeat(prompts, args.group_size, axis=0)
        group_ids = np.repeat(np.arange(args.prompts), args.group_size)
        key, k_sample, k_shuffle = jax.random.split(key, 3)
        seqs, mask, sampler_log_probs, old_values = sample(graphdef, params, jnp.asarray(tiled), k_sample,
                                                           task.response_len, args.sampler_temperature)
        if correcting:   # the trainer's own log-probs of the drawn tokens; the sampler's are the behaviour's
            old_log_probs = jnp.where(mask > 0, token_log_probs(graphdef, params, seqs, task.prompt_len), 0.0)
            behavior_log_probs = sampler_log_probs
        else:
            old_log_probs, behavior_log_probs = sampler_log_probs, None
        # 2. Score, and the reference's log-probs when a KL term reads them.
        rewards = reward_fn(task, tiled, np.asarray(seqs[:, task.prompt_len:]), np.asarray(mask))
        ref_log_probs = token_log_probs(graphdef, ref_params, seqs, task.prompt_len) if kl_field else None
        ppo = args.estimator == "ppo"
        if ppo:   # PPO's GAE reads per-token rewards: the outcome reward on the last response token
            last = jax.nn.one_hot(mask.sum(1).astype(jnp.int32) - 1, task.response_len)
            rollout = obj.Rollout(mask=mask, old_log_probs=old_log_probs, token_rewards=last * rewards[:, None],
                                  old_values=old_values, ref_log_probs=ref_log_probs,
                                  behavior_log_probs=behavior_log_probs)
        else:
            rollout = obj.Rollout(mask=mask, old_log_probs=old_log_probs, rewards=rewards,
                                  ref_log_probs=ref_log_probs, group_ids=group_ids,
                                  behavior_log_probs=behavior_log_probs)
        # 3. Stage 1, once per rollout batch. (DAPO's dynamic sampling masks the rows of tied groups here.)
        #    Data parallel: the rows are split over the devices, prompt by prompt.
        seqs, rollout = put((seqs, rollout), mesh, P("dp"))
        rollout, rollout_metrics = stage1(cfg, rollout)
        # 4. Stage 2: epochs x shuffled mini-batches, each one AdamW step over summed micro-batch gradients.
        train_metrics, losses = [], []
        for perm in jax.random.split(k_shuffle, args.epochs):
            order = jax.random.permutation(perm, rows) if args.shuffle else jnp.arange(rows)
            for idx in np.asarray(order).reshape(args.mini_batches, -1):   # host indices: any device layout
                params, opt_state, loss, metrics = train_step(params, opt_state, cfg, (seqs, rollout), idx)
                losses.append(loss)
                train_metrics.append(metrics)
        record = {"step": step, "reward": float(np.mean(rewards)), "loss": float(np.mean(losses)),
                  **{k: float(v) for k, v in rollout_metrics.items()},
                  **{k: float(np.mean([m[k] for m in train_metrics])) for k in train_metrics[0]}}
        # 5. The adaptive KL controller: the measured KL steers the coefficient; the new value is a leaf of
        #    the config, so the jitted functions run with it without compiling again.
        if kl_field:
            record["kl_coef"] = float(getattr(cfg, kl_field))
            current_kl = (rollout_metrics["rollout/reward_kl_penalty"] if kl_field == "kl_coef"
                          else record["train/kl_loss"])
            new_coef = rl.adaptive_kl_update(getattr(cfg, kl_field), current_kl, n_steps=rows,
                                             target_kl=args.target_kl, horizon=args.kl_horizon)
            # (Data parallel: replicated on the mesh again, so that the jitted functions see the same
            # layout every step; a coefficient on another device would be a new input layout.)
            cfg = put(dataclasses.replace(cfg, **{kl_field: new_coef}), mesh, P())
        if step >= 2:   # by now the coefficient has changed twice: still one compilation each
            assert traces["train_step"] == 1 and traces["stage1"] == 1, \
                f"recompiled: train_step traced {traces['train_step']} times, stage1 {traces['stage1']}"
        record["compiles/train_step"], record["compiles/stage1"] = traces["train_step"], traces["stage1"]
        record["seconds"] = time.perf_counter() - t0
        history.append(record)
        log(format_record(record))
    if return_params:
        return history, jax.tree.map(np.asarray, params)
    return history


def format_record(r):
    parts = [f"step {r['step']:3d}", f"reward {r['reward']:.3f}", f"loss {r['loss']:+.4f}",
             f"entropy {r['train/entropy']:.3f}", f"pg_clipfrac {r['train/pg_clipfrac']:.3f}",
             f"ppo_kl {r['train/ppo_kl']:+.4f}"]
    if "kl_coef" in r:
        parts.append(f"kl_coef {r['kl_coef']:.5f}")
    if "rollout_corr/rollout_rs_masked_fraction" in r:
        parts.append(f"rejected {r['rollout_corr/rollout_rs_masked_fraction']:.3f}")
    if "rollout/kept_groups" in r:
        parts.append(f"kept_groups {int(r['rollout/kept_groups'])}")
    if "train/vf_loss" in r:
        parts.append(f"vf_loss {r['train/vf_loss']:.4f}")
    parts.append(f"{r['seconds']:.2f}s")
    return " | ".join(parts)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for f in dataclasses.fields(Args):
        flag = "--" + f.name.replace("_", "-")
        if f.name == "estimator":
            p.add_argument(flag, default=f.default, choices=ESTIMATORS)
        elif f.name == "rollout_correction":
            p.add_argument(flag, default=f.default, choices=tuple(ROLLOUT_CORRECTIONS))
        elif f.name == "optimizer":
            p.add_argument(flag, default=f.default, choices=("adamw", "sgd"))
        elif f.name == "dp":
            p.add_argument(flag, default=f.default, choices=("shard_map", "jit"))
        else:
            p.add_argument(flag, type=type(f.default), default=f.default)
    return Args(**vars(p.parse_args(argv)))


def main(argv=None):
    args = parse_args(argv)
    dp = f", data parallel over {args.devices} devices ({args.dp})" if args.devices > 1 else ""
    print(f"estimator {args.estimator}: {args.steps} steps of {args.prompts} prompts x {args.group_size} "
          f"completions, flax NNX transformer{dp}, jax {jax.__version__}")
    history = train(args)
    first, last = history[: max(1, len(history) // 5)], history[-max(1, len(history) // 5):]
    print(f"mean reward: first {len(first)} steps {np.mean([r['reward'] for r in first]):.3f}, "
          f"last {len(last)} steps {np.mean([r['reward'] for r in last]):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
