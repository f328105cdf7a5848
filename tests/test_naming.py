"""The naming rule's deprecated spellings (nbs/00a_checks.md, "The naming rule"): each old keyword still gives the
new keyword's result, bit for bit, and warns once per process, with a `DeprecationWarning` naming both spellings."""
import warnings

import jax
import numpy as np
import pytest

import dew_rl as rl
from dew_rl._checks import _WARNED

B, T = 4, 5
g = np.random.default_rng(7)
LP = g.normal(-1.0, 0.5, (B, T)).astype(np.float32)
OLD = (LP + g.normal(0.0, 0.3, (B, T))).astype(np.float32)
ADV = g.normal(0.0, 1.0, (B, T)).astype(np.float32)
MASK = np.ones((B, T), np.float32)
MASK[1, 3:] = 0
MASK_R = np.ones((B, T), np.float32)
MASK_R[0, 2:] = 0
MASK_R[2, 1:] = 0
PAIRS = (LP, OLD, OLD, LP, MASK, MASK_R)   # policy chosen / rejected, reference chosen / rejected, the two masks

CASES = {  # function -> (positional arguments, {old keyword: (new keyword, value)})
    "m2po_loss_mask": ((), dict(old_log_probs=("behavior_log_probs", OLD)),
                       dict(prox_log_probs=LP, mask=MASK, m2_threshold=0.02)),
    "dppo_tv_terms": ((LP, OLD, ADV, MASK), dict(clip_ratio_low=("epsilon_low", 0.05), clip_ratio_high=("epsilon_high", 0.1)), {}),
    "dppo_kl_terms": ((LP, OLD, ADV, MASK), dict(clip_ratio_low=("epsilon_low", 0.01), clip_ratio_high=("epsilon_high", 0.02)), {}),
    "gmpo_terms": ((LP - OLD, ADV, MASK), dict(clip_ratio_low=("epsilon_low", 0.1), clip_ratio_high=("epsilon_high", 0.05)), {}),
    "clip_cov_terms": ((LP - OLD, LP, ADV, MASK, jax.random.key(0)),
                       dict(clip_ratio_low=("epsilon_low", 0.1), clip_ratio_high=("epsilon_high", 0.05)), dict(clip_cov_ratio=0.3)),
    "preference_margin": (PAIRS, dict(length_normalise=("length_normalize", True)), {}),
    "preference_ipo": ((*PAIRS, 0.1), dict(length_normalise=("length_normalize", True)), {}),
}


@pytest.mark.parametrize("name", ["preference_margin", "preference_ipo"])
def test_length_normalize_is_the_mean_over_kept_tokens(name):
    """The renamed flag still selects per-token means (so the cases above compare two different results): against
    float64 NumPy, and not the default's sums."""
    keep_c, keep_r = MASK != 0, MASK_R != 0
    lp64, old64 = np.float64(LP), np.float64(OLD)
    side = lambda d, k: np.where(k, d, 0).sum(1) / np.maximum(k.sum(1), 1)  # noqa: E731
    margin = side(lp64 - old64, keep_c) - side(old64 - lp64, keep_r)
    ref = margin if name == "preference_margin" else np.mean((margin - 1 / (2 * 0.1)) ** 2)
    args = CASES[name][0]
    out = np.asarray(getattr(rl, name)(*args, length_normalize=True), np.float64)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)
    assert not np.allclose(out, np.asarray(getattr(rl, name)(*args), np.float64), rtol=1e-3)


def _leaves(out):
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(out)]


@pytest.mark.parametrize("name", sorted(CASES))
def test_old_keyword_gives_the_same_result_and_warns_once(name):
    fn = getattr(rl, name)
    args, renames, rest = CASES[name]
    old_kw = {old: value for old, (new, value) in renames.items()}
    new_kw = {new: value for old, (new, value) in renames.items()}
    _WARNED.difference_update({(name, old) for old in renames})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = fn(*args, **old_kw, **rest)
        second = fn(*args, **old_kw, **rest)
        new = fn(*args, **new_kw, **rest)
    for a, b, c in zip(_leaves(first), _leaves(second), _leaves(new)):
        np.testing.assert_array_equal(a, c)
        np.testing.assert_array_equal(b, c)
    messages = sorted(str(w.message) for w in caught if issubclass(w.category, DeprecationWarning))
    assert len(messages) == len(renames), messages  # once per old keyword, not once per call
    for old, (new, _) in renames.items():
        assert any(m.startswith(f"{name}: the argument `{old}` is now called `{new}`") for m in messages), messages


@pytest.mark.parametrize("name", sorted(CASES))
def test_both_spellings_at_once_is_an_error(name):
    fn = getattr(rl, name)
    args, renames, rest = CASES[name]
    old, (new, value) = next(iter(renames.items()))
    with pytest.raises(TypeError, match=f"{name}: got both `{old}` \\(the deprecated name\\) and `{new}`"):
        fn(*args, **{old: value, new: value}, **rest)


def test_terms_functions_return_the_pair():
    """`<loss>_terms` returns `(terms, indicators)`; the terms of REINFORCE and DRO against float64 NumPy."""
    lp64, adv64, old64 = (np.asarray(x, np.float64) for x in (LP, ADV, OLD))
    keep = np.asarray(MASK) != 0
    cases = {
        "reinforce_terms": (rl.reinforce_terms(LP, ADV, MASK), np.where(keep, -adv64 * lp64, 0)),
        "dro_terms": (rl.dro_terms(LP, OLD, ADV, MASK, 0.1),
                      np.where(keep, -(adv64 * lp64 - 0.05 * (lp64 - old64) ** 2), 0)),
        "vespo_terms": (rl.vespo_terms(LP - OLD, LP, ADV, MASK), None),
    }
    for name, (out, ref) in cases.items():
        assert isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], dict), name
        assert out[0].shape == LP.shape, name
        if ref is not None:
            np.testing.assert_allclose(np.asarray(out[0], np.float64), ref, rtol=1e-6, atol=1e-6, err_msg=name)
