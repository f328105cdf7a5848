"""Properties of the REINFORCE++ pair and the global normalisation, on random batches (hypothesis).

Each property is also compared with an independent float64 NumPy reference written from the
equations; none of the references calls a production function.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import given, settings, strategies as st

from dew_rl._advantages.normalize import global_masked_normalize
from dew_rl._advantages.reinforce_pp import group_baseline_advantage, reinforce_plus_plus_returns
from references import population_normalize

SETTINGS = settings(max_examples=30, deadline=None, derandomize=True)
SENTINELS = np.array([np.nan, np.inf, -np.inf])


@st.composite
def batches(draw, min_valid=0, group=None):
    """A [B, T] batch: rows of random length with holes, NaN/Inf at masked positions, rewards per row."""
    # few distinct shapes (each new shape compiles once): B = 12 rows, groups of 2, 3, 4 or 6
    k = draw(st.sampled_from([2, 3, 4, 6])) if group is None else group
    B = 12
    T = draw(st.sampled_from([1, 5, 9]))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, T + 1, size=B)
    m = (np.arange(T)[None, :] < lengths[:, None]).astype(np.float64)
    m *= rng.random((B, T)) > draw(st.sampled_from([0.0, 0.2, 0.5]))
    if m.sum() < min_valid:
        m[-1, :] = 1.0
    scale = draw(st.sampled_from([1e-3, 1.0, 30.0]))
    offset = draw(st.sampled_from([0.0, 5.0, -100.0]))
    x = offset + scale * rng.normal(size=(B, T))
    x_p = x.copy()
    x_p[m == 0] = SENTINELS[np.arange(int((m == 0).sum())) % 3]
    rewards = draw(st.sampled_from(["binary", "normal"]))
    R = rng.integers(0, 2, size=B).astype(float) if rewards == "binary" else rng.normal(size=B)
    return dict(x=x, x_poisoned=x_p, m=m, R=R, group=k, kl=rng.normal(0.0, 0.3, size=(B, T)))


ref_normalize = population_normalize  # (normalised, population variance), tests/references.py


def ref_returns(R, kl, m, beta, gamma):
    B, T = kl.shape
    out = np.zeros((B, T))
    for i in range(B):
        valid = np.flatnonzero(m[i] != 0)
        if valid.size == 0:
            continue
        r = np.zeros(T)
        r[valid] = -beta * kl[i, valid]
        r[valid[-1]] += R[i]
        for t in valid:
            out[i, t] = sum(gamma ** (u - t) * r[u] for u in range(t, T))
    return out


@SETTINGS
@given(batches(min_valid=1), st.booleans())
def test_normalised_mean_zero_variance_one(b, jit):
    f = jax.jit(global_masked_normalize) if jit else global_masked_normalize
    z = np.asarray(f(jnp.asarray(b["x_poisoned"], jnp.float32), b["m"]), np.float64)
    keep = b["m"] != 0
    assert np.isfinite(z).all()
    assert (z[~keep] == 0).all()                                     # exactly zero outside the mask
    want, var = ref_normalize(b["x"].astype(np.float32).astype(np.float64), b["m"])
    np.testing.assert_allclose(z, want, rtol=1e-4, atol=1e-4)
    v = z[keep]
    if var > 1e-6 and v.size > 1:                                    # non-degenerate: a true z-score
        assert abs(v.mean()) < 1e-4
        assert abs(v.var() - 1.0) < 1e-4                             # population variance (ddof 0)
    elif var == 0.0:
        assert (v == 0).all()


@SETTINGS
@given(batches(), st.sampled_from([0.0, 0.05, 1.0]), st.sampled_from([1.0, 0.9, 0.0]))
def test_returns_match_reference_and_vanish_outside_mask(b, beta, gamma):
    kl_p = np.where(b["m"] != 0, b["kl"], np.nan)
    R = np.where(b["m"].sum(1) > 0, b["R"], np.nan)                  # rewards of empty rows are never read
    G = np.asarray(reinforce_plus_plus_returns(R, kl_p, b["m"], beta, gamma), np.float64)
    assert np.isfinite(G).all()
    assert (G[b["m"] == 0] == 0).all()
    np.testing.assert_allclose(G, ref_returns(b["R"], b["kl"], b["m"], beta, gamma), rtol=1e-5, atol=1e-5)


@SETTINGS
@given(batches())
def test_returns_beta0_gamma1_equal_reward_on_every_valid_position(b):
    G = np.asarray(jax.jit(reinforce_plus_plus_returns)(b["R"], b["kl"], b["m"], 0.0, 1.0), np.float64)
    want = np.where(b["m"] != 0, b["R"][:, None], 0.0)
    np.testing.assert_array_equal(G, want.astype(np.float32))      # exact: one reward, nothing added


@SETTINGS
@given(batches())
def test_group_baseline_sums_to_zero_over_each_group(b):
    k = b["group"]
    A = np.asarray(group_baseline_advantage(b["R"], b["m"], k), np.float64)
    assert (A[b["m"] == 0] == 0).all()
    B, T = b["m"].shape
    full = b["m"].reshape(B // k, k, T).all(axis=1)                  # positions valid in every row of the group
    sums = A.reshape(B // k, k, T).sum(axis=1)
    np.testing.assert_allclose(sums[full], 0.0, atol=1e-5)
    C = b["R"] - b["R"].reshape(-1, k).mean(1).repeat(k)            # float64 reference
    np.testing.assert_allclose(A, np.where(b["m"] != 0, C[:, None], 0.0), rtol=1e-5, atol=1e-6)


@SETTINGS
@given(batches(min_valid=1), st.sampled_from([jnp.float32, jnp.bfloat16]))
def test_baseline_then_normalise_is_a_z_score_of_broadcast_centred_rewards(b, dtype):
    k = b["group"]
    R = jnp.asarray(b["R"], dtype)
    A = global_masked_normalize(group_baseline_advantage(R, b["m"], k), b["m"])
    assert A.dtype == dtype
    R64 = np.asarray(R, np.float64)
    C = R64 - R64.reshape(-1, k).mean(1).repeat(k)
    want, _ = ref_normalize(np.broadcast_to(C[:, None], b["m"].shape), b["m"])
    tol = 1e-4 if dtype == jnp.float32 else 3e-2
    np.testing.assert_allclose(np.asarray(A, np.float64), want, rtol=tol, atol=tol)
