"""Property tests for the group advantages (nbs/02b_group_advantage.md, nbs/02c_rloo.md).

Every property is checked against an independent float64 NumPy computation written here from the
equations; none of them calls the production function to make its expectation.

- `group_advantage` sums to zero within each group;
- with `normalise_by_std`, the within-group ddof=1 std of the output is sigma / (sigma + eps);
- the output matches the float64 reference elementwise;
- `rloo_advantage` equals G / (G - 1) times the centred reward;
- groups of equal float32 rewards give exactly 0 from both functions, whatever sits next to them.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from dew_rl._advantages.group import GROUP_EPS, group_advantage
from dew_rl._advantages.rloo import rloo_advantage

SETTINGS = settings(max_examples=30, deadline=None, derandomize=True)

# float32-representable rewards, so that the float64 reference sees exactly what the function sees; magnitudes
# are 0 or above 1e-6, so that no square of a difference underflows float32 (not a property of the function)
reward = st.floats(min_value=-1e3, max_value=1e3, allow_nan=False, allow_infinity=False, width=32).filter(
    lambda v: v == 0 or abs(v) > 1e-6)


@st.composite
def grouped(draw, min_group=2, max_group=9, max_groups=5):
    """(rewards as float32 NumPy [n*G], G): a few groups, some of them binary or constant."""
    G = draw(st.integers(min_group, max_group))
    n = draw(st.integers(1, max_groups))
    rows = []
    for _ in range(n):
        kind = draw(st.sampled_from(["free", "binary", "constant", "offset"]))
        if kind == "free":
            rows.append(draw(st.lists(reward, min_size=G, max_size=G)))
        elif kind == "binary":
            rows.append([float(b) for b in draw(st.lists(st.booleans(), min_size=G, max_size=G))])
        elif kind == "constant":
            rows.append([draw(reward)] * G)
        else:  # a large offset with a small spread: where cancellation would show
            base = draw(st.floats(1e3, 1e4, width=32))
            rows.append([base + 0.125 * k for k in draw(st.lists(st.integers(0, 8), min_size=G, max_size=G))])
    return np.asarray(rows, np.float32).ravel(), G


def ref_centred(r, G):
    g = np.asarray(r, np.float64).reshape(-1, G)
    return g - g.mean(axis=1, keepdims=True)


def ref_std(r, G):
    c = ref_centred(r, G)
    return np.sqrt((c**2).sum(axis=1) / (G - 1))


def scale_of(r, G):
    """Size of the float32 rounding of the groups' centred values: spacing of the largest reward."""
    return np.repeat(np.spacing(np.abs(np.asarray(r, np.float32).reshape(-1, G)).max(axis=1)).astype(np.float64), G)


@SETTINGS
@given(grouped(), st.booleans())
def test_group_advantage_sums_to_zero_per_group(data, norm):
    r, G = data
    a = np.asarray(group_advantage(jnp.asarray(r), G, normalise_by_std=norm), np.float64).reshape(-1, G)
    # float32 rounding: each centred value carries a few float32 spacings of the group's largest one
    tol = 2e-6 * G * np.abs(a).max(axis=1)
    assert (np.abs(a.sum(axis=1)) <= tol).all(), (a.sum(axis=1), tol)


@SETTINGS
@given(grouped())
def test_normalised_std_is_sigma_over_sigma_plus_eps(data):
    r, G = data
    a = np.asarray(group_advantage(jnp.asarray(r), G), np.float64).reshape(-1, G)
    sd = ref_std(r, G)
    got = np.sqrt(((a - a.mean(axis=1, keepdims=True)) ** 2).sum(axis=1) / (G - 1))
    np.testing.assert_allclose(got, sd / (sd + GROUP_EPS), rtol=1e-4, atol=1e-5)


@SETTINGS
@given(grouped(), st.sampled_from([GROUP_EPS, 1e-4, 1e-9, 0.0]))
def test_group_advantage_matches_float64_reference(data, eps):
    r, G = data
    c = ref_centred(r, G)
    denom = ref_std(r, G)[:, None] + eps
    want = np.divide(c, denom, out=np.zeros_like(c), where=denom > 0).ravel()
    got = np.asarray(jax.jit(group_advantage, static_argnums=(1, 2))(jnp.asarray(r), G, True, eps), np.float64)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    got_dr = np.asarray(group_advantage(jnp.asarray(r), G, normalise_by_std=False), np.float64)
    np.testing.assert_allclose(got_dr, c.ravel(), rtol=1e-5, atol=4 * scale_of(r, G).max())


@SETTINGS
@given(grouped())
def test_rloo_is_scaled_centred_reward(data):
    r, G = data
    got = np.asarray(rloo_advantage(jnp.asarray(r), G), np.float64)
    want = (G / (G - 1) * ref_centred(r, G)).ravel()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=8 * scale_of(r, G).max())
    # ... and equals the leave-one-out definition, element by element
    g = np.asarray(r, np.float64).reshape(-1, G)
    loo = np.array([[row[i] - np.delete(row, i).mean() for i in range(G)] for row in g]).ravel()
    np.testing.assert_allclose(got, loo, rtol=1e-5, atol=8 * scale_of(r, G).max())


wide = st.floats(min_value=-float(np.float32(1e38)), max_value=float(np.float32(1e38)), allow_nan=False, allow_infinity=False, width=32)  # finite in bfloat16 too


@SETTINGS
@given(st.lists(wide, min_size=1, max_size=6), st.integers(2, 17), grouped(), st.sampled_from(["float32", "bfloat16"]))
def test_equal_rewards_give_exact_zero(constants, G, neighbours, dtype):
    """Constant groups (any float32 value up to 1e38, subnormals included) next to arbitrary groups: exactly 0."""
    r_other, G_other = neighbours
    const = np.repeat(np.asarray(constants, np.float32), G)
    # the neighbours are regrouped to G when their length allows, else dropped
    other = r_other if r_other.size % G == 0 else np.zeros(0, np.float32)
    x = jnp.asarray(np.concatenate([const, other]), dtype)
    n = const.size
    for out in (group_advantage(x, G), group_advantage(x, G, normalise_by_std=False), rloo_advantage(x, G),
                jax.jit(group_advantage, static_argnums=1)(x, G), jax.jit(rloo_advantage, static_argnums=1)(x, G)):
        assert out.dtype == jnp.dtype(dtype)
        assert (np.asarray(out[:n].astype(jnp.float32)) == 0).all(), np.asarray(out[:n])


@pytest.mark.parametrize("G", [3, 5, 6, 7, 8, 12, 16])
def test_the_exact_zero_property_can_fail(G):
    """A float32 mean written as sum * (1/G) breaks the property for one of these constants: the test has teeth."""
    consts = np.array([0.1, 1 / 3, 0.7, 2.2, 123.456, 1e4 + 0.1], np.float32)
    x = jnp.asarray(np.repeat(consts, G)).reshape(-1, G)
    c = x - x.sum(1, keepdims=True) * (1.0 / G)
    naive = c / (jnp.sqrt((c**2).sum(1, keepdims=True) / (G - 1)) + GROUP_EPS)
    assert (np.asarray(naive) != 0).any()
    assert (np.asarray(group_advantage(x.ravel(), G)) == 0).all()
