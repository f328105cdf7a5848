"""Preference conformance adapter for OpenRLHF 0.11.2: `DPOLoss` (sigmoid with label smoothing, IPO) and the DPO
trainer's NLL term, run by OpenRLHF.

Runs in the `openrlhf` environment of tools/refenvs.py (torch 2.13.0 CPU, `openrlhf==0.11.2` with --no-deps). As in
the main adapter, nothing is imported through the package `__init__` (tools/stubs/openrlhf_lite.py registers empty
package modules and stubs); `openrlhf/trainer/dpo_trainer.py` is loaded by path as well, after giving the empty
`openrlhf.models` module the wheel's own `DPOLoss` (and a stub `tqdm`, whose
progress bar the loss never uses, when the environment lacks it). What runs, all of it the wheel's code:

- `DPOTrainer.concatenated_forward`, unbound, with a stand-in `self` (its real `concatenated_inputs` and
  `_get_batch_logps`, a one-token prompt) and a stand-in model that returns the given per-token log-probs: the
  summed log-probs of each response, and the NLL term `-mean over pairs of the chosen per-token mean`;
- the same for the reference model, then `DPOLoss(beta, label_smoothing, ipo)` on the four sums, as the trainer's
  `fit` calls it.

float32, one process. The gradient of each loss w.r.t. the per-token log-probs (torch autograd) is recorded too.

    <openrlhf-python> tools/conformance_adapters/preference/openrlhf_adapter.py INPUTS.npz OUTPUTS.npz OUTPUTS.json
"""
import importlib.util
import sys
import types
from importlib.metadata import version
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent.parent / "stubs"))
from _common import Recorder, load_inputs  # noqa: E402
from openrlhf_lite import load_openrlhf  # noqa: E402

VERSION = version("openrlhf")
assert VERSION == "0.11.2", VERSION
mu, loss_mod, em, ROOT = load_openrlhf()
sys.modules["openrlhf.models"].DPOLoss = loss_mod.DPOLoss
if importlib.util.find_spec("tqdm") is None:  # imported by the trainer for its progress bar, never called here
    def _no_tqdm(*a, **k):
        raise RuntimeError("stub tqdm: the progress bar is not part of the oracle")
    sys.modules["tqdm"] = types.SimpleNamespace(tqdm=_no_tqdm)
for name in ("openrlhf.utils.distributed_sampler", "openrlhf.trainer.dpo_trainer"):
    spec = importlib.util.spec_from_file_location(name, ROOT.joinpath(*name.split(".")[1:]).with_suffix(".py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
DPOTrainer = sys.modules["openrlhf.trainer.dpo_trainer"].DPOTrainer

rec = Recorder("openrlhf", f"OpenRLHF {VERSION}")
FWD = "openrlhf/trainer/dpo_trainer.py:DPOTrainer.concatenated_forward"
LOSS = "openrlhf/models/loss.py:DPOLoss"


def forward(x, keys, grad):
    """concatenated_forward on a stand-in model returning the given per-token log-probs; (chosen sums, rejected
    sums, nll, leaf tensors)."""
    P, Tc = x[keys[0]].shape
    Tr = x[keys[1]].shape[1]
    leaves = [torch.tensor(x[k], dtype=torch.float32, requires_grad=grad) for k in keys]
    c_ids, r_ids = torch.zeros((P, Tc + 1), dtype=torch.long), torch.zeros((P, Tr + 1), dtype=torch.long)
    c_mask = torch.tensor(np.concatenate([np.ones((P, 1)), x["mc"]], 1), dtype=torch.long)
    r_mask = torch.tensor(np.concatenate([np.ones((P, 1)), x["mr"]], 1), dtype=torch.long)
    T = max(Tc, Tr)

    def model(input_ids, attention_mask=None, return_output=False, return_logprobs=False, ring_attn_group=None):
        pad = lambda v: torch.nn.functional.pad(v, (0, T - v.shape[1]))  # noqa: E731
        return torch.cat([pad(leaves[0]), pad(leaves[1])]), {}

    me = types.SimpleNamespace(tokenizer=types.SimpleNamespace(pad_token_id=0),
                               strategy=types.SimpleNamespace(ring_attn_group=None))
    me.concatenated_inputs = lambda *a: DPOTrainer.concatenated_inputs(me, *a)
    me._get_batch_logps = lambda *a: DPOTrainer._get_batch_logps(me, *a)
    chosen, rejected, _, nll = DPOTrainer.concatenated_forward(me, model, c_ids, c_mask, r_ids, r_mask,
                                                               [1] * P)  # a list, as the data loader gives it
    return chosen, rejected, nll, leaves


def run_case(case, x):
    put = lambda *a, **k: rec.put(case, *a, **k)  # noqa: E731
    common = "summed log-probs from DPOTrainer.concatenated_forward (one prompt token), float32, one process"
    for beta, eps, ipo in ((0.1, 0.0, False), (0.1, 0.1, False), (0.5, 0.3, False), (0.1, 0.0, True),
                           (0.5, 0.0, True)):
        def one(beta=beta, eps=eps, ipo=ipo):
            pc, pr, _, leaves = forward(x, ("pc", "pr"), True)
            with torch.no_grad():
                rc, rr, _, _ = forward(x, ("rc", "rr"), False)
            loss, _, _ = loss_mod.DPOLoss(beta, eps, ipo)(pc, pr, rc, rr)
            loss.backward()
            kind = "ipo_loss" if ipo else "dpo_loss"
            s = f"DPOLoss(beta={beta}, label_smoothing={eps}, ipo={ipo}); {common}"
            put(kind, loss.detach(), LOSS, s, beta=beta, label_smoothing=eps)
            put(kind.replace("loss", "grad_chosen"), leaves[0].grad, LOSS + " (torch autograd)", s, beta=beta,
                label_smoothing=eps)
            put(kind.replace("loss", "grad_rejected"), leaves[1].grad, LOSS + " (torch autograd)", s, beta=beta,
                label_smoothing=eps)
        rec.attempt(f"{case}: DPOLoss beta={beta} eps={eps} ipo={ipo}", one)

    def nll():
        _, _, value, leaves = forward(x, ("pc", "pr"), True)
        value.backward()
        s = f"the nll_loss returned by concatenated_forward (trained with nll_loss_coef); {common}"
        put("nll_loss", value.detach(), FWD, s)
        put("nll_grad_chosen", leaves[0].grad, FWD + " (torch autograd)", s)
    rec.attempt(f"{case}: nll", nll)


cases = load_inputs(sys.argv[1])
for case, x in cases.items():
    if "pc" in x and not int(x["empty_pair_case"]) and not int(x["extreme_case"]):
        run_case(case, x)
rec.save(sys.argv[2], sys.argv[3], dict(torch=torch.__version__))
print(f"[openrlhf] {len(rec.records)} outputs, {len(rec.failed)} failures")
