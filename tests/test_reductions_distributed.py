"""Data-parallel reductions under `shard_map` on four simulated CPU devices.

`token_mean`, `response_mean` and every `aggregate` mode with `axis_name` must return, on every
shard, the single-device value on the concatenated batch, including when one shard holds no valid
token; and the gradient each shard computes for its own rows must be its slice of the single-device
gradient. The expectations are independent float64 NumPy formulas, not the production functions.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import dew_rl as rl
from dew_rl.testing import poison, random_mask

NDEV = 4


def ref_value(x, m, mode, norm=None):
    k = m != 0
    S = np.where(k, x, 0.0).sum(1)
    n = k.sum(1)
    B, T = x.shape
    return {"token-mean": S.sum() / n.sum(), "token-sum": S.sum(),
            "seq-mean-token-mean": np.mean(S / np.maximum(n, 1)), "seq-mean-token-sum": S.sum() / B,
            "seq-mean-token-sum-norm": S.sum() / B / (T if norm is None else norm)}[mode]


def ref_grad(m, mode, norm=None):
    """d(value)/d(x) in closed form: the weight of each token."""
    k = (m != 0).astype(float)
    n = k.sum(1, keepdims=True)
    B, T = m.shape
    return {"token-mean": k / k.sum(), "token-sum": k, "seq-mean-token-mean": k / (B * np.maximum(n, 1)),
            "seq-mean-token-sum": k / B, "seq-mean-token-sum-norm": k / (B * (T if norm is None else norm))}[mode]


def batch(seed):
    B, T = 8, 6
    m = random_mask(seed, B, T, empty_rows=0)
    m[:2] = 0.0  # shard 0 (rows 0-1) has no valid token at all
    x = poison(np.random.default_rng(seed).normal(size=(B, T)), m)
    return x, m


def sharded(fn, mesh):
    return jax.jit(jax.shard_map(fn, mesh=mesh, in_specs=(P("dp"), P("dp")), out_specs=P("dp")))


@pytest.mark.parametrize("mode", rl.AGGREGATION_MODES)
def test_aggregate_modes_equal_single_device(mesh, mode):
    x, m = batch(0)
    f = sharded(lambda a, b: rl.aggregate(a, b, mode, axis_name="dp")[None], mesh)
    got = np.asarray(f(jnp.asarray(x, jnp.float32), jnp.asarray(m)))
    want = ref_value(x, m, mode)
    np.testing.assert_allclose(got, np.full(NDEV, want), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["token_mean", "response_mean"])
def test_named_reductions_equal_single_device(mesh, name):
    x, m = batch(1)
    fn = getattr(rl, name)
    f = sharded(lambda a, b: fn(a, b, axis_name="dp")[None], mesh)
    got = np.asarray(f(jnp.asarray(x, jnp.float32), jnp.asarray(m)))
    want = ref_value(x, m, "token-mean" if name == "token_mean" else "seq-mean-token-mean")
    np.testing.assert_allclose(got, np.full(NDEV, want), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", rl.AGGREGATION_MODES)
def test_sharded_gradient_is_the_slice_of_the_global_gradient(mesh, mode):
    x, m = batch(2)

    def local_grad(a, b):
        return jax.grad(lambda v: rl.aggregate(v, b, mode, axis_name="dp"))(a)

    f = jax.jit(jax.shard_map(local_grad, mesh=mesh, in_specs=(P("dp"), P("dp")), out_specs=P("dp")))
    got = np.asarray(f(jnp.asarray(x, jnp.float32), jnp.asarray(m)))
    np.testing.assert_allclose(got, ref_grad(m, mode), rtol=1e-5, atol=1e-7)


def test_local_mean_would_be_wrong(mesh):
    """The test can fail: without axis_name each shard's own token mean differs from the global one."""
    x, m = batch(3)
    f = sharded(lambda a, b: rl.token_mean(a, b)[None], mesh)
    got = np.asarray(f(jnp.asarray(x, jnp.float32), jnp.asarray(m)))
    assert got[0] == 0.0  # the shard with no valid token has a local loss over nothing: 0
    assert not np.allclose(got[1:], ref_value(x, m, "token-mean"), rtol=1e-3)
