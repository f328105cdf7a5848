"""The exact-gradient harness (`dew_rl._exact`, chapter 08): how often its intervals cover the truth.

The chapter checks each statistic against a brute-force computation and the coverage of the intervals
on synthetic gradients. Here the whole harness runs many times on a small enumerable problem whose
expected gradients are known exactly, and the intervals must contain the truth about as often as their
level says:

- on-policy REINFORCE: unbiased (squared bias 0, scale 1);
- PPO at ratio 1 with GRPO's inclusive group mean: scale exactly 1 - 1/G, relative bias exactly 1/G;
- REINFORCE with token TIS weights under a perturbed sampler: a biased loss whose expected gradient
  `exact_expected_gradient` computes by enumeration.

Also: nothing in the library imports the harness.
"""
import ast
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dew_rl as rl
from dew_rl._exact import (batch_gradients, digit_sum_problem, enumerate_sequences, exact_expected_gradient,
                           expectation, measure, sample_batches)

REPS, M, K, G = 100, 512, 16, 4


def _reinforce(lp, b):
    return -rl.aggregate(lp * b.rewards[:, None], b.mask, "seq-mean-token-sum")


def _inclusive(lp, b):
    adv = rl.group_advantage(b.rewards, G, normalise_by_std=False)
    terms, _ = rl.clipped_surrogate_terms(rl.token_log_ratio(lp, b.old_log_probs), jnp.where(b.mask, adv[:, None], 0),
                                          b.mask)
    return rl.aggregate(terms, b.mask, "seq-mean-token-sum")


def _reinforce_tis(lp, b):
    w = rl.behavior_importance_weights(b.old_log_probs, b.behavior_log_probs, b.mask, 2.0)
    return -rl.aggregate(lp * b.rewards[:, None] * w, b.mask, "seq-mean-token-sum")


def _coverage(problem, loss, target, true_bias2, true_scale, seed):
    grads = np.asarray(batch_gradients(problem, loss, sample_batches(problem, jax.random.key(seed), REPS * M)))
    grads = grads.reshape(REPS, M, -1)
    hit_bias = hit_scale = 0
    estimates = []
    for r in range(REPS):
        res = measure(grads[r], target, blocks=K)
        hit_bias += res.bias2[1] <= true_bias2 <= res.bias2[2]
        hit_scale += res.scale[1] <= true_scale <= res.scale[2]
        estimates.append((res.bias2[0], res.scale[0]))
    # the U-statistic and the scale are unbiased: their mean over the repetitions is within 4 standard errors
    est = np.array(estimates)
    z = (est.mean(0) - [true_bias2, true_scale]) / (est.std(0, ddof=1) / np.sqrt(REPS))
    assert (np.abs(z) < 4).all(), z
    return hit_bias / REPS, hit_scale / REPS


@pytest.fixture(scope="module")
def small():
    on = digit_sum_problem(targets=(1, 2), max_len=3, group=G)
    g = np.asarray(jax.grad(lambda x: -expectation(on.seqs, x, on.rewards))(on.theta)).reshape(-1)
    return on, g


@pytest.mark.parametrize("case", ["on-policy REINFORCE", "inclusive group mean", "token TIS off-policy"])
def test_intervals_cover_the_exact_answer(small, case):
    on, g = small
    if case == "on-policy REINFORCE":
        cover = _coverage(on, _reinforce, g, 0.0, 1.0, seed=1)
    elif case == "inclusive group mean":
        cover = _coverage(on, _inclusive, g, (1 / G) ** 2, 1 - 1 / G, seed=2)
    else:
        off = digit_sum_problem(targets=(1, 2), max_len=3, group=G, sampler_scale=0.6)
        exact = np.asarray(exact_expected_gradient(off, _reinforce_tis), np.float64)
        bias2 = np.sum((exact - g) ** 2) / (g @ g)
        assert bias2 > 0.01                                   # the case is biased
        cover = _coverage(off, _reinforce_tis, g, bias2, exact @ g / (g @ g), seed=3)
    # 100 nominal-95% intervals: below 0.88 would be a miss rate the binomial makes very unlikely
    print(case, cover)
    assert min(cover) >= 0.88, (case, cover)


def test_the_coverage_check_can_fail(small):
    """A wrong truth (the inclusive mean's exact bias called 0) fails the check."""
    on, g = small
    with pytest.raises(AssertionError):
        _coverage(on, _inclusive, g, 0.0, 1.0, seed=2)


def test_enumeration_counts():
    for V in range(2, 6):
        for T in range(1, 5):
            s = enumerate_sequences(V, T)
            k = V - 1
            assert len(s.tokens) == sum(k**t for t in range(T)) + k**T
            assert s.n_states == sum(k**t for t in range(T))
            assert (s.lengths == s.mask.sum(1)).all() and (s.lengths[s.ended] <= T).all()
            assert (s.lengths[~s.ended] == T).all()


def test_nothing_in_the_library_imports_the_harness():
    pkg = Path(rl.__file__).resolve().parent
    for path in pkg.rglob("*.py"):
        if path.name in ("_exact.py", "_modidx.py"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        names += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        assert not [m for m in names if "_exact" in m], f"{path.name} imports the exact-gradient harness"
