"""Policy-loss conformance adapter for OpenRLHF 0.11.2: its dual-clip `PolicyLoss` (the δ-clip equivalence).

Runs in the `openrlhf` environment of tools/refenvs.py and loads the wheel's files by path exactly as
tools/conformance_adapters/general/openrlhf_adapter.py does (tools/stubs/openrlhf_lite.py). The loss and
d loss / d log_probs (autograd) are recorded; float32, one process, batch_num_tokens = the valid tokens.

    <openrlhf-python> tools/conformance_adapters/policyloss/openrlhf_adapter.py INPUTS.npz OUTPUTS.npz OUTPUTS.json
"""
import sys
from importlib.metadata import version
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent / "stubs"))
from openrlhf_lite import load_openrlhf  # noqa: E402

from _common import Recorder, load_inputs  # noqa: E402

VERSION = version("openrlhf")
assert VERSION == "0.11.2", VERSION
mu, loss_mod, em, ROOT = load_openrlhf()
rec = Recorder("openrlhf", f"OpenRLHF {VERSION}")


def t(a):
    return torch.tensor(np.asarray(a, np.float32))


for case, x in load_inputs(sys.argv[1]).items():
    for c in (4.0, 1.5):
        def run(c=c):
            lp = t(x["lp"]).requires_grad_(True)
            pl = loss_mod.PolicyLoss(clip_eps_low=0.2, clip_eps_high=0.28, dual_clip=c, token_level_loss=True)
            loss = pl(lp, t(x["old"]), t(x["adv"]), action_mask=t(x["mask"]), batch_num_tokens=float(x["mask"].sum()))[0]
            loss.backward()
            s = f"PolicyLoss(clip_eps_low=0.2, clip_eps_high=0.28, dual_clip={c}, token_level_loss=True), " \
                "batch_num_tokens = the valid tokens"
            rec.put(case, "loss", loss, "openrlhf/models/loss.py:PolicyLoss", s, loss="dual_clip", delta=c)
            rec.put(case, "grad", lp.grad, "openrlhf/models/loss.py:PolicyLoss (d loss / d log_probs)", s,
                    loss="dual_clip", delta=c)
        rec.attempt(f"{case}: dual clip {c}", run)
rec.save(sys.argv[2], sys.argv[3], dict(torch=torch.__version__))
print(f"[openrlhf] {len(rec.records)} outputs, {len(rec.failed)} failures")
