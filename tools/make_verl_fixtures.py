"""Freeze verl 0.9.1's outputs on seeded inputs as a test fixture (tests/fixtures/verl_0_9_1.npz).

verl is a reference framework, not a dependency: this script runs in a separate environment that
has it (torch==2.13.0, verl==0.9.1 with --no-deps, a stub `ray`
module exposing an empty `ObjectRef`). It stores only inputs and verl's outputs; no verl code is
copied. tests/test_verl_oracle.py compares dew_rl with the stored outputs on every `make test`.

    PYTHONPATH=<dir with ray stub> VERL_USE_EXTERNAL_PLUGINS=none <oracle-python> tools/make_verl_fixtures.py
"""
from pathlib import Path

import numpy as np
import torch
import verl
from verl.trainer.ppo import core_algos as ca
from verl.trainer.ppo import rollout_corr_helper as rc

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "verl_0_9_1.npz"
assert verl.__version__ == "0.9.1", verl.__version__
rng = np.random.default_rng(20261129)
B, T, G = 8, 12, 4
store = {}


def put(name, value):
    store[name] = np.asarray(value.detach().numpy() if torch.is_tensor(value) else value, dtype=np.float64)


def t(a):
    return torch.tensor(np.asarray(a), dtype=torch.float64)


# A mask with variable lengths and interior holes, every row non-empty (verl raises or differs on
# empty rows in ways the chapters document separately).
lengths = rng.integers(3, T + 1, size=B)
mask = (np.arange(T)[None, :] < lengths[:, None]).astype(np.float64)
mask[1, 1] = mask[4, 2] = mask[6, 1] = 0.0
put("mask", mask)

# GAE
rewards_tok = rng.normal(size=(B, T)) * mask
values = rng.normal(size=(B, T))
put("gae/token_rewards", rewards_tok); put("gae/values", values)
for gamma, lam in [(1.0, 0.95), (0.9, 0.8)]:
    adv, ret = ca.compute_gae_advantage_return(t(rewards_tok), t(values), t(mask), torch.tensor(gamma, dtype=torch.float64), torch.tensor(lam, dtype=torch.float64))
    put(f"gae/advantages_{gamma}_{lam}", adv); put(f"gae/returns_{gamma}_{lam}", ret)

# GRPO, Dr.GRPO and RLOO: scalar rewards on the last valid token, groups of G consecutive rows.
scores = rng.normal(size=B).round(1)
scores[G:2 * G] = 0.7  # one group of equal rewards
last = mask * (np.cumsum(mask, 1) == mask.sum(1, keepdims=True))
token_scores = last * scores[:, None]
index = np.array([f"p{i // G}" for i in range(B)], dtype=object)
put("group/scores", scores)
adv, _ = ca.compute_grpo_outcome_advantage(t(token_scores), t(mask), index, norm_adv_by_std_in_grpo=True)
put("group/grpo", adv)
adv, _ = ca.compute_grpo_outcome_advantage(t(token_scores), t(mask), index, norm_adv_by_std_in_grpo=False)
put("group/drgrpo", adv)
adv, _ = ca.compute_rloo_outcome_advantage(t(token_scores), t(mask), index)
put("group/rloo", adv)

# KL estimators
lp = rng.normal(-1.0, 1.0, size=(B, T))
ref = lp + rng.normal(0.0, 0.7, size=(B, T))
ref[0, 0], lp[0, 0] = -30.0, 0.0  # the clamp region
put("kl/log_probs", lp); put("kl/ref_log_probs", ref)
for name in ("k1", "mse", "low_var_kl"):
    put(f"kl/{name}", ca.kl_penalty(t(lp), t(ref), name))

# Aggregation (single device; global_batch_size = B counts every row)
loss_mat = rng.normal(size=(B, T))
put("agg/loss", loss_mat)
for mode in ("token-mean", "token-sum", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"):
    put(f"agg/{mode}", ca.agg_loss(t(loss_mat), t(mask), mode, dp_size=1, batch_num_tokens=int(mask.sum()),
                                   global_batch_size=B))

# Vanilla (dual-clip) PPO policy loss
from verl.workers.config.actor import ActorConfig, PolicyLossConfig  # noqa: E402

old = lp + rng.normal(0.0, 0.3, size=(B, T))
adv_tok = rng.normal(size=(B, T))
put("ppo/old_log_probs", old); put("ppo/advantages", adv_tok)
for lo, hi, c in [(0.2, 0.2, 3.0), (0.2, 0.28, 3.0)]:
    cfg = ActorConfig(strategy="fsdp", rollout_n=1, ppo_micro_batch_size_per_gpu=1, clip_ratio=0.2, clip_ratio_low=lo,
                      clip_ratio_high=hi, clip_ratio_c=c, loss_agg_mode="token-mean",
                      policy_loss=PolicyLossConfig(loss_mode="vanilla"))
    loss, metrics = ca.compute_policy_loss_vanilla(t(old), t(lp), t(adv_tok), t(mask), "token-mean", cfg)
    key = f"ppo/{lo}_{hi}_{c}"
    put(f"{key}/loss", loss)
    for m in ("actor/pg_clipfrac", "actor/ppo_kl", "actor/pg_clipfrac_lower"):
        put(f"{key}/{m.split('/')[1]}", metrics[m])

# Value loss
vpreds = rng.normal(size=(B, T)); ret = rng.normal(size=(B, T)); vold = vpreds + rng.normal(0, 0.3, size=(B, T))
put("value/predicted", vpreds); put("value/returns", ret); put("value/old_values", vold)
vl, vclip = ca.compute_value_loss(t(vpreds), t(ret), t(vold), t(mask), 0.2, "token-mean", dp_size=1,
                                  batch_num_tokens=int(mask.sum()), global_batch_size=B)
put("value/loss", vl); put("value/clipfrac", vclip)

# Token-level truncated importance sampling (rollout correction)
log_ratio = rng.normal(0.0, 0.8, size=(B, T)); log_ratio[0, 1] = 25.0
put("tis/log_ratio", log_ratio)
w, _ = rc.compute_rollout_correction_weights(t(log_ratio), t(mask), rollout_is="token", rollout_is_threshold=2.0)
put("tis/weights", w)

np.savez_compressed(OUT, **store)
print(f"wrote {len(store)} arrays to {OUT.relative_to(OUT.parent.parent.parent)}")
