"""Log-probs and entropy from logits, and fused with the unembedding (`dew_rl._logits`).

Every expectation is an independent float64 NumPy computation (log_softmax of the whole matrix and
the closed-form gradients onehot - p and -p (log p + H), chained through hidden @ weight) or the
frozen output of verl 0.9.1 / TRL 1.16.0 (tests/fixtures/logits_frameworks.npz, written by
tools/make_logits_fixtures.py). The memory claims are asserted on XLA's compiled temporary bytes,
which are deterministic; nothing here is timed.
"""
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, PartitionSpec as P

from dew_rl._logits import (VOCAB_CHUNK, _entropy_from_logits, _log_probs_from_logits, entropy_from_logits,
                           linear_log_probs_and_entropy, log_probs_from_logits)

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "logits_frameworks.npz"
EPS32 = float(np.finfo(np.float32).eps)


@np.errstate(invalid="ignore", divide="ignore")
def reference(z, tokens, tau, g_lp, g_H):
    """float64 (log p[y], H, d(sum g_lp lp + g_H H)/dz) from the whole [..., V] matrix."""
    u = np.asarray(z, np.float64) / tau
    m = u.max(-1, keepdims=True)
    logp = u - (m + np.log(np.exp(u - m).sum(-1, keepdims=True)))
    p = np.exp(logp)
    H = -np.where(p > 0, p * logp, 0.0).sum(-1)
    lp = np.take_along_axis(logp, tokens[..., None], -1)[..., 0]
    onehot = np.arange(u.shape[-1]) == tokens[..., None]
    dz = (g_lp[..., None] * (onehot - p) - g_H[..., None] * np.where(p > 0, p * (logp + H[..., None]), 0.0)) / tau
    return lp, H, dz


def f64(x):
    x = jnp.asarray(x)
    return np.asarray(x.astype(jnp.float32) if x.dtype == jnp.bfloat16 else x, np.float64)


def batch(seed, B=2, T=3, D=8, V=131, scale=3.0, offset=0.0):
    rng = np.random.default_rng(seed)
    h = rng.normal(size=(B, T, D))
    w = rng.normal(size=(D, V)) * scale / np.sqrt(D)
    if offset:
        h = np.concatenate([h, np.ones((B, T, 1))], -1)
        w = np.concatenate([w, np.full((1, V), offset)], 0)
    tokens = rng.integers(0, V, size=(B, T))
    tokens[0, 0] = (h[0, 0] @ w).argmax()
    return h.astype(np.float32), w.astype(np.float32), tokens, rng.normal(size=(B, T)), rng.normal(size=(B, T))


def linear_grads(h, w, tokens, tau, C, g_lp, g_H):
    def loss(h, w):
        lp, H = linear_log_probs_and_entropy(h, w, tokens, tau, C)
        return jnp.sum(lp * g_lp.astype(np.float32)) + jnp.sum(H * g_H.astype(np.float32))
    return jax.jit(jax.grad(loss, (0, 1)))(h, w)


# ---------------------------------------------------------------- values and gradients
@pytest.mark.parametrize("tau", [1.0, 0.6, 1.7])
@pytest.mark.parametrize("C", [1, 16, 131, 1000, None])
def test_linear_equals_float64_reference(tau, C):
    h, w, tok, g_lp, g_H = batch(0)
    lp, H = jax.jit(lambda h, w: linear_log_probs_and_entropy(h, w, tok, tau, C))(h, w)
    dh, dw = linear_grads(h, w, tok, tau, C, g_lp, g_H)
    z = f64(h) @ f64(w)
    r_lp, r_H, r_dz = reference(z, tok, tau, g_lp, g_H)
    assert lp.dtype == H.dtype == jnp.float32 and dh.dtype == dw.dtype == jnp.float32
    tol = 16 * EPS32 * (1 + np.abs(z).max() / tau)
    np.testing.assert_allclose(lp, r_lp, rtol=0, atol=tol)
    np.testing.assert_allclose(H, r_H, rtol=0, atol=tol)
    np.testing.assert_allclose(dh, r_dz @ f64(w).T, rtol=0, atol=tol * (1 + np.abs(r_dz @ f64(w).T).max()))
    np.testing.assert_allclose(dw, np.einsum("btd,btv->dv", f64(h), r_dz), rtol=0,
                               atol=tol * (1 + np.abs(np.einsum("btd,btv->dv", f64(h), r_dz)).max()))


@pytest.mark.parametrize("offset", [1e4, -1e4])
def test_large_logits(offset):
    h, w, tok, g_lp, g_H = batch(1, offset=offset)
    z = (f64(h) @ f64(w)).astype(np.float32)  # logits of magnitude 1e4, given as float32
    r_lp, r_H, r_dz = reference(z, tok, 0.8, g_lp, g_H)
    lp = _log_probs_from_logits(z, tok, 0.8, 32)
    H = _entropy_from_logits(z, 0.8, 32)
    # the shift is exact, so the error is float32 round-off of log V-sized numbers, not of 1e4
    np.testing.assert_allclose(lp, r_lp, rtol=0, atol=1e-5)
    np.testing.assert_allclose(H, r_H, rtol=0, atol=1e-5)
    dz = jax.grad(lambda z: jnp.sum(_log_probs_from_logits(z, tok, 0.8, 32) * g_lp.astype(np.float32))
                  + jnp.sum(_entropy_from_logits(z, 0.8, 32) * g_H.astype(np.float32)))(z)
    np.testing.assert_allclose(dz, r_dz, rtol=0, atol=1e-5)
    # fused: hidden @ weight itself rounds at ulp(1e4); the tolerance is that round-off
    lp2, H2 = linear_log_probs_and_entropy(h, w, tok, 0.8, 32)
    r2 = reference(f64(h) @ f64(w), tok, 0.8, g_lp, g_H)
    tol = 8 * EPS32 * (np.abs(f64(h)) @ np.abs(f64(w))).max() / 0.8
    np.testing.assert_allclose(lp2, r2[0], rtol=0, atol=tol)
    np.testing.assert_allclose(H2, r2[1], rtol=0, atol=tol)
    assert float(lp[0, 0]) <= 0.0 and float(lp2[0, 0]) <= 0.0  # the argmax token


def test_argmax_token_is_minus_log_s_exactly():
    z = np.array([[[5.0, 1.0, 5.0 - 1e-3, -2.0, 0.5]]], np.float32)
    lp = float(log_probs_from_logits(z, np.array([[0]]))[0, 0])
    u = z[0, 0].astype(np.float64)
    assert lp <= 0.0
    assert abs(lp - (-np.log(np.exp(u - u.max()).sum()))) < 1e-6


def test_t_equals_one_and_ragged_vocab():
    h, w, tok, g_lp, g_H = batch(2, B=3, T=1, V=77)
    lp, H = linear_log_probs_and_entropy(h, w, tok, 1.0, 10)  # 7 full chunks and a tail of 7
    r = reference(f64(h) @ f64(w), tok, 1.0, g_lp, g_H)
    np.testing.assert_allclose(lp, r[0], atol=1e-5)
    np.testing.assert_allclose(H, r[1], atol=1e-5)
    assert lp.shape == (3, 1)


def test_bfloat16_inputs_accumulate_in_float32():
    h, w, tok, g_lp, g_H = batch(3, D=32, V=300)
    hb, wb = jnp.asarray(h, jnp.bfloat16), jnp.asarray(w, jnp.bfloat16)
    lp, H = linear_log_probs_and_entropy(hb, wb, tok, 1.0, 64)
    assert lp.dtype == H.dtype == jnp.float32
    z = f64(hb) @ f64(wb)  # the exact logits of the bf16 inputs
    r = reference(z, tok, 1.0, g_lp, g_H)
    np.testing.assert_allclose(lp, r[0], rtol=0, atol=1e-5)  # float32 round-off, not bfloat16's 2^-8
    np.testing.assert_allclose(H, r[1], rtol=0, atol=1e-5)
    dh, dw = linear_grads(hb, wb, tok, 1.0, 64, g_lp, g_H)
    assert dh.dtype == dw.dtype == jnp.bfloat16
    r_dh = r[2] @ f64(wb).T
    np.testing.assert_allclose(f64(dh), r_dh, rtol=0, atol=2 ** -7 * np.abs(r_dh).max())
    # from the logits: bf16 logits give float32 log-probs at float32 round-off of the same values
    zb = jnp.asarray(z, jnp.bfloat16)
    r_b = reference(f64(zb), tok, 1.0, g_lp, g_H)
    np.testing.assert_allclose(_log_probs_from_logits(zb, tok, 1.0, 64), r_b[0], rtol=0, atol=1e-5)
    np.testing.assert_allclose(_entropy_from_logits(zb, 1.0, 64), r_b[1], rtol=0, atol=1e-5)


def test_masked_vocabulary_neg_inf():
    rng = np.random.default_rng(4)
    z = rng.normal(size=(2, 3, 40)).astype(np.float32)
    z[..., ::3] = -np.inf
    tok = np.full((2, 3), 1)
    g_lp, g_H = rng.normal(size=(2, 3)), rng.normal(size=(2, 3))
    r = reference(z, tok, 1.0, g_lp, g_H)
    lp, H = _log_probs_from_logits(z, tok, 1.0, 8), _entropy_from_logits(z, 1.0, 8)
    np.testing.assert_allclose(lp, r[0], atol=1e-6)
    np.testing.assert_allclose(H, r[1], atol=1e-6)
    dz = jax.grad(lambda z: jnp.sum(_log_probs_from_logits(z, tok, 1.0, 8) * g_lp.astype(np.float32))
                  + jnp.sum(_entropy_from_logits(z, 1.0, 8) * g_H.astype(np.float32)))(z)
    assert np.isfinite(dz).all()
    np.testing.assert_allclose(dz, r[2], atol=1e-6)


def test_default_chunk_and_float64(x64):
    h, w, tok, g_lp, g_H = batch(5, V=VOCAB_CHUNK + 3)  # the default plan: a tail of 3, then one full chunk
    h, w = h.astype(np.float64), w.astype(np.float64)
    lp, H = linear_log_probs_and_entropy(h, w, tok)
    assert lp.dtype == jnp.float64
    r = reference(h @ w, tok, 1.0, g_lp, g_H)
    np.testing.assert_allclose(lp, r[0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(H, r[1], rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- frameworks, run as oracles
@pytest.fixture(scope="module")
def fx():
    with np.load(FIXTURE) as f:
        return {k: f[k] for k in f.files}


@pytest.mark.parametrize("case", ["normal", "large", "neginf"])
def test_log_probs_match_verl_and_trl_float32(fx, case):
    z = fx[f"in/{case}"]
    tok = fx["in/tokens_neginf" if case == "neginf" else "in/tokens"]
    g = fx["in/g_lp"]
    ours = np.asarray(log_probs_from_logits(z, tok))
    grad = np.asarray(jax.grad(lambda z: jnp.sum(log_probs_from_logits(z, tok) * g))(z))
    ref = reference(z, tok, 1.0, g.astype(np.float64), np.zeros_like(g, np.float64))
    np.testing.assert_allclose(ours, ref[0], atol=1e-5)
    np.testing.assert_allclose(grad, ref[2], atol=1e-6)
    for name in ("verl/logprobs_from_logits", "verl/logprobs_from_logits_naive", "trl/selective_log_softmax"):
        # at 1e4 torch's float32 logsumexp rounds at ulp(1e4): their values and p carry ~1e-3 of it, ours do not
        tol, gtol = (2e-3, 1e-3) if case == "large" else (1e-5, 1e-6)
        np.testing.assert_allclose(ours, fx[f"{name}/{case}"], atol=tol, err_msg=name)
        np.testing.assert_allclose(grad, fx[f"{name}/{case}/grad"], atol=gtol, err_msg=name)


@pytest.mark.parametrize("case", ["normal", "large"])
def test_entropy_matches_trl_and_verl_chunked(fx, case):
    z = fx[f"in/{case}"]
    g = fx["in/g_H"]
    ours = np.asarray(entropy_from_logits(z))
    grad = np.asarray(jax.grad(lambda z: jnp.sum(entropy_from_logits(z) * g))(z))
    np.testing.assert_allclose(ours, fx[f"trl/entropy_from_logits/{case}"], atol=1e-5)
    np.testing.assert_allclose(grad, fx[f"trl/entropy_from_logits/{case}/grad"], atol=1e-5)
    if case == "normal":  # at 1e4, verl's lse - E[z] cancels (the chapter tabulates it)
        np.testing.assert_allclose(ours, fx["verl/entropy_from_logits_with_chunking/normal"], atol=1e-5)


def test_framework_disagreements_are_as_documented(fx):
    # a masked vocabulary: verl's and TRL's entropies are NaN, ours is finite
    assert np.isnan(fx["verl/entropy_from_logits/neginf"]).all() and np.isnan(fx["trl/entropy_from_logits/neginf"]).all()
    assert np.isfinite(np.asarray(entropy_from_logits(fx["in/neginf"]))).all()
    # bf16 logits: both frameworks return bf16 log-probs; ours are float32
    assert str(fx["verl/logprobs_from_logits/bf16/dtype"]) == str(fx["trl/selective_log_softmax/bf16/dtype"]) == "bfloat16"
    zb = jnp.asarray(fx["in/bf16"], jnp.bfloat16)
    ours = log_probs_from_logits(zb, fx["in/tokens"])
    assert ours.dtype == jnp.float32
    ref = reference(fx["in/bf16"], fx["in/tokens"], 1.0, np.zeros((2, 5)), np.zeros((2, 5)))[0]
    assert np.abs(np.asarray(ours) - ref).max() < 1e-5 < np.abs(fx["verl/logprobs_from_logits/bf16"] - ref).max()


def test_fused_matches_verl_fused_linear_float32(fx):
    h, w, tok = fx["in/hidden"], fx["in/weight"], fx["in/tokens"]
    g_lp, g_H = fx["in/g_lp"], fx["in/g_H"]
    lp, H = linear_log_probs_and_entropy(h, w, tok, 1.0, 64)
    dh, dw = linear_grads(h, w, tok, 1.0, 64, g_lp.astype(np.float64), g_H.astype(np.float64))
    k = "verl/FusedLinearForPPO/float32"
    np.testing.assert_allclose(lp, fx[f"{k}/log_probs"], atol=1e-5)
    np.testing.assert_allclose(H, fx[f"{k}/entropy"], atol=1e-5)
    np.testing.assert_allclose(dh, fx[f"{k}/grad_hidden"], atol=1e-5)
    np.testing.assert_allclose(dw, fx[f"{k}/grad_weight"], rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- memory: compiled temporary bytes
def temp_bytes(f, *args):
    return jax.jit(f).lower(*args).compile().memory_analysis().temp_size_in_bytes


@pytest.mark.parametrize("V", [16384, 65536, 65536 + 333])
def test_linear_never_materialises_BTV(V):
    B, T, D, C = 4, 128, 64, 1024
    N = B * T
    h, w = jax.ShapeDtypeStruct((B, T, D), jnp.float32), jax.ShapeDtypeStruct((D, V), jnp.float32)
    tok = jax.ShapeDtypeStruct((B, T), jnp.int32)
    f = lambda h, w, t: linear_log_probs_and_entropy(h, w, t, 1.0, C)
    g = jax.grad(lambda h, w, t: (lambda o: jnp.sum(o[0]) + jnp.sum(o[1]))(f(h, w, t)), (0, 1))
    bound = 4 * N * C * 4 + 4 * N * D * 4  # a few [N, C] float32 chunk buffers and [N, D] terms
    for fn in (f, g):
        t = temp_bytes(fn, h, w, tok)
        assert t <= bound, (V, t, bound)
        assert t < N * V * 4 * (1 / 2 if V < 65536 else 1 / 16)  # far below one [N, V] float32 array


@pytest.mark.parametrize("fn", ["log_probs", "entropy"])
def test_logits_functions_float32_temp_is_chunk_sized(fn):
    B, T, V, C = 4, 128, 32768 + 77, 512
    N = B * T
    z, tok = jax.ShapeDtypeStruct((B, T, V), jnp.float32), jax.ShapeDtypeStruct((B, T), jnp.int32)
    f = ((lambda z, t: _log_probs_from_logits(z, t, 1.0, C)) if fn == "log_probs"
         else (lambda z, t: _entropy_from_logits(z, 1.0, C)))
    g = jax.grad(lambda z, t: jnp.sum(f(z, t)))
    for h in (f, g):  # the gradient [N, V] is an output, not a temporary
        assert temp_bytes(h, z, tok) <= 4 * N * C * 4, (fn, temp_bytes(h, z, tok))


# ---------------------------------------------------------------- transformations
def test_jit_grad_vmap():
    h, w, tok, g_lp, g_H = batch(6, B=4, V=50)
    base = linear_log_probs_and_entropy(h, w, tok, 0.9, 7)
    vm = jax.vmap(lambda h, t: linear_log_probs_and_entropy(h[None], w, t[None], 0.9, 7))(h, tok)
    np.testing.assert_allclose(np.asarray(vm[0])[:, 0], base[0], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(vm[1])[:, 0], base[1], rtol=1e-6)
    g = jax.jit(jax.grad(lambda w: jnp.sum(linear_log_probs_and_entropy(h, w, tok, 0.9, 7)[1])))(w)
    r = reference(f64(h) @ f64(w), tok, 0.9, np.zeros((4, 3)), np.ones((4, 3)))
    np.testing.assert_allclose(g, np.einsum("btd,btv->dv", f64(h), r[2]), atol=1e-5)


@pytest.fixture(scope="module")
def mesh():
    devices = jax.devices()
    assert len(devices) >= 4, f"expected 4 CPU devices from XLA_FLAGS, got {len(devices)}"
    return Mesh(np.array(devices[:4]), ("dp",))


def test_shard_map_dp_replicated_weight(mesh):
    h, w, tok, g_lp, g_H = batch(7, B=8, V=37)
    tok = tok.astype(np.int32)

    def loss(h, w, t):
        lp, H = linear_log_probs_and_entropy(h, w, t, 0.8, 8)
        return jax.lax.psum(jnp.sum(lp) + 0.1 * jnp.sum(H), "dp")

    sharded = jax.jit(jax.shard_map(jax.grad(loss, (0, 1)), mesh=mesh, in_specs=(P("dp"), P(), P("dp")),
                                    out_specs=(P("dp"), P())))
    dh, dw = sharded(h, w, tok)
    r = reference(f64(h) @ f64(w), tok, 0.8, np.ones((8, 3)), 0.1 * np.ones((8, 3)))
    np.testing.assert_allclose(dh, r[2] @ f64(w).T, atol=1e-5)
    np.testing.assert_allclose(dw, np.einsum("btd,btv->dv", f64(h), r[2]), atol=1e-5)  # summed over the 4 shards
    values = jax.jit(jax.shard_map(lambda z, t: (log_probs_from_logits(z, t), entropy_from_logits(z)), mesh=mesh,
                                   in_specs=(P("dp"), P("dp")), out_specs=(P("dp"), P("dp"))))
    z = (h @ w).astype(np.float32)
    lp, H = values(z, tok)
    r1 = reference(z, tok, 1.0, np.zeros((8, 3)), np.zeros((8, 3)))
    np.testing.assert_allclose(lp, r1[0], atol=1e-5)
    np.testing.assert_allclose(H, r1[1], atol=1e-5)


# ---------------------------------------------------------------- misuse
Z, TOK = np.zeros((2, 3, 5), np.float32), np.zeros((2, 3), np.int32)
H_, W_ = np.zeros((2, 3, 4), np.float32), np.zeros((4, 5), np.float32)


@pytest.mark.parametrize("call,message", [
    (lambda: log_probs_from_logits(Z, np.full((2, 3), 5)), "log_probs_from_logits: `tokens` must lie in [0, 5)"),
    (lambda: log_probs_from_logits(Z, [[0, 0, -1], [0, 0, 0]]), "log_probs_from_logits: `tokens` must lie in [0, 5)"),
    (lambda: linear_log_probs_and_entropy(H_, W_, np.full((2, 3), 9)), "linear_log_probs_and_entropy: `tokens` must lie in [0, 5)"),
    (lambda: log_probs_from_logits(Z, TOK.astype(np.float32)), "log_probs_from_logits: `tokens` must be an integer array"),
    (lambda: linear_log_probs_and_entropy(H_, W_, TOK.astype(bool) + 0.5), "linear_log_probs_and_entropy: `tokens` must be an integer array"),
    (lambda: log_probs_from_logits(Z, np.zeros((3, 2), int)), "log_probs_from_logits: `tokens` must have the shape of `logits[..., 0]` [2, 3]"),
    (lambda: linear_log_probs_and_entropy(H_, W_, np.zeros((2, 4), int)), "linear_log_probs_and_entropy: `tokens` must have the shape of `hidden[..., 0]` [2, 3]"),
    (lambda: linear_log_probs_and_entropy(H_, np.zeros((3, 5), np.float32), TOK), "linear_log_probs_and_entropy: `weight` must be [D, V] with D = 4"),
    (lambda: linear_log_probs_and_entropy(H_[0], W_, TOK), "linear_log_probs_and_entropy: `hidden` must be [B, T, D] (rank 3)"),
    (lambda: log_probs_from_logits(Z, TOK, 0.0), "log_probs_from_logits: `temperature` must be a finite number > 0; got 0.0"),
    (lambda: entropy_from_logits(Z, -0.5), "entropy_from_logits: `temperature` must be a finite number > 0; got -0.5"),
    (lambda: linear_log_probs_and_entropy(H_, W_, TOK, 0), "linear_log_probs_and_entropy: `temperature` must be a finite number > 0"),
    (lambda: entropy_from_logits(Z, jnp.ones(2)), "entropy_from_logits: `temperature` must be a finite number > 0: a real scalar"),
    (lambda: linear_log_probs_and_entropy(H_, W_, TOK, 1.0, 0), "linear_log_probs_and_entropy: `chunk_size` must be >= 1; got 0"),
    (lambda: linear_log_probs_and_entropy(H_, W_, TOK, 1.0, 64.0), "linear_log_probs_and_entropy: `chunk_size` must be a Python int"),
    (lambda: linear_log_probs_and_entropy(H_, W_, TOK, 1.0, jnp.asarray(64)), "`chunk_size` must be a Python int"),
    (lambda: entropy_from_logits(np.zeros((2, 3, 0), np.float32)), "entropy_from_logits: `logits` must have a non-empty vocabulary axis"),
    (lambda: log_probs_from_logits(Z.astype(int), TOK), "log_probs_from_logits: `logits` must be a floating array"),
])
def test_misuse_raises_value_error(call, message):
    with pytest.raises(ValueError) as e:
        call()
    assert message in str(e.value), str(e.value)


def test_misuse_raises_under_jit_at_trace_time():
    with pytest.raises(ValueError, match="`tokens` must lie in"):
        jax.jit(lambda z: log_probs_from_logits(z, np.full((2, 3), 7)))(Z)
    with pytest.raises(ValueError, match="`chunk_size` must be >= 1"):
        jax.jit(lambda h: linear_log_probs_and_entropy(h, W_, TOK, 1.0, -2))(H_)


def test_traced_out_of_range_token_is_nan_not_an_error():
    tok = jnp.asarray([[0, 1, -100], [4, 5, 2]])
    z = np.arange(30, dtype=np.float32).reshape(2, 3, 5)
    lp = np.asarray(jax.jit(log_probs_from_logits)(z, tok))
    assert np.isnan(lp[0, 2]) and np.isnan(lp[1, 1])
    assert np.isfinite(np.delete(lp.ravel(), [2, 4])).all()
    lp2, _ = jax.jit(lambda h, w, t: linear_log_probs_and_entropy(h, w, t))(H_ + 1.0, W_, tok)
    assert np.isnan(np.asarray(lp2)[0, 2])
