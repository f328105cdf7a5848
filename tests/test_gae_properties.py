"""Property tests for generalized advantage estimation (nbs/02a_gae.md).

Every property is checked against an independent float64 NumPy computation written here from the
equations; none of them calls the production function to make its expectation. The references are
closed forms (sums over the valid steps), not the backward recursion the production code and the
notebook's reference loop use.

- lam = 1: the returns are the discounted reward-to-go and returns - values = reward-to-go - V;
- lam = 0: the raw advantage is the TD error against the next *valid* value;
- masked steps inserted anywhere in a row leave the valid positions' raw advantages bit-identical,
  and a masked position holds the next valid step's advantage (0 after the last);
- nothing stored at a masked position (NaN, +-inf, huge, ordinary numbers) changes any advantage, any
  valid return, or the derivative of the returns in gamma and lam (which is not stopped), and that
  derivative matches a float64 finite difference;
- the advantages are the Bessel whitening of the closed-form raw advantages over the valid tokens;
- bfloat16 input: the recursion runs in float32, so the only error is the final rounding to bfloat16;
- the two-level form of the recursion (`_gae_raw_two_level`, `_gae_two_level`), at every chunk size from
  one position to longer than the row, equals the closed form at every position, nothing stored at a
  masked position changes it, and its derivative in gamma and lam matches a float64 finite difference.

One array shape and jitted functions keep compilation to a handful; lengths and holes come from the
masks. `gamma` and `lam` are passed to the jitted functions, so they are traced.
"""
import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import example, given, settings, strategies as st
from hypothesis.extra import numpy as hnp

from dew_rl._advantages.gae import _gae_raw_two_level, _gae_two_level, gae, gae_raw

B, T = 4, 12
GAE = jax.jit(gae)
RAW = jax.jit(gae_raw)
# d/d(gamma, lam) of the sum of the valid returns; gamma and lam are the only inputs with a gradient
D_RETURNS = jax.jit(jax.grad(lambda r, v, m, g, l: jnp.where(m, gae(r, v, m, g, l)[1], 0).sum(), argnums=(3, 4)))
SETTINGS = settings(max_examples=40, deadline=None, derandomize=True)
ATOL, RTOL = 2e-4, 1e-5  # float32 recursion over <= 12 steps of values up to 4 in magnitude

value = st.floats(-4.0, 4.0, allow_nan=False, allow_infinity=False, allow_subnormal=False, width=32)
unit = st.floats(0.0, 1.0, allow_nan=False, width=32)
arrays = hnp.arrays(np.float32, (B, T), elements=value)
masks = hnp.arrays(np.bool_, (B, T))
prefix_lengths = st.lists(st.integers(0, T), min_size=B, max_size=B)
junk = hnp.arrays(np.float32, (B, T), elements=st.sampled_from([np.nan, np.inf, -np.inf, 3e38, -7.0, 0.0]))


def prefix_mask(lengths):
    return np.arange(T)[None, :] < np.asarray(lengths)[:, None]


def closed_form_raw(r, v, m, gamma, lam):
    """Â_t = Σ_l (γλ)^l δ_{t+l} over the valid steps of each row (float64); a masked position takes the
    value of the first valid step after it, 0 if there is none."""
    A = np.zeros((B, T))
    for i in range(B):
        idx = np.flatnonzero(m[i])
        n = idx.size
        if n == 0:
            continue
        rr, vv = r[i, idx].astype(np.float64), v[i, idx].astype(np.float64)
        delta = rr + gamma * np.append(vv[1:], 0.0) - vv
        lag = np.arange(n)[None, :] - np.arange(n)[:, None]
        a = np.where(lag >= 0, (gamma * lam) ** np.maximum(lag, 0), 0.0) @ delta
        first_at_or_after = np.searchsorted(idx, np.arange(T))
        A[i] = np.where(first_at_or_after < n, a[np.minimum(first_at_or_after, n - 1)], 0.0)
    return A


def close(got, want, rtol=RTOL, atol=ATOL):
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=rtol, atol=atol)


@SETTINGS
@given(r=arrays, v=arrays, lengths=prefix_lengths, gamma=unit, fill=junk)
@example(r=np.ones((B, T), np.float32), v=np.zeros((B, T), np.float32), lengths=[T, 5, 1, 0], gamma=1.0,
         fill=np.full((B, T), np.nan, np.float32))
def test_lambda_one_gives_reward_to_go(r, v, lengths, gamma, fill):
    m = prefix_mask(lengths)
    g = float(np.float32(gamma))
    rtg = np.zeros((B, T))
    for i, n in enumerate(lengths):
        for t in range(n):
            rtg[i, t] = sum(g ** (u - t) * float(r[i, u]) for u in range(t, n))
    adv, ret = GAE(np.where(m, r, fill), np.where(m, v, fill), m, gamma, 1.0)
    raw = RAW(np.where(m, r, fill), np.where(m, v, fill), m, gamma, 1.0)
    close(np.asarray(ret)[m], rtg[m])
    close(np.asarray(ret, np.float64)[m] - v[m], rtg[m] - v[m])      # returns - values = reward-to-go - V
    close(np.asarray(raw)[m], rtg[m] - v[m])


@SETTINGS
@given(r=arrays, v=arrays, m=masks, gamma=unit, fill=junk)
def test_lambda_zero_gives_td_error_against_next_valid_value(r, v, m, gamma, fill):
    g = float(np.float32(gamma))
    td = np.zeros((B, T))
    for i in range(B):
        for t in np.flatnonzero(m[i]):
            later = np.flatnonzero(m[i, t + 1:])
            v_next = float(v[i, t + 1 + later[0]]) if later.size else 0.0
            td[i, t] = float(r[i, t]) + g * v_next - float(v[i, t])
    raw = RAW(np.where(m, r, fill), np.where(m, v, fill), m, gamma, 0.0)
    _, ret = GAE(np.where(m, r, fill), np.where(m, v, fill), m, gamma, 0.0)
    close(np.asarray(raw)[m], td[m])
    close(np.asarray(ret, np.float64)[m] - v[m], td[m])


@SETTINGS
@given(r=arrays, v=arrays, lengths=prefix_lengths, gamma=unit, lam=unit, fill=junk, data=st.data())
def test_masked_steps_inserted_anywhere_change_nothing(r, v, lengths, gamma, lam, fill, data):
    compact = prefix_mask(lengths)
    spread = np.zeros((B, T), bool)
    r_s, v_s = fill.copy(), fill.copy()
    for i, n in enumerate(lengths):                      # the row's n steps, in order, at n of the T positions
        pos = np.sort(np.array(data.draw(st.lists(st.integers(0, T - 1), min_size=n, max_size=n, unique=True)), int))
        spread[i, pos] = True
        r_s[i, pos], v_s[i, pos] = r[i, :n], v[i, :n]
    raw_compact = np.asarray(RAW(np.where(compact, r, fill), np.where(compact, v, fill), compact, gamma, lam))
    raw_spread = np.asarray(RAW(r_s, v_s, spread, gamma, lam))
    np.testing.assert_array_equal(raw_spread[spread], raw_compact[compact])   # bit-identical on the valid steps
    close(raw_spread, closed_form_raw(r_s, v_s, spread, float(np.float32(gamma)), float(np.float32(lam))))


@SETTINGS
@given(r=arrays, v=arrays, m=masks, gamma=unit, lam=unit, fill_a=junk, fill_b=arrays)
def test_nothing_stored_at_masked_positions_matters(r, v, m, gamma, lam, fill_a, fill_b):
    adv_a, ret_a = (np.asarray(o) for o in GAE(np.where(m, r, fill_a), np.where(m, v, fill_a), m, gamma, lam))
    adv_b, ret_b = (np.asarray(o) for o in GAE(np.where(m, r, fill_b), np.where(m, v, fill_b), m, gamma, lam))
    np.testing.assert_array_equal(adv_a, adv_b)                       # every position, masked ones included
    np.testing.assert_array_equal(ret_a[m], ret_b[m])
    assert np.isfinite(adv_a).all() and np.isfinite(ret_a[m]).all()
    g, l = float(np.float32(gamma)), float(np.float32(lam))
    close(ret_a[m] - v[m].astype(np.float64), closed_form_raw(r, v, m, g, l)[m])
    d_a = np.asarray(D_RETURNS(np.where(m, r, fill_a), np.where(m, v, fill_a), m, np.float32(gamma), np.float32(lam)))
    d_b = np.asarray(D_RETURNS(np.where(m, r, fill_b), np.where(m, v, fill_b), m, np.float32(gamma), np.float32(lam)))
    np.testing.assert_array_equal(d_a, d_b)
    h = 1e-6
    fd = [(closed_form_raw(r, v, m, g + h, l)[m].sum() - closed_form_raw(r, v, m, g - h, l)[m].sum()) / (2 * h),
          (closed_form_raw(r, v, m, g, l + h)[m].sum() - closed_form_raw(r, v, m, g, l - h)[m].sum()) / (2 * h)]
    np.testing.assert_allclose(d_a, fd, rtol=1e-4, atol=1e-2)


@SETTINGS
@given(r=arrays, v=arrays, m=masks, gamma=unit, lam=unit, fill=junk)
def test_advantages_are_the_bessel_whitening_of_the_raw_advantages(r, v, m, gamma, lam, fill):
    adv, _ = GAE(np.where(m, r, fill), np.where(m, v, fill), m, gamma, lam)
    adv = np.asarray(adv, np.float64)
    A = closed_form_raw(r, v, m, float(np.float32(gamma)), float(np.float32(lam)))
    N = int(m.sum())
    if N == 0:
        np.testing.assert_array_equal(adv, 0.0)
        return
    mu = A[m].sum() / (N + 1e-8)
    var = ((A[m] - mu) ** 2).sum() / (N + 1e-8) * N / max(N - 1, 1)
    sd = np.sqrt(var + 1e-8)
    # compared in the units of Â (times sd) so that a near-zero variance does not amplify float32 noise
    np.testing.assert_allclose(adv * sd, A - mu, rtol=RTOL, atol=ATOL)   # masked positions: the whitened carry
    if N == 1:
        assert adv[m][0] == 0.0                                          # one valid token: exactly 0, finite


@SETTINGS
@given(r=arrays, v=arrays, m=masks, gamma=unit, lam=unit, fill=junk)
def test_bfloat16_input_is_carried_in_float32(r, v, m, gamma, lam, fill):
    rb, vb = jnp.asarray(r, jnp.bfloat16), jnp.asarray(v, jnp.bfloat16)
    raw = RAW(jnp.where(m, rb, jnp.asarray(fill, jnp.bfloat16)), jnp.where(m, vb, jnp.asarray(fill, jnp.bfloat16)),
              m, gamma, lam)
    assert raw.dtype == jnp.bfloat16
    want = closed_form_raw(np.asarray(rb, np.float64), np.asarray(vb, np.float64), m,
                           float(np.float32(gamma)), float(np.float32(lam)))
    err = np.abs(np.asarray(raw, np.float64) - want)
    assert (err <= 2.0**-8 * np.abs(want) + ATOL).all(), err.max()     # one bfloat16 rounding of a float32 result


TWO_LEVEL = {c: jax.jit(lambda r, v, m, g, l, c=c: _gae_raw_two_level(r, v, m, g, l, chunk=c)) for c in (1, 5, 12, 13)}
D_TWO_LEVEL = {c: jax.jit(jax.grad(lambda r, v, m, g, l, c=c: jnp.where(m, _gae_two_level(r, v, m, g, l, chunk=c)[1],
                                                                       0).sum(), argnums=(3, 4))) for c in (1, 5)}


@SETTINGS
@given(r=arrays, v=arrays, m=masks, gamma=unit, lam=unit, fill=junk, chunk=st.sampled_from(sorted(TWO_LEVEL)))
@example(r=np.ones((B, T), np.float32), v=np.ones((B, T), np.float32), m=np.eye(B, T, 11, dtype=bool), gamma=1.0,
         lam=0.0, fill=np.full((B, T), np.nan, np.float32), chunk=5)
def test_two_level_recursion_equals_the_closed_form(r, v, m, gamma, lam, fill, chunk):
    g, l = float(np.float32(gamma)), float(np.float32(lam))
    raw = np.asarray(TWO_LEVEL[chunk](np.where(m, r, fill), np.where(m, v, fill), m, gamma, lam))
    close(raw, closed_form_raw(r, v, m, g, l))                         # every position: masked ones hold the carry
    other = np.asarray(TWO_LEVEL[chunk](np.where(m, r, -fill), np.where(m, v, 2.0), m, gamma, lam))
    np.testing.assert_array_equal(raw, other)                          # nothing stored at a masked position is read


@SETTINGS
@given(r=arrays, v=arrays, m=masks, gamma=unit, lam=unit, fill=junk, chunk=st.sampled_from(sorted(D_TWO_LEVEL)))
def test_two_level_derivative_in_gamma_and_lam(r, v, m, gamma, lam, fill, chunk):
    g, l = float(np.float32(gamma)), float(np.float32(lam))
    d = np.asarray(D_TWO_LEVEL[chunk](np.where(m, r, fill), np.where(m, v, fill), m, np.float32(gamma), np.float32(lam)))
    assert np.isfinite(d).all()
    h = 1e-6
    fd = [(closed_form_raw(r, v, m, g + h, l)[m].sum() - closed_form_raw(r, v, m, g - h, l)[m].sum()) / (2 * h),
          (closed_form_raw(r, v, m, g, l + h)[m].sum() - closed_form_raw(r, v, m, g, l - h)[m].sum()) / (2 * h)]
    np.testing.assert_allclose(d, fd, rtol=1e-4, atol=1e-2)
