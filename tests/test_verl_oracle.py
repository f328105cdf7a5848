"""dew_rl against verl 0.9.1 itself, run as an oracle.

The expected values were produced by the real framework (PyPI verl==0.9.1 on torch 2.13.0 CPU, in
float64) by tools/make_verl_fixtures.py and frozen in tests/fixtures/verl_0_9_1.npz, as
that script's docstring describes; no verl code is in this repository. Each test runs the dew_rl
function in float64 on the same inputs and compares, so these tests fail if a convention that the
chapters claim to share with verl drifts: GAE's masked-step carry and Bessel whitening, the GRPO /
Dr.GRPO / RLOO group statistics, the k1/k2/k3 clamps, the five aggregation modes, the dual-clip
PPO loss with its three metrics, the clipped value loss and token-level truncated IS.

Inputs have variable lengths and interior holes but no fully masked row: on empty rows verl
raises or differs, and the chapters tabulate that separately.
"""
from pathlib import Path

import numpy as np
import pytest

import dew_rl as rl

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "verl_0_9_1.npz"
G = 4
TOL = dict(rtol=1e-7, atol=1e-9)  # float64 on both sides; verl's +1e-8 denominators move values by ~1e-9


pytestmark = pytest.mark.usefixtures("x64")  # float64 on both sides


@pytest.mark.parametrize("gamma,lam", [(1.0, 0.95), (0.9, 0.8)])
def test_gae_every_position(ref, gamma, lam):
    adv, ret = rl.gae(ref["gae/token_rewards"], ref["gae/values"], ref["mask"], gamma, lam)
    np.testing.assert_allclose(adv, ref[f"gae/advantages_{gamma}_{lam}"], **TOL)  # pads included
    np.testing.assert_allclose(ret, ref[f"gae/returns_{gamma}_{lam}"], **TOL)


def test_grpo_drgrpo_rloo(ref):
    m, s = ref["mask"], ref["group/scores"]
    np.testing.assert_allclose(rl.group_advantage(s, G)[:, None] * m, ref["group/grpo"], **TOL)
    np.testing.assert_allclose(rl.group_advantage(s, G, normalise_by_std=False)[:, None] * m, ref["group/drgrpo"], **TOL)
    np.testing.assert_allclose(rl.rloo_advantage(s, G)[:, None] * m, ref["group/rloo"], **TOL)
    np.testing.assert_array_equal(np.asarray(rl.group_advantage(s, G))[G:2 * G], 0.0)  # the equal-reward group


@pytest.mark.parametrize("ours,theirs", [("k1_kl", "k1"), ("k2_kl", "mse"), ("k3_kl", "low_var_kl")])
def test_kl_estimators(ref, ours, theirs):
    got = getattr(rl, ours)(ref["kl/log_probs"], ref["kl/ref_log_probs"])
    np.testing.assert_allclose(got, ref[f"kl/{theirs}"], rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("mode", rl.AGGREGATION_MODES)
def test_aggregation_modes(ref, mode):
    np.testing.assert_allclose(rl.aggregate(ref["agg/loss"], ref["mask"], mode), ref[f"agg/{mode}"], **TOL)


@pytest.mark.parametrize("lo,hi,c", [(0.2, 0.2, 3.0), (0.2, 0.28, 3.0)])
def test_dual_clip_ppo_and_metrics(ref, lo, hi, c):
    log_ratio = rl.token_log_ratio(ref["kl/log_probs"], ref["ppo/old_log_probs"])
    loss, metrics = rl.clipped_surrogate(log_ratio, ref["ppo/advantages"], ref["mask"], lo, hi, c)
    key = f"ppo/{lo}_{hi}_{c}"
    np.testing.assert_allclose(loss, ref[f"{key}/loss"], **TOL)
    for name in ("pg_clipfrac", "ppo_kl", "pg_clipfrac_lower"):
        np.testing.assert_allclose(metrics[name], ref[f"{key}/{name}"], err_msg=name, **TOL)


def test_clipped_value_loss(ref):
    loss, metrics = rl.clipped_value_loss(ref["value/predicted"], ref["value/returns"], ref["value/old_values"],
                                          ref["mask"], clip=0.2)
    np.testing.assert_allclose(loss, ref["value/loss"], **TOL)
    np.testing.assert_allclose(metrics["vf_clipfrac"], ref["value/clipfrac"], **TOL)
    terms = rl.clipped_value_loss_terms(ref["value/predicted"], ref["value/returns"], ref["value/old_values"], 0.2)
    np.testing.assert_allclose(rl.token_mean(terms, ref["mask"]), ref["value/loss"], **TOL)


def test_token_truncated_importance_sampling(ref):
    w = rl.behavior_importance_weights(ref["tis/log_ratio"], np.zeros_like(ref["tis/log_ratio"]), ref["mask"], 2.0)
    np.testing.assert_allclose(w, ref["tis/weights"], rtol=1e-12, atol=0)


def test_the_oracle_can_tell_conventions_apart(ref):
    """A ddof=0 group std, or a token-mean where verl uses seq-mean-token-mean, misses the fixture."""
    s, m = ref["group/scores"], ref["mask"]
    x = s.reshape(-1, G)
    ddof0 = ((x - x.mean(1, keepdims=True)) / (x.std(1, keepdims=True) + 1e-6)).reshape(-1)[:, None] * m
    assert not np.allclose(ddof0, ref["group/grpo"], **TOL)
    assert not np.allclose(rl.aggregate(ref["agg/loss"], m, "token-mean"), ref["agg/seq-mean-token-mean"], **TOL)
