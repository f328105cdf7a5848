"""ROLL's sample weights and weighted aggregation, slime's and NeMo-RL's reward-KL estimators, frozen.

tests/fixtures/entropy_frameworks.npz holds their outputs, run from git checkouts at the revisions in its
`meta` entry by tools/make_entropy_fixtures.py. dew_rl must reproduce them where the conventions agree,
and differ exactly where the chapters say they differ.
"""
import json

import numpy as np
import pytest

import dew_rl as rl

FIXTURE = "tests/fixtures/entropy_frameworks.npz"


@pytest.fixture(scope="module")
def fx():
    with np.load(FIXTURE) as f:
        return {k: f[k] for k in f.files}


def test_revisions_recorded(fx):
    meta = json.loads(str(fx["meta"]))
    assert meta["revisions"]["ROLL"].startswith("8eb27cc2dc34") and meta["revisions"]["slime"].startswith("624b824a898a")
    assert meta["revisions"]["NeMo-RL"].startswith("7ea279abfbeb")


@pytest.mark.parametrize("dw", [False, True])
@pytest.mark.parametrize("lw", [False, True])
def test_roll_sample_weights_and_weighted_aggregation(fx, dw, lw):
    m, loss = fx["in/mask"], fx["in/loss"]
    w = np.asarray(rl.sample_weights(m, fx["in/difficulty"] if dw else None, difficulty_loss_weight=dw,
                                     length_loss_weight=lw), np.float64)
    np.testing.assert_allclose(w, fx[f"ROLL/sample_weights/difficulty={dw}/length={lw}"], rtol=1e-6, atol=1e-7)
    B, T = m.shape
    for mode in ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"):
        ours = float(rl.aggregate(loss * w[:, None], m, mode))
        theirs = float(fx[f"ROLL/agg_loss/{mode}/difficulty={dw}/length={lw}"])
        if mode == "seq-mean-token-sum-norm":  # ROLL divides by T only; dew_rl by B * T
            ours *= B
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6, err_msg=mode)


def test_roll_token_mean_reads_masked_positions(fx):
    m, loss = fx["in/mask"], fx["in/loss"]
    assert abs(float(fx["ROLL/agg_loss/token-mean/unmasked_loss"]) - float(rl.aggregate(loss, m, "token-mean"))) > 1e-2
    np.testing.assert_allclose(float(fx["ROLL/agg_loss/token-mean/unmasked_loss"]), loss.sum() / m.sum(), rtol=1e-5)


def test_slime_and_nemo_reward_kl(fx):
    lp, ref = fx["in/lp"], fx["in/ref"]
    ours = {k: np.asarray(rl.kl_penalty(lp, ref, k), np.float64) for k in ("k1", "k2", "k3")}
    far = np.zeros(lp.shape, bool)
    far[0, 0] = far[1, 0] = True
    np.testing.assert_allclose(fx["slime/compute_approx_kl/k1"], ours["k1"], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(fx["slime/compute_approx_kl/k2"], ours["k2"], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(fx["slime/compute_approx_kl/low_var_kl"], ours["k3"], rtol=1e-5, atol=1e-6)
    # slime's "k3" has no clamp: equal except at the two far tokens, where it is far above verl's 10
    k3 = fx["slime/compute_approx_kl/k3"]
    np.testing.assert_allclose(k3[~far], ours["k3"][~far], rtol=1e-5, atol=1e-6)
    assert (k3[far] > 19).all() and (ours["k3"][far] == 10).all()
    # NeMo-RL clamps every kind: the log ratio to +-20, the estimate to +-10
    np.testing.assert_allclose(fx["NeMo-RL/calculate_kl/k3"], ours["k3"], rtol=1e-5, atol=1e-6)
    for k in ("k1", "k2"):
        nemo = fx[f"NeMo-RL/calculate_kl/{k}"]
        np.testing.assert_allclose(nemo[~far], ours[k][~far], rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(nemo, np.clip(np.where(far, {"k1": lambda d: np.clip(d, -20, 20),
                                                               "k2": lambda d: 0.5 * np.clip(d, -20, 20) ** 2}[k](
            lp.astype(np.float64) - ref), ours[k]), -10, 10), rtol=1e-6, atol=1e-6)
