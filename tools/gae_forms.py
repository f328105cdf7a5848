"""Two more formulations of `dew_rl.gae`'s outputs, for `make bench` only: which form is fastest is measured, not assumed.

Both compute the masked-step recursion of nbs/02a_gae on the same cleaned inputs as the library, then whiten
with `dew_rl.masked_whiten` and form the returns as `gae` does; the bench side checks each against `dew_rl.gae`
before timing it.

* `associative`: every position is an affine map of the carry (V_next, Â_next) -> (V, Â); a valid step is
  (d, β, α, b_V, b_A) = (0, γ, γλ, V_t, r_t - V_t), a masked one the identity (1, 0, 1, 0, 0), and the maps
  compose in the lower-triangular form (d, β, α) of the two-level recursion's coefficients.
  `jax.lax.associative_scan` composes them right to left: log2(T) levels of elementwise work instead of T steps.
* `blocked`: the same maps, composed inside blocks of C positions by the associative scan (log2(C) levels), the
  block maps joined by a sequential scan over the T / C blocks, and one elementwise pass applying each
  position's in-block map to the carry that enters its block.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

import dew_rl as rl

IDENTITY = (1.0, 0.0, 1.0, 0.0, 0.0)


def _compose(right, left):
    "The map `left ∘ right` (right applied first): positions to the right act on the carry first."
    d1, b1, a1, v1, A1 = right
    d2, b2, a2, v2, A2 = left
    return d2 * d1, b2 * d1 + a2 * b1, a2 * a1, d2 * v1 + v2, b2 * v1 + a2 * A1 + A2


def _maps(r, v, m, gamma, lam):
    k = m != 0
    rk, vk = jnp.where(k, r, 0), jnp.where(k, v, 0)
    g = jnp.asarray(gamma, jnp.float32)
    gl = g * jnp.asarray(lam, jnp.float32)
    return k, (jnp.where(k, 0.0, 1.0), jnp.where(k, g, 0.0), jnp.where(k, gl, 1.0), vk, rk - vk)


def _finish(adv, k, v):
    return rl.masked_whiten(adv, k), adv + v


def associative(r, v, m, gamma, lam):
    k, e = _maps(r, v, m, gamma, lam)
    return _finish(jax.lax.associative_scan(_compose, e, reverse=True, axis=1)[4], k, v)


def blocked(r, v, m, gamma, lam, C=8):
    k, e = _maps(r, v, m, gamma, lam)
    B, T = r.shape
    n = -(-T // C)
    if n * C - T:
        e = tuple(jnp.pad(a, ((0, 0), (0, n * C - T)), constant_values=i) for a, i in zip(e, IDENTITY))
    e = jax.lax.associative_scan(_compose, tuple(a.reshape(B, n, C) for a in e), reverse=True, axis=2)
    z = jnp.zeros((B,), jnp.float32)

    def step(carry, blk):  # one block of every row, right to left: its map applied to the carry entering it
        v_in, a_in = carry
        d, b, a, vv, AA = blk
        return (d * v_in + vv, b * v_in + a * a_in + AA), (v_in, a_in)

    _, (v_in, a_in) = jax.lax.scan(step, (z, z), tuple(x[..., 0].T for x in e), reverse=True)
    _, b, a, _, AA = e
    adv = (b * v_in.T[..., None] + a * a_in.T[..., None] + AA).reshape(B, n * C)[:, :T]
    return _finish(adv, k, v)
