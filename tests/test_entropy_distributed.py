"""The exact global quantile, the top-entropy mask, the controller and the sample weights across shards.

Four simulated CPU devices (tests/conftest.py). `masked_quantile` and `top_entropy_mask` with `axis_name`
under `shard_map`, and without it under `jit` with row-sharded inputs, must return exactly (bit for bit)
what they return on one device on the concatenated batch, with a shard that holds no valid token; the
expectations are independent float64 NumPy order statistics. The compiled programs gather nothing.
"""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import dew_rl as rl
from dew_rl.testing import poison, random_mask

NDEV = 4


def ref_quantile(x, m, q):
    "torch.quantile's rule: float32 rank, lerp from the nearer end, on the sorted kept values (float64)."
    v = np.sort(np.asarray(x, np.float64)[np.asarray(m) != 0])
    if v.size == 0:
        return 0.0
    r = float(np.float32(np.float32(q) * np.float32(v.size - 1)))
    k, hi, w = int(np.floor(r)), int(np.ceil(r)), r - np.floor(r)
    return v[k] + w * (v[hi] - v[k]) if w < 0.5 else v[hi] - (v[hi] - v[k]) * (1 - w)


def batch(seed, ties=False):
    B, T = 8, 7
    rng = np.random.default_rng(seed)
    H = rng.exponential(size=(B, T)) * 2
    if ties:
        H = np.round(H, 1)
    m = random_mask(seed, B, T, empty_rows=1)
    m[2:4] = 0.0  # shard 1 (rows 2-3) has no valid token
    return poison(H, m).astype(np.float32), m


def shard_mapped(fn, mesh):
    return jax.jit(jax.shard_map(fn, mesh=mesh, in_specs=(P("dp"), P("dp")), out_specs=P("dp")))


@pytest.mark.parametrize("q", [0.0, 0.2, 0.5, 0.8, 0.95, 1.0])
@pytest.mark.parametrize("ties", [False, True])
def test_quantile_equals_single_device_exactly(mesh, q, ties):
    H, m = batch(int(q * 100) + ties, ties)
    single = np.asarray(rl.masked_quantile(H, m, q))
    sm = shard_mapped(lambda a, b: rl.masked_quantile(a, b, q, axis_name="dp")[None], mesh)
    np.testing.assert_array_equal(np.asarray(sm(H, m)), np.full(NDEV, single))
    sh = NamedSharding(mesh, P("dp"))
    jitted = jax.jit(lambda a, b: rl.masked_quantile(a, b, q))(jax.device_put(H, sh), jax.device_put(m, sh))
    np.testing.assert_array_equal(np.asarray(jitted), single)
    valid = np.where(m != 0, H, 0).astype(np.float32)
    assert abs(float(single) - ref_quantile(valid, m, q)) <= 2e-7 * max(1.0, abs(ref_quantile(valid, m, q)))


@pytest.mark.parametrize("rho", [0.0, 0.2, 0.5, 1.0])
def test_top_entropy_mask_equals_single_device(mesh, rho):
    H, m = batch(7, ties=True)
    keep1, thr1 = rl.top_entropy_mask(H, m, rho)

    def local(a, b):
        keep, thr = rl.top_entropy_mask(a, b, rho, axis_name="dp")
        return keep, thr[None]
    f = jax.jit(jax.shard_map(local, mesh=mesh, in_specs=(P("dp"), P("dp")), out_specs=(P("dp"), P("dp"))))
    keep, thr = f(H, m)
    np.testing.assert_array_equal(np.asarray(keep), np.asarray(keep1))
    np.testing.assert_array_equal(np.asarray(thr), np.full(NDEV, np.asarray(thr1)))
    assert not np.asarray(keep)[2:4].any()  # the empty shard keeps nothing and still got the threshold
    want = (m != 0) & (np.where(m != 0, H, -np.inf) >= ref_quantile(np.where(m != 0, H, 0), m, 1.0 - rho))
    np.testing.assert_array_equal(np.asarray(keep), want)


def test_no_valid_token_anywhere(mesh):
    H, m = batch(3)
    m = np.zeros_like(m)
    f = jax.jit(jax.shard_map(lambda a, b: tuple(v[None] if v.ndim == 0 else v for v in rl.top_entropy_mask(a, b, 0.2, axis_name="dp")),
                              mesh=mesh, in_specs=(P("dp"), P("dp")), out_specs=(P("dp"), P("dp"))))
    keep, thr = f(H, m)
    assert not np.asarray(keep).any() and np.all(np.asarray(thr) == 0.0)


def test_programs_gather_nothing(mesh):
    H, m = batch(5)
    sh = NamedSharding(mesh, P("dp"))
    for compiled in (jax.jit(lambda a, b: rl.masked_quantile(a, b, 0.8)).lower(jax.device_put(H, sh), jax.device_put(m, sh)).compile(),
                     shard_mapped(lambda a, b: rl.masked_quantile(a, b, 0.8, axis_name="dp")[None], mesh).lower(H, m).compile()):
        text = compiled.as_text()
        assert not re.search(r"all-gather|all-to-all", text)
        assert len(re.findall(r" all-reduce(-start)?\(", text)) == 2


def test_controller_update_sums_over_shards(mesh):
    H, m = batch(9)
    sums = np.where(m != 0, H, 0).reshape(NDEV, -1).sum(1)
    counts = (m != 0).reshape(NDEV, -1).sum(1)
    state = rl.entropy_control_init(0.01)

    def local(s, n):
        new = rl.entropy_control_update(state, s[0], n[0], 2.0, 0.005, 0.0, 1.0, axis_name="dp")
        return jnp.stack([new.entropy_coef, new.last_entropy])[None]
    out = np.asarray(jax.jit(jax.shard_map(local, mesh=mesh, in_specs=(P("dp"), P("dp")), out_specs=P("dp")))(
        sums.astype(np.float32), counts.astype(np.int32)))
    mean = sums.sum() / counts.sum()
    np.testing.assert_allclose(out[:, 1], mean, rtol=1e-6)
    np.testing.assert_allclose(out[:, 0], 0.015 if mean <= 2.0 else 0.005, rtol=1e-6)


def test_sample_weights_global(mesh):
    m = random_mask(4, 8, 7, empty_rows=1)
    m[2:4] = 0.0
    d = np.random.default_rng(0).random(8).astype(np.float32)
    single = rl.sample_weights(m, d, difficulty_loss_weight=True, length_loss_weight=True)
    f = jax.jit(jax.shard_map(lambda a, b: rl.sample_weights(a, b, difficulty_loss_weight=True, length_loss_weight=True,
                                                             axis_name="dp"), mesh=mesh, in_specs=(P("dp"), P("dp")),
                              out_specs=P("dp")))
    np.testing.assert_allclose(np.asarray(f(m, d)), np.asarray(single), rtol=1e-6)
    L = m.sum(1)
    w = (0.5 + 1.5 * d) * (1.5 - (L - L.min()) / (L.max() - L.min() + 1e-8))
    np.testing.assert_allclose(np.asarray(single), w * 8 / (w.sum() + 1e-8), rtol=1e-6)
