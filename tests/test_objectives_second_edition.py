"""What a real training loop found in the first edition of `dew_rl.objectives`, one test per finding.

A GRPO/DAPO/PPO trainer for a small transformer, written from outside the repository, crashed (DAPO with
every group tied), mis-grouped silently (a wrong group size) and recompiled at every coefficient change.
Each test below failed on the first edition (main at 43e25b8) and passes now; each docstring names the
finding. The float64 references are `tests/objectives_reference.py` (grouping by prompt id included).
"""
from __future__ import annotations

import dataclasses
import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dew_rl as rl
import dew_rl.objectives as obj
from tracing import jit_counting_traces
from dew_rl.testing import poison, random_mask
import objectives_reference as ref

B, T, G = 12, 6, 4


def batch(seed=0, rewards=None):
    rng = np.random.default_rng(seed)
    m = random_mask(seed, B, T, empty_rows=1).astype(np.float32)
    old = rng.normal(-1.0, 0.3, (B, T))
    r = rng.normal(0.5, 1.0, B) if rewards is None else np.asarray(rewards, np.float64)
    ro = obj.Rollout(mask=m, old_log_probs=jnp.asarray(poison(old, m), jnp.float32),
                     ref_log_probs=jnp.asarray(poison(old + 0.1, m), jnp.float32),
                     behavior_log_probs=jnp.asarray(poison(old - 0.05, m), jnp.float32),
                     rewards=jnp.asarray(r, jnp.float32))
    lp = old + rng.normal(0.0, 0.2, (B, T))
    return ro, lp, m, old, r


# ----------------------------------------------------------------------------- 1. DAPO with every group tied
@pytest.mark.parametrize("tie", [0.0, 1.0])
@pytest.mark.parametrize("jit", [False, True])
def test_dapo_every_group_tied_is_a_zero_update(tie, jit):
    """Finding 1: `dapo` with dynamic sampling raised when every group tied; it is a zero update now."""
    cfg = obj.dapo(n_samples_per_prompt=G)
    ro, lp, m, *_ = batch(rewards=np.full(B, tie))
    stage1 = jax.jit(obj.advantages, static_argnums=0) if jit else obj.advantages
    ro2, met = stage1(cfg, ro)
    assert int(met["rollout/kept_groups"]) == 0 and int(met["rollout/valid_tokens"]) == 0
    assert not np.asarray(ro2.mask).any()
    assert all(np.isfinite(float(v)) for v in met.values())
    for counts in (None, obj.loss_counts(ro2)):
        f = lambda x: obj.loss(cfg, x, ro2, counts=counts)  # noqa: E731
        if jit:
            f = jax.jit(f)
        (val, tm), g = jax.value_and_grad(f, has_aux=True)(jnp.asarray(poison(lp, m), jnp.float32))
        assert float(val) == 0.0 and not np.asarray(g).any()
        assert all(np.isfinite(float(v)) for v in tm.values())


def test_a_mask_empty_before_dynamic_sampling_is_still_an_error():
    cfg = obj.dapo(n_samples_per_prompt=G)
    ro, *_ = batch()
    with pytest.raises(rl.EmptyBatchError, match="keeps no token in the whole"):
        obj.advantages(cfg, dataclasses.replace(ro, mask=np.zeros((B, T), np.float32)))


def test_some_groups_tied_match_the_reference():
    cfg = obj.dapo(n_samples_per_prompt=G)
    r = np.concatenate([np.full(G, 1.0), [0.0, 1.0, 0.0, 0.5], np.full(G, 0.0)])
    ro, lp, m, old, _ = batch(rewards=r)
    ro2, met = obj.advantages(cfg, ro)
    adv, _, k, want = ref.ref_advantages(cfg, m, r)
    np.testing.assert_allclose(np.asarray(ro2.advantages), adv, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(np.asarray(ro2.mask) != 0, k)
    assert int(met["rollout/kept_groups"]) == want["rollout/kept_groups"] == 1


# ------------------------------------------------------------------------------- 2. groups by prompt id
def test_group_ids_any_order_and_ragged_against_the_reference():
    """Finding 2: with `Rollout.group_ids`, group statistics are taken over rows that share an id."""
    ro, lp, m, old, r = batch(3)
    ids = np.array([5, 5, 5, 9, 9, 2, 2, 2, 2, 7, 9, 40])          # ragged: 3, 3, 4, 1 (a singleton) and one more
    for name in ("grpo", "dr_grpo", "rloo", "reinforce_plus_plus_baseline", "dapo", "gspo"):
        cfg = getattr(obj, name)(n_samples_per_prompt=G)
        ro2, met = obj.advantages(cfg, dataclasses.replace(ro, group_ids=ids))
        adv, _, k, want = ref.ref_advantages(cfg, m, r, group_ids=ids)
        np.testing.assert_allclose(np.asarray(ro2.advantages), adv, rtol=1e-5, atol=1e-6, err_msg=name)
        np.testing.assert_array_equal(np.asarray(ro2.mask) != 0, k)
        for key, w in want.items():
            np.testing.assert_allclose(float(met[key]), w, rtol=1e-5, atol=1e-6, err_msg=f"{name} {key}")


def test_group_ids_are_order_invariant_and_equal_the_contiguous_layout():
    ro, *_ = batch(4)
    cfg = obj.grpo(n_samples_per_prompt=G)
    contiguous = np.asarray(obj.advantages(cfg, ro)[0].advantages)
    ids = np.repeat([70, -1, 3], G)
    perm = np.random.default_rng(0).permutation(B)
    shuffled = jax.tree.map(lambda a: a[perm], dataclasses.replace(ro, group_ids=ids))
    got = np.asarray(jax.jit(obj.advantages, static_argnums=0)(cfg, shuffled)[0].advantages)
    np.testing.assert_allclose(got, contiguous[perm], rtol=1e-5, atol=1e-6)


def test_a_wrong_group_size_is_silent_without_ids_and_harmless_with_them():
    ro, *_ = batch(5)                                                  # 3 prompts x 4 completions
    right = np.asarray(obj.advantages(obj.grpo(n_samples_per_prompt=G), ro)[0].advantages)
    wrong = np.asarray(obj.advantages(obj.grpo(n_samples_per_prompt=6), ro)[0].advantages)
    assert np.abs(wrong - right).max() > 0.05                          # prompts pooled: no error, wrong advantages
    ids = np.repeat(np.arange(3), G)
    with_ids = np.asarray(obj.advantages(obj.grpo(n_samples_per_prompt=6), dataclasses.replace(ro, group_ids=ids))[0].advantages)
    np.testing.assert_allclose(with_ids, right, rtol=1e-5, atol=1e-6)


def test_host_ids_are_checked_against_the_sampling_plan():
    ro, *_ = batch(6)
    ids = np.repeat(np.arange(3), G)
    with pytest.raises(ValueError, match="puts 4 rows in group 0, more than n_samples_per_prompt=2"):
        obj.advantages(obj.grpo(n_samples_per_prompt=2), dataclasses.replace(ro, group_ids=ids))
    with pytest.raises(ValueError, match="`rollout.group_ids` must be an integer array of ids"):
        obj.advantages(obj.grpo(n_samples_per_prompt=G), dataclasses.replace(ro, group_ids=ids.astype(float)))
    with pytest.raises(ValueError, match="`rollout.group_ids` must have the shape of `the rows of rollout.mask`"):
        obj.advantages(obj.grpo(n_samples_per_prompt=G), dataclasses.replace(ro, group_ids=ids[:5]))
    # device ids are never read back: the same plan mismatch passes unread under jit
    jax.jit(obj.advantages, static_argnums=0)(obj.grpo(n_samples_per_prompt=2), dataclasses.replace(ro, group_ids=ids))


# ---------------------------------------------------------------------- 3. the estimator of a config
def test_the_constructor_applies_the_recipe_and_replace_refuses_a_new_estimator():
    """Finding 3: `ObjectiveConfig(advantage_estimator="dapo")` was a dapo without DAPO's recipe."""
    assert obj.ObjectiveConfig(advantage_estimator="dapo") == obj.dapo()
    assert obj.ObjectiveConfig(advantage_estimator="dapo").dynamic_sampling is True
    with pytest.raises(ValueError, match=r"changed from 'grpo' to 'dapo'.*dew_rl\.objectives\.dapo\(\.\.\.\)"):
        dataclasses.replace(obj.grpo(), advantage_estimator="dapo")
    assert dataclasses.replace(obj.dapo(), clip_ratio_high=0.3).dynamic_sampling is True
    with pytest.raises(ValueError, match="`advantage_estimator` is fixed by the entry point"):
        obj.grpo(advantage_estimator="dapo")


# ------------------------------------------------------------------------- 4. counts after DAPO's filter
def test_counts_come_from_the_rollout_advantages_returned():
    """Finding 4: counts from the mask before dynamic sampling changed the loss without a word."""
    cfg = obj.dapo(n_samples_per_prompt=G)
    r = np.concatenate([[0.0, 1.0, 0.0, 1.0], np.full(G, 0.5), [1.0, 0.0, 0.0, 0.0]])
    ro, lp, m, *_ = batch(rewards=r)
    ro2, _ = obj.advantages(cfg, ro)
    x = jnp.asarray(poison(lp, m), jnp.float32)
    right = float(obj.loss(cfg, x, ro2, counts=obj.loss_counts(ro2))[0])
    assert right == pytest.approx(float(obj.loss(cfg, x, ro2)[0]), rel=1e-6)
    stale = float(obj.loss(cfg, x, ro2, counts=rl.loss_counts(m))[0])
    assert abs(stale - right) > 1e-4                                  # what the trial's trainer computed
    with pytest.raises(ValueError, match="take the counts from the rollout that advantages"):
        obj.loss_counts(ro)                                            # the wrong way is loud


# ------------------------------------------------------------------------- 5. traced coefficients
def test_coefficients_are_leaves_and_a_schedule_compiles_once():
    """Finding 5: every coefficient was a compile-time constant; a KL schedule recompiled the step."""
    cfg = obj.grpo(n_samples_per_prompt=G, use_kl_loss=True, kl_loss_coef=0.01, entropy_coeff=0.001, tis_cap=2.0)
    ro, lp, m, *_ = batch(7)
    ent = jnp.ones((B, T))
    step, traces = jit_counting_traces(lambda c, r, x: obj.loss(c, x, obj.advantages(c, r)[0], entropy=ent)[0])
    x = jnp.asarray(poison(lp, m), jnp.float32)
    values = []
    for kl in (0.01, 0.02, jnp.float32(0.05), 0.3):
        c = dataclasses.replace(cfg, kl_loss_coef=kl, clip_ratio_high=0.28, entropy_coeff=0.002, tis_cap=jnp.float32(1.5))
        values.append(float(step(c, ro, x)))
        eager = float(obj.loss(c, x, obj.advantages(c, ro)[0], entropy=ent)[0])
        assert values[-1] == pytest.approx(eager, rel=1e-5, abs=1e-7)
    assert len(traces) == 1
    assert len(set(values)) == 4
    names = [jax.tree_util.keystr(path) for path, _ in jax.tree_util.tree_flatten_with_path(cfg)[0]]
    # the leaves in the order the fields are declared; opd_kl_coef is read by grpo, so a leaf whatever its value (0 here)
    assert names == [".kl_loss_coef", ".clip_ratio_low", ".clip_ratio_high", ".clip_ratio_c", ".tis_cap", ".entropy_coeff",
                     ".opd_kl_coef"]
    assert hash(cfg) == hash(obj.grpo(n_samples_per_prompt=G, use_kl_loss=True, kl_loss_coef=0.01, entropy_coeff=0.001,
                                      tis_cap=2.0))


def test_a_config_argument_lowers_and_compiles_ahead_of_time():
    """The example trainer's finding: `jit(f).lower(cfg).compile()` re-flattens the config with placeholder leaves
    (ArgInfo); only host numbers may become JAX scalars there."""
    cfg = obj.grpo(n_samples_per_prompt=G, clip_ratio_low=0.1)
    compiled = jax.jit(lambda c: c.clip_ratio_low * 2 + c.clip_ratio_high).lower(cfg).compile()
    assert float(compiled(cfg)) == pytest.approx(0.4)
    assert float(compiled(dataclasses.replace(cfg, clip_ratio_low=jnp.float32(0.2)))) == pytest.approx(0.6)


def test_the_adaptive_kl_controller_drives_a_jitted_ppo_step_without_recompiling():
    rng = np.random.default_rng(8)
    m = np.ones((B, T), np.float32)
    old = rng.normal(-1.0, 0.3, (B, T)).astype(np.float32)
    ro = obj.Rollout(mask=m, old_log_probs=old, ref_log_probs=old - rng.uniform(0.0, 0.2, (B, T)).astype(np.float32),
                     token_rewards=rng.normal(size=(B, T)).astype(np.float32),
                     old_values=rng.normal(size=(B, T)).astype(np.float32))
    cfg = obj.ppo(kl_coef=0.05)
    stage1, traces = jit_counting_traces(lambda c, r: obj.advantages(c, r))
    beta = 0.05
    for _ in range(4):
        _, met = stage1(dataclasses.replace(cfg, kl_coef=beta), ro)
        beta = rl.adaptive_kl_update(beta, met["rollout/reward_kl_penalty"], B, target_kl=0.01, horizon=100.0)
    assert len(traces) == 1
    kl = float(met["rollout/reward_kl_penalty"])
    assert kl == pytest.approx(ref.response_mean(old - np.asarray(ro.ref_log_probs), m != 0), rel=1e-6)
    assert float(beta) > 0.05                                          # the KL is above target: beta rises


def test_replace_inside_jit_and_a_missing_input_leaves_a_term_out():
    cfg = obj.grpo(n_samples_per_prompt=G, use_kl_loss=True)
    ro, lp, m, *_ = batch(9)
    x = jnp.asarray(poison(lp, m), jnp.float32)

    def schedule_step(c, k):
        c = dataclasses.replace(c, kl_loss_coef=k)                     # a schedule applied inside the step
        return obj.loss(c, x, obj.advantages(c, ro)[0])[0]

    step, traces = jit_counting_traces(schedule_step)
    a, b = float(step(cfg, 0.01)), float(step(cfg, 0.5))
    assert a != b and len(traces) == 1
    ro1 = obj.advantages(cfg, ro)[0]
    with pytest.raises(ValueError, match="`entropy` is required when entropy_coeff=0.01"):
        obj.loss(dataclasses.replace(cfg, entropy_coeff=0.01), x, ro1)      # a host number other than 0
    # a JAX scalar is never read: without `entropy` the bonus is off, whatever its value
    np.testing.assert_array_equal(obj.loss(dataclasses.replace(cfg, entropy_coeff=jnp.float32(0.3)), x, ro1)[0],
                                  obj.loss(cfg, x, ro1)[0])


# --------------------------------------------------------------------- 6. namespaces and naming
def test_namespaces_follow_one_rule():
    """Finding 6: `rl.advantages` was a subpackage; `dir(objectives)` leaked np, jnp, Any and helpers."""
    for layer in ("advantages", "surrogates", "reductions", "logits"):
        assert not hasattr(rl, layer), layer
    public = sorted(n for n in dir(obj) if not n.startswith("_"))
    assert public == sorted(obj.__all__)
    for leak in ("np", "jnp", "jax", "Any", "Callable"):
        assert not hasattr(obj, leak)


def test_entry_points_show_their_fields():
    params = inspect.signature(obj.grpo).parameters
    assert {"n_samples_per_prompt", "clip_ratio_high", "use_kl_loss", "loss_mode"} <= set(params)
    assert params["n_samples_per_prompt"].default == 8 and params["clip_ratio_high"].default == 0.2
    assert inspect.signature(obj.dapo).parameters["clip_ratio_high"].default == 0.28
    assert "tau_pos" not in params and "tau_pos" in inspect.signature(obj.sapo).parameters
    assert "overrides" in inspect.getsource(obj.grpo.__wrapped__) and obj.grpo.__doc__.startswith("GRPO")


def test_low_level_reduced_forms_take_aggregate_arguments():
    x = np.random.default_rng(10).normal(0, 0.3, (4, 5)).astype(np.float32)
    a = np.ones((4, 5), np.float32)
    m = random_mask(10, 4, 5).astype(np.float32)
    for fn, args in ((rl.clipped_surrogate, (x, a, m)), (rl.clipped_value_loss, (x, a, a * 0.9, m))):
        params = inspect.signature(fn).parameters
        assert {"mode", "axis_name", "counts", "norm"} <= set(params), fn.__name__
        loss, metrics = fn(*args, mode="seq-mean-token-mean", counts=rl.loss_counts(m))
        assert all(not k.startswith("train/") for k in metrics)       # bare at the low level
    terms, ind = rl.clipped_surrogate_terms(x, a, m)
    assert float(rl.clipped_surrogate(x, a, m, mode="token-sum")[0]) == pytest.approx(float(terms.sum()), rel=1e-6)


# ------------------------------------------------------------------------------ 7. silent clamps
def test_a_minus_inf_log_prob_is_reported():
    """Finding 7: a -inf log-prob at a kept token gave a finite loss and zero gradient without a word."""
    cfg = obj.grpo(n_samples_per_prompt=G, loss_agg_mode="token-mean")
    ro, lp, m, *_ = batch(11)
    ro2, _ = obj.advantages(cfg, ro)
    kept = np.argwhere(m > 0)
    bad = lp.copy()
    bad[tuple(kept[1])] = -np.inf                                      # log(0) at two kept tokens
    bad[tuple(kept[5])] = -np.inf
    val, met = obj.loss(cfg, jnp.asarray(poison(bad, m), jnp.float32), ro2)
    assert np.isfinite(float(val))
    assert float(met["train/log_ratio_clampfrac"]) == pytest.approx(2 / m.sum(), rel=1e-6)
    _, met_ok = obj.loss(cfg, jnp.asarray(poison(lp, m), jnp.float32), ro2)
    assert float(met_ok["train/log_ratio_clampfrac"]) == 0.0


# ----------------------------------------------------------------------------------------- 8. masks
def test_a_mask_selects_and_is_never_a_weight():
    """Finding 8: a NaN in a float mask counted as kept; 0.5 counted as 1, silently."""
    ro, lp, m, *_ = batch(12)
    half = m.copy()
    half[0, 0] = 0.5
    with pytest.raises(ValueError, match="`rollout.mask` must hold only 0 and 1"):
        obj.advantages(obj.grpo(n_samples_per_prompt=G), dataclasses.replace(ro, mask=half))
    nan = m.copy()
    nan[1, 1] = np.nan
    with pytest.raises(ValueError, match="`mask` must hold only 0 and 1"):
        rl.token_mean(np.ones((B, T)), nan)
    # a JAX mask is not read back: non-zero keeps (bool(nan) is True), as documented
    assert float(rl.token_mean(jnp.ones((1, 2)), jnp.asarray([[0.5, 0.0]]))) == 1.0


# ------------------------------------------------------------------------------ 9. empty batches
def test_empty_batches_follow_one_rule():
    """Finding 9: `obj.*` raised, `rl.token_mean` returned NaN, `rl.masked_mean` 0; the README said 'raises'."""
    z = np.zeros((3, 4))
    assert float(rl.token_mean(np.ones((3, 4)), z)) == 0.0
    for mode in rl.AGGREGATION_MODES:
        assert float(rl.aggregate(np.ones((3, 4)), z, mode)) == 0.0
    assert float(rl.masked_mean(np.ones((3, 4)), z)) == 0.0
    with pytest.raises(rl.EmptyBatchError):
        rl.global_masked_normalize(np.ones((3, 4)), z)
    ro, *_ = batch(13)
    with pytest.raises(rl.EmptyBatchError):
        obj.advantages(obj.grpo(n_samples_per_prompt=G), dataclasses.replace(ro, mask=np.zeros((B, T), np.float32)))
    readme = (__import__("pathlib").Path(__file__).resolve().parent.parent / "README.md").read_text()
    readme = " ".join(readme.split())
    assert "a loss over nothing is 0" in readme and "EmptyBatchError" in readme


# ------------------------------------------------------------------------------------ 10. rewards
def test_bool_and_integer_rewards_are_float32():
    """Amendment 5: rewards may be bool or integer (a verifier's 0/1)."""
    ro, *_ = batch(14)
    r = np.arange(B) % 2
    want = np.asarray(obj.advantages(obj.grpo(n_samples_per_prompt=G), dataclasses.replace(ro, rewards=r.astype(np.float32)))[0].advantages)
    for rr in (r.astype(bool), r.astype(np.int32), jnp.asarray(r, jnp.int32)):
        got = np.asarray(obj.advantages(obj.grpo(n_samples_per_prompt=G), dataclasses.replace(ro, rewards=rr))[0].advantages)
        np.testing.assert_array_equal(got, want)
