"""examples/tunix_grpo.py, run: Tunix's learners (RL cluster, vanilla sampler, trainer) on a shrunk random-init
Qwen3 with dew_rl's loss, for GRPO, DAPO whose first batch is rejected (every group tied), GRPO with token TIS
against the sampler's log-probs, and PPO (Tunix's PPOLearner with a Qwen3 critic, dew_rl's policy loss, GAE and
value loss). Each run takes 3 steps and must log finite metrics, every dew_rl metric name of the configuration
among them (stage 1's `rollout/*` and the loss's `train/*`, through Tunix's MetricsLogger), and change the
parameters; the rejected batch has a zero gradient and a zero loss. dew_rl's stage-1 metrics are checked against
what Tunix logs of the same batch (the mean score, the completion lengths).
"""
import json
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tunix")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
import tunix_grpo  # noqa: E402

import dew_rl.tunix as dt  # noqa: E402


def _run(tmp_path, estimator):
    out = tmp_path / f"{estimator}.json"
    tunix_grpo.main(["--estimator", estimator, "--steps", "3", "--json", str(out)])
    return json.loads(out.read_text())


ROLLOUT = ["rollout/raw_reward", "rollout/advantages_mean", "rollout/advantages_std", "rollout/advantages_raw_mean",
           "rollout/advantages_raw_std", "rollout/valid_tokens", "rollout/zero_variance"]


@pytest.mark.parametrize("estimator", ["grpo", "dapo_rejected", "tis", "ppo"])
def test_a_few_tunix_steps_train_with_dew_rl(tmp_path, estimator):
    log = _run(tmp_path, estimator)
    summary, steps = log["summary"], log["steps"]
    assert summary["steps"] == 3 and [s["global_step"] for s in steps] == [1, 2, 3]
    assert summary["finite"], steps
    assert summary["param_change"] > 1e-4, summary
    # every metric dew_rl's loss returns, and its stage-1 metrics, reach Tunix's logger under dew_rl's names
    config = tunix_grpo.objective(estimator)
    names = ["actor/train/" + n for n in dt.metric_names(config)] + ["rewards/train/score/mean"]
    names += [n.replace("rollout/", "rollout/train/", 1) for n in ROLLOUT + (["rollout/returns"] if estimator == "ppo" else [])]
    for name in names:
        assert all(name in s for s in steps), (name, summary["metric_names"])
    rows = tunix_grpo.G * 4  # 4 prompts x 4 samples (GRPO), 16 prompts x 1 sample (PPO)
    lengths = "generation/train/completions/mean_length" if estimator == "ppo" else "completions/train/mean_length"
    for s in steps:  # stage 1 on the batch Tunix logged: the same mean reward and the same number of tokens
        reward = "rewards/train/reward/mean" if estimator == "ppo" else "rewards/train/score/mean"
        np.testing.assert_allclose(s["rollout/train/raw_reward"], s[reward], rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(s["rollout/train/valid_tokens"], s[lengths] * rows, rtol=1e-6)
    if estimator == "dapo_rejected":
        assert steps[0]["rewards/train/score/max"] == 0.0 and steps[0]["rollout/train/zero_variance"] == 1.0
        assert steps[0]["actor/train/grad_norm"] == 0.0 and steps[0]["actor/train/train/loss"] == 0.0
        assert steps[1]["actor/train/grad_norm"] > 0.0
    if estimator == "tis":  # the sampler's log-probs reached the loss: the correction's diagnostics are logged
        assert all("actor/train/rollout_corr/rollout_is_mean" in s for s in steps)
        assert any(s["actor/train/rollout_corr/chi2_token"] > 0 for s in steps)
    if estimator == "ppo":  # the critic trains with dew_rl's value loss, logged under dew_rl's names and Tunix's
        assert summary["critic_param_change"] > 1e-4, summary
        for s in steps:
            assert s["critic/train/train/vf_loss"] > 0 and "critic/train/vpred_mean" in s
            np.testing.assert_allclose(s["critic/train/loss"], 0.5 * s["critic/train/train/vf_loss"], rtol=1e-5)
        assert any(s["rewards/train/score/mean"] > 0 for s in steps)  # an integer reward survives Tunix's cast
