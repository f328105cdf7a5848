"""More formulations of `linear_log_probs_and_entropy`'s training step, for the benchmark only: measured, not assumed.

Each returns (log_probs [N], entropy [N]) of hidden [N, D] @ weight [D, V] with a custom VJP, built from the
library's own pieces (dew_rl._logits: the online log-sum-exp `_forward`, the chunk cotangent `_dlogits`, the
chunk plan), so that only the formulation named differs:

* `store`: the forward keeps every logits chunk as a residual, and the backward reads them instead of
  recomputing `hidden @ weight[:, chunk]`: one matmul fewer per chunk, and [N, V] of residual memory (the
  naive form's memory; what the recompute saves).
* `transposed`: the backward reads chunks of weight.T [V, D] (contiguous rows instead of a column slice)
  and writes the weight's gradient as rows of a [V, D] buffer, transposed once at the end.
* `scan`: the chunk loop as `lax.scan` over the chunk index (instead of `fori_loop`), forward and backward.
* `chunk_for(N)`: the chunk width chosen from the shape: columns such that one [N, C] float32 buffer is
  about 64 MiB, a multiple of 128 (at N = 4096: the library's 4096).
"""
from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

from dew_rl._logits import _dlogits, _first, _forward, _plan, _projector, _read, _update


def chunk_for(N: int, V: int, budget_bytes: int = 64 * 2**20) -> int:
    return int(min(V, max(128, (budget_bytes // (4 * N)) // 128 * 128)))


# ---- store: the logits chunks kept from the forward -----------------------------------------------------
def _forward_storing(hidden, weight, tokens, tau, C):
    V = weight.shape[1]
    get = _projector(hidden, weight, jnp.float32)
    (start, width), full = _plan(V, C)
    z0 = get(start, width)
    carry = _first(z0, start, tokens, tau)
    zs = jnp.zeros((len(full), hidden.shape[0], C), jnp.float32) if len(full) else None

    def body(k, c):
        carry, zs = c
        z = get(k * C, C)
        return _update(carry, z, k * C, tokens, tau), jax.lax.dynamic_update_index_in_dim(zs, z, k - full.start, 0)

    if len(full):
        carry, zs = jax.lax.fori_loop(full.start, full.stop, body, (carry, zs))
    m, s, t, zy = carry
    shift = jnp.where(jnp.isneginf(m), 0.0, m)
    log_s = jnp.log(s)
    entropy = log_s - t / s
    lp = (zy - shift) / tau - log_s
    return (lp, entropy), (z0, zs, shift, log_s)


@partial(jax.custom_vjp, nondiff_argnums=(4,))
def store(hidden, weight, tokens, tau, C):
    return _forward_storing(hidden, weight, tokens, tau, C)[0]


def _store_fwd(hidden, weight, tokens, tau, C):
    out, (z0, zs, shift, log_s) = _forward_storing(hidden, weight, tokens, tau, C)
    return out, (hidden, weight, tokens, tau, z0, zs, shift, log_s, out[1])


def _store_bwd(C, res, g):
    hidden, weight, tokens, tau, z0, zs, shift, log_s, entropy = res
    g_lp, g_H = (c.astype(jnp.float32) for c in g)
    (start, width), full = _plan(weight.shape[1], C)

    def grads(start, width, z):
        dz = _dlogits(z, start, tokens, tau, shift, log_s, entropy, g_lp, g_H)
        w = _read(weight, start, width)
        return jnp.matmul(dz, w.T), jnp.matmul(hidden.T, dz)

    dh, dw0 = grads(start, width, z0)
    dw = jax.lax.dynamic_update_slice_in_dim(jnp.zeros(weight.shape, weight.dtype), dw0, start, axis=1)

    def body(k, c):
        dh, dw = c
        dh_c, dw_c = grads(k * C, C, zs[k - full.start])
        return dh + dh_c, jax.lax.dynamic_update_slice_in_dim(dw, dw_c, k * C, axis=1)

    if len(full):
        dh, dw = jax.lax.fori_loop(full.start, full.stop, body, (dh, dw))
    return dh, dw, None, jnp.zeros_like(tau)


store.defvjp(_store_fwd, _store_bwd)


# ---- transposed: weight.T chunks read as rows, the weight's gradient written as rows -----------------------
def _fwd_plain(hidden, weight, tokens, tau, C):
    lp, entropy, shift, log_s = _forward(_projector(hidden, weight, jnp.float32), weight.shape[1], C, tokens, tau)
    return lp, entropy, shift, log_s


@partial(jax.custom_vjp, nondiff_argnums=(4,))
def transposed(hidden, weight, tokens, tau, C):
    return _fwd_plain(hidden, weight, tokens, tau, C)[:2]


def _transposed_fwd(hidden, weight, tokens, tau, C):
    lp, entropy, shift, log_s = _fwd_plain(hidden, weight, tokens, tau, C)
    return (lp, entropy), (hidden, weight, tokens, tau, shift, log_s, entropy)


def _transposed_bwd(C, res, g):
    hidden, weight, tokens, tau, shift, log_s, entropy = res
    g_lp, g_H = (c.astype(jnp.float32) for c in g)
    wt = weight.T   # [V, D], one transpose
    (start, width), full = _plan(weight.shape[1], C)

    def grads(start, width):
        w_rows = jax.lax.dynamic_slice_in_dim(wt, start, width, axis=0)          # [width, D]
        z = jnp.matmul(hidden, w_rows.T)
        dz = _dlogits(z, start, tokens, tau, shift, log_s, entropy, g_lp, g_H)
        return jnp.matmul(dz, w_rows), jnp.matmul(dz.T, hidden)                # [N, D], [width, D]

    dh, dwt0 = grads(start, width)
    dwt = jax.lax.dynamic_update_slice_in_dim(jnp.zeros(wt.shape, wt.dtype), dwt0, start, axis=0)

    def body(k, c):
        dh, dwt = c
        dh_c, dwt_c = grads(k * C, C)
        return dh + dh_c, jax.lax.dynamic_update_slice_in_dim(dwt, dwt_c, k * C, axis=0)

    if len(full):
        dh, dwt = jax.lax.fori_loop(full.start, full.stop, body, (dh, dwt))
    return dh, dwt.T, None, jnp.zeros_like(tau)


transposed.defvjp(_transposed_fwd, _transposed_bwd)


# ---- scan: the chunk loop as lax.scan ---------------------------------------------------------------------
def _fwd_scan(hidden, weight, tokens, tau, C):
    V = weight.shape[1]
    get = _projector(hidden, weight, jnp.float32)
    (start, width), full = _plan(V, C)
    carry = _first(get(start, width), start, tokens, tau)
    if len(full):
        carry, _ = jax.lax.scan(lambda c, k: (_update(c, get(k * C, C), k * C, tokens, tau), None), carry,
                                jnp.arange(full.start, full.stop))
    m, s, t, zy = carry
    shift = jnp.where(jnp.isneginf(m), 0.0, m)
    log_s = jnp.log(s)
    entropy = log_s - t / s
    return (zy - shift) / tau - log_s, entropy, shift, log_s


@partial(jax.custom_vjp, nondiff_argnums=(4,))
def scan(hidden, weight, tokens, tau, C):
    return _fwd_scan(hidden, weight, tokens, tau, C)[:2]


def _scan_fwd(hidden, weight, tokens, tau, C):
    lp, entropy, shift, log_s = _fwd_scan(hidden, weight, tokens, tau, C)
    return (lp, entropy), (hidden, weight, tokens, tau, shift, log_s, entropy)


def _scan_bwd(C, res, g):
    hidden, weight, tokens, tau, shift, log_s, entropy = res
    g_lp, g_H = (c.astype(jnp.float32) for c in g)
    get = _projector(hidden, weight, jnp.float32)
    (start, width), full = _plan(weight.shape[1], C)

    def grads(start, width):
        z = get(start, width)
        dz = _dlogits(z, start, tokens, tau, shift, log_s, entropy, g_lp, g_H)
        return jnp.matmul(dz, _read(weight, start, width).T), jnp.matmul(hidden.T, dz)

    dh, dw0 = grads(start, width)
    dw = jax.lax.dynamic_update_slice_in_dim(jnp.zeros(weight.shape, weight.dtype), dw0, start, axis=1)
    if len(full):
        def body(c, k):
            dh, dw = c
            dh_c, dw_c = grads(k * C, C)
            return (dh + dh_c, jax.lax.dynamic_update_slice_in_dim(dw, dw_c, k * C, axis=1)), None
        (dh, dw), _ = jax.lax.scan(body, (dh, dw), jnp.arange(full.start, full.stop))
    return dh, dw, None, jnp.zeros_like(tau)


scan.defvjp(_scan_fwd, _scan_bwd)
