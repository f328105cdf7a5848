"""Off-policy family, conformance adapter for OpenRLHF 0.11.2: PolicyLoss's train/rollout IS correction.

Runs in the `openrlhf` environment of tools/refenvs.py; OpenRLHF's loss module is loaded without its package
`__init__` by tools/stubs/openrlhf_lite.py (as the main adapter does). `PolicyLoss.forward` multiplies its
per-token PPO loss by the correction coefficient and hands the product to the module's `aggregate_loss`; to read
the coefficient per token, that function is wrapped (it still runs) to keep a copy of the matrix it receives, and
the loss is called with log_probs = old_log_probs (ratio 1) and advantages -1, where the PPO term is exactly 1,
so the matrix is the coefficient itself. float32.

    <openrlhf-python> tools/conformance_adapters/offpolicy/openrlhf_adapter.py INPUTS.npz OUTPUTS.npz OUTPUTS.json
"""
import sys
from importlib.metadata import version
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parents[1] / "stubs"))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from openrlhf_lite import load_openrlhf  # noqa: E402

from _common import Recorder, load_inputs  # noqa: E402

VERSION = version("openrlhf")
assert VERSION == "0.11.2", VERSION
mu, loss_mod, em, ROOT = load_openrlhf()
rec = Recorder("openrlhf", f"OpenRLHF {VERSION}")
LOSS = "openrlhf/models/loss.py:PolicyLoss"

captured = []
_aggregate = loss_mod.aggregate_loss


def _observed(loss, *a, **k):
    captured.append(loss.detach().clone())
    return _aggregate(loss, *a, **k)


loss_mod.aggregate_loss = _observed


def t(a):
    return torch.tensor(np.asarray(a, np.float32))


def run_case(case, x):
    m = x["mask"]

    def correction():
        for level, mode, band in (("token", "clip", (0.5, 5.0)), ("token", "mask", (0.5, 5.0)),
                                  ("seq", "mask", (0.5, 5.0)), ("seq", "mask", (0.9, 1.1)), ("token", "clip", (0.8, 1.25))):
            pl = loss_mod.PolicyLoss(clip_eps_low=0.2, clip_eps_high=0.2, policy_loss_type="ppo",
                                     is_correction_level=level, is_correction_mode=mode,
                                     is_correction_gating="ratio", is_correction_threshold=band)
            captured.clear()
            _, _, _, vllm_kl, filt = pl(t(x["old"]), t(x["old"]), -torch.ones(m.shape), action_mask=t(m),
                                        rollout_log_probs=t(x["rollout"]))
            s = (f"is_correction_level={level!r}, is_correction_mode={mode!r}, is_correction_gating='ratio', "
                 f"is_correction_threshold={band}; log_probs = old_log_probs, advantages = -1 (the PPO term is 1), "
                 "the per-token matrix handed to aggregate_loss")
            kw = dict(level=level, mode=mode, lo=band[0], hi=band[1])
            rec.put(case, "is_coef", captured[-1], f"{LOSS}.forward", s, **kw)
            rec.put(case, "is_filter_ratio", filt, f"{LOSS}.forward (is_filter_ratio)", s, **kw)
            rec.put(case, "vllm_kl", vllm_kl, f"{LOSS}.forward (vllm_kl)", s, **kw)
    rec.attempt(f"{case}: PolicyLoss IS correction", correction)


cases = load_inputs(sys.argv[1])
for case, x in cases.items():
    run_case(case, x)
rec.unavailable(f"{LOSS} with is_correction_gating='binary_kl' or 'tv'", "none",
                "a divergence of the sampled token's probability between the engines (p log p/q + (1-p) log "
                "(1-p)/(1-q), or |p - q|), the trust region of DPPO; not part of this family")
rec.save(sys.argv[2], sys.argv[3], dict(torch=torch.__version__))
print(f"[openrlhf] {len(rec.records)} outputs, {len(rec.failed)} failures")
