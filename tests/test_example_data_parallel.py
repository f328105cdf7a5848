"""Data parallel as a user runs it: examples/train.py on 4 simulated CPU devices equals the single-device run.

What this file backs, sentence by sentence, in the README's and 04d's data-parallel text:

1. `shard_map` over "dp" with `axis_name="dp"` (rows `P("dp")`, parameters `P()`): the gradient of a
   replicated parameter is the global gradient on every device, with no `psum` of it; a `psum` makes it
   N times too large.
2. With `check_vma=False`, each device's gradient is N times its share of the global one; the sum over
   "dp" is N times the global gradient, and `pmean` over "dp" is the global gradient.
3. `jit` over rows sharded with `NamedSharding(mesh, P("dp"))` and `axis_name=None`: the global gradient.
4. The trainer in either form, for GRPO (KL loss), DAPO with token TIS and token-k3 rejection (one device
   holding only rows whose tokens are all masked) and PPO (value head): the parameters after a few
   optimiser steps equal the single-device run's to float32 round-off; across two processes too.

The single-device run is the reference (its own correctness is checked against float64 NumPy in the
objectives' tests); every comparison here is between two executions of the same mathematics on different
layouts, which fail when a collective is missing or doubled (the psum case below is the demonstration).
"""
import importlib.util
import pathlib
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

import dew_rl.objectives as obj
from _multiprocess import run_processes

pytest.importorskip("flax")
pytest.importorskip("optax")

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "examples" / "train.py"
NDEV = 4


@pytest.fixture(scope="module")
def mesh():
    if jax.device_count() < NDEV:
        pytest.skip("needs XLA_FLAGS=--xla_force_host_platform_device_count=4 (tests/conftest.py)")
    return Mesh(np.array(jax.devices()[:NDEV]), ("dp",))


@pytest.fixture(scope="module")
def train():
    name = "dew_rl_example_train_dp"
    spec = importlib.util.spec_from_file_location(name, SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(name, None)


# ---------------------------------------------------------------------------------------------------
# 1-3: the gradient rule, on a linear "model" whose log-probs are x * w
# ---------------------------------------------------------------------------------------------------
def grad_problem():
    rng = np.random.default_rng(0)
    B, T = 16, 6
    w = jnp.asarray(rng.normal(size=T), jnp.float32)
    x = jnp.asarray(rng.normal(size=(B, T)), jnp.float32)
    mask = rng.random((B, T)) > 0.3
    mask[4:8] = False                                      # device 1 holds rows with no kept token
    ro = obj.Rollout(mask=jnp.asarray(mask, jnp.float32), old_log_probs=0.1 * x,
                     rewards=jnp.asarray(rng.random(B), jnp.float32), group_ids=jnp.repeat(jnp.arange(4), 4))
    cfg = obj.grpo(n_samples_per_prompt=4, loss_agg_mode="token-mean")
    ro, _ = obj.advantages(cfg, ro)

    def loss(w, ro, x, axis_name=None):
        return obj.loss(cfg, 0.1 * x * w, ro, axis_name=axis_name)[0]

    return loss, w, ro, x


def test_shard_map_gradient_of_replicated_params_is_global(mesh):
    loss, w, ro, x = grad_problem()
    single = jax.grad(loss)(w, ro, x)
    assert float(jnp.abs(single).max()) > 1e-3

    def local(w, ro, x):
        g = jax.grad(loss)(w, ro, x, "dp")
        return g, jax.lax.psum(g, "dp")
    g, summed = jax.jit(jax.shard_map(local, mesh=mesh, in_specs=(P(), P("dp"), P("dp")), out_specs=(P(), P())))(
        w, ro, x)
    np.testing.assert_allclose(np.asarray(g), np.asarray(single), rtol=1e-5, atol=1e-8)
    # the psum a user adds believing each device holds its share: N times the gradient
    np.testing.assert_allclose(np.asarray(summed), NDEV * np.asarray(single), rtol=1e-5, atol=1e-8)


def test_check_vma_false_gradient_is_n_times_the_share(mesh):
    loss, w, ro, x = grad_problem()
    single = np.asarray(jax.grad(loss)(w, ro, x))

    def local(w, ro, x):
        g = jax.grad(loss)(w, ro, x, "dp")
        return g[None], jax.lax.pmean(g, "dp")[None]
    per_device, pmeaned = jax.jit(jax.shard_map(local, mesh=mesh, in_specs=(P(), P("dp"), P("dp")),
                                                out_specs=(P("dp"), P("dp")), check_vma=False))(w, ro, x)
    per_device = np.asarray(per_device)
    # each device: N x (the gradient of its own rows' share of the global loss); computed independently
    mask = np.asarray(ro.mask, np.float64)
    n_tok = mask.sum()
    for d in range(NDEV):
        rows = slice(d * 4, (d + 1) * 4)
        share = lambda w_: loss(w_, jax.tree.map(lambda a: a, ro), x * jnp.asarray(
            np.arange(16)[:, None] // 4 == d, jnp.float32))
        want = np.asarray(jax.grad(share)(w)) if mask[rows].sum() else np.zeros_like(single)
        np.testing.assert_allclose(per_device[d], NDEV * want, rtol=1e-5, atol=1e-7, err_msg=f"device {d}")
    assert n_tok > 0
    np.testing.assert_allclose(per_device.sum(0), NDEV * single, rtol=1e-5, atol=1e-7)
    for d in range(NDEV):
        np.testing.assert_allclose(np.asarray(pmeaned)[d], single, rtol=1e-5, atol=1e-8)


def test_jit_with_sharded_rows_gradient_is_global(mesh):
    loss, w, ro, x = grad_problem()
    single = jax.grad(loss)(w, ro, x)
    rows = NamedSharding(mesh, P("dp"))
    g = jax.jit(jax.grad(loss))(w, jax.device_put(ro, rows), jax.device_put(x, rows))
    np.testing.assert_allclose(np.asarray(g), np.asarray(single), rtol=1e-5, atol=1e-8)


# ---------------------------------------------------------------------------------------------------
# 4: the trainer, data parallel against one device
# ---------------------------------------------------------------------------------------------------
# SGD: a weight moves by lr x its gradient, so the comparison sees the gradient's round-off and nothing
# else. (AdamW divides by the root of the second moment: an entry of 1e-9 that round-off turns into 2e-9
# moves its weight by about lr either way; the AdamW run below compares losses and gradient norms.)
BASE = dict(steps=3, n_layers=1, epochs=1, optimizer="sgd", lr=0.5)
SETTINGS = {
    "grpo": dict(estimator="grpo"),                                  # with its k3 KL loss (kl_coef 0.01)
    "dapo_rejection": dict(estimator="dapo", rollout_correction="token_tis_k3", sampler_temperature=1.3,
                           shuffle=0),
    "ppo": dict(estimator="ppo"),
}


def tie_first_device(train, n_devices):
    """A verifier that ties every group of the first device's prompts: after DAPO's dynamic sampling that
    device holds only rows whose tokens are all masked (in stage 1, and, unshuffled, in mini-batch 0)."""
    def reward_fn(task, prompts, responses, mask):
        r = train.verify(task, prompts, responses, mask)
        r[: len(r) // n_devices] = 0.5                # the first device's rows: whole groups (prompt by prompt)
        return r
    return reward_fn


_RUNS = {}


def run(train, setting, devices=1, dp="shard_map", **extra):
    key = (setting, devices, dp, tuple(sorted(extra.items())))
    if key not in _RUNS:
        args = train.Args(**{**BASE, **SETTINGS[setting], **extra, "devices": devices, "dp": dp})
        reward_fn = tie_first_device(train, NDEV) if setting == "dapo_rejection" else train.verify
        _RUNS[key] = train.train(args, reward_fn=reward_fn, log=lambda line: None, return_params=True)
    return _RUNS[key]


def max_param_diff(a, b):
    return max(float(np.abs(x - y).max()) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


@pytest.mark.parametrize("dp", ["shard_map", "jit"])
@pytest.mark.parametrize("setting", list(SETTINGS))
def test_trainer_data_parallel_equals_one_device(train, mesh, setting, dp):
    h1, p1 = run(train, setting)
    h4, p4 = run(train, setting, devices=NDEV, dp=dp)
    moved = max_param_diff(p1, jax.tree.map(np.zeros_like, p1))
    assert moved > 0
    assert max_param_diff(p1, p4) < 1e-5, max_param_diff(p1, p4)
    for r1, r4 in zip(h1, h4):
        assert set(r1) == set(r4)
        for k, v in r1.items():
            if k != "seconds":
                np.testing.assert_allclose(r4[k], v, rtol=2e-5, atol=2e-6, err_msg=k)
    if setting == "dapo_rejection":
        # the first device's groups were tied and left the loss; the correction rejected some tokens
        assert all(r["rollout/kept_groups"] <= train.Args().prompts - train.Args().prompts // NDEV for r in h1)
        assert all(r["rollout_corr/rollout_rs_masked_fraction"] > 0 for r in h1)
        assert all(np.isfinite(v) for r in h4 for v in r.values())


def test_trainer_adamw_data_parallel_losses_equal(train, mesh):
    h1, _ = run(train, "grpo", optimizer="adamw", lr=1e-3)
    h4, _ = run(train, "grpo", devices=NDEV, optimizer="adamw", lr=1e-3)
    for r1, r4 in zip(h1, h4):
        for k in ("loss", "train/grad_norm", "train/pg_loss", "train/kl_loss", "rollout/advantages_std"):
            np.testing.assert_allclose(r4[k], r1[k], rtol=2e-5, atol=2e-6, err_msg=k)


def test_trainer_rejects_a_layout_that_splits_groups(train):
    with pytest.raises(ValueError, match="--prompts 6 does not divide by --devices 4"):
        train.train(train.Args(prompts=6, group_size=8, mini_batches=1, micro_batches=1, devices=4))


# ---------------------------------------------------------------------------------------------------
# Across two processes (jax.distributed, one CPU device each)
# ---------------------------------------------------------------------------------------------------
CHILD = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("train_dp_child", PAYLOAD["script"])
train = importlib.util.module_from_spec(spec); sys.modules["train_dp_child"] = train; spec.loader.exec_module(train)
base = dict(estimator="grpo", steps=2, n_layers=1, epochs=1, optimizer="sgd", lr=0.5)
h2, p2 = train.train(train.Args(**base, devices=2, dp=PAYLOAD["dp"]), log=lambda l: None, return_params=True)
h1, p1 = train.train(train.Args(**base), log=lambda l: None, return_params=True)
diff = max(float(np.abs(a - b).max()) for a, b in zip(jax.tree.leaves(p1), jax.tree.leaves(p2)))
print("RESULT " + json.dumps({"pid": PID, "diff": diff, "loss2": [r["loss"] for r in h2],
                              "loss1": [r["loss"] for r in h1], "devices": jax.device_count()}))
"""


@pytest.mark.parametrize("dp", ["shard_map"])
def test_trainer_two_processes(tmp_path, dp):
    results = run_processes(CHILD, {"script": str(SCRIPT), "dp": dp}, tmp_path, nproc=2, timeout=240)
    for r in results.values():
        assert r["devices"] == 2
        assert r["diff"] < 1e-5, r
        np.testing.assert_allclose(r["loss2"], r["loss1"], rtol=2e-5, atol=2e-6)


def test_data_parallel_script(mesh):
    "examples/data_parallel.py, the three forms side by side (the README's and 04d's numbers)."
    spec = importlib.util.spec_from_file_location("dew_rl_example_dp", ROOT / "examples" / "data_parallel.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    r = module.main()
    assert r["n"] == jax.device_count() >= NDEV and r["scale"] > 1e-2
    for k in ("shard_map", "psum", "unchecked_sum", "pmean", "jit"):
        assert r[k] < 1e-6 * r["scale"] * r["n"], (k, r)
