"""Log-probs at given ids, the top-k, sum_v p_v^2 and the sampler's support (`dew_rl._logits`).

Every expectation is an independent float64 NumPy computation from the whole [N, V] matrix: log_softmax,
the closed-form gradients (scatter of the cotangents minus their sum times p; 2 p (p - S)), the top-k by a
lexicographic sort (value descending, id ascending), and the nucleus by the definition "keep v iff the mass
of the strictly larger logits is < top_p". The memory claims are asserted on XLA's compiled temporary
bytes; nothing here is timed.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, PartitionSpec as P

import dew_rl as rl
from tracing import jit_counting_traces

EPS32 = float(np.finfo(np.float32).eps)


# ---------------------------------------------------------------- float64 references
@np.errstate(invalid="ignore", divide="ignore", over="ignore")
def log_softmax64(z, tau):
    u = np.asarray(z, np.float64) / tau
    m = u.max(-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    return u - m - np.log(np.exp(u - m).sum(-1, keepdims=True))


@np.errstate(invalid="ignore")
def ref_at(z, ids, tau, g=None):
    """log-probs at ids [..., K] and d(sum g * lp)/dz."""
    L = log_softmax64(z, tau)
    lp = np.where(ids >= 0, np.take_along_axis(L, np.maximum(ids, 0), -1), -np.inf)
    if g is None:
        return lp
    p = np.exp(L)
    g = np.where(ids >= 0, g, 0.0)
    dz = -g.sum(-1, keepdims=True) * p
    for idx in np.ndindex(ids.shape):
        if ids[idx] >= 0:
            dz[idx[:-1] + (ids[idx],)] += g[idx]
    return lp, dz / tau


def ref_sq(z, tau, g=None):
    p = np.exp(log_softmax64(z, tau))
    S = (p * p).sum(-1)
    if g is None:
        return S
    return S, 2.0 * g[..., None] * p * (p - S[..., None]) / tau


def ref_top_k(z, k, tau):
    z = np.asarray(z, np.float64)
    V = z.shape[-1]
    flat = z.reshape(-1, V)
    order = np.stack([np.lexsort((np.arange(V), -row))[:k] for row in flat]).reshape(z.shape[:-1] + (k,))
    vals = np.take_along_axis(z, order, -1)
    ids = np.where(np.isfinite(vals), order, -1)
    lp = np.where(ids >= 0, np.take_along_axis(log_softmax64(z, tau), np.maximum(ids, 0), -1), -np.inf)
    return lp, ids


def ref_on_support(z, tokens, support, tau):
    L = log_softmax64(z, tau)
    out = np.zeros(tokens.shape)
    for idx in np.ndindex(tokens.shape):
        keep = set(int(v) for v in support[idx] if v >= 0) | {int(tokens[idx])}
        row = L[idx]
        out[idx] = row[tokens[idx]] - np.log(np.exp(row[sorted(keep)]).sum())
    return out


def ref_support(z, tau, top_k, top_p):
    """The kept ids of each position as a set: top_k by (value desc, id asc), then top-p by mass strictly above."""
    L = log_softmax64(z, tau)
    out = {}
    for idx in np.ndindex(z.shape[:-1]):
        row = np.asarray(z[idx], np.float64)
        order = np.lexsort((np.arange(row.size), -row))
        cand = order[:top_k] if top_k else order
        p = np.exp(L[idx][cand])
        if top_k:
            p = p / p.sum()
        vals = row[cand]
        keep = [int(c) for c, v in zip(cand, vals) if p[vals > v].sum() < top_p or top_p >= 1.0]
        out[idx] = set(keep)
    return out


def f64(x):
    x = jnp.asarray(x)
    return np.asarray(x.astype(jnp.float32) if x.dtype == jnp.bfloat16 else x, np.float64)


def batch(seed, B=2, T=3, D=8, V=61, K=5, scale=3.0):
    rng = np.random.default_rng(seed)
    h = rng.normal(size=(B, T, D)).astype(np.float32)
    w = (rng.normal(size=(D, V)) * scale / np.sqrt(D)).astype(np.float32)
    ids = np.stack([rng.choice(V, size=K, replace=False) for _ in range(B * T)]).reshape(B, T, K)
    ids[0, 0, -1] = -1  # one empty slot
    tokens = rng.integers(0, V, size=(B, T))
    return h, w, ids, tokens, rng.normal(size=(B, T, K)), rng.normal(size=(B, T))


# ---------------------------------------------------------------- log-probs at ids
@pytest.mark.parametrize("tau,C", [(1.0, 1), (0.7, 16), (1.0, None)])
def test_log_probs_at_equal_float64_reference(tau, C):
    h, w, ids, _, g, _ = batch(0)
    z = f64(h) @ f64(w)
    r_lp, r_dz = ref_at(z, ids, tau, g)
    (lp, vjp) = jax.vjp(lambda h, w: rl.linear_log_probs_at(h, w, ids, tau, C), h, w)
    dh, dw = vjp(jnp.asarray(g, jnp.float32))
    assert lp.dtype == jnp.float32 and lp.shape == ids.shape
    tol = 16 * EPS32 * (1 + np.abs(z).max() / tau)
    np.testing.assert_array_equal(np.isneginf(lp), ids < 0)
    np.testing.assert_allclose(np.where(ids >= 0, lp, 0), np.where(ids >= 0, r_lp, 0), rtol=0, atol=tol)
    np.testing.assert_allclose(dh, np.einsum("btv,dv->btd", r_dz, f64(w)), rtol=0, atol=tol * 10)
    np.testing.assert_allclose(dw, np.einsum("btd,btv->dv", f64(h), r_dz), rtol=0, atol=tol * 10)
    # from the logits
    zf = z.astype(np.float32)
    (lp2, vjp2) = jax.vjp(lambda z: rl.log_probs_at(z, ids, tau), zf)
    r2 = ref_at(zf, ids, tau, g)
    np.testing.assert_allclose(np.where(ids >= 0, lp2, 0), np.where(ids >= 0, r2[0], 0), rtol=0, atol=tol)
    np.testing.assert_allclose(vjp2(jnp.asarray(g, jnp.float32))[0], r2[1], rtol=0, atol=tol)


def test_log_probs_at_equals_log_probs_from_logits_at_the_token():
    h, w, _, tokens, _, _ = batch(1)
    a = rl.linear_log_probs_at(h, w, tokens[..., None], 0.9, 7)[..., 0]
    b, _ = rl.linear_log_probs_and_entropy(h, w, tokens, 0.9, 7)
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)


def test_log_probs_at_bfloat16_and_neg_inf_logits():
    h, w, ids, _, g, _ = batch(2, V=40)
    hb, wb = jnp.asarray(h, jnp.bfloat16), jnp.asarray(w, jnp.bfloat16)
    lp = rl.linear_log_probs_at(hb, wb, ids, 1.0, 8)
    assert lp.dtype == jnp.float32
    r = ref_at(f64(hb) @ f64(wb), ids, 1.0)
    np.testing.assert_allclose(np.where(ids >= 0, lp, 0), np.where(ids >= 0, r, 0), rtol=0, atol=1e-5)
    z = (h @ w).astype(np.float32)
    z[..., ::4] = -np.inf  # a masked vocabulary; some ids fall on it
    lp, vjp = jax.vjp(lambda z: rl.log_probs_at(z, ids), z)
    dz = np.asarray(vjp(jnp.asarray(g, jnp.float32))[0])
    r_lp, r_dz = ref_at(z, ids, 1.0, g)
    assert np.isfinite(dz).all()
    np.testing.assert_array_equal(np.isneginf(lp), np.isneginf(r_lp))
    np.testing.assert_allclose(np.where(np.isfinite(r_lp), lp, 0), np.where(np.isfinite(r_lp), r_lp, 0), atol=1e-5)
    np.testing.assert_allclose(dz, r_dz, atol=1e-6)


def test_traced_ids_out_of_range_give_nan_not_an_error():
    z = np.arange(30, dtype=np.float32).reshape(1, 2, 15) / 7
    ids = jnp.asarray([[[0, 15, -1], [-2, 3, 14]]])
    lp = np.asarray(jax.jit(rl.log_probs_at)(z, ids))
    assert np.isnan(lp[0, 0, 1]) and np.isneginf(lp[0, 0, 2]) and np.isnan(lp[0, 1, 0])
    assert np.isfinite(lp[0, 0, 0]) and np.isfinite(lp[0, 1, 1:]).all()
    g = jax.grad(lambda z: jnp.sum(jnp.where(jnp.isfinite(rl.log_probs_at(z, ids)), rl.log_probs_at(z, ids), 0.0)))(z)
    assert np.isfinite(g).all()


# ---------------------------------------------------------------- sum p^2
@pytest.mark.parametrize("tau", [0.5])
def test_sum_pi_squared(tau):
    h, w, _, _, _, gq = batch(3, V=77)
    z = f64(h) @ f64(w)
    S, r_dz = ref_sq(z, tau, gq)
    (sq, vjp) = jax.vjp(lambda h, w: rl.linear_sum_pi_squared(h, w, tau, 10), h, w)
    dh, dw = vjp(jnp.asarray(gq, jnp.float32))
    np.testing.assert_allclose(sq, S, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(dh, np.einsum("btv,dv->btd", r_dz, f64(w)), rtol=0, atol=1e-5)
    np.testing.assert_allclose(dw, np.einsum("btd,btv->dv", f64(h), r_dz), rtol=0, atol=1e-5)
    zf = z.astype(np.float32)
    sq2, vjp2 = jax.vjp(lambda z: rl.sum_pi_squared_from_logits(z, tau), zf)
    S2, dz2 = ref_sq(zf, tau, gq)
    np.testing.assert_allclose(sq2, S2, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(vjp2(jnp.asarray(gq, jnp.float32))[0], dz2, atol=1e-6)


def test_sum_pi_squared_edges():
    V = 50
    z = np.zeros((1, 3, V), np.float32)
    z[0, 1, 7] = 1e4                     # one-hot: S = 1
    z[0, 2] = np.linspace(-1, 1, V) + 1e4  # large logits: no cancellation
    z[0, 2, ::5] = -np.inf
    S = np.asarray(rl.sum_pi_squared_from_logits(z))
    np.testing.assert_allclose(S[0, 0], 1 / V, rtol=1e-6)
    assert S[0, 1] == 1.0
    np.testing.assert_allclose(S[0, 2], ref_sq(z[0, 2], 1.0), rtol=1e-5)


# ---------------------------------------------------------------- top-k
@pytest.mark.parametrize("C", [1, 13, None])
def test_top_k_sorted_ties_lower_id_first(C):
    rng = np.random.default_rng(4)
    z = rng.normal(size=(2, 2, 30)).astype(np.float32)
    z[0, 0] = np.round(z[0, 0])           # many ties
    zm = z.copy()
    zm[1, 1, 5:] = -np.inf                 # fewer finite logits than k (from the logits only: -inf @ eye is NaN)
    for zz, (lp, ids) in [(zm, rl.top_k_log_probs(zm, 7, 0.8)),
                          (z, rl.linear_top_k_log_probs(z, np.eye(30, dtype=np.float32), 7, 0.8, C))]:
        r_lp, r_ids = ref_top_k(zz, 7, 0.8)
        np.testing.assert_array_equal(ids, r_ids)
        np.testing.assert_allclose(np.where(r_ids >= 0, lp, 0), np.where(r_ids >= 0, r_lp, 0), atol=2e-6)
        assert np.isneginf(np.asarray(lp)[r_ids < 0]).all()
    assert (np.asarray(rl.top_k_log_probs(zm, 7)[1])[1, 1, 5:] == -1).all()
    assert float(jnp.abs(jax.grad(lambda z: rl.top_k_log_probs(z, 3)[0].sum())(z)).max()) == 0.0


# ---------------------------------------------------------------- the sampler's support
def test_log_probs_on_support():
    h, w, ids, tokens, _, _ = batch(5, V=40, K=6)
    ids[0, 1, 2] = tokens[0, 1]           # the token listed once
    ids[1, 0, :2] = tokens[1, 0]          # the token listed twice: still counted once
    z = f64(h) @ f64(w)
    r = ref_on_support(z, tokens, ids, 0.8)
    for got in (rl.linear_log_probs_on_support(h, w, tokens, ids, 0.8, 9),
                rl.log_probs_on_support(z.astype(np.float32), tokens, ids, 0.8)):
        np.testing.assert_allclose(got, r, rtol=0, atol=2e-5)
        assert (np.asarray(got) <= 0).all()
    # the full vocabulary as the support gives the plain log-prob
    every = np.broadcast_to(np.arange(40), (2, 3, 40))
    np.testing.assert_allclose(rl.log_probs_on_support(z.astype(np.float32), tokens, every),
                               rl.log_probs_from_logits(z.astype(np.float32), tokens), atol=1e-6)
    # the gradient equals the one of the renormalised log-softmax, by finite differences in float64
    with jax.enable_x64(True):
        z64 = jnp.asarray(z)
        g = jax.grad(lambda z: rl.log_probs_on_support(z, tokens, ids, 0.8).sum())(z64)
        eps, fd = 1e-6, np.zeros_like(z)
        for idx in [(0, 1, int(tokens[0, 1])), (1, 0, int(ids[1, 0, 3])), (1, 2, 0), (0, 0, int(ids[0, 0, 0]))]:
            e = np.zeros_like(z); e[idx] = eps
            fd[idx] = (ref_on_support(z + e, tokens, ids, 0.8).sum() - ref_on_support(z - e, tokens, ids, 0.8).sum()) / (2 * eps)
            np.testing.assert_allclose(float(g[idx]), fd[idx], atol=1e-7)


@pytest.mark.parametrize("top_k,top_p", [(5, 1.0), (8, 0.7), (None, 0.5), (None, 0.9)])
def test_sampler_support_rule(top_k, top_p):
    rng = np.random.default_rng(6)
    z = rng.normal(size=(3, 4, 40)).astype(np.float32) * 2
    z[0, 0, :6] = 3.0                      # a tie group at the top
    z[0, 1, [3, 9]] = [2.5, 2.5]           # a tie that the nucleus boundary can fall on
    want = ref_support(z, 0.9, top_k, top_p)
    kw = dict(top_k=top_k, top_p=top_p, temperature=0.9, max_support=None if top_k else 40)
    for ids, complete in [rl.sampler_support(z, **kw),
                          rl.linear_sampler_support(z, np.eye(40, dtype=np.float32), chunk_size=7, **kw)]:
        assert np.asarray(complete).all()
        for idx, ks in want.items():
            got = set(int(v) for v in np.asarray(ids)[idx] if v >= 0)
            assert got == ks, (idx, got, ks)


def test_sampler_support_tie_at_the_crossing_is_kept_whole():
    z = np.log(np.array([[[0.4, 0.2, 0.2, 0.1, 0.1]]], np.float32))
    ids, _ = rl.sampler_support(z, top_p=0.41, max_support=5)
    assert set(np.asarray(ids)[0, 0].tolist()) - {-1} == {0, 1, 2}   # 0.4 < 0.41: both 0.2 tokens cross together
    ids, _ = rl.sampler_support(z, top_p=0.39, max_support=5)
    assert set(np.asarray(ids)[0, 0].tolist()) - {-1} == {0}         # the mass above the 0.2s is 0.4 >= 0.39


def test_sampler_support_incomplete_is_reported():
    z = np.zeros((1, 1, 20), np.float32)   # uniform: one tie group, so the nucleus is the whole vocabulary
    for K, whole in [(5, False), (19, False), (20, True)]:
        ids, complete = rl.sampler_support(z, top_p=0.9, max_support=K)
        assert bool(complete[0, 0]) == whole and (np.asarray(ids) >= 0).sum() == K
    z = np.log(np.arange(20, 0, -1, dtype=np.float32))[None, None]   # p proportional to 20, 19, ..., 1
    p = np.arange(20, 0, -1) / 210
    n = int(np.searchsorted(np.cumsum(p), 0.6) + 1)                  # the crossing token included
    for K in (n - 1, n):
        ids, complete = rl.sampler_support(z, top_p=0.6, max_support=K)
        assert not bool(complete[0, 0]) and (np.asarray(ids) >= 0).sum() == K
    ids, complete = rl.sampler_support(z, top_p=0.6, max_support=n + 1)
    assert bool(complete[0, 0]) and (np.asarray(ids) >= 0).sum() == n


def test_traced_temperature_and_top_p_do_not_recompile():
    z = np.random.default_rng(7).normal(size=(2, 3, 20)).astype(np.float32)
    f, f_traces = jit_counting_traces(lambda z, tau, p: rl.sampler_support(z, top_k=6, top_p=p, temperature=tau)[0])
    a = f(z, jnp.asarray(0.8), jnp.asarray(0.6))
    b = f(z, jnp.asarray(1.1), jnp.asarray(0.9))
    assert len(f_traces) == 1
    np.testing.assert_array_equal(a, rl.sampler_support(z, top_k=6, top_p=0.6, temperature=0.8)[0])
    np.testing.assert_array_equal(b, rl.sampler_support(z, top_k=6, top_p=0.9, temperature=1.1)[0])
    g, g_traces = jit_counting_traces(lambda z, tau: rl.sum_pi_squared_from_logits(z, tau))
    g(z, jnp.asarray(0.5)); g(z, jnp.asarray(2.0))
    assert len(g_traces) == 1


# ---------------------------------------------------------------- memory
def temp_bytes(f, *args):
    return jax.jit(f).lower(*args).compile().memory_analysis().temp_size_in_bytes


@pytest.mark.parametrize("V", [65536 + 333])
def test_fused_functions_never_materialise_BTV(V):
    B, T, D, C, K = 4, 128, 64, 1024, 32
    N = B * T
    h, w = jax.ShapeDtypeStruct((B, T, D), jnp.float32), jax.ShapeDtypeStruct((D, V), jnp.float32)
    ids = jax.ShapeDtypeStruct((B, T, K), jnp.int32)
    tok = jax.ShapeDtypeStruct((B, T), jnp.int32)
    bound = 4 * N * C * 4 + 4 * N * D * 4 + 8 * N * K * 4
    cases = {
        "log_probs_at": (lambda h, w, i: rl.linear_log_probs_at(h, w, i, 1.0, C).sum(), (h, w, ids)),
        "sum_pi_squared": (lambda h, w: rl.linear_sum_pi_squared(h, w, 1.0, C).sum(), (h, w)),
        "on_support": (lambda h, w, t, i: rl.linear_log_probs_on_support(h, w, t, i, 1.0, C).sum(), (h, w, tok, ids)),
    }
    for name, (f, args) in cases.items():
        for fn in (f, jax.grad(f, (0, 1))):
            t = temp_bytes(fn, *args)
            assert t <= bound, (name, V, t, bound)
    for f in (lambda h, w: rl.linear_top_k_log_probs(h, w, K, 1.0, C),
              lambda h, w: rl.linear_sampler_support(h, w, top_k=K, top_p=0.9, chunk_size=C)):
        t = temp_bytes(f, h, w)
        assert t <= 4 * N * (C + K) * 4 + 4 * N * D * 4, (V, t)


# ---------------------------------------------------------------- data parallel
def test_shard_map_gradient_with_a_replicated_weight():
    devices = jax.devices()
    assert len(devices) >= 4, f"expected 4 CPU devices from XLA_FLAGS, got {len(devices)}"
    mesh = Mesh(np.array(devices[:4]), ("dp",))
    h, w, ids, tokens, _, _ = batch(8, B=8, V=29, K=4)
    ids, tokens = ids.astype(np.int32), tokens.astype(np.int32)

    def local(h, w, i, t):
        a = rl.linear_log_probs_at(h, w, i, 0.8, 8)
        return (jnp.sum(jnp.where(i >= 0, a, 0.0)) + jnp.sum(rl.linear_sum_pi_squared(h, w, 0.8, 8))
                + jnp.sum(rl.linear_log_probs_on_support(h, w, t, i, 0.8, 8)))

    sharded = jax.jit(jax.shard_map(jax.grad(lambda *a: jax.lax.psum(local(*a), "dp"), (0, 1)), mesh=mesh,
                                    in_specs=(P("dp"), P(), P("dp"), P("dp")), out_specs=(P("dp"), P())))
    dh, dw = sharded(h, w, ids, tokens)
    rh, rw = jax.grad(local, (0, 1))(h, w, ids, tokens)
    np.testing.assert_allclose(dh, rh, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dw, rw, rtol=1e-5, atol=1e-5)   # the weight's gradient summed over the four shards


# ---------------------------------------------------------------- misuse
Z = np.zeros((2, 3, 5), np.float32)
H, W = np.zeros((2, 3, 4), np.float32), np.zeros((4, 5), np.float32)
IDS, TOK = np.zeros((2, 3, 2), np.int32), np.zeros((2, 3), np.int32)


@pytest.mark.parametrize("call,message", [
    (lambda: rl.log_probs_at(Z, IDS + 5), "log_probs_at: `ids` must lie in [0, 5) (the vocabulary axis of `logits`), or be -1"),
    (lambda: rl.log_probs_at(Z, IDS - 2), "`ids` must lie in [0, 5)"),
    (lambda: rl.log_probs_at(Z, IDS[..., 0]), "log_probs_at: `ids` must be [B, T, K] (rank 3)"),
    (lambda: rl.log_probs_at(Z, np.zeros((3, 2, 2), int)), "log_probs_at: `ids` must be [B, T, K] with [B, T] = [2, 3]"),
    (lambda: rl.log_probs_at(Z, np.zeros((2, 3, 0), int)), "and K >= 1"),
    (lambda: rl.log_probs_at(Z, IDS + 0.0), "log_probs_at: `ids` must be an integer array"),
    (lambda: rl.linear_log_probs_at(H, W, IDS + 7), "linear_log_probs_at: `ids` must lie in [0, 5) (the vocabulary axis of `weight`)"),
    (lambda: rl.linear_log_probs_at(H, W[:3], IDS), "linear_log_probs_at: `weight` must be [D, V] with D = 4"),
    (lambda: rl.linear_log_probs_at(H, W, IDS, 0.0), "linear_log_probs_at: `temperature` must be a finite number > 0"),
    (lambda: rl.linear_log_probs_at(H, W, IDS, 1.0, 0), "linear_log_probs_at: `chunk_size` must be >= 1"),
    (lambda: rl.top_k_log_probs(Z, 6), "top_k_log_probs: `k` must be <= V = 5"),
    (lambda: rl.top_k_log_probs(Z, 0), "top_k_log_probs: `k` must be >= 1"),
    (lambda: rl.linear_top_k_log_probs(H, W, 2.0), "linear_top_k_log_probs: `k` must be a Python int"),
    (lambda: rl.sum_pi_squared_from_logits(Z, -1.0), "sum_pi_squared_from_logits: `temperature` must be a finite number > 0"),
    (lambda: rl.linear_sum_pi_squared(H[0], W), "linear_sum_pi_squared: `hidden` must be [B, T, D] (rank 3)"),
    (lambda: rl.log_probs_on_support(Z, TOK + 5, IDS), "log_probs_on_support: `tokens` must lie in [0, 5)"),
    (lambda: rl.log_probs_on_support(Z, TOK, IDS + 9), "log_probs_on_support: `support` must lie in [0, 5)"),
    (lambda: rl.linear_log_probs_on_support(H, W, TOK[:1], IDS), "linear_log_probs_on_support: `tokens` must have the shape of `hidden[..., 0]`"),
    (lambda: rl.sampler_support(Z, top_p=1.0, max_support=3), "sampler_support: `top_k` is None and `top_p` is 1.0"),
    (lambda: rl.sampler_support(Z, top_p=0.9), "sampler_support: `max_support` is required without `top_k`"),
    (lambda: rl.sampler_support(Z, top_k=2, max_support=3), "sampler_support: `max_support` must be None when `top_k` is given"),
    (lambda: rl.sampler_support(Z, top_k=2, top_p=0.0), "sampler_support: `top_p` must be in (0, 1]"),
    (lambda: rl.sampler_support(Z, top_k=2, top_p=1.5), "`top_p` must be in (0, 1]"),
    (lambda: rl.linear_sampler_support(H, W, top_k=9), "linear_sampler_support: `top_k` must be <= V = 5"),
])
def test_misuse_raises_value_error(call, message):
    with pytest.raises(ValueError) as e:
        call()
    assert message in str(e.value), str(e.value)
