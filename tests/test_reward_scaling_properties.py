"""Property tests for the reward-scaling and per-token-baseline estimators (nbs/02f_reward_scaling.md,
nbs/02g_token_baselines.md), in both group layouts.

None of the expectations calls the function under test to make itself:

- the prompt-id layout does not depend on the order of the rows (a permutation of rows and ids permutes the output);
- the contiguous layout is the id layout with ids = row // G (to an ulp: a mean is a reshape in one, a segment sum in
  the other);
- a group of equal float32 rewards gives exactly 0, whatever sits next to it, for every group estimator;
- the leave-one-out advantage matches a float64 loop over the other rows of each group;
- OTB with every weight equal is the plain per-position group mean of the returns (float64 loop).
"""
import jax.numpy as jnp
import numpy as np
from hypothesis import given, settings, strategies as st

import dew_rl as rl

SETTINGS = settings(max_examples=12, deadline=None, derandomize=True)
FEW = settings(max_examples=6, deadline=None, derandomize=True)  # every example compiles seven estimators
reward = st.floats(min_value=-100, max_value=100, allow_nan=False, allow_infinity=False, width=32).filter(
    lambda v: v == 0 or abs(v) > 1e-3)

GROUP_ESTIMATORS = {
    "batch_std_advantage": lambda r, g, m: rl.batch_std_advantage(r, g),
    "level_normalize": lambda r, g, m: rl.level_normalize(r, g, "group", "batch", True),
    "leave_one_out_advantage": lambda r, g, m: rl.leave_one_out_advantage(r, g),
    "opo_advantage": lambda r, g, m: rl.opo_advantage(r, m, g)[:, 0],
    "passk_advantage": lambda r, g, m: rl.passk_advantage(r, g),
    "gpg_advantage": lambda r, g, m: rl.gpg_advantage(r, g),
    "gdpo_advantage": lambda r, g, m: rl.gdpo_advantage(jnp.stack([r, r * r], 1), m, g)[:, 0],
}


@st.composite
def batch(draw):
    """(rewards float32 [B], contiguous G, a tied-group flag per group)."""
    G = draw(st.integers(2, 6))
    n = draw(st.integers(1, 4))
    rows, tied = [], []
    for _ in range(n):
        if draw(st.booleans()):
            rows.append([draw(reward)] * G); tied.append(True)
        else:
            rows.append(draw(st.lists(reward, min_size=G, max_size=G))); tied.append(False)
    return np.asarray(rows, np.float32).ravel(), G, np.repeat(tied, G)


@FEW
@given(batch(), st.integers(0, 2**31 - 1))
def test_layouts_agree_and_order_does_not_matter(b, seed):
    r, G, _ = b
    B = r.size
    m = np.ones((B, 3), np.float32)
    ids = np.arange(B) // G
    perm = np.random.default_rng(seed).permutation(B)
    for name, f in GROUP_ESTIMATORS.items():
        contiguous = np.asarray(f(jnp.asarray(r), G, m))
        by_id = np.asarray(f(jnp.asarray(r), jnp.asarray(ids), m))
        np.testing.assert_allclose(contiguous, by_id, rtol=1e-6, atol=1e-6, err_msg=name)
        shuffled = np.asarray(f(jnp.asarray(r[perm]), jnp.asarray(ids[perm] * 7 - 3), m))  # any integers as ids
        np.testing.assert_allclose(shuffled, by_id[perm], rtol=2e-5, atol=2e-5, err_msg=name)


@FEW
@given(batch())
def test_a_tied_group_is_exactly_zero(b):
    r, G, tied = b
    m = np.ones((r.size, 2), np.float32)
    for name, f in GROUP_ESTIMATORS.items():
        if name == "gdpo_advantage":  # the batch whitening moves every row; the z-scores are exact (chapter 02f)
            continue
        out = np.asarray(f(jnp.asarray(r), G, m))
        assert (out[tied] == 0).all(), (name, r, out)


@SETTINGS
@given(batch())
def test_leave_one_out_matches_a_float64_loop(b):
    r, G, _ = b
    want = np.zeros(r.size)
    x = r.astype(np.float64).reshape(-1, G)
    for gi, row in enumerate(x):
        for i in range(G):
            o = np.delete(row, i)
            a = row[i] - o.mean()
            s = o.std(ddof=1) if o.size > 1 else 0.0
            want[gi * G + i] = a / (s + 1e-6) if s > 0 else a
    got = np.asarray(rl.leave_one_out_advantage(jnp.asarray(r), G), np.float64)
    scale = np.maximum(1.0, np.abs(want))
    assert (np.abs(got - want) <= 2e-4 * scale).all(), (r, got, want)


@SETTINGS
@given(st.integers(2, 5), st.integers(1, 3), st.integers(0, 2**31 - 1))
def test_otb_with_equal_weights_is_the_group_mean_of_the_returns(G, n, seed):
    rng = np.random.default_rng(seed)
    B, T = G * n, 6
    lengths = rng.integers(1, T + 1, B)
    m = (np.arange(T)[None] < lengths[:, None]).astype(np.float32)
    tr = (rng.normal(size=(B, T)) * m).astype(np.float32)
    lp = np.full((B, T), np.log(0.5), np.float32)          # pi = 0.5 and sum pi^2 = 0.5: every weight term is 0.5
    s2 = np.full((B, T), 0.5, np.float32)
    got = np.asarray(rl.optimal_token_baseline_advantage(tr, m, lp, s2, G, handle_zero_tail=False)[0], np.float64)
    G64 = np.flip(np.cumsum(np.flip(tr.astype(np.float64) * m, 1), 1), 1)
    W = np.cumsum(0.5 * m, 1)
    want = np.zeros((B, T))
    for g in range(n):
        rows = slice(g * G, (g + 1) * G)
        base = (G64[rows] * W[rows] * m[rows]).sum(0) / ((W[rows] * m[rows]).sum(0) + 1e-8)
        want[rows] = (G64[rows] - base) * m[rows]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
