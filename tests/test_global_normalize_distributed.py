"""`global_masked_normalize` across data-parallel shards.

(a) `jax.shard_map` over four simulated CPU devices (tests/conftest.py sets XLA_FLAGS before JAX
    starts): every shard's output is its slice of the single-device result on the concatenated
    batch, also when one shard has no valid token, and a globally empty mask is reported through
    `checkify` on every shard.
(b) Two real processes joined by `jax.distributed.initialize` with CPU (gloo) collectives: each
    holds its own rows, one of them with no valid token, and each process's output is compared with
    an independent float64 NumPy normalisation of the concatenated global population.

The references below are written from the equation and never call the production function.
"""
from __future__ import annotations

import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import checkify
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from dew_rl._advantages.normalize import global_masked_normalize
from references import population_normalize
from _multiprocess import run_processes

def ref_normalize(x: np.ndarray, m: np.ndarray, var_floor: float = 1e-8) -> np.ndarray:
    """float64: m * (x - mu) / sqrt(max(population var, floor)) over every valid position."""
    return population_normalize(x, m, var_floor)[0]


def _batch(seed: int, B: int = 8, T: int = 7, empty_rows=(2, 3)):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, T + 1, size=B)
    m = (np.arange(T)[None, :] < lengths[:, None]).astype(np.float32)
    m[:, 1] *= rng.random(B) > 0.3                       # interior holes
    m[list(empty_rows)] = 0.0                            # rows 2-3: one whole shard of the four is empty
    x = rng.normal(0.7, 1.5, size=(B, T)).astype(np.float32)
    x[m == 0] = np.array([np.nan, np.inf, -np.inf], np.float32)[np.arange(int((m == 0).sum())) % 3]
    return x, m


# --------------------------------------------------------------------------- (a) shard_map, 4 devices
@pytest.fixture(scope="module")
def mesh4():
    if jax.device_count() < 4:
        pytest.skip("needs XLA_FLAGS=--xla_force_host_platform_device_count=4 (tests/conftest.py)")
    return Mesh(np.array(jax.devices()[:4]), ("dp",))


def _sharded(mesh):
    body = lambda a, b: global_masked_normalize(a, b, axis_name="dp")
    return jax.shard_map(body, mesh=mesh, in_specs=(P("dp"), P("dp")), out_specs=P("dp"))


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_shard_map_equals_single_device(mesh4, dtype):
    x, m = _batch(0)
    assert m[2:4].sum() == 0 and m.sum() > 0
    f = jax.jit(_sharded(mesh4))
    got = f(jnp.asarray(x, dtype), m)
    assert got.dtype == dtype
    single = global_masked_normalize(jnp.asarray(x, dtype), m)
    tol = 1e-6 if dtype == jnp.float32 else 2e-2
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(single, np.float64), rtol=tol, atol=tol)
    want = ref_normalize(np.asarray(jnp.asarray(x, dtype), np.float64), m)
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=10 * tol, atol=10 * tol)
    assert (np.asarray(got, np.float64)[2:4] == 0).all()          # the empty shard returns zeros
    assert (np.asarray(got, np.float64)[m == 0] == 0).all()


def test_shard_map_eager_on_sharded_inputs(mesh4):
    x, m = _batch(1)
    sh = NamedSharding(mesh4, P("dp"))
    got = _sharded(mesh4)(jax.device_put(jnp.asarray(x), sh), jax.device_put(jnp.asarray(m), sh))
    np.testing.assert_allclose(np.asarray(got, np.float64), ref_normalize(x, m), rtol=1e-5, atol=1e-6)


def test_shard_map_local_statistics_would_differ(mesh4):
    """The check can fail: normalising each shard with its own moments is rejected."""
    x, m = _batch(0, empty_rows=())                      # no empty shard: an empty one now raises without axis_name
    local = jax.jit(jax.shard_map(lambda a, b: global_masked_normalize(a, b),      # no axis_name: shard moments
                                  mesh=mesh4, in_specs=(P("dp"), P("dp")), out_specs=P("dp")))
    got = np.asarray(local(x, m), np.float64)
    assert np.abs(got - ref_normalize(x, m)).max() > 1e-2


def test_shard_map_checkify_reports_global_empty_only(mesh4):
    x, m = _batch(0)
    f = jax.jit(checkify.checkify(_sharded(mesh4)))
    err, out = f(x, m)                                    # shards 1 empty, batch not: no error
    assert err.get() is None
    err, out = f(x, np.zeros_like(m))                     # every shard empty: reported on every shard
    msg = err.get()
    assert msg is not None and "keeps no position" in msg
    assert all(f"at mapped index {r}" in msg for r in range(4)), msg
    assert (np.asarray(out) == 0).all() and np.isfinite(np.asarray(out)).all()
    with pytest.raises(Exception, match="keeps no position"):
        err.throw()
    # without checkify the same jitted call raises when its result is awaited (report_if_empty's callback)
    with pytest.raises(Exception, match="keeps no position"):
        jax.jit(_sharded(mesh4))(x, np.zeros_like(m)).block_until_ready()


def test_shard_map_gradient_matches_single_device(mesh4):
    x, m = _batch(3)
    w = np.random.default_rng(4).normal(size=x.shape).astype(np.float32)

    def loss_sharded(v):
        return (jnp.where(m != 0, w, 0) * _sharded(mesh4)(v, m)).sum()

    def loss_single(v):
        return (jnp.where(m != 0, w, 0) * global_masked_normalize(v, m)).sum()

    g_dp = jax.jit(jax.grad(loss_sharded))(jnp.asarray(x))
    g_1 = jax.grad(loss_single)(jnp.asarray(x))
    assert np.isfinite(np.asarray(g_dp)).all()
    np.testing.assert_allclose(np.asarray(g_dp), np.asarray(g_1), rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------- (b) two real processes
CHILD = textwrap.dedent(
    """
    import jax.numpy as jnp
    from jax.experimental import checkify, multihost_utils
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    from dew_rl._advantages.normalize import global_masked_normalize

    assert jax.device_count() == 2
    pid = PID
    cases = PAYLOAD
    mesh = Mesh(np.array(jax.devices()), ("dp",))
    sh = NamedSharding(mesh, P("dp"))
    body = lambda a, b: global_masked_normalize(a, b, axis_name="dp")
    f = jax.shard_map(body, mesh=mesh, in_specs=(P("dp"), P("dp")), out_specs=P("dp"))
    result = {"pid": pid}
    for name, case in cases.items():
        x = np.array(case["x"][pid], np.float32)
        m = np.array(case["m"][pid], np.float32)
        x[m == 0] = np.nan                               # never read
        out = jax.jit(f)(jax.make_array_from_process_local_data(sh, x), jax.make_array_from_process_local_data(sh, m))
        result[name] = np.asarray(out.addressable_shards[0].data, np.float64).tolist()
    # a globally empty mask: the checkify error flag is set on this process's shard
    zeros = jax.make_array_from_process_local_data(sh, np.zeros((3, 5), np.float32))
    err, _ = jax.jit(checkify.checkify(f))(zeros, zeros)
    err = multihost_utils.process_allgather(err, tiled=True)   # err.get() reads every shard's flag
    result["empty_reported"] = err.get() or ""
    print("RESULT " + json.dumps(result), flush=True)
    jax.distributed.shutdown()
    """
)


def test_two_processes_gloo(tmp_path):
    rng = np.random.default_rng(11)
    x = [rng.normal(2.0, 3.0, size=(3, 5)).round(3), rng.normal(-1.0, 0.5, size=(3, 5)).round(3)]
    m0 = (np.arange(5)[None, :] < np.array([[5], [2], [4]])).astype(float)
    m0[0, 2] = 0.0                                        # an interior hole
    m1 = (np.arange(5)[None, :] < np.array([[1], [5], [3]])).astype(float)
    cases = {
        "one_process_empty": {"x": x, "m": [m0, np.zeros((3, 5))]},   # process 1 holds no valid token
        "both_valid": {"x": x, "m": [m0, m1]},   # global moments differ from each process's own
    }
    payload = {k: {"x": [a.tolist() for a in c["x"]], "m": [a.tolist() for a in c["m"]]} for k, c in cases.items()}
    results = run_processes(CHILD, payload, tmp_path, nproc=2, timeout=90)
    assert set(results) == {0, 1}
    for name, case in cases.items():
        want = ref_normalize(np.concatenate(case["x"]), np.concatenate(case["m"]))   # the global population
        for pid in (0, 1):
            got = np.array(results[pid][name])
            np.testing.assert_allclose(got, want[3 * pid: 3 * pid + 3], rtol=1e-5, atol=1e-6, err_msg=f"{name}, process {pid}")
    assert (np.array(results[1]["one_process_empty"]) == 0).all()
    # the comparison can fail: each process's own moments are far from the global ones in the second case
    own = ref_normalize(x[0], m0)
    assert np.abs(own - np.array(results[0]["both_valid"])).max() > 1e-1
    for pid in (0, 1):
        msg = results[pid]["empty_reported"]
        assert "keeps no position" in msg and all(f"at mapped index {r}" in msg for r in (0, 1)), (pid, msg)
