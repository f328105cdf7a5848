"""The one-pass masked sum and count that `make bench` measures against the library's plain form (bench only).

`masked_row_sums(keep, *xs)` takes each row's kept count and the masked row sums of every `x` from one
variadic reduction over 16 slices of the row: XLA:CPU's own reduction emitter fuses the `where` and the
mask comparison into the loop that sums, where the library kernel that a plain `jnp.where(keep, x, 0).sum()`
is handed to (`__ynn_fusion`) fuses neither. It was the library's form for one commit (13d52b5) and was
reverted: on a plain array it is faster, but a value computed in front of it (a loss's exp and
log-ratios) is fused into the same scalar loop, and that runs many times slower (data/bench_one_pass.json,
nbs/07_benchmarks). Kept here so that the bench can show both.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from dew_rl._ops import FLOAT32_EXACT, count_kept

ONE_PASS_SLICES = 16  # masked_row_sums: a row is summed as 16 slices side by side, then the slices' partial sums


def _slices(x, n):
    "[..., T] -> [..., n, ceil(T / n)], padded with zeros at the end."
    T = x.shape[-1]
    pad = -T % n
    if pad:
        x = jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, pad)])
    return x.reshape(*x.shape[:-1], n, (T + pad) // n)


@jax.custom_jvp
def _row_sums_one_pass(*xs):
    "The row sums of every x (same shape, floating) from one variadic reduction over 16 slices of each row."
    parts = jax.lax.reduce(tuple(_slices(x, ONE_PASS_SLICES) for x in xs), tuple(jnp.zeros((), x.dtype) for x in xs),
                           lambda a, b: tuple(p + q for p, q in zip(a, b)), (xs[0].ndim - 1,))
    return tuple(p.sum(axis=-1) for p in parts)


@_row_sums_one_pass.defjvp
def _row_sums_one_pass_jvp(primals, tangents):
    return _row_sums_one_pass(*primals), tuple(t.sum(axis=-1) for t in tangents)  # a sum is linear


def _one_pass(keep) -> bool:
    "Whether masked_row_sums takes the one-pass form: rows of 32 to 2^24 positions."
    return (keep.ndim >= 1 and keep.size > 0
            and 2 * ONE_PASS_SLICES <= keep.shape[-1] < FLOAT32_EXACT)


def masked_row_sums(keep, *xs) -> tuple:
    """The count of kept positions of each row and the sum of each `x` over them, in one pass where it pays.

    Parameters
    ----------
    keep
        bool [..., T]: the kept positions
    xs
        floating arrays of `keep`'s shape, in the statistics dtype; read only where `keep` is True

    Returns
    -------
    tuple
        (int32 counts [...], then one row sum [...] per `x`, in its dtype)
    """
    if not _one_pass(keep):
        return (count_kept(keep, axis=-1), *(jnp.where(keep, x, 0).sum(axis=-1) for x in xs))
    ct = jnp.result_type(jnp.float32, *(x.dtype for x in xs))
    counts, *sums = _row_sums_one_pass(keep.astype(ct), *(jnp.where(keep, x, 0) for x in xs))
    return (counts.astype(jnp.int32), *sums)
