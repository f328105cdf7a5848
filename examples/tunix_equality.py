"""Tunix 0.1.7's own policy losses against dew_rl's, configured the same way, on one TrainExample and one model.

    python examples/tunix_equality.py        # prints the table nbs/05t_tunix shows

A two-layer Qwen3 from `tunix.models.qwen3` (vocabulary 64, random init, nothing downloaded) and a
`TrainExample` built as Tunix's learners build it: left-padded prompts, right-padded completions of
unequal lengths, old and reference log-probs away from the current policy. Each case runs Tunix's
registered loss (`function_registry.get_policy_loss_fn("grpo" | "ppo")` with Tunix's config) and the
loss `dew_rl.tunix.register` puts next to it, under `nnx.value_and_grad`, and reports the loss, the
largest gradient difference over all parameters, and each metric Tunix returns next to dew_rl's.
tests/test_tunix.py asserts the figures; no number is stored.
"""
from __future__ import annotations

import dataclasses
import re
import warnings

warnings.filterwarnings("ignore", message="IProgress not found")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from flax import nnx  # noqa: E402
from tunix.models.qwen3 import model as qwen3  # noqa: E402
from tunix.rl import algo_core, common, function_registry  # noqa: E402
from tunix.rl.grpo import dapo_learner, drgrpo_learner, grpo_learner  # noqa: E402
from tunix.rl.ppo import ppo_learner  # noqa: E402

import dew_rl.objectives as obj  # noqa: E402
import dew_rl.tunix as dt  # noqa: E402
from absl import logging  # noqa: E402

logging.set_verbosity(logging.ERROR)  # re-registering a name is a warning in Tunix's registry

B, P, T, G, PAD, EOS, VOCAB = 8, 5, 7, 4, 0, 1, 64


def tiny_qwen3(tied=False, seed=0):
    config = qwen3.ModelConfig(num_layers=2, vocab_size=VOCAB, embed_dim=32, hidden_dim=64, num_heads=2, head_dim=16,
                               num_kv_heads=1, rope_theta=10_000, norm_eps=1e-6, use_tied_embedding=tied)
    return qwen3.Qwen3(config, rngs=nnx.Rngs(seed))


def batch(model, seed=0, ppo=False, ref=True, empty_row=False):
    """A GRPO (or PPO) TrainExample for `model` and the rewards its advantages came from."""
    rng = np.random.default_rng(seed)
    prompt = rng.integers(2, VOCAB, (B, P))
    prompt[0, :2] = PAD
    prompt[3, :1] = PAD
    lengths = rng.integers(2, T + 1, B)
    lengths[1] = T
    if empty_row:
        lengths[5] = 0  # a completion with no kept token (Tunix's sequence modes divide by the non-empty rows)
    mask = np.arange(T)[None] < lengths[:, None]
    completion = np.where(mask, rng.integers(2, VOCAB, (B, T)), PAD)
    lp = np.asarray(common.compute_per_token_logps(*nnx.split(model), jnp.asarray(prompt), jnp.asarray(completion),
                                                   PAD, EOS))
    old = (lp + 0.3 * rng.normal(size=(B, T))).astype(np.float32)
    ref_lp = (lp + 0.2 * rng.normal(size=(B, T))).astype(np.float32) if ref else None
    rewards = rng.normal(size=B)
    common_fields = dict(prompt_ids=jnp.asarray(prompt), prompt_mask=jnp.asarray(prompt != PAD),
                         completion_ids=jnp.asarray(completion), completion_mask=jnp.asarray(mask),
                         old_per_token_logps=jnp.asarray(old),
                         ref_per_token_logps=None if ref_lp is None else jnp.asarray(ref_lp))
    if not ppo:
        adv = algo_core.compute_advantages(rewards, G)
        return grpo_learner.TrainExample(advantages=jnp.asarray(adv, jnp.float32), **common_fields), rewards
    adv = np.where(mask, rng.normal(size=(B, T)), 0.0).astype(np.float32)
    values = np.where(mask, rng.normal(size=(B, T)), 0.0).astype(np.float32)
    returns = (values + adv).astype(np.float32)
    return ppo_learner.TrainExample(advantages=jnp.asarray(adv), returns=jnp.asarray(returns),
                                    old_values=jnp.asarray(values), **common_fields), rewards


@dataclasses.dataclass
class Case:
    name: str
    tunix_loss: str                 # Tunix's registered policy loss
    tunix_config: object            # Tunix's algo config
    ours: obj.ObjectiveConfig       # dew_rl configured the same way
    metrics: dict                   # Tunix aux key -> dew_rl metric of the same convention
    other_convention: dict          # Tunix aux key -> (dew_rl metric, the dew_rl config whose reduction Tunix uses)
    ppo: bool = False
    ref: bool = True


def _grpo_config(cls, **kw):
    config = cls(**kw)
    config.temperature = 1.0  # GRPOLearner sets it from the rollout config
    return config


def cases():
    token = dict(loss_agg_mode="token-mean")
    grpo = obj.grpo(n_samples_per_prompt=G, clip_ratio_c=None, use_kl_loss=True, kl_loss_type="k1", kl_loss_coef=0.04)
    gspo = obj.gspo(n_samples_per_prompt=G, clip_ratio_low=0.2, clip_ratio_high=0.2)
    dr = obj.dr_grpo(n_samples_per_prompt=G, clip_ratio_c=None)
    return [
        Case("GRPO (seq-mean-token-mean, k1 KL loss 0.04)", "grpo",
             _grpo_config(grpo_learner.GRPOConfig, num_generations=G, beta=0.04, epsilon=0.2), grpo,
             {"pg_loss": "train/pg_loss", "kl_loss": "train/kl_loss", "entropy": "train/entropy"},
             {"pg_clipfrac": ("train/pg_clipfrac", dataclasses.replace(grpo, **token)),
              "ppo_kl": ("train/ppo_kl", dataclasses.replace(grpo, **token)),
              "kl": ("train/kl_loss", dataclasses.replace(grpo, **token))}),
        Case("DAPO (token-mean, clip 0.2/0.28)", "grpo",
             _grpo_config(dapo_learner.DAPOConfig, num_generations=G, epsilon=0.2, epsilon_high=0.28),
             obj.dapo(n_samples_per_prompt=G, clip_ratio_c=None, dynamic_sampling=False),
             {"pg_loss": "train/pg_loss", "pg_clipfrac": "train/pg_clipfrac", "ppo_kl": "train/ppo_kl",
              "entropy": "train/entropy"}, {}),
        Case("Dr.GRPO (sequence-mean-token-scale = seq-mean-token-sum-norm, T)", "grpo",
             _grpo_config(drgrpo_learner.DrGRPOConfig, num_generations=G, beta=0.0, epsilon=0.2), dr,
             {"pg_loss": "train/pg_loss", "entropy": "train/entropy"},
             {"pg_clipfrac": ("train/pg_clipfrac", dataclasses.replace(dr, **token)),
              "ppo_kl": ("train/ppo_kl", dataclasses.replace(dr, **token))}, ref=False),
        Case("GSPO-token (loss_algo='gspo-token', clip 0.2)", "grpo",
             _grpo_config(grpo_learner.GRPOConfig, num_generations=G, beta=0.0, epsilon=0.2, loss_algo="gspo-token"),
             gspo, {"pg_loss": "train/pg_loss", "entropy": "train/entropy"},
             {"pg_clipfrac": ("train/pg_clipfrac", dataclasses.replace(gspo, **token))}, ref=False),
        Case("PPO (token-mean, dual clip 3, entropy 0.01)", "ppo",
             ppo_learner.PPOConfig(epsilon=0.2, epsilon_c=3.0, entropy_coef=0.01, beta=0.0),
             obj.ppo(clip_ratio_c=3.0, entropy_coeff=0.01),
             {"pg_clipfrac": "train/pg_clipfrac", "pg_clipfrac_lower": "train/pg_clipfrac_lower",
              "loss/entropy": "train/entropy"}, {}, ppo=True, ref=False),
    ]


def _run(model, loss_fn, example, config):
    fn = lambda m: loss_fn(m, example, config, PAD, EOS)  # noqa: E731
    (loss, aux), grad = nnx.value_and_grad(fn, has_aux=True)(model)
    return float(loss), {k: float(v) for k, v in aux.items()}, [np.asarray(g) for g in jax.tree.leaves(grad)]


def compare(case, model=None, seed=0):
    """One row: Tunix's and dew_rl's loss, the largest gradient difference, and each metric pair."""
    model = model or tiny_qwen3()
    example, _ = batch(model, seed, ppo=case.ppo, ref=case.ref)
    loss_t, aux_t, grad_t = _run(model, function_registry.get_policy_loss_fn(case.tunix_loss), example,
                                 case.tunix_config)
    name = dt.register(case.ours, "dew_rl_equality")
    loss_d, aux_d, grad_d = _run(model, function_registry.get_policy_loss_fn(name), example, case.tunix_config)
    metrics = {k: (aux_t[k], aux_d[v]) for k, v in case.metrics.items()}
    other = {}
    for k, (v, config) in case.other_convention.items():
        dt.register(config, "dew_rl_equality_token")
        _, aux_o, _ = _run(model, function_registry.get_policy_loss_fn("dew_rl_equality_token"), example,
                           case.tunix_config)
        other[k] = (aux_t[k], aux_d[v], aux_o[v])  # Tunix, dew_rl as configured, dew_rl reduced Tunix's way
    scale = max(float(np.max(np.abs(g))) for g in grad_t)
    gap = max(float(np.max(np.abs(a - b))) for a, b in zip(grad_t, grad_d))
    return dict(case=case.name, loss=(loss_t, loss_d), grad_gap=gap, grad_scale=scale, metrics=metrics, other=other)


def empty_row(seed=0):
    """GRPO's sequence mean on a batch with one empty completion: Tunix divides by the NE non-empty rows, dew_rl
    by all B rows (verl's convention), so Tunix = dew_rl * B / NE. Returns (Tunix, dew_rl, dew_rl * B / NE)."""
    model = tiny_qwen3()
    example, _ = batch(model, seed, ref=False, empty_row=True)
    config = _grpo_config(grpo_learner.GRPOConfig, num_generations=G, beta=0.0, epsilon=0.2)
    loss_t, _, _ = _run(model, function_registry.get_policy_loss_fn("grpo"), example, config)
    name = dt.register(obj.grpo(n_samples_per_prompt=G, clip_ratio_c=None), "dew_rl_equality_empty")
    loss_d, _, _ = _run(model, function_registry.get_policy_loss_fn(name), example, config)
    kept = int(np.sum(np.asarray(example.completion_mask).sum(-1) > 0))
    return loss_t, loss_d, loss_d * B / kept


def advantage_rows(seed=0):
    """Tunix's advantage estimators against the ones `register` adds, on the same rewards."""
    rng = np.random.default_rng(seed)
    rewards = rng.normal(size=B)
    rows = []
    for tunix_name, ours in [("grpo", obj.grpo(n_samples_per_prompt=G)), ("drgrpo", obj.dr_grpo(n_samples_per_prompt=G)),
                             ("rloo", obj.rloo(n_samples_per_prompt=G))]:
        name = dt.register(ours, f"dew_rl_adv_{tunix_name}")
        a_t = np.asarray(function_registry.get_advantage_estimator(tunix_name)(rewards=rewards, num_generations=G))
        a_d = function_registry.get_advantage_estimator(name)(rewards=rewards, num_generations=G)
        rows.append((tunix_name, float(np.max(np.abs(a_t - a_d))), float(np.max(np.abs(a_t)))))
    mask = np.arange(T)[None] < rng.integers(2, T + 1, B)[:, None]
    token_rewards = np.where(mask, rng.normal(size=(B, T)), 0.0).astype(np.float32)
    values = np.where(mask, rng.normal(size=(B, T)), 0.0).astype(np.float32)
    name = dt.register(obj.ppo(), "dew_rl_adv_gae")
    kw = dict(rewards=jnp.asarray(token_rewards), values=jnp.asarray(values), completion_mask=jnp.asarray(mask),
              gamma=1.0, gae_lambda=0.95)
    a_t, r_t = function_registry.get_advantage_estimator("gae")(**kw)
    a_d, r_d = function_registry.get_advantage_estimator(name)(**kw)
    rows.append(("gae (advantages, kept tokens)", float(np.max(np.abs(np.asarray(a_t - a_d))[mask])),
                 float(np.max(np.abs(np.asarray(a_t))[mask]))))
    rows.append(("gae (returns, kept tokens)", float(np.max(np.abs(np.asarray(r_t - r_d))[mask])),
                 float(np.max(np.abs(np.asarray(r_t))[mask]))))
    return rows


def _compiled_step(model, loss_fn, example, config):
    """The jitted loss-and-gradient step, compiled as Tunix's trainer jits it: its HLO text and temporary bytes."""
    graphdef, state = nnx.split(model)

    def step(state):
        return jax.value_and_grad(lambda s: loss_fn(nnx.merge(graphdef, s), example, config, PAD, EOS),
                                  has_aux=True)(state)
    compiled = jax.jit(step).lower(state).compile()
    return compiled.as_text(), compiled.memory_analysis().temp_size_in_bytes


def _vocab_sized(hlo, vocab, limit):
    "The array shapes of an HLO text with a vocabulary dimension and more elements than the unembedding [D, V]."
    out = set()
    for dims in re.findall(r"[fbsu]\w*\[([\d,]+)\]", hlo):
        shape = tuple(int(d) for d in dims.split(","))
        if vocab in shape and int(np.prod(shape)) > limit:
            out.add(shape)
    return sorted(out)


def fused_check(vocab=8192, width=32, chunk_size=1024):
    """Tunix's "grpo" loss and dew_rl's GRPO (log-probs from the sown last hidden state), each compiled under
    jit with its gradient, on a one-layer Qwen3 with a vocabulary of `vocab`: the vocabulary-sized arrays larger
    than the unembedding in each compiled program, and XLA's temporary memory next to the [B, L, V] float32 logits."""
    config = qwen3.ModelConfig(num_layers=1, vocab_size=vocab, embed_dim=width, hidden_dim=64, num_heads=2,
                               head_dim=16, num_kv_heads=1, rope_theta=10_000, norm_eps=1e-6)
    model = qwen3.Qwen3(config, rngs=nnx.Rngs(0))
    example, _ = batch(model, ref=False)
    tconfig = _grpo_config(grpo_learner.GRPOConfig, num_generations=G, beta=0.0, epsilon=0.2)
    name = dt.register(obj.grpo(n_samples_per_prompt=G), "dew_rl_fused", chunk_size=chunk_size)
    hlo_d, temp_d = _compiled_step(model, function_registry.get_policy_loss_fn(name), example, tconfig)
    hlo_t, temp_t = _compiled_step(model, function_registry.get_policy_loss_fn("grpo"), example, tconfig)
    rows = example.prompt_ids.shape[0] * (example.prompt_ids.shape[1] + example.completion_ids.shape[1])
    return dict(path=dt.policy_log_probs(model, example, PAD, EOS)[2], vocab=vocab, chunk_size=chunk_size,
                logits_shape=(example.prompt_ids.shape[0], rows // example.prompt_ids.shape[0], vocab),
                logits_bytes=rows * vocab * 4, tunix_temp_bytes=int(temp_t), dew_rl_temp_bytes=int(temp_d),
                tunix_vocab_shapes=_vocab_sized(hlo_t, vocab, width * vocab),
                dew_rl_vocab_shapes=_vocab_sized(hlo_d, vocab, width * vocab))


def table():
    lines = ["| case | loss: Tunix | loss: dew_rl | max abs grad diff | largest grad |", "|---|---|---|---|---|"]
    same = ["| case | metric | Tunix | dew_rl |", "|---|---|---|---|"]
    notes = []
    for case in cases():
        row = compare(case)
        short = row["case"].split(" (")[0]
        lines.append(f"| {row['case']} | {row['loss'][0]:.7f} | {row['loss'][1]:.7f} | "
                     f"{row['grad_gap']:.1e} | {row['grad_scale']:.2f} |")
        same += [f"| {short} | `{k}` | {a:.6f} | {b:.6f} |" for k, (a, b) in row["metrics"].items()]
        for k, (t, d, o) in row["other"].items():
            notes.append(f"| {short} | `{k}` | {t:.6f} | {d:.6f} | {o:.6f} |")
    lines += [""] + same
    out = "\n".join(lines)
    if notes:
        out += ("\n\n| case | Tunix metric | Tunix | dew_rl, reduced like the loss | dew_rl, token mean |\n"
                "|---|---|---|---|---|\n" + "\n".join(notes))
    t, d, scaled = empty_row()
    out += ("\n\n| one empty completion (GRPO, seq-mean-token-mean) | Tunix | dew_rl | dew_rl x B / NE |\n|---|---|---|---|\n"
            f"| loss | {t:.7f} | {d:.7f} | {scaled:.7f} |")
    adv = advantage_rows()
    out += ("\n\n| advantage estimator | max abs difference | largest value |\n|---|---|---|\n"
            + "\n".join(f"| {n} | {d:.1e} | {s:.2f} |" for n, d, s in adv))
    return out


if __name__ == "__main__":
    print(table())
