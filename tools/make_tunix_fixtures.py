"""Freeze Tunix 0.1.7's outputs on seeded inputs as a test fixture (tests/fixtures/tunix_0_1_7.npz).

Tunix is a reference framework, not a dependency: this script runs in a separate environment that
has it, installed "lite":

    python3 -m venv /tmp/tunix-oracle
    /tmp/tunix-oracle/bin/pip install --no-deps google-tunix==0.1.7
    /tmp/tunix-oracle/bin/pip install jax==0.10.2 flax==0.12.8 absl-py humanize fsspec huggingface_hub
    /tmp/tunix-oracle/bin/python tools/make_tunix_fixtures.py

The lite shim (tools/stubs/tunix_lite.py): an empty `tunix` package module whose `__path__` is the
installed directory, so `tunix/__init__.py` (which imports every trainer) never runs. The script
stores only inputs and Tunix's outputs; no Tunix code is copied. tests/test_tunix_oracle.py compares
dew_rl with the stored outputs on every `make test`.

Dtypes are Tunix's own: GAE runs in JAX's default float32 (and once more under `jax_enable_x64` with
float64 inputs, the same jitted code, for a tight check of the carry and the whitening); the group
advantages are NumPy functions and run in float64 on float64 rewards; `compute_kl_divergence` and
`aggregate_loss` cast to float32 themselves, so their inputs are drawn in float32.
"""
import importlib.metadata
import sys
import warnings
from pathlib import Path

import numpy as np

VERSION = importlib.metadata.version("google-tunix")
assert VERSION == "0.1.7", VERSION
sys.path.insert(0, str(Path(__file__).resolve().parent / "stubs"))
from tunix_lite import install  # noqa: E402

install()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from tunix.rl import algo_core as ac  # noqa: E402
from tunix.rl import common  # noqa: E402

assert jax.__version__ == "0.10.2", jax.__version__
OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "tunix_0_1_7.npz"
rng = np.random.default_rng(20261130)
B, T, G = 8, 12, 4
store = {}


def put(name, value, dtype=None):
    a = np.asarray(value)
    store[name] = a.astype(dtype) if dtype is not None else a


# A mask with variable lengths, interior holes and one fully masked row (row 5).
lengths = rng.integers(3, T + 1, size=B)
mask = (np.arange(T)[None, :] < lengths[:, None]).astype(np.float32)
mask[1, 1] = mask[4, 2] = mask[6, 1] = 0.0
mask[5] = 0.0
put("mask", mask)

# GAE: float32 (Tunix's default) and the same jitted function with float64 inputs under x64.
rewards_tok = (rng.normal(size=(B, T)) * mask).astype(np.float32)
values = rng.normal(size=(B, T)).astype(np.float32)
put("gae/token_rewards", rewards_tok); put("gae/values", values)
for gamma, lam in [(1.0, 0.95), (0.9, 0.8)]:
    adv, ret = ac.compute_gae_advantages(jnp.asarray(rewards_tok), jnp.asarray(values), jnp.asarray(mask), gamma, lam)
    assert adv.dtype == ret.dtype == jnp.float32, (adv.dtype, ret.dtype)
    put(f"gae/f32/advantages_{gamma}_{lam}", adv); put(f"gae/f32/returns_{gamma}_{lam}", ret)
with jax.enable_x64(True):
    for gamma, lam in [(1.0, 0.95), (0.9, 0.8)]:
        adv, ret = ac.compute_gae_advantages(jnp.asarray(rewards_tok, jnp.float64), jnp.asarray(values, jnp.float64),
                                             jnp.asarray(mask, jnp.float64), gamma, lam)
        assert adv.dtype == ret.dtype == jnp.float64, (adv.dtype, ret.dtype)
        put(f"gae/f64/advantages_{gamma}_{lam}", adv); put(f"gae/f64/returns_{gamma}_{lam}", ret)

# One valid token in the whole batch (Tunix gives NaN: Bessel variance of one value), float32.
one_mask = np.zeros((2, 5), np.float32); one_mask[0, 2] = 1.0
one_r = np.zeros((2, 5), np.float32); one_r[0, 2] = 0.7
one_v = rng.normal(size=(2, 5)).astype(np.float32)
adv, ret = ac.compute_gae_advantages(jnp.asarray(one_r), jnp.asarray(one_v), jnp.asarray(one_mask), 1.0, 0.95)
put("gae_one/mask", one_mask); put("gae_one/token_rewards", one_r); put("gae_one/values", one_v)
put("gae_one/advantages", adv); put("gae_one/returns", ret)

# GRPO, Dr.GRPO and RLOO: NumPy float64 rewards, contiguous groups of G.
scores = rng.normal(size=B).round(1)
scores[G:2 * G] = 0.7  # one group of equal rewards
put("group/scores", scores)
put("group/grpo", ac.compute_advantages(scores, G))
put("group/drgrpo", ac.compute_drgrpo_advantages(scores, G))
put("group/rloo", ac.compute_rloo_advantages(scores, G))
single = np.array([2.0, -0.5, 1.3])  # groups of one
put("group1/scores", single)
with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
    warnings.simplefilter("ignore", RuntimeWarning)  # ddof=1 of one value: NaN, which is the point
    put("group1/grpo", ac.compute_advantages(single, 1))
put("group1/drgrpo", ac.compute_drgrpo_advantages(single, 1))
put("group1/rloo", ac.compute_rloo_advantages(single, 1))

# KL estimators (Tunix casts to float32). Column 0 of row 0..4 holds hand-placed points:
#   ref - lp = 29 (beyond verl's +20 input clamp), -25 (beyond -20), 12 (k3 above the output clamp 10),
#   2.5 (k3 ~ 8.7, inside both clamps), and lp = -1e-6, ref = 0 (Tunix #2315, the cancellation).
lp = rng.normal(-1.0, 1.0, size=(B, T)).astype(np.float32)
ref = (lp + rng.normal(0.0, 0.7, size=(B, T))).astype(np.float32)
for i, (a, b) in enumerate([(-30.0, -1.0), (0.0, -25.0), (-13.0, -1.0), (-3.5, -1.0), (-1e-6, 0.0)]):
    lp[i, 0], ref[i, 0] = a, b
put("kl/log_probs", lp); put("kl/ref_log_probs", ref)
for name in ("kl", "mse_kl", "low_var_kl"):
    kl = common.compute_kl_divergence(jnp.asarray(lp), jnp.asarray(ref), name)
    assert kl.dtype == jnp.float32
    put(f"kl/{name}", kl)
put("kl/low_var_kl_clamp10", common.compute_kl_divergence(jnp.asarray(lp), jnp.asarray(ref), "low_var_kl", 10.0))

# Aggregation (float32), on the mask with the empty row.
loss_mat = rng.normal(size=(B, T)).astype(np.float32)
put("agg/loss", loss_mat)
for mode in ("token-mean", "sequence-mean-token-mean", "sequence-mean-token-scale", "seq-mean-token-sum",
             "sequence-mean-token-sum-norm"):
    put(f"agg/{mode}", common.aggregate_loss(jnp.asarray(loss_mat), jnp.asarray(mask), mode))

# The 3x4 batch of the reductions chapter (one empty row), whose five figures were recorded in an earlier run.
L = np.array([[1, 2, 3, 4], [5, 6, 0, 0], [0, 0, 0, 0]], np.float32)
M = np.array([[1, 1, 1, 1], [1, 1, 0, 0], [0, 0, 0, 0]], np.float32)
recorded = {"token-mean": 3.5, "sequence-mean-token-mean": 4.0, "sequence-mean-token-scale": 2.625,
            "seq-mean-token-sum": 10.5, "sequence-mean-token-sum-norm": 10.5}
for mode, fig in recorded.items():
    got = float(common.aggregate_loss(jnp.asarray(L), jnp.asarray(M), mode))
    assert got == fig, (mode, got, fig)

np.savez_compressed(OUT, **store)
print(f"wrote {len(store)} arrays to {OUT.relative_to(OUT.parent.parent.parent)} "
      f"(google-tunix {VERSION}, jax {jax.__version__})")
