"""examples/tunix_grpo.py, run: Tunix's GRPOLearner (RL cluster, vanilla sampler, trainer) on a shrunk random-init
Qwen3 with dew_rl's loss, for GRPO, DAPO whose first batch is rejected (every group tied) and GRPO with token TIS
against the sampler's log-probs. Each run takes 3 steps and must log finite metrics, dew_rl's metric names among
them, and change the parameters; the rejected batch has a zero gradient and a zero loss.
"""
import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("tunix")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
import tunix_grpo  # noqa: E402


def _run(tmp_path, estimator):
    out = tmp_path / f"{estimator}.json"
    tunix_grpo.main(["--estimator", estimator, "--steps", "3", "--json", str(out)])
    return json.loads(out.read_text())


@pytest.mark.parametrize("estimator", ["grpo", "dapo_rejected", "tis"])
def test_a_few_tunix_steps_train_with_dew_rl(tmp_path, estimator):
    log = _run(tmp_path, estimator)
    summary, steps = log["summary"], log["steps"]
    assert summary["steps"] == 3 and [s["global_step"] for s in steps] == [1, 2, 3]
    assert summary["finite"], steps
    assert summary["param_change"] > 1e-4, summary
    for name in ("actor/train/train/loss", "actor/train/train/pg_loss", "actor/train/train/entropy",
                 "rewards/train/score/mean"):
        assert all(name in s for s in steps), (name, summary["metric_names"])
    if estimator == "dapo_rejected":
        assert steps[0]["rewards/train/score/max"] == 0.0
        assert steps[0]["actor/train/grad_norm"] == 0.0 and steps[0]["actor/train/train/loss"] == 0.0
        assert steps[1]["actor/train/grad_norm"] > 0.0
    if estimator == "tis":  # the sampler's log-probs reached the loss: the correction's diagnostics are logged
        assert all("actor/train/rollout_corr/rollout_is_mean" in s for s in steps)
        assert any(s["actor/train/rollout_corr/chi2_token"] > 0 for s in steps)
