"""dew_rl against Tunix 0.1.7 itself, run as an oracle.

The expected values were produced by the real framework (PyPI google-tunix==0.1.7 = tag v0.1.7,
ce63a9fd, installed "lite" with jax 0.10.2 on CPU) by tools/make_tunix_fixtures.py and frozen in
tests/fixtures/tunix_0_1_7.npz (the script's docstring says how it is installed); no Tunix code is in this
repository. Each test runs the dew_rl function on the same inputs and compares where the chapters
claim Tunix's convention, and asserts the documented difference exactly where they do not:

- GAE (`compute_gae_advantages`): masked-step carry and Bessel whitening, compared at every position
  including the padding and one fully masked row. Tunix computes in float32 (JAX's default), so dew_rl
  runs in float32 too, to 1e-6 (float32 rounding of the whitening's sums; values are O(1)). The same
  jitted Tunix function was also run with float64 inputs under `jax_enable_x64`; that is compared in
  float64 to 1e-12. With one valid token in the batch Tunix gives NaN everywhere (its Bessel variance of one value is 0/0);
  dew_rl gives 0 at that token and finite values elsewhere, with the same returns.
- The group advantages (`compute_advantages`, ddof 1 and std + 1e-6; `drgrpo`;
  `compute_rloo_advantages`) are NumPy float64 in Tunix and compared in float64. Groups of one differ
  by design: Tunix returns NaN (GRPO) and zeros (RLOO), dew_rl raises.
- `compute_kl_divergence` casts to float32: `kl` and `mse_kl` equal `k1_kl` and `k2_kl`; `low_var_kl`
  has no clamp in Tunix, so `k3_kl` is compared where Tunix's value is inside verl's clamps (to
  float32 rounding of exp(δ), 2e-6), and outside it is exactly 10 = min(Tunix, 10), the value of
  Tunix's own optional `clamp_value=10`. At lp = −1e-6, ref = 0 Tunix's exp form gives −2⁻²⁴ (#2315)
  where dew_rl's expm1 gives +5e-13.
- `aggregate_loss` (float32) on a batch with one empty row: token-mean is the same; Tunix's sequence
  modes divide by the NE non-empty rows where dew_rl counts all B rows, so Tunix = dew_rl · B/NE,
  and Tunix = dew_rl on the non-empty rows (to float32 rounding of row sums that cancel, 4e-6
  relative).
"""
from pathlib import Path

import jax
import numpy as np
import pytest

import dew_rl as rl

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "tunix_0_1_7.npz"
G = 4
F32 = dict(rtol=1e-6, atol=1e-6)  # GAE in float32: whitening sums in another order, O(1) values
F64 = dict(rtol=1e-12, atol=1e-12)
KL3 = dict(rtol=1e-6, atol=2e-6)  # Tunix's exp(δ) - δ - 1 rounds by ~ulp(e^δ) <= 1e-6 in this range
AGG = dict(rtol=4e-6, atol=1e-7)  # row sums of O(1) cancel to O(0.1): a few float32 ulps become ~1e-6 relative
# dew_rl mode for each Tunix mode; each Tunix sequence mode divides by NE where dew_rl divides by B
MODES = {"token-mean": ("token-mean", False), "sequence-mean-token-mean": ("seq-mean-token-mean", True),
         "sequence-mean-token-scale": ("seq-mean-token-sum-norm", True),  # both default the constant to T
         "seq-mean-token-sum": ("seq-mean-token-sum", True),
         "sequence-mean-token-sum-norm": ("seq-mean-token-sum", True)}  # 0.1.7: Σ S_i / NE, no constant


@pytest.mark.parametrize("gamma,lam", [(1.0, 0.95), (0.9, 0.8)])
def test_gae_every_position_float32(ref, gamma, lam):
    adv, ret = rl.gae(ref["gae/token_rewards"], ref["gae/values"], ref["mask"], gamma, lam)
    assert adv.dtype == ret.dtype == np.float32
    np.testing.assert_allclose(adv, ref[f"gae/f32/advantages_{gamma}_{lam}"], **F32)  # pads and the empty row too
    np.testing.assert_allclose(ret, ref[f"gae/f32/returns_{gamma}_{lam}"], **F32)


@pytest.mark.parametrize("gamma,lam", [(1.0, 0.95), (0.9, 0.8)])
def test_gae_every_position_float64(ref, gamma, lam):
    with jax.enable_x64(True):
        f64 = lambda k: ref[k].astype(np.float64)  # noqa: E731
        adv, ret = rl.gae(f64("gae/token_rewards"), f64("gae/values"), f64("mask"), gamma, lam)
        np.testing.assert_allclose(adv, ref[f"gae/f64/advantages_{gamma}_{lam}"], **F64)
        np.testing.assert_allclose(ret, ref[f"gae/f64/returns_{gamma}_{lam}"], **F64)


def test_gae_one_valid_token(ref):
    """Tunix: Bessel's N/(N-1) = 1/0 makes every advantage NaN. dew_rl: 0 at the token, finite elsewhere."""
    m = ref["gae_one/mask"]
    assert np.isnan(ref["gae_one/advantages"]).all()
    adv, ret = rl.gae(ref["gae_one/token_rewards"], ref["gae_one/values"], m, 1.0, 0.95)
    adv = np.asarray(adv)
    assert np.isfinite(adv).all() and adv[m > 0].tolist() == [0.0]
    np.testing.assert_allclose(ret, ref["gae_one/returns"], **F32)  # returns are not whitened: both finite


def test_grpo_drgrpo_rloo(ref):
    s = ref["group/scores"]
    with jax.enable_x64(True):
        np.testing.assert_allclose(rl.group_advantage(s, G), ref["group/grpo"], **F64)
        np.testing.assert_allclose(rl.group_advantage(s, G, normalise_by_std=False), ref["group/drgrpo"], **F64)
        np.testing.assert_allclose(rl.rloo_advantage(s, G), ref["group/rloo"], **F64)
        # the equal-reward group: exact zeros in dew_rl (shifted); Tunix's unshifted RLOO leaves 1.1e-16
        np.testing.assert_array_equal(np.asarray(rl.rloo_advantage(s, G))[G:2 * G], 0.0)
        np.testing.assert_array_equal(ref["group/grpo"][G:2 * G], 0.0)


def test_groups_of_one_differ_by_design(ref):
    """Tunix: GRPO NaN (ddof=1 std of one value), Dr.GRPO 0, RLOO zeros. dew_rl raises where Tunix is NaN or 0."""
    s = ref["group1/scores"]
    assert np.isnan(ref["group1/grpo"]).all()
    np.testing.assert_array_equal(ref["group1/rloo"], 0.0)
    np.testing.assert_array_equal(ref["group1/drgrpo"], 0.0)
    np.testing.assert_array_equal(rl.group_advantage(s, 1, normalise_by_std=False), ref["group1/drgrpo"])
    with pytest.raises(ValueError):
        rl.group_advantage(s, 1)
    with pytest.raises(ValueError):
        rl.rloo_advantage(s, 1)


@pytest.mark.parametrize("ours,theirs", [("k1_kl", "kl"), ("k2_kl", "mse_kl")])
def test_k1_k2_unclamped_everywhere(ref, ours, theirs):
    got = getattr(rl, ours)(ref["kl/log_probs"], ref["kl/ref_log_probs"])
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, ref[f"kl/{theirs}"], rtol=1e-6, atol=0)  # including |δ| = 29


def test_k3_inside_and_outside_the_clamps(ref):
    lp, rp, tunix = ref["kl/log_probs"], ref["kl/ref_log_probs"], ref["kl/low_var_kl"]
    ours = np.asarray(rl.k3_kl(lp, rp))
    inside = (np.abs(rp - lp) <= 20) & (tunix <= rl.KL_OUTPUT_CLAMP)
    assert (~inside).sum() == 3  # the three hand-placed points of column 0
    np.testing.assert_allclose(ours[inside], tunix[inside], **KL3)
    # outside: Tunix is unclamped (3.93e12 at δ = 29, 24 at δ = -25, 1.6e5 at δ = 12); dew_rl is exactly 10
    np.testing.assert_allclose(tunix[:3, 0], [np.exp(29.0) - 30.0, np.exp(-25.0) + 24.0, np.exp(12.0) - 13.0], rtol=1e-6)
    np.testing.assert_array_equal(ours[~inside], rl.KL_OUTPUT_CLAMP)
    np.testing.assert_allclose(ours, np.minimum(tunix, rl.KL_OUTPUT_CLAMP), **KL3)
    np.testing.assert_allclose(ours, ref["kl/low_var_kl_clamp10"], **KL3)  # = Tunix with clamp_value=10 (#1560)
    # Tunix #2315: exp(δ) - δ - 1 in float32 at lp = -1e-6, ref = 0 is -2^-24; expm1 keeps it positive (~δ²/2)
    assert tunix[4, 0] == -(2.0 ** -24)
    assert 0 < ours[4, 0] < 1e-12


@pytest.mark.parametrize("mode", list(MODES))
def test_aggregation_with_an_empty_row(ref, mode):
    loss, m = ref["agg/loss"], ref["mask"]
    B, keep = m.shape[0], m.sum(1) > 0
    NE = int(keep.sum())
    assert (B, NE) == (8, 7)
    ours_mode, by_rows = MODES[mode]
    tunix = float(ref[f"agg/{mode}"])
    full = float(rl.aggregate(loss, m, ours_mode))
    np.testing.assert_allclose(tunix, float(rl.aggregate(loss[keep], m[keep], ours_mode)), **AGG)  # non-empty rows
    np.testing.assert_allclose(tunix, full * (B / NE if by_rows else 1.0), **AGG)  # the documented factor B/NE


def test_the_oracle_can_tell_conventions_apart(ref):
    """A ddof=0 group std, GAE without the masked-step carry, or a sequence mean over all B rows misses the fixture."""
    s, m = ref["group/scores"], ref["mask"]
    x = s.reshape(-1, G)
    ddof0 = ((x - x.mean(1, keepdims=True)) / (x.std(1, keepdims=True) + 1e-6)).reshape(-1)
    assert not np.allclose(ddof0, ref["group/grpo"], **F64)
    # every position a step (pads' values read, holes discounted), then whitened over the valid tokens
    raw = rl.gae_raw(ref["gae/token_rewards"], ref["gae/values"], np.ones_like(m), 1.0, 0.95)
    assert not np.allclose(rl.masked_whiten(raw, m), ref["gae/f32/advantages_1.0_0.95"], **F32)
    full = float(rl.aggregate(ref["agg/loss"], m, "seq-mean-token-mean"))
    assert not np.isclose(full, float(ref["agg/sequence-mean-token-mean"]), **AGG)
    assert not np.allclose(rl.k3_kl(ref["kl/log_probs"], ref["kl/ref_log_probs"]), ref["kl/low_var_kl"], **KL3)
