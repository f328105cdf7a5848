"""dew_rl inside Tunix 0.1.7, checked live against Tunix's own losses (google-tunix is a dev extra).

Every comparison runs Tunix's registered policy loss (`"grpo"` with GRPOConfig, DAPOConfig, DrGRPOConfig and
`loss_algo="gspo-token"`; `"ppo"` with PPOConfig) and the one `dew_rl.tunix.register` adds, on the same
`TrainExample` and the same two-layer random-init Qwen3 (examples/tunix_equality.py builds both), and asserts
loss, the gradient w.r.t. every parameter and each metric equal to float32 round-off; metrics Tunix reduces
by a token mean where dew_rl reduces like the loss are compared with dew_rl reduced by a token mean, and
differ from dew_rl as configured. Tunix's advantage estimators (float64 NumPy for the group ones) are
compared with the ones `register` adds (float32). Also: the hidden-state path equals Tunix's own
log-probs and, compiled under jit, forms no [B, L, V] array (Tunix's own loss does); a model without
`output_hidden_states` (Llama 3) falls back to its logits; the errors that name a missing field or a PPOConfig
setting that disagrees, with the Tunix setting to change; and the name selection.
"""
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tunix")

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
import tunix_equality as eq  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from flax import nnx  # noqa: E402
from tunix.rl import common, function_registry  # noqa: E402
from tunix.rl.grpo import grpo_learner  # noqa: E402

import dew_rl.objectives as obj  # noqa: E402
import dew_rl.tunix as dt  # noqa: E402

LOSS = dict(rtol=2e-6, atol=2e-7)  # O(0.1) losses summed in another order: a few float32 ulps
METRIC = dict(rtol=2e-6, atol=2e-7)
GRAD_REL = 4e-6  # max |grad difference| / max |grad|: float32 round-off through two transformer layers


@pytest.fixture(scope="module")
def model():
    return eq.tiny_qwen3()


@pytest.mark.parametrize("case", eq.cases(), ids=lambda c: c.name.split(" ")[0])
def test_tunix_loss_gradient_and_metrics_equal_dew_rl(case, model):
    row = eq.compare(case, model)
    np.testing.assert_allclose(row["loss"][1], row["loss"][0], **LOSS)
    assert abs(row["loss"][0]) > 1e-3  # a loss that is not trivially 0
    assert row["grad_gap"] <= GRAD_REL * row["grad_scale"], row
    assert row["grad_scale"] > 0.1
    for key, (tunix, ours) in row["metrics"].items():
        np.testing.assert_allclose(ours, tunix, err_msg=key, **METRIC)
    for key, (tunix, ours, ours_token_mean) in row["other"].items():
        np.testing.assert_allclose(ours_token_mean, tunix, err_msg=key, **METRIC)
        if tunix != 0.0:
            assert abs(ours - tunix) > 1e-3, (key, ours, tunix)  # the documented difference is real here


def test_the_comparison_can_fail(model):
    """A different clip range than Tunix's makes the same comparison report a difference."""
    case = eq.cases()[1]  # DAPO, 0.2 / 0.28
    case.ours = obj.dapo(n_samples_per_prompt=eq.G, clip_ratio_c=None, dynamic_sampling=False, clip_ratio_high=0.2)
    row = eq.compare(case, model)
    assert abs(row["loss"][1] - row["loss"][0]) > 1e-4 or row["grad_gap"] > 1e-3, row


def test_an_empty_completion_is_divided_by_the_non_empty_rows_in_tunix():
    tunix, ours, scaled = eq.empty_row()
    np.testing.assert_allclose(scaled, tunix, **LOSS)
    assert abs(ours - tunix) > 1e-3


def test_advantage_estimators_equal_tunix():
    for name, gap, scale in eq.advantage_rows():
        assert gap <= 4e-7 * max(1.0, scale), (name, gap)
        assert scale > 0.5, name


@pytest.mark.parametrize("tied", [False, True])
def test_hidden_state_path_equals_tunix_log_probs(tied):
    model = eq.tiny_qwen3(tied=tied, seed=3)
    example, _ = eq.batch(model)
    lp, ent, path = dt.policy_log_probs(model, example, eq.PAD, eq.EOS, chunk_size=16)
    assert path == "hidden"
    ref, logits = common.compute_per_token_logps(*nnx.split(model), example.prompt_ids, example.completion_ids,
                                                 eq.PAD, eq.EOS, return_logits=True)
    mask = np.asarray(example.completion_mask)
    np.testing.assert_allclose(np.asarray(lp)[mask], np.asarray(ref)[mask], rtol=1e-5, atol=2e-6)
    z = np.asarray(logits, np.float64)
    top = z.max(-1, keepdims=True)
    logp = z - top - np.log(np.exp(z - top).sum(-1, keepdims=True))
    entropy = -(np.exp(logp) * logp).sum(-1)  # float64 NumPy reference from Tunix's logits
    np.testing.assert_allclose(np.asarray(ent)[mask], entropy[mask], rtol=1e-5, atol=2e-6)
    assert not nnx.state(model, nnx.Intermediate)  # nothing was sown into the model itself


def test_temperature_matches_tunix(model):
    example, _ = eq.batch(model)
    lp, _, _ = dt.policy_log_probs(model, example, eq.PAD, eq.EOS, temperature=0.7)
    ref = common.compute_per_token_logps(*nnx.split(model), example.prompt_ids, example.completion_ids, eq.PAD,
                                         eq.EOS, temperature=0.7)
    mask = np.asarray(example.completion_mask)
    np.testing.assert_allclose(np.asarray(lp)[mask], np.asarray(ref)[mask], rtol=1e-5, atol=2e-6)


def _call(config, example, model, name):
    tconfig = grpo_learner.GRPOConfig(num_generations=eq.G, beta=0.0)
    tconfig.temperature = 1.0
    fn = function_registry.get_policy_loss_fn(dt.register(config, name))
    return fn(model, example, tconfig, eq.PAD, eq.EOS)


def test_missing_reference_log_probs_names_beta(model):
    example, _ = eq.batch(model, ref=False)
    with pytest.raises(ValueError, match=r"TrainExample\.ref_per_token_logps.*non-zero `beta`"):
        _call(obj.grpo(n_samples_per_prompt=eq.G, use_kl_loss=True), example, model, "t_kl")


def test_missing_sampler_log_probs_names_the_learner(model):
    example, _ = eq.batch(model)
    with pytest.raises(ValueError, match=r"behavior_per_token_logps.*dew_rl\.tunix\.GRPOLearner.*return_logprobs"):
        _call(obj.grpo(n_samples_per_prompt=eq.G, tis_cap=2.0), example, model, "t_tis")


def test_ppo_on_a_grpo_example_names_the_critic(model):
    example, _ = eq.batch(model)
    with pytest.raises(ValueError, match=r"TrainExample\.old_values.*PPOLearner with a critic"):
        _call(obj.ppo(), example, model, "t_ppo")


def test_sampler_log_probs_reach_the_loss(model):
    example, _ = eq.batch(model)
    fields = {f: getattr(example, f) for f in example.__dataclass_fields__}
    behavior = np.asarray(example.old_per_token_logps) - 0.1
    with_sampler = dt.SamplerTrainExample(**fields, behavior_per_token_logps=jnp.asarray(behavior))
    loss, aux = _call(obj.grpo(n_samples_per_prompt=eq.G, tis_cap=2.0), with_sampler, model, "t_tis2")
    plain, _ = _call(obj.grpo(n_samples_per_prompt=eq.G), example, model, "t_plain")
    assert np.isfinite(float(loss)) and abs(float(loss) - float(plain)) > 1e-5  # the weights exp(0.1) act


def test_num_generations_must_match():
    name = dt.register(obj.grpo(n_samples_per_prompt=4), "t_groups")
    with pytest.raises(ValueError, match="num_generations=2.*n_samples_per_prompt=4"):
        function_registry.get_advantage_estimator(name)(rewards=np.arange(8.0), num_generations=2)


def test_register_selects_by_name_and_leaves_estimator_out_where_stage_one_needs_the_mask():
    name = dt.register(obj.dapo(n_samples_per_prompt=4), "t_dapo_dynamic")  # dynamic sampling: mask-dependent
    assert function_registry.get_policy_loss_fn(name)
    with pytest.raises(LookupError):
        function_registry.get_advantage_estimator(name)
    config = grpo_learner.GRPOConfig(num_generations=4, policy_loss_fn=name, advantage_estimator="grpo")
    assert config.policy_loss_fn == name  # GRPOConfig accepts a registered name
    with pytest.raises(ValueError, match="dpo"):
        dt.register(obj.dpo())


def test_metric_names_are_the_loss_metrics(model):
    config = obj.grpo(n_samples_per_prompt=eq.G, use_kl_loss=True)
    example, _ = eq.batch(model)
    _, aux = _call(config, example, model, "t_names")
    assert dt.metric_names(config) == sorted(k for k in aux if k.startswith("train/"))


class _Critic(nnx.Module):
    """A value head on the tiny Qwen3's last hidden state (as Tunix's own tests build a critic)."""

    def __init__(self, backbone, rngs):
        self.backbone = backbone
        self.score = nnx.Linear(32, 1, use_bias=False, rngs=rngs)

    def __call__(self, *args, **kwargs):
        self.backbone(*args, **kwargs, output_hidden_states=True)
        hidden = nnx.pop(self.backbone, nnx.Intermediate)["all_hidden_states"]
        return self.score(hidden.get_value()[-1])


def test_ppo_value_loss_equals_tunix(model):
    critic = _Critic(eq.tiny_qwen3(seed=5), nnx.Rngs(6))
    example, _ = eq.batch(model, ppo=True, ref=False)
    name = dt.register(obj.ppo(vf_coef=1.0, cliprange_value=0.2), "t_ppo_value")

    def run(fn):
        f = lambda m: fn(m, example, 0.2, eq.PAD, eq.EOS)  # noqa: E731
        (loss, aux), grad = nnx.value_and_grad(f, has_aux=True)(critic)
        return float(loss), {k: float(v) for k, v in aux.items()}, [np.asarray(g) for g in jax.tree.leaves(grad)]

    loss_t, aux_t, grad_t = run(function_registry.get_value_loss_fn("ppo"))
    loss_d, aux_d, grad_d = run(function_registry.get_value_loss_fn(name))
    np.testing.assert_allclose(loss_d, loss_t, **LOSS)
    for key in ("vpred_mean", "vf_clipfrac"):
        np.testing.assert_allclose(aux_d[key], aux_t[key], err_msg=key, **METRIC)
    assert 0.0 < aux_t["vf_clipfrac"] < 1.0  # both branches occur
    np.testing.assert_allclose(aux_d["train/vf_loss"], aux_t["vf_loss"], **METRIC)
    scale = max(float(np.max(np.abs(g))) for g in grad_t)
    assert max(float(np.max(np.abs(a - b))) for a, b in zip(grad_t, grad_d)) <= GRAD_REL * scale and scale > 1e-3



def test_the_hidden_state_path_never_forms_the_logits_under_jit():
    """Under jit (Tunix's trainer jits the step), dew_rl's loss on a model that sows its last hidden state has
    no [B, L, V] array in the compiled forward and backward pass: the logits the model returns are dead code,
    and linear_log_probs_and_entropy works over vocabulary chunks. Tunix's own loss, on the same model, has them
    (so the check can fail)."""
    row = eq.fused_check()
    assert row["path"] == "hidden"
    assert row["tunix_vocab_shapes"], row
    assert not row["dew_rl_vocab_shapes"], row
    assert row["tunix_temp_bytes"] >= row["logits_bytes"] > row["dew_rl_temp_bytes"], row


def test_a_model_without_hidden_state_output_falls_back_to_its_logits():
    """Tunix 0.1.7's Llama 3 has no `output_hidden_states`: the loss takes the logits it returns, and equals
    Tunix's own log-probs."""
    from tunix.models.llama3 import model as llama3
    config = llama3.ModelConfig(num_layers=1, vocab_size=eq.VOCAB, embed_dim=32, hidden_dim=64, num_heads=2,
                                head_dim=16, num_kv_heads=1, rope_theta=10_000, norm_eps=1e-6)
    model = llama3.Llama3(config, rngs=nnx.Rngs(0))
    example, _ = eq.batch(model)
    lp, _, path = dt.policy_log_probs(model, example, eq.PAD, eq.EOS)
    assert path == "logits"
    ref = common.compute_per_token_logps(*nnx.split(model), example.prompt_ids, example.completion_ids, eq.PAD, eq.EOS)
    mask = np.asarray(example.completion_mask)
    np.testing.assert_allclose(np.asarray(lp)[mask], np.asarray(ref)[mask], rtol=1e-5, atol=2e-6)


def test_ppo_settings_that_disagree_with_tunix_are_named():
    name = dt.register(obj.ppo(cliprange_value=0.2), "t_ppo_settings")
    with pytest.raises(ValueError, match=r"PPOConfig\(gamma=0\.99, gae_lambda=0\.95\).*gamma=1\.0"):
        function_registry.get_advantage_estimator(name)(
            rewards=jnp.zeros((2, 3)), values=jnp.zeros((2, 3)), completion_mask=jnp.ones((2, 3), bool),
            gamma=0.99, gae_lambda=0.95)
    model = eq.tiny_qwen3()
    example, _ = eq.batch(model, ppo=True, ref=False)
    with pytest.raises(ValueError, match=r"PPOConfig\(clip_range_value=0\.5\).*cliprange_value=0\.2"):
        function_registry.get_value_loss_fn(name)(model, example, 0.5, eq.PAD, eq.EOS)


class _Cluster:
    def __init__(self):
        self.buffered = {}

    def buffer_metrics(self, metrics, mode):
        self.buffered.update({k: v for k, (v, _) in metrics.items()})


def test_rollout_metrics_are_taken_over_the_completion_tokens(model):
    """The stage-1 metrics the learners buffer: the GRPO estimator saw rewards only, the metrics use the
    TrainExample's token mask (float64 NumPy reference); after Tunix's own estimator nothing is buffered."""
    import types
    example, rewards = eq.batch(model)
    learner = types.SimpleNamespace(rl_cluster=_Cluster())
    name = dt.register(obj.grpo(n_samples_per_prompt=eq.G), "t_stage_one")
    adv = function_registry.get_advantage_estimator(name)(rewards=rewards, num_generations=eq.G)
    metrics = dt._log_rollout_metrics(learner, example, "train")
    assert metrics == learner.rl_cluster.buffered and metrics
    mask = np.asarray(example.completion_mask, bool)
    tokens = np.broadcast_to(np.asarray(adv, np.float64)[:, None], mask.shape)[mask]
    np.testing.assert_allclose(metrics["rollout/valid_tokens"], mask.sum())
    np.testing.assert_allclose(metrics["rollout/raw_reward"], np.mean(rewards), rtol=1e-6)
    np.testing.assert_allclose(metrics["rollout/advantages_mean"], tokens.mean(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(metrics["rollout/advantages_std"], tokens.std(), rtol=1e-5)
    assert abs(tokens.mean() - np.mean(adv)) > 1e-3  # the token weighting matters on this batch
    function_registry.get_advantage_estimator("grpo")(rewards=rewards, num_generations=eq.G)
    assert dt._log_rollout_metrics(learner, example, "train") == {}  # nothing stale: the call was consumed
