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
VERSIONS = rng.integers(-1, 6, size=(B, T)).astype(np.int32)

DIFF = np.random.default_rng(1).random(B).astype(np.float32)
TRUNC = np.array([True, False, False, True, True, True, False, False])          # truncated responses

TOK_IDS = np.stack([rng.choice(V, size=4, replace=False) for _ in range(B * T)]).reshape(B, T, 4).astype(np.int32)
TOK_IDS[0, 0, -1] = -1
_LS = LOGITS - np.log(np.exp(LOGITS).sum(-1, keepdims=True))
TOPK_T = np.take_along_axis(_LS, np.argsort(-LOGITS, -1)[..., :4], -1).astype(np.float32)
TOPK_S = (TOPK_T + rng.normal(size=TOPK_T.shape) * 0.5).astype(np.float32)
TOPK_T[1, 2, -1] = -np.inf

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
    "dynamic_sampling_mask": (lambda r: rl.dynamic_sampling_mask(r, 2), (R,), False),
    "rloo_advantage": (lambda r: rl.rloo_advantage(r, 2), (R,), False),
    "overlong_penalty": (lambda m: rl.overlong_penalty(m, T, 2), (M,), False),
    "truncated_rows": (lambda t, m: rl.truncated_rows(t, m, (2, 3)), (TOKENS, M), False),
    "stop_properly_rewards": (lambda r, t: [rl.stop_properly_rewards(r, t, 0.5), rl.stop_properly_rewards(r, t, -0.5)],
                              (R, TRUNC), False),
    "mask_truncated_completions": (lambda m, t: rl.mask_truncated_completions(m, t), (M, TRUNC), False),
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
    "adaptive_kl_update": (lambda y, m: rl.adaptive_kl_update(0.05, rl.token_mean(y, m, axis_name="dp"), 8, 0.06, 100.0),
                           (Y, M), True),
    "clipped_surrogate_terms": (lambda y, x, m: rl.clipped_surrogate_terms(y, x, m), (Y, X, M), False),
    "clipped_surrogate": (lambda y, x, m: rl.clipped_surrogate(y, x, m), (Y, X, M), False),
    "sapo_terms": (lambda y, x, m: rl.sapo_terms(y, x, m), (Y, X, M), False),
    "cispo_terms": (lambda y, z, x, m: rl.cispo_terms(y, z, x, m), (Y, Z, X, M), False),
    "clipped_value_loss_terms": (lambda x, y, z: rl.clipped_value_loss_terms(x, y, z), (X, Y, Z), False),
    "clipped_value_loss": (lambda x, y, z, m: rl.clipped_value_loss(x, y, z, m, axis_name="dp"), (X, Y, Z, M), True),
    "behavior_importance_weights": (lambda y, z, m: rl.behavior_importance_weights(y, z, m, 2.0), (Y, Z, M), False),
    "sequence_importance_weights": (lambda y, z, m: rl.sequence_importance_weights(y, z, m, 2.0), (Y, Z, M), False),
    "rollout_is_weights": (lambda y, z, m: [rl.rollout_is_weights(y, z, m, lvl, 1.5, 0.7, mode, True, axis_name="dp")
                                            for lvl in rl.ROLLOUT_IS_LEVELS for mode in rl.ROLLOUT_IS_MODES], (Y, Z, M), True),
    "rollout_rejection_mask": (lambda y, z, m: rl.rollout_rejection_mask(y, z, m, ",".join(rl.ROLLOUT_RS_OPTIONS), 2.0,
                                                                         axis_name="dp"), (Y, Z, M), True),
    "opsm_mask": (lambda y, z, x, m: [rl.opsm_mask(y, z, x, m, 0.1, s, axis_name="dp") for s in rl.OPSM_SCOPES],
                  (Y, Z, X, M), True),
    "offpolicy_metrics": (lambda y, z, m: rl.offpolicy_metrics(y, z, m, axis_name="dp"), (Y, Z, M), True),
    "rollout_correction": (lambda y, z, m: rl.rollout_correction(y, z, m, "token", 2.0, 0.5, "mask", True, "seq_mean_k3",
                                                                 0.5, axis_name="dp"), (Y, Z, M), True),
    "importance_weighted_kl": (lambda x, y, z, m: rl.importance_weighted_kl(x, y, z, m, "k3"), (X, Y, Z, M), False),
    "loglinear_proximal_log_probs": (lambda y, z, v, m: rl.loglinear_proximal_log_probs(y, z, v, 5, m),
                                     (Y, Z, VERSIONS, M), False),
    "preference_margin": (lambda y, z, m: rl.preference_margin(y, z, z, y, m, m), (Y, Z, M), False),
    "preference_logsigmoid": (lambda y, z, m: rl.preference_logsigmoid(y, z, z, y, m, m, 0.1), (Y, Z, M), False),
    "preference_ipo": (lambda y, z, m: rl.preference_ipo(y, z, z, y, m, m, 0.1), (Y, Z, M), False),
    # the preference family: global means over the pairs of every shard (M has an empty row: a pair with no
    # token, left out). AOT sorts within a shard (as TRL within a process), so it is not the whole-batch value.
    "dpo_loss": (lambda y, z, m: [rl.dpo_loss(y, z, z, y, m, m, loss_type=t, axis_name="dp",
                                              label_smoothing=1e-3 if t == "exo_pair" else 0.0)
                                  for t in rl.DPO_LOSS_TYPES if t not in ("aot", "aot_unpaired")], (Y, Z, M), True),
    "kto_loss": (lambda y, z, m: rl.kto_loss(y, z, m, m[:, 0] > 0, z, y, m, axis_name="dp"), (Y, Z, M), True),
    "cpo_loss": (lambda y, z, m: [rl.cpo_loss(y, z, m, m, loss_type=t, axis_name="dp") for t in rl.CPO_LOSS_TYPES],
                 (Y, Z, M), True),
    "orpo_loss": (lambda y, z, m: rl.orpo_loss(y, z, m, m, axis_name="dp"), (Y, Z, M), True),
    "dpo_sft_loss": (lambda y, z, m: rl.dpo_sft_loss(y, z, z, y, m, m, sft_loss_weight=0.5, axis_name="dp"),
                     (Y, Z, M), True),
    "tpo_loss": (lambda y, z, m: [rl.tpo_loss(y, z, m, m, y, m, loss_type=t, axis_name="dp") for t in rl.TPO_LOSS_TYPES],
                 (Y, Z, M), True),
    "log_probs_from_logits": (lambda z, t: rl.log_probs_from_logits(z, t), (LOGITS, TOKENS), False),
    "entropy_from_logits": (lambda z: rl.entropy_from_logits(z), (LOGITS,), False),
    "linear_log_probs_and_entropy": (lambda h, w, t: rl.linear_log_probs_and_entropy(h, w, t, chunk_size=4),
                                     (HIDDEN, WEIGHT, TOKENS), False),
    # policy losses with a detached weight (Y, Z: log-probs below 0; X: advantages)
    "reinforce_terms": (lambda z, x, m: rl.reinforce_terms(z, x, m)[0], (Z, X, M), False),
    "dro_terms": (lambda z, y, x, m: rl.dro_terms(z, y - 1.0, x, m, 0.1)[0], (Z, Y, X, M), False),
    "positive_example_nll_terms": (lambda z, m, r: rl.positive_example_nll_terms(z, m, r), (Z, M, R), False),
    "topr_terms": (lambda y, z, x, m, r: rl.topr_terms(y, z, x, m, r), (Y, Z, X, M, R), False),
    "signed_cispo_terms": (lambda y, z, x, m: rl.signed_cispo_terms(y, z, x, m, 0.2, 0.2), (Y, Z, X, M), False),
    "dppo_tv_terms": (lambda z, y, x, m: rl.dppo_tv_terms(z, y - 1.0, x, m, 0.05, 0.05), (Z, Y, X, M), False),
    "dppo_kl_terms": (lambda z, y, x, m: rl.dppo_kl_terms(z, y - 1.0, x, m, 0.01, 0.01), (Z, Y, X, M), False),
    "vespo_terms": (lambda y, z, x, m: rl.vespo_terms(y, z, x, m)[0], (Y, Z, X, M), False),
    "p3o_ess": (lambda z, y, m: rl.p3o_ess(z, y - 1.0, m, axis_name="dp"), (Z, Y, M), True),
    "p3o_terms": (lambda z, y, x, m: rl.p3o_terms(z, y - 1.0, x, m, axis_name="dp"), (Z, Y, X, M), True),
    "astar_po_value": (lambda r, i: [rl.astar_po_value(r, 2), rl.astar_po_value(r, i, 0.3)], (R, IDS), False),
    "astar_po_loss_terms": (lambda z, y, m, r, d: rl.astar_po_loss_terms(z, y - 1.0, m, r, d, 0.1), (Z, Y, M, R, DIFF), False),
    # sequence ratios and batch-selected trust regions
    "gmpo_terms": (lambda y, x, m: rl.gmpo_terms(y, x, m), (Y, X, M), False),
    "sequence_product_terms": (lambda y, x, m: rl.sequence_product_terms(y, x, m), (Y, X, M), False),
    "clip_cov_terms": (lambda y, z, x, m: rl.clip_cov_terms(y, z, x, m, jax.random.key(0), clip_cov_ratio=0.2,
                                                            clip_cov_lb=0.0, clip_cov_ub=10.0, axis_name="dp"),
                       (Y, Z, X, M), True),
    "kl_cov_terms": (lambda y, z, x, m: rl.kl_cov_terms(y, z, x, m, kl_cov_ratio=0.2, axis_name="dp"), (Y, Z, X, M), True),
    "m2po_loss_mask": (lambda y, z, m: rl.m2po_loss_mask(y, z, m, 0.05, axis_name="dp"), (Y, Z, M), True),
    "m2po_clip_bounds": (lambda y, x, m: rl.m2po_clip_bounds(y, x, m, 0.01, axis_name="dp"), (Y, X, M), True),
    "m2po_terms": (lambda y, x, m: rl.m2po_terms(y, x, m, 0.01, axis_name="dp"), (Y, X, M), True),

    "sample_weights": (lambda m, d: rl.sample_weights(m, d, difficulty_loss_weight=True, length_loss_weight=True,
                                                      axis_name="dp"), (M, DIFF), True),
    "kl_shaped_token_rewards": (lambda x, y, z, m: rl.kl_shaped_token_rewards(x, y, z, m, 0.1, "k3"), (X, Y, Z, M), False),
    "kl_shaped_sequence_rewards": (lambda r, y, z, m: rl.kl_shaped_sequence_rewards(r, y, z, m, 0.1), (R, Y, Z, M), False),
    "masked_quantile": (lambda x, m: rl.masked_quantile(x, m, 0.8, axis_name="dp"), (X, M), True),
    "top_entropy_mask": (lambda x, m: rl.top_entropy_mask(jnp.abs(x), m, 0.2, axis_name="dp"), (X, M), True),
    "entropy_control_init": (lambda r: rl.entropy_control_init(jnp.abs(r[0])), (R,), False),
    "entropy_bonus_coef": (lambda r: rl.entropy_bonus_coef(rl.entropy_control_update(
        rl.entropy_control_init(jnp.abs(r[0])), jnp.abs(r).sum(), r.shape[0]), 0.9), (R,), False),
    "entropy_control_update": (lambda x, m: rl.entropy_control_update(
        rl.entropy_control_init(0.01), jnp.where(m > 0, jnp.abs(x), 0).sum(), (m > 0).sum(), 0.8, axis_name="dp"),
        (X, M), True),

    "log_probs_at": (lambda z, i: rl.log_probs_at(z, i), (LOGITS, TOK_IDS), False),
    "linear_log_probs_at": (lambda h, w, i: rl.linear_log_probs_at(h, w, i, chunk_size=4), (HIDDEN, WEIGHT, TOK_IDS), False),
    "top_k_log_probs": (lambda z: rl.top_k_log_probs(z, 3), (LOGITS,), False),
    "linear_top_k_log_probs": (lambda h, w: rl.linear_top_k_log_probs(h, w, 3, chunk_size=4), (HIDDEN, WEIGHT), False),
    "sum_pi_squared_from_logits": (lambda z: rl.sum_pi_squared_from_logits(z), (LOGITS,), False),
    "linear_sum_pi_squared": (lambda h, w: rl.linear_sum_pi_squared(h, w, chunk_size=4), (HIDDEN, WEIGHT), False),
    "log_probs_on_support": (lambda z, t, i: rl.log_probs_on_support(z, t, i), (LOGITS, TOKENS, TOK_IDS), False),
    "linear_log_probs_on_support": (lambda h, w, t, i: rl.linear_log_probs_on_support(h, w, t, i, chunk_size=4),
                                    (HIDDEN, WEIGHT, TOKENS, TOK_IDS), False),
    "sampler_support": (lambda z: rl.sampler_support(z, top_k=4, top_p=0.7), (LOGITS,), False),
    "linear_sampler_support": (lambda h, w: rl.linear_sampler_support(h, w, top_p=0.7, max_support=5, chunk_size=4),
                               (HIDDEN, WEIGHT), False),
    "distillation_advantage": (lambda y, z, m, x: rl.distillation_advantage(y, z, m, x, 0.5, "k3", 5.0), (Y, Z, M, X), False),
    "distillation_kl_terms": (lambda y, z, m: rl.distillation_kl_terms(y, z, m, "k3+", 5.0), (Y, Z, M), False),
    "top_k_kl": (lambda s, t, m: [rl.top_k_kl(s, t, m, k, n, 0.3, 0.4) for k in rl.TOP_K_KL_TYPES for n in rl.TOP_K_NORM_MODES],
                 (TOPK_S, TOPK_T, M), False),
}
REPLICATED = {"linear_log_probs_and_entropy": 1, "linear_log_probs_at": 1, "linear_top_k_log_probs": 1,
              "linear_sum_pi_squared": 1, "linear_log_probs_on_support": 1, "linear_sampler_support": 1}
# argument positions passed whole to every shard (the weight)

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
