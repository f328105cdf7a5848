"""dew_rl against NeMo-RL's frozen outputs for two frontier conventions (tests/fixtures/frontier_nemo_rl.npz).

The fixture was written by tools/make_nemo_rl_frontier_fixtures.py, which ran NeMo-RL's own code (NVIDIA-NeMo/RL at
the revision in the .json beside it) on inputs it drew with a fixed seed and stored under in/<case>/<name>. No
framework is needed here: dew_rl's side is recomputed from the stored inputs, in float32.

* A16, raw reward as advantage (`RawRewardAdvantageEstimator`): with `normalize_advantages` NeMo-RL z-scores the
  broadcast reward over the valid tokens of the batch (population variance, `clamp(min=1e-8).rsqrt()`, no shift
  back): `global_masked_normalize(broadcast, mask)` with its default var_floor 1e-8 is the same on the valid tokens.
  Two differences, both pinned below: NeMo-RL leaves the masked positions non-zero ((r - mean) * rstd there, e.g.
  a fully masked row) where dew_rl writes exact zeros; and when every valid reward is equal NeMo-RL's mean carries
  one float32 rounding, which the 1e-8 floor's rsqrt (1e4) lifts to a constant 1.19e-3 on every valid token
  (case rd), where dew_rl (centred after a shift by the largest valid value) gives exact zeros.
* B19, VAPO positive-example NLL (`ClippedPGLossFn`, `positive_example_nll_weight`): NeMo-RL's added term is
  w * sum(-log pi over the valid tokens of rows with reward > 0) / (their count), and nothing when there are none;
  dew_rl's `positive_example_nll_terms` summed over `max(positive.sum(), 1)` gives the value and, through
  jax.grad, the gradient w.r.t. the log-probs (the loss takes log-probs, not logits).
"""
from __future__ import annotations

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dew_rl as rl
from frozen import ATOL, RTOL, close, comparer, load_script, npz_fixture

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "frontier_nemo_rl.npz"
SCRIPT = ROOT / "tools" / "make_nemo_rl_frontier_fixtures.py"
WEIGHTS = (0.1, 0.5)


fx = npz_fixture(FIXTURE)
assert_close = comparer("NeMo-RL")


def _load_script():
    return load_script(SCRIPT)


# ------------------------------------------------------------------ the fixture itself
def test_stored_inputs_are_the_scripts(fx):
    inputs = _load_script().make_inputs()
    assert sorted(k for k in fx if k.startswith("in/")) == sorted(inputs)
    for k, v in inputs.items():
        assert fx[k].dtype == np.float32, k
        np.testing.assert_array_equal(fx[k], v, err_msg=k)


def test_json_describes_every_output(fx):
    meta = json.loads(FIXTURE.with_suffix(".json").read_text())
    mod = _load_script()
    assert meta["framework"] == "nemo_rl" and meta["revision"] == mod.REVISION and not meta["failed"]
    assert sorted(r["key"] for r in meta["records"]) == sorted(k for k in fx if k.startswith("nemo_rl/"))
    kinds = {(r["case"], r["kind"]) for r in meta["records"]}
    assert {(c, "raw_reward") for c in mod.RAW_CASES} <= kinds
    assert {(c, k) for c in mod.NLL_CASES for k in ("positive_nll", "positive_nll_grad")} <= kinds
    assert FIXTURE.stat().st_size < 200_000


# ------------------------------------------------------------------ A16: raw reward as advantage
def raw_inputs(fx, case):
    r, m = fx[f"in/{case}/rewards"], fx[f"in/{case}/mask"]
    return np.broadcast_to(r[:, None], m.shape).astype(np.float32), m


def ours_normalized(fx, case, **kw):
    x, m = raw_inputs(fx, case)
    return np.asarray(rl.global_masked_normalize(jnp.asarray(x), jnp.asarray(m), **kw))


@pytest.mark.parametrize("case", ["ra", "rb", "rc"])
def test_raw_reward_normalized_matches_on_valid_tokens(fx, case):
    theirs = fx[f"nemo_rl/{case}/raw_reward/normalize=True"]
    ours = ours_normalized(fx, case)
    v = raw_inputs(fx, case)[1] > 0
    assert_close(ours[v], theirs[v], f"{case} normalize=True")
    assert np.all(ours[~v] == 0)  # dew_rl: exact zeros outside the mask


def test_raw_reward_masked_positions_differ(fx):
    """NeMo-RL does not zero the masked positions: rb's fully masked row (reward 7.5) reads (7.5 - mean) * rstd."""
    theirs = fx["nemo_rl/rb/raw_reward/normalize=True"]
    x, m = raw_inputs(fx, "rb")
    assert m[1].sum() == 0 and x[1, 0] == 7.5
    assert np.all(ours_normalized(fx, "rb")[1] == 0)
    v = m > 0
    mean, std = x[v].astype(np.float64).mean(), x[v].astype(np.float64).std()  # the population moments
    np.testing.assert_allclose(theirs[1], (7.5 - mean) / std, rtol=RTOL)
    assert np.abs(theirs[1]).min() > 7.9


@pytest.mark.parametrize("case", ["ra", "rb", "rc", "rd"])
def test_raw_reward_unnormalized_is_the_broadcast(fx, case):
    x, _ = raw_inputs(fx, case)
    np.testing.assert_array_equal(fx[f"nemo_rl/{case}/raw_reward/normalize=False"], x)  # every position


def test_raw_reward_constant_rewards(fx):
    """Every valid reward 0.7 (35 tokens): zero variance, so both scale by 1e-8 ** -1/2 = 1e4. dew_rl's centred
    values are exact zeros; NeMo-RL's float32 mean (sum / 35) is one rounding away from 0.7, so its advantages are
    a constant 1.19e-3 (2 ** -23 * 1e4 = 1.19e-3) on every valid token: a degenerate-case difference, not round-off."""
    theirs = fx["nemo_rl/rd/raw_reward/normalize=True"]
    x, m = raw_inputs(fx, "rd")
    v = m > 0
    assert np.all(x[v] == np.float32(0.7))
    assert np.all(ours_normalized(fx, "rd") == 0)
    assert np.unique(theirs[v]).size == 1
    np.testing.assert_allclose(np.abs(theirs[v]), 1.1920928955078125e-3, rtol=1e-6)
    assert not close(ours_normalized(fx, "rd")[v], theirs[v])


# ------------------------------------------------------------------ B19: VAPO positive-example NLL
def nll_inputs(fx, case):
    lp = fx[f"in/{case}/curr_logprobs"]
    mask = fx[f"in/{case}/token_mask"][:, 1:] * fx[f"in/{case}/sample_mask"][:, None]  # NeMo-RL's `mask`
    return lp, mask, fx[f"in/{case}/rewards"]


def ours_nll(fx, case, extra_tokens=0):
    "dew_rl's value and gradient w.r.t. the log-probs; `extra_tokens` perturbs the normaliser (a negative control)."
    lp, mask, r = nll_inputs(fx, case)

    def nll(lp):
        terms, aux = rl.positive_example_nll_terms(lp, jnp.asarray(mask), jnp.asarray(r))
        return terms.sum() / jnp.maximum(aux["positive"].sum() + extra_tokens, 1)

    v, g = jax.value_and_grad(nll)(jnp.asarray(lp))
    return np.asarray(v), np.asarray(g)


@pytest.mark.parametrize("weight", WEIGHTS)
@pytest.mark.parametrize("case", ["pa", "pb", "pc"])
def test_positive_nll_matches(fx, case, weight):
    v, g = ours_nll(fx, case)
    assert_close(v, fx[f"nemo_rl/{case}/positive_nll/weight={weight}"], f"{case} value")
    assert_close(v, fx[f"nemo_rl/{case}/positive_nll_metric/weight={weight}"], f"{case} metric")
    assert_close(g, fx[f"nemo_rl/{case}/positive_nll_grad/weight={weight}"], f"{case} gradient")


def test_positive_nll_rows(fx):
    """Which rows count: reward > 0 (not >= 0), valid tokens only, sample_mask applied; none positive adds 0."""
    for case in ("pa", "pc"):
        _, mask, r = nll_inputs(fx, case)
        g = fx[f"nemo_rl/{case}/positive_nll_grad/weight=0.1"]
        positive = (mask > 0) & (r > 0)[:, None]
        assert positive.any() and (mask[r == 0] > 0).any() and (mask[r < 0] > 0).any()
        np.testing.assert_allclose(g[positive], -1.0 / positive.sum(), rtol=RTOL)
        assert np.all(np.abs(g[~positive]) <= ATOL)
    _, mask, r = nll_inputs(fx, "pb")
    assert not (r > 0).any()
    for w in WEIGHTS:
        assert fx[f"nemo_rl/pb/positive_nll/weight={w}"] == 0
        assert np.all(fx[f"nemo_rl/pb/positive_nll_grad/weight={w}"] == 0)
    v, g = ours_nll(fx, "pb")
    assert v == 0 and np.all(g == 0)


# ------------------------------------------------------------------ the comparison can fail
@pytest.mark.parametrize("case", ["pa", "pc"])
def test_the_comparison_can_fail(fx, case):
    """One token more in the NLL's normaliser, or the sample (ddof=1) instead of the population variance, is caught."""
    v, g = ours_nll(fx, case, extra_tokens=1)
    assert not close(v, fx[f"nemo_rl/{case}/positive_nll/weight=0.1"])
    assert not close(g, fx[f"nemo_rl/{case}/positive_nll_grad/weight=0.1"])
    x, m = raw_inputs(fx, "rb")
    n = m.sum()
    ours = ours_normalized(fx, "rb") * np.sqrt((n - 1) / n)  # as if divided by the ddof=1 standard deviation
    v = m > 0
    assert not close(ours[v], fx["nemo_rl/rb/raw_reward/normalize=True"][v])
