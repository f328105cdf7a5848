"""Properties of the off-policy family that the chapters do not show: data parallelism with an empty shard,
chaining, and agreement between the global (axis_name) statistics and the single-device ones.

Runs on the four simulated CPU devices of tests/conftest.py.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, PartitionSpec as P

import dew_rl as rl
from dew_rl.testing import poison, random_mask

NDEV, B, T = 4, 8, 7


@pytest.fixture(scope="module")
def mesh():
    return Mesh(np.array(jax.devices()[:NDEV]), ("dp",))


def _batch(seed, empty_shard):
    rng = np.random.default_rng(seed)
    mask = random_mask(seed, B, T, empty_rows=0)
    if empty_shard:
        mask[:B // NDEV] = 0.0          # the first shard holds no valid token
    beh = rng.normal(-1.5, 0.8, size=(B, T))
    old = beh + rng.normal(0.0, 0.3, size=(B, T))
    adv = rng.normal(size=(B, T))
    return [np.asarray(a, np.float32) for a in (poison(old, mask), poison(beh, mask), poison(adv, mask), mask)]


CALLS = {
    "rollout_is_weights": lambda o, b, a, m, ax: rl.rollout_is_weights(o, b, m, "sequence", 2.0, 0.5, "mask", True, axis_name=ax),
    "rollout_is_weights token": lambda o, b, a, m, ax: rl.rollout_is_weights(o, b, m, "token", 1.5, None, "truncate", True, axis_name=ax),
    "rollout_rejection_mask": lambda o, b, a, m, ax: rl.rollout_rejection_mask(o, b, m, "token_k1,seq_mean_k3,seq_max_ratio",
                                                                               (1.5, 0.05, 3.0), axis_name=ax),
    "opsm_mask": lambda o, b, a, m, ax: rl.opsm_mask(o, b, a, m, 0.02, "token", axis_name=ax),
    "offpolicy_metrics": lambda o, b, a, m, ax: rl.offpolicy_metrics(o, b, m, axis_name=ax),
    "rollout_correction": lambda o, b, a, m, ax: rl.rollout_correction(o, b, m, "geometric_mean", 1.2, 0.8, "truncate", True,
                                                                       "seq_sum_k2", 0.5, axis_name=ax),
}


@pytest.mark.parametrize("empty_shard", [False, True])
@pytest.mark.parametrize("name", sorted(CALLS))
def test_global_statistics_with_an_empty_shard(mesh, name, empty_shard):
    """Under shard_map every shard returns the single-device metrics of the whole batch and its own rows of the
    arrays, finite, also when one shard holds no valid token."""
    arrays = _batch(3, empty_shard)
    call = CALLS[name]
    body = lambda *a: jax.tree.map(lambda leaf: jnp.asarray(leaf)[None], call(*a, "dp"))   # noqa: E731
    got = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=(P("dp"),) * 4, out_specs=P("dp")))(*map(jnp.asarray, arrays))
    want = call(*map(jnp.asarray, arrays), None)
    rows = B // NDEV
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        g, w = np.asarray(g, np.float64), np.asarray(w, np.float64)
        assert np.all(np.isfinite(g)), name
        if w.ndim == 2:
            w = w.reshape(NDEV, rows, T)
        else:
            w = np.broadcast_to(w, (NDEV,) + w.shape)
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-6, err_msg=name)


def test_chaining_is_the_product_of_the_options():
    o, b, _, m = _batch(5, False)
    opts = ("token_k1", "seq_sum_k2", "seq_mean_ratio", "seq_max_k3")
    ups, lows = (1.4, 0.3, 1.1, 0.2), (None, None, 0.95, None)
    chained, met = rl.rollout_rejection_mask(o, b, m, ",".join(opts), ups, lows)
    product = np.asarray(m, bool)
    for opt, up, lo in zip(opts, ups, lows):
        single, single_met = rl.rollout_rejection_mask(o, b, m, opt, up, lo)
        product &= np.asarray(single) != 0
        for k, v in single_met.items():
            if k.startswith(f"rollout_rs_{opt}_"):
                assert float(met[k]) == float(v), k
    np.testing.assert_array_equal(np.asarray(chained) != 0, product)
    assert 0 < float(met["rollout_rs_masked_fraction"]) < 1


def test_ratio_options_are_k1_with_the_reciprocal_band():
    o, b, _, m = _batch(7, False)
    for scope in ("token", "seq_sum", "seq_mean"):
        for lo, hi in ((0.8, 1.3), (0.5, 2.0), (0.97, 1.02)):
            ratio = rl.rollout_rejection_mask(o, b, m, f"{scope}_ratio", hi, lo)[0]
            k1 = rl.rollout_rejection_mask(o, b, m, f"{scope}_k1", 1 / lo, 1 / hi)[0]
            assert np.mean(np.asarray(ratio) != np.asarray(k1)) <= 1 / m.size   # equal up to a boundary rounding


def test_normalised_weights_have_mean_one():
    o, b, _, m = _batch(9, False)
    k = m != 0
    w, met = rl.rollout_is_weights(o, b, m, "token", 3.0, 0.4, "truncate", True)
    np.testing.assert_allclose(np.asarray(w, np.float64)[k].mean(), 1.0, rtol=1e-5)
    w, met = rl.rollout_is_weights(o, b, m, "sequence", 3.0, 0.4, "truncate", True)
    rows = [np.asarray(w, np.float64)[i][k[i]].mean() for i in range(B) if k[i].any()]
    np.testing.assert_allclose(np.mean(rows), 1.0, rtol=1e-5)
