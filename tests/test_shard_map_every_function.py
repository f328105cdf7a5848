"""Every public function works inside `jax.shard_map` with JAX's default replication checks on.

Each function runs under `jax.jit(jax.shard_map(...))` over a `dp` axis of four simulated CPU devices,
with the default `check_vma=True` (no `check_vma=False` needed by the caller), and must return what it
returns on one device: on each shard's own rows for the local functions, and the value on the
concatenated batch for those given `axis_name`. A function added to `dew_rl.__all__` without a case
here fails `test_every_public_function_has_a_case`.
"""
import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, PartitionSpec as P

import dew_rl as rl
from dew_rl.testing import random_mask

NDEV, B, T, V = 4, 8, 6, 11

rng = np.random.default_rng(0)
M = random_mask(0, B, T, empty_rows=1).astype(np.float32)
X = rng.normal(size=(B, T)).astype(np.float32)
Y = rng.normal(size=(B, T)).astype(np.float32) * 0.3
Z = rng.normal(size=(B, T)).astype(np.float32) * 0.3 - 1.0
R = rng.normal(size=(B,)).astype(np.float32)
IDS = np.array([7, 7, -1, -1, 3, 3, 0, 0], np.int32)      # prompt ids: each group whole on its shard of 2 rows
RK = np.stack([R, (R > 0).astype(np.float32), np.cos(R)], 1).astype(np.float32)   # three reward components
PI2 = (0.2 + 0.5 * rng.random(size=(B, T))).astype(np.float32)                    # a sum of squared probabilities
SEG = np.repeat(np.array([[0, 0, 0, 1, 1, 1]]), B, axis=0).astype(np.int32)
LOGITS = rng.normal(size=(B, T, V)).astype(np.float32)
TOKENS = rng.integers(0, V, size=(B, T)).astype(np.int32)
HIDDEN = rng.normal(size=(B, T, 5)).astype(np.float32)
WEIGHT = rng.normal(size=(5, V)).astype(np.float32)

# name -> (function of the shard's arrays, the arrays, whether it takes axis_name="dp" and so is global)
CASES = {
    "masked_mean": (lambda x, m: rl.masked_mean(x, m), (X, M), False),
    "masked_whiten": (lambda x, m: rl.masked_whiten(x, m), (X, M), False),
    "token_mean": (lambda x, m: rl.token_mean(x, m, axis_name="dp"), (X, M), True),
    "response_mean": (lambda x, m: rl.response_mean(x, m, axis_name="dp"), (X, M), True),
    "aggregate": (lambda x, m: [rl.aggregate(x, m, mode, axis_name="dp") for mode in rl.AGGREGATION_MODES], (X, M), True),
    "loss_counts": (lambda m: rl.loss_counts(m, axis_name="dp"), (M,), True),
    "segment_mean": (lambda x, m, s: rl.segment_mean(x, m, s), (X, M, SEG), False),
    "global_masked_whiten": (lambda x, m: rl.global_masked_whiten(x, m, axis_name="dp"), (X, M), True),
    "gae": (lambda x, y, m: rl.gae(x, y, m, 0.9, 0.95), (X, Y, M), False),
    "gae_raw": (lambda x, y, m: rl.gae_raw(x, y, m, 0.9, 0.95), (X, Y, M), False),
    "group_advantage": (lambda r: rl.group_advantage(r, 2), (R,), False),
    "rloo_advantage": (lambda r: rl.rloo_advantage(r, 2), (R,), False),
    "overlong_penalty": (lambda m: rl.overlong_penalty(m, T, 2), (M,), False),
    "group_baseline_advantage": (lambda r, m: rl.group_baseline_advantage(r, m, 2), (R, M), False),
    "reinforce_plus_plus_returns": (lambda r, y, m: rl.reinforce_plus_plus_returns(r, y, m, 0.1, 0.9), (R, Y, M), False),
    "gdpo_advantage": (lambda r, m: [rl.gdpo_advantage(r, m, 2, axis_name="dp"),
                                     rl.gdpo_advantage(r, m, 2, whiten="tokens", axis_name="dp")], (RK, M), True),
    "batch_std_advantage": (lambda r: rl.batch_std_advantage(r, 2, axis_name="dp"), (R,), True),
    "level_normalize": (lambda r: [rl.level_normalize(r, 2, axis_name="dp"),
                                   rl.level_normalize(r, 2, "group", "batch", True, axis_name="dp")], (R,), True),
    "leave_one_out_advantage": (lambda r, i: [rl.leave_one_out_advantage(r, 2), rl.leave_one_out_advantage(r, i)],
                                (R, IDS), False),
    "opo_advantage": (lambda r, m, i: rl.opo_advantage(r, m, i), (R, M, IDS), False),
    "passk_advantage": (lambda r: rl.passk_advantage(r, 2), (R,), False),
    "gpg_advantage": (lambda r: rl.gpg_advantage(r, 2, axis_name="dp"), (R,), True),
    "remax_advantage": (lambda x, r, m: rl.remax_advantage(x, r, m), (X, R, M), False),
    "length_adaptive_lambda": (lambda m: rl.length_adaptive_lambda(m, 0.5), (M,), False),
    "decoupled_gae": (lambda x, y, m: rl.decoupled_gae(x, y, m, 0.9, rl.length_adaptive_lambda(m, 0.5), 1.0), (X, Y, M),
                      False),
    "optimal_token_baseline_advantage": (lambda x, z, p, m, i: rl.optimal_token_baseline_advantage(x, m, z, p, i),
                                         (X, Z, PI2, M, IDS), False),
    "global_masked_moments": (lambda x, m: rl.global_masked_moments(x, m, axis_name="dp"), (X, M), True),
    "global_masked_normalize": (lambda x, m: rl.global_masked_normalize(x, m, axis_name="dp"), (X, M), True),
    "token_log_ratio": (lambda y, z: rl.token_log_ratio(y, z), (Y, Z), False),
    "sequence_log_ratio": (lambda y, z, m, s: rl.sequence_log_ratio(y, z, m, s), (Y, Z, M, SEG), False),
    "k1_kl": (lambda y, z: rl.k1_kl(y, z), (Y, Z), False),
    "k2_kl": (lambda y, z: rl.k2_kl(y, z), (Y, Z), False),
    "k3_kl": (lambda y, z: rl.k3_kl(y, z), (Y, Z), False),
    "kl_penalty": (lambda y, z: [rl.kl_penalty(y, z, k) for k in ("k1", "k2", "k3+")], (Y, Z), False),
    "clipped_surrogate_terms": (lambda y, x, m: rl.clipped_surrogate_terms(y, x, m), (Y, X, M), False),
    "clipped_surrogate": (lambda y, x, m: rl.clipped_surrogate(y, x, m), (Y, X, M), False),
    "sapo_terms": (lambda y, x, m: rl.sapo_terms(y, x, m), (Y, X, M), False),
    "cispo_terms": (lambda y, z, x, m: rl.cispo_terms(y, z, x, m), (Y, Z, X, M), False),
    "clipped_value_loss_terms": (lambda x, y, z: rl.clipped_value_loss_terms(x, y, z), (X, Y, Z), False),
    "clipped_value_loss": (lambda x, y, z, m: rl.clipped_value_loss(x, y, z, m, axis_name="dp"), (X, Y, Z, M), True),
    "behavior_importance_weights": (lambda y, z, m: rl.behavior_importance_weights(y, z, m, 2.0), (Y, Z, M), False),
    "sequence_importance_weights": (lambda y, z, m: rl.sequence_importance_weights(y, z, m, 2.0), (Y, Z, M), False),
    "preference_margin": (lambda y, z, m: rl.preference_margin(y, z, z, y, m, m), (Y, Z, M), False),
    "preference_logsigmoid": (lambda y, z, m: rl.preference_logsigmoid(y, z, z, y, m, m, 0.1), (Y, Z, M), False),
    "preference_ipo": (lambda y, z, m: rl.preference_ipo(y, z, z, y, m, m, 0.1), (Y, Z, M), False),
    "log_probs_from_logits": (lambda z, t: rl.log_probs_from_logits(z, t), (LOGITS, TOKENS), False),
    "entropy_from_logits": (lambda z: rl.entropy_from_logits(z), (LOGITS,), False),
    "linear_log_probs_and_entropy": (lambda h, w, t: rl.linear_log_probs_and_entropy(h, w, t, chunk_size=4),
                                     (HIDDEN, WEIGHT, TOKENS), False),
}
REPLICATED = {"linear_log_probs_and_entropy": 1}  # argument positions passed whole to every shard (the weight)

PUBLIC_FUNCTIONS = sorted(n for n in rl.__all__ if inspect.isfunction(getattr(rl, n)))


@pytest.fixture(scope="module")
def mesh():
    devices = jax.devices()
    assert len(devices) >= NDEV, f"expected {NDEV} CPU devices from XLA_FLAGS, got {len(devices)}"
    return Mesh(np.array(devices[:NDEV]), ("dp",))


def test_every_public_function_has_a_case():
    missing = [n for n in PUBLIC_FUNCTIONS if n not in CASES]
    assert not missing, f"public functions without a shard_map case: {missing}"


def _per_shard(out):
    """Give every output leaf a leading axis of one per shard, so that out_specs=P('dp') stacks them."""
    return jax.tree.map(lambda leaf: jnp.asarray(leaf)[None], out)


@pytest.mark.parametrize("name", sorted(n for n in CASES if n in PUBLIC_FUNCTIONS))
def test_shard_map_with_default_checks(mesh, name):
    fn, arrays, is_global = CASES[name]
    replicated = REPLICATED.get(name)
    specs = tuple(P() if i == replicated else P("dp") for i in range(len(arrays)))
    body = lambda *a: _per_shard(fn(*a))
    sharded = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=specs, out_specs=P("dp")))   # check_vma on
    got = sharded(*(jnp.asarray(a) for a in arrays))
    rows = B // NDEV
    if is_global:   # every shard returns its slice of the single-device value on the whole batch (a scalar: all of it)
        want_one = jax.tree.map(lambda leaf: np.asarray(leaf), _strip_axis(fn, arrays))
        want = jax.tree.map(lambda w: np.stack([w[i * rows:(i + 1) * rows] if w.ndim and w.shape[0] == B else w
                                                for i in range(NDEV)]), want_one)
    else:           # every shard returns the single-device value on its own rows
        per = [jax.tree.map(np.asarray, fn(*(a if k == replicated else a[i * rows:(i + 1) * rows]
                                             for k, a in enumerate(arrays)))) for i in range(NDEV)]
        want = jax.tree.map(lambda *leaves: np.stack(leaves), *per)
    got_leaves, got_tree = jax.tree.flatten(got)
    want_leaves, want_tree = jax.tree.flatten(want)
    assert got_tree == want_tree, (got_tree, want_tree)
    for g, w in zip(got_leaves, want_leaves):
        g, w = np.asarray(g, np.float64), np.asarray(w, np.float64)
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-6, err_msg=name)


def _strip_axis(fn, arrays):
    """The function on the whole batch, on one device: a vmap over one 'dp' member gives the axis a meaning."""
    out = jax.vmap(lambda *a: fn(*a), axis_name="dp")(*(jnp.asarray(a)[None] for a in arrays))
    return jax.tree.map(lambda leaf: leaf[0], out)
