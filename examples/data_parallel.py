"""Data parallel with dew_rl.objectives: what to do with the gradient, in each of JAX's two forms.

    XLA_FLAGS=--xla_force_host_platform_device_count=4 python examples/data_parallel.py

One GRPO step (stage 1 and the loss's gradient) on 16 prompts x 4 completions, computed four ways and
compared with the same step on one device:

1. `jax.shard_map` over a mesh axis "dp" (rows `P("dp")`, parameters `P()`) with `axis_name="dp"`: the
   gradient of the replicated parameters is already the global gradient on every device. A `psum` of
   it is N times too large (printed, to show the mistake).
2. The same with `check_vma=False`: each device's gradient is N times its share of the global one;
   `jax.lax.pmean(grads, "dp")` is the global gradient.
3. `jax.jit` over rows sharded with `NamedSharding(mesh, P("dp"))`, `axis_name=None`: the global gradient.

It runs on any number of devices that divides the 16 prompts (each prompt's rows must sit on one
device for stage 1 under shard_map). examples/train.py trains with either form (`--devices 4 --dp jit`).
"""
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

import dew_rl as rl
import dew_rl.objectives as obj

PROMPTS, G, T, V = 16, 4, 6, 7
B = PROMPTS * G


def make_batch(seed=0):
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, V, (B, T))
    mask = (np.arange(T) < rng.integers(1, T + 1, B)[:, None]).astype(np.float32)
    mask[:G] = 0.0                                       # one prompt's rows keep no token at all
    rewards = (tokens[:, 0] == 3).astype(np.float32)
    return tokens, mask, rewards, np.repeat(np.arange(PROMPTS), G)


def log_probs(params, tokens):                           # a table of logits as the policy
    return rl.log_probs_from_logits(jnp.broadcast_to(params, tokens.shape + (V,)), tokens)


def grpo_step(params, cfg, rollout, tokens, axis_name=None):
    "Stage 1, then the loss and its gradient w.r.t. params, with the statistics over `axis_name`."
    rollout, _ = obj.advantages(cfg, rollout, axis_name=axis_name)
    counts = obj.loss_counts(rollout, axis_name=axis_name)
    loss_fn = lambda p: obj.loss(cfg, log_probs(p, tokens), rollout, axis_name=axis_name, counts=counts)[0]
    return jax.value_and_grad(loss_fn)(params)


def main():
    n = len(jax.devices())
    if PROMPTS % n:
        raise SystemExit(f"{n} devices: the {PROMPTS} prompts do not divide over them")
    mesh = Mesh(np.array(jax.devices()), ("dp",))
    tokens, mask, rewards, group_ids = make_batch()
    rng = np.random.default_rng(1)
    params = jnp.asarray(rng.normal(size=(T, V)), jnp.float32)
    cfg = obj.grpo(n_samples_per_prompt=G)
    rollout = obj.Rollout(mask=mask, old_log_probs=log_probs(params, tokens) + 0.1 * rng.normal(size=(B, T)),
                          rewards=rewards, group_ids=group_ids)

    loss_1, grads_1 = jax.jit(grpo_step)(params, cfg, rollout, tokens)          # the reference: one device

    # 1. shard_map, varying-axis checking on (the default): no psum of the gradient.
    def local(params, cfg, rollout, tokens):
        loss, grads = grpo_step(params, cfg, rollout, tokens, axis_name="dp")
        return loss, grads, jax.lax.psum(grads, "dp")                              # the psum: a mistake
    loss_s, grads_s, psummed = jax.jit(jax.shard_map(
        local, mesh=mesh, in_specs=(P(), P(), P("dp"), P("dp")), out_specs=P()))(params, cfg, rollout, tokens)

    # 2. shard_map with check_vma=False: each device holds N x its share; pmean is the global gradient.
    def local_unchecked(params, cfg, rollout, tokens):
        _, grads = grpo_step(params, cfg, rollout, tokens, axis_name="dp")
        return grads[None], jax.lax.pmean(grads, "dp")[None]
    per_device, pmeaned = jax.jit(jax.shard_map(
        local_unchecked, mesh=mesh, in_specs=(P(), P(), P("dp"), P("dp")), out_specs=P("dp"),
        check_vma=False))(params, cfg, rollout, tokens)

    # 3. jit with the rows sharded: the single-device code, axis_name=None.
    rows = NamedSharding(mesh, P("dp"))
    loss_j, grads_j = jax.jit(grpo_step)(params, cfg, jax.device_put(rollout, rows), jax.device_put(tokens, rows))

    diff = lambda a, b: float(jnp.abs(a - b).max())
    scale = float(jnp.abs(grads_1).max())
    print(f"{n} device(s); one-device loss {float(loss_1):+.6f}, max |gradient| {scale:.4f}")
    print(f"shard_map:           |loss - 1 device| {abs(float(loss_s) - float(loss_1)):.1e}, "
          f"max |grad - 1 device| {diff(grads_s, grads_1):.1e}")
    print(f"shard_map + psum:    max |psum(grad) - {n} x 1 device| {diff(psummed, n * grads_1):.1e}  (N times too large)")
    print(f"check_vma=False:     max |sum of device grads - {n} x 1 device| {diff(per_device.sum(0), n * grads_1):.1e}; "
          f"max |pmean - 1 device| {diff(pmeaned[0], grads_1):.1e}")
    print(f"jit, sharded rows:   |loss - 1 device| {abs(float(loss_j) - float(loss_1)):.1e}, "
          f"max |grad - 1 device| {diff(grads_j, grads_1):.1e}")
    return dict(n=n, shard_map=diff(grads_s, grads_1), psum=diff(psummed, n * grads_1),
                unchecked_sum=diff(per_device.sum(0), n * grads_1), pmean=diff(pmeaned[0], grads_1),
                jit=diff(grads_j, grads_1), scale=scale)


if __name__ == "__main__":
    main()
