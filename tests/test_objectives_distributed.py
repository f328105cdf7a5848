"""The objectives across data-parallel shards.

(a) `jax.jit(jax.shard_map(...))` over a `dp` axis of four simulated CPU devices (tests/conftest.py
    sets XLA_FLAGS): for every estimator, the stage-1 moments and advantages, the stage-2 loss and
    metrics, and each shard's gradient equal the single-device run on the concatenated batch (the
    gradient: its slice), with one shard whose responses are all masked.
(b) `jax.jit` with inputs sharded by `NamedSharding` over the four devices and no `axis_name`.
(c) Two real processes joined by `jax.distributed.initialize` (CPU collectives), running the
    REINFORCE++-baseline objective end to end with one rank holding only fully masked responses:
    both ranks report the same moments, loss and gradients equal the concatenated single-process
    run and the float64 reference, and a globally empty batch raises on both ranks.
"""
from __future__ import annotations

import dataclasses
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

import dew_rl as rl
import dew_rl.objectives as obj
from dew_rl.testing import poison, random_mask
from _multiprocess import run_processes
import objectives_reference as ref

NDEV, B, T, G = 4, 16, 6, 4          # four rows per shard: one whole group each
EMPTY_SHARD = 2                       # rows 8-11 hold no valid token


def make_batch(seed=3):
    rng = np.random.default_rng(seed)
    m = random_mask(seed, B, T, empty_rows=0)
    m[EMPTY_SHARD * 4:(EMPTY_SHARD + 1) * 4] = 0.0
    old = rng.normal(-1.0, 0.3, (B, T))
    data = dict(mask=m, old_log_probs=old, ref_log_probs=old + rng.normal(0, 0.2, (B, T)),
                behavior_log_probs=old + rng.normal(0, 0.2, (B, T)), token_rewards=rng.normal(0, 0.5, (B, T)),
                old_values=rng.normal(0, 0.5, (B, T)), rewards=rng.normal(0.3, 1.0, B))
    data["rewards"][12:] = 0.5                                        # shard 3's group is degenerate (DAPO drops it)
    extra = dict(lp=old + rng.normal(0, 0.3, (B, T)), values=data["old_values"] + rng.normal(0, 0.3, (B, T)),
                 entropy=rng.uniform(0.2, 2.0, (B, T)))
    return data, extra


DATA, EXTRA = make_batch()
GROUPED = {"n_samples_per_prompt": G}
CONFIGS = {
    "reinforce_plus_plus": obj.reinforce_plus_plus(),
    "reinforce_plus_plus_baseline": obj.reinforce_plus_plus_baseline(**GROUPED),
    "grpo": obj.grpo(**GROUPED, use_kl_loss=True, entropy_coeff=0.01, tis_cap=2.0),
    "dr_grpo": obj.dr_grpo(**GROUPED),
    "dapo": obj.dapo(**GROUPED, overlong_buffer_len=2),
    "gspo": obj.gspo(**GROUPED),
    "sapo": obj.sapo(**GROUPED),
    "cispo": obj.cispo(**GROUPED),
    "rloo": obj.rloo(**GROUPED),
    "ppo": obj.ppo(kl_coef=0.05),
}


@pytest.fixture(scope="module")
def mesh():
    if jax.device_count() < NDEV:
        pytest.skip("needs XLA_FLAGS=--xla_force_host_platform_device_count=4 (tests/conftest.py)")
    return Mesh(np.array(jax.devices()[:NDEV]), ("dp",))


def inputs(data=DATA, extra=EXTRA):
    m = data["mask"]
    f32 = lambda a: jnp.asarray(poison(a, m), jnp.float32)
    ro = obj.Rollout(mask=m, rewards=jnp.asarray(data["rewards"], jnp.float32),
                     **{k: f32(v) for k, v in data.items() if k not in ("mask", "rewards")})
    return ro, f32(extra["lp"]), f32(extra["values"]), f32(extra["entropy"])


def step(cfg, axis_name):
    """Both stages and the gradient, as a trainer runs them on one mini-batch."""
    is_ppo = cfg.advantage_estimator == "ppo"

    def f(lp, ro, values, entropy):
        ro2, rmet = obj.advantages(cfg, ro, axis_name=axis_name)
        counts = rl.loss_counts(ro2.mask, axis_name=axis_name)

        def total(x, v):
            return obj.loss(cfg, x, ro2, axis_name=axis_name, counts=counts, values=v if is_ppo else None,
                            entropy=entropy if cfg.entropy_coeff else None)

        (val, tmet), grads = jax.value_and_grad(total, argnums=(0, 1), has_aux=True)(lp, values)
        return val, {**rmet, **tmet}, grads, ro2.advantages

    return f


def single(cfg):
    ro, lp, values, entropy = inputs()
    return jax.jit(step(cfg, None))(lp, ro, values, entropy)


def sharded(cfg, mesh):
    ro, lp, values, entropy = inputs()
    f = jax.shard_map(step(cfg, "dp"), mesh=mesh, in_specs=(P("dp"), P("dp"), P("dp"), P("dp")),
                      out_specs=(P(), P(), P("dp"), P("dp")))
    return jax.jit(f)(lp, ro, values, entropy)


def assert_same(got, want, rtol=2e-5, atol=2e-6):
    val, met, (g_lp, g_v), adv = got
    val1, met1, (g_lp1, g_v1), adv1 = want
    np.testing.assert_allclose(float(val), float(val1), rtol=rtol, atol=atol)
    assert set(met) == set(met1)
    for k in met1:
        np.testing.assert_allclose(float(met[k]), float(met1[k]), rtol=rtol, atol=atol, err_msg=k)
    np.testing.assert_allclose(np.asarray(adv), np.asarray(adv1), rtol=rtol, atol=atol)
    np.testing.assert_allclose(np.asarray(g_lp), np.asarray(g_lp1), rtol=rtol, atol=1e-7)
    np.testing.assert_allclose(np.asarray(g_v), np.asarray(g_v1), rtol=rtol, atol=1e-7)
    assert np.isfinite(np.asarray(g_lp)).all()


@pytest.mark.parametrize("name", list(CONFIGS))
def test_shard_map_equals_single_device(mesh, name):
    cfg = CONFIGS[name]
    got, want = sharded(cfg, mesh), single(cfg)
    assert_same(got, want)
    s = slice(EMPTY_SHARD * 4, (EMPTY_SHARD + 1) * 4)
    assert (np.asarray(got[3])[s] == 0).all() and (np.asarray(got[2][0])[s] == 0).all()   # the empty shard
    # and the single-device run is the float64 reference on the concatenated batch
    adv, returns, k, rmet, *_ = ref.ref_advantages(cfg, DATA["mask"], DATA["rewards"], DATA["old_log_probs"],
                                                   DATA["ref_log_probs"], DATA["token_rewards"], DATA["old_values"])
    np.testing.assert_allclose(np.asarray(got[3]), adv, rtol=2e-5, atol=2e-5)
    for key in ("rollout/advantages_raw_mean", "rollout/advantages_raw_std", "rollout/valid_tokens"):
        np.testing.assert_allclose(float(got[1][key]), rmet[key], rtol=2e-5, atol=2e-6, err_msg=key)


def test_shard_local_statistics_would_differ(mesh):
    """The comparison can fail: stage 1 without axis_name (each shard's own moments) gives other advantages."""
    cfg = CONFIGS["reinforce_plus_plus_baseline"]
    ro, lp, values, entropy = inputs()
    ro = dataclasses.replace(ro, mask=random_mask(5, B, T, empty_rows=0))     # no empty shard: each has moments
    f = jax.shard_map(lambda r: obj.advantages(cfg, r)[0].advantages, mesh=mesh, in_specs=P("dp"), out_specs=P("dp"))
    local = np.asarray(jax.jit(f)(ro))
    want = np.asarray(obj.advantages(cfg, ro)[0].advantages)
    assert np.abs(local - want).max() > 1e-2


def test_group_split_across_shards_is_rejected(mesh):
    cfg = obj.grpo(n_samples_per_prompt=8)                            # a group of 8 rows over shards of 4
    ro, lp, values, entropy = inputs()
    f = jax.shard_map(lambda r: obj.advantages(cfg, r, axis_name="dp")[0].advantages, mesh=mesh,
                      in_specs=P("dp"), out_specs=P("dp"))
    with pytest.raises(ValueError, match="its 4 local rows must be a multiple of n_samples_per_prompt=8"):
        jax.jit(f).lower(ro)


def test_shard_map_global_empty_raises(mesh):
    cfg = CONFIGS["reinforce_plus_plus_baseline"]
    ro, lp, values, entropy = inputs()
    empty = dataclasses.replace(ro, mask=np.zeros((B, T)))
    f = jax.jit(jax.shard_map(lambda r: obj.advantages(cfg, r, axis_name="dp")[1]["rollout/valid_tokens"],
                              mesh=mesh, in_specs=P("dp"), out_specs=P()))
    assert int(f(ro)) == int(DATA["mask"].sum())                      # one empty shard is fine
    with pytest.raises(Exception, match="keeps no token in the whole"):
        f(empty).block_until_ready()


@pytest.mark.parametrize("name", ["grpo", "rloo", "dapo", "reinforce_plus_plus_baseline"])
def test_shard_map_with_prompt_ids(mesh, name):
    """Groups by prompt id under shard_map: shuffled rows within each shard, ragged groups; equal to one device."""
    cfg = getattr(obj, name)(n_samples_per_prompt=4)
    ro, lp, values, entropy = inputs()
    rows = B // 4                                                   # rows per shard
    ids = np.repeat(np.arange(B // 2), 2)                           # groups of two rows...
    ids[:4] = [900, 900, 900, 97]                                   # ...and a group of three and a singleton
    rng = np.random.default_rng(3)
    perm = np.concatenate([s * rows + rng.permutation(rows) for s in range(4)])   # shuffled inside each shard
    ro = jax.tree_util.tree_map(lambda a: jnp.asarray(a)[perm], dataclasses.replace(ro, group_ids=ids))
    if name == "dapo":   # one shard whose groups all tie: its rows leave the loss, the others do not
        ro = dataclasses.replace(ro, rewards=ro.rewards.at[rows:2 * rows].set(0.5))
    f = jax.shard_map(lambda r: obj.advantages(cfg, r, axis_name="dp"), mesh=mesh, in_specs=P("dp"),
                      out_specs=(P("dp"), P()))
    got_ro, got_met = jax.jit(f)(ro)
    want_ro, want_met = obj.advantages(cfg, ro)
    np.testing.assert_allclose(np.asarray(got_ro.advantages), np.asarray(want_ro.advantages), rtol=2e-5, atol=2e-6)
    np.testing.assert_array_equal(np.asarray(got_ro.mask), np.asarray(want_ro.mask))
    for k in want_met:
        np.testing.assert_allclose(float(got_met[k]), float(want_met[k]), rtol=2e-5, atol=2e-6, err_msg=k)
    adv, _, k, rmet = ref.ref_advantages(cfg, np.asarray(ro.mask), np.asarray(ro.rewards), group_ids=np.asarray(ro.group_ids))
    np.testing.assert_allclose(np.asarray(got_ro.advantages), adv, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_named_sharding_without_axis_name(mesh, name):
    """Inputs sharded by NamedSharding, plain jit, no axis_name (GSPMD): the same numbers."""
    cfg = CONFIGS[name]
    ro, lp, values, entropy = inputs()
    sh = NamedSharding(mesh, P("dp"))
    put = lambda tree: jax.tree_util.tree_map(lambda a: jax.device_put(jnp.asarray(a), sh), tree)
    got = jax.jit(step(cfg, None))(put(lp), put(ro), put(values), put(entropy))
    assert got[3].sharding.is_equivalent_to(sh, 2)
    assert_same(got, single(cfg))


# --------------------------------------------------------------------------- (c) two real processes
CHILD = textwrap.dedent(
    """
    import jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    import dew_rl as rl
    import dew_rl.objectives as obj

    mesh = Mesh(np.array(jax.devices()), ("dp",))
    sh = NamedSharding(mesh, P("dp"))
    cfg = obj.reinforce_plus_plus_baseline(n_samples_per_prompt=PAYLOAD["G"])
    part = lambda a: jax.make_array_from_process_local_data(sh, a)
    local = lambda a: np.asarray(a.addressable_shards[0].data, np.float64)

    def step(lp, ro):
        ro2, rmet = obj.advantages(cfg, ro, axis_name="dp")
        counts = rl.loss_counts(ro2.mask, axis_name="dp")
        (val, tmet), g = jax.value_and_grad(lambda x: obj.loss(cfg, x, ro2, axis_name="dp", counts=counts),
                                            has_aux=True)(lp)
        return val, {**rmet, **tmet}, g, ro2.advantages

    f = jax.jit(jax.shard_map(step, mesh=mesh, in_specs=(P("dp"), P("dp")), out_specs=(P(), P(), P("dp"), P("dp"))))

    def rollout(case):
        m = np.array(case["mask"][PID], np.float32)
        arr = {k: np.array(case[k][PID], np.float32) for k in ("old_log_probs", "ref_log_probs", "lp")}
        for a in arr.values():
            a[m == 0] = np.nan                                       # never read
        ro = obj.Rollout(mask=part(m), old_log_probs=part(arr["old_log_probs"]),
                         ref_log_probs=part(arr["ref_log_probs"]),
                         rewards=part(np.array(case["rewards"][PID], np.float32)))
        return part(arr["lp"]), ro

    result = {"pid": PID}
    lp, ro = rollout(PAYLOAD)
    val, met, g, adv = f(lp, ro)
    result["loss"] = float(np.asarray(val.addressable_shards[0].data))
    result["metrics"] = {k: float(np.asarray(v.addressable_shards[0].data)) for k, v in met.items()}
    result["grad"] = local(g).tolist()
    result["advantages"] = local(adv).tolist()
    empty = dict(PAYLOAD, mask=[np.zeros_like(np.array(m)).tolist() for m in PAYLOAD["mask"]])
    lp0, ro0 = rollout(empty)
    try:
        jax.block_until_ready(f(lp0, ro0))
        result["empty_error"] = ""
    except Exception as e:
        result["empty_error"] = str(e)[-2000:]
    print("RESULT " + json.dumps(result), flush=True)
    jax.distributed.shutdown()
    """
)


def test_two_processes_reinforce_plus_plus_baseline(tmp_path):
    rng = np.random.default_rng(21)
    Bl, Tl, Gl = 4, 5, 2
    masks = [(np.arange(Tl)[None] < np.array([[5], [2], [4], [3]])).astype(float), np.zeros((Bl, Tl))]
    masks[0][0, 2] = 0.0                                              # an interior hole; rank 1 holds nothing
    old = [rng.normal(-1, 0.3, (Bl, Tl)).round(4) for _ in range(2)]
    refs = [o + rng.normal(0, 0.2, (Bl, Tl)).round(4) for o in old]
    lps = [o + rng.normal(0, 0.3, (Bl, Tl)).round(4) for o in old]
    rewards = [rng.normal(0.5, 1.0, Bl).round(3) for _ in range(2)]
    payload = {"G": Gl, "mask": [m.tolist() for m in masks], "old_log_probs": [a.tolist() for a in old],
               "ref_log_probs": [a.tolist() for a in refs], "lp": [a.tolist() for a in lps],
               "rewards": [r.tolist() for r in rewards]}
    results = run_processes(CHILD, payload, tmp_path, nproc=2, timeout=120)

    cat = lambda xs: np.concatenate(xs)
    cfg = obj.reinforce_plus_plus_baseline(n_samples_per_prompt=Gl)
    M, OLD, REF, LP, R = cat(masks), cat(old), cat(refs), cat(lps), cat(rewards)
    # the same objective on the concatenated batch in this single process
    ro = obj.Rollout(mask=M, old_log_probs=jnp.asarray(poison(OLD, M), jnp.float32),
                     ref_log_probs=jnp.asarray(poison(REF, M), jnp.float32), rewards=jnp.asarray(R, jnp.float32))
    ro2, rmet = obj.advantages(cfg, ro)
    counts = rl.loss_counts(ro2.mask)
    (val, tmet), g = jax.value_and_grad(lambda x: obj.loss(cfg, x, ro2, counts=counts), has_aux=True)(
        jnp.asarray(poison(LP, M), jnp.float32))
    met1 = {**rmet, **tmet}
    # and the float64 reference
    adv_ref, _, k, rmet_ref = ref.ref_advantages(cfg, M, R, OLD, REF)
    loss_ref, _ = ref.ref_loss(cfg, LP, k, OLD, adv_ref, ref=REF)
    for pid in (0, 1):
        r = results[pid]
        np.testing.assert_allclose(r["loss"], float(val), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(r["loss"], loss_ref, rtol=1e-5, atol=1e-6)
        for key in met1:
            np.testing.assert_allclose(r["metrics"][key], float(met1[key]), rtol=1e-5, atol=1e-6, err_msg=key)
        for key in ("rollout/advantages_raw_mean", "rollout/advantages_raw_std", "rollout/advantages_mean",
                    "rollout/advantages_std", "rollout/valid_tokens"):
            np.testing.assert_allclose(r["metrics"][key], rmet_ref[key], rtol=1e-5, atol=1e-6, err_msg=key)
        rows = slice(Bl * pid, Bl * (pid + 1))
        np.testing.assert_allclose(np.array(r["grad"]), np.asarray(g)[rows], rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(np.array(r["advantages"]), adv_ref[rows], rtol=1e-5, atol=1e-6)
        assert "keeps no token in the whole" in r["empty_error"], (pid, r["empty_error"][-500:])
    assert results[0]["metrics"] == results[1]["metrics"]                 # the same moments on both ranks
    assert (np.array(results[1]["grad"]) == 0).all() and (np.array(results[1]["advantages"]) == 0).all()
    # the comparison can fail: rank 0 alone (its own rows in the response mean) gives another loss
    own_adv, _, own_k, _ = ref.ref_advantages(cfg, masks[0], rewards[0], old[0], refs[0])
    own_loss, _ = ref.ref_loss(cfg, lps[0], own_k, old[0], own_adv, ref=refs[0])
    assert abs(own_loss - loss_ref) > 1e-3


# the frontier's batch statistics and masks, with one shard that holds no valid token: sharded == single device
_rng = np.random.default_rng(11)
FRONTIER_DATA = dict(DATA, teacher_log_probs=DATA["old_log_probs"] + _rng.normal(0, 0.4, (B, T)))
FRONTIER = {
    "grpo_batch_std": obj.grpo(**GROUPED, scale_rewards="batch"),
    "grpo_loo": obj.grpo(**GROUPED, use_leave_one_out_baseline=True),
    "grpo_opd": obj.grpo(**GROUPED, opd_kl_coef=0.3),
    "grpo_m2_mask": obj.grpo(**GROUPED, m2_threshold=0.02),
    "grpo_m2po_clip": obj.grpo(**GROUPED, loss_mode="m2po", kl2_budget=0.01),
    "grpo_positive_nll": obj.grpo(**GROUPED, positive_example_nll_weight=0.5),
    "on_policy_distillation": obj.on_policy_distillation(),
    "ppo_vapo_gae": obj.ppo(gae_lambda_value=1.0, length_adaptive_alpha=0.4),
}


@pytest.mark.parametrize("name", list(FRONTIER))
def test_frontier_fields_shard_map_equals_single_device(mesh, name):
    cfg = FRONTIER[name]
    ro, lp, values, entropy = inputs(FRONTIER_DATA)
    want = jax.jit(step(cfg, None))(lp, ro, values, entropy)
    f = jax.shard_map(step(cfg, "dp"), mesh=mesh, in_specs=(P("dp"), P("dp"), P("dp"), P("dp")),
                      out_specs=(P(), P(), P("dp"), P("dp")))
    got = jax.jit(f)(lp, ro, values, entropy)
    assert_same(got, want)
    s = slice(EMPTY_SHARD * 4, (EMPTY_SHARD + 1) * 4)
    assert (np.asarray(got[3])[s] == 0).all() and (np.asarray(got[2][0])[s] == 0).all()
