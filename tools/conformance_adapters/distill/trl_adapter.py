"""Conformance adapter for TRL 1.16.0's distillation divergences (tools/conformance_distill.py).

Runs in the `trl` environment of tools/refenvs.py (torch 2.13.0 CPU). Two of TRL's functions, called with
tensors, nothing copied:

* `GKDTrainer.generalized_jsd_loss` (trl/experimental/gkd/gkd_trainer.py, a static method): the
  generalized JSD of GKD over the full vocabulary from the student's and the teacher's logits,
  reduction "batchmean" over the positions whose label is not -100;
* `ChunkedDivergenceFunction` (trl/kernels/chunked_divergence.py), the fused kernel of the
  DistillationTrainer: the same divergence from both models' hidden states and LM heads, per token,
  over vocabulary tiles (its torch path on CPU).

    <trl-python> tools/conformance_adapters/distill/trl_adapter.py INPUTS.npz OUTPUTS.npz OUTPUTS.json
"""
import sys

import numpy as np
import torch
import trl
from trl.experimental.gkd.gkd_trainer import GKDTrainer
from trl.kernels.chunked_divergence import ChunkedDivergenceFunction

from _common import Recorder, load_inputs

assert trl.__version__ == "1.16.0", trl.__version__
GKD, CDF = "trl/experimental/gkd/gkd_trainer.py", "trl/kernels/chunked_divergence.py"
rec = Recorder("trl", f"TRL {trl.__version__}")


def t(a, dtype=torch.float32):
    return torch.tensor(np.asarray(a), dtype=dtype)


def run_case(case, x):
    put = lambda *a, **k: rec.put(case, *a, **k)  # noqa: E731
    B, T, V = x["logits"].shape
    labels = torch.where(t(x["mask"]) > 0, t(x["tokens"], torch.long), torch.full((B, T), -100))

    def gkd():
        for beta in (0.0, 0.5, 1.0):
            for tau in (1.0, 0.7):
                z = t(x["logits"]).requires_grad_(True)
                loss = GKDTrainer.generalized_jsd_loss(z, t(x["teacher_logits"]), labels=labels, beta=beta, temperature=tau,
                                                       reduction="batchmean")
                loss.backward()
                s = f"generalized_jsd_loss(student_logits, teacher_logits, labels (-100 outside the mask), beta={beta}, temperature={tau}, reduction='batchmean')"
                put("gkd_jsd", loss, f"{GKD}:GKDTrainer.generalized_jsd_loss", s, beta=beta, temperature=tau)
                put("gkd_jsd_grad", z.grad, f"{GKD}:GKDTrainer.generalized_jsd_loss", s + "; gradient w.r.t. the student's logits",
                    beta=beta, temperature=tau)
    rec.attempt(f"{case}: generalized_jsd_loss", gkd)

    def chunked():
        D, Dt = x["hidden"].shape[-1], x["teacher_hidden"].shape[-1]
        for beta in (0.0, 0.5, 1.0):
            tau = 1.0
            h = t(x["hidden"]).reshape(B * T, D).requires_grad_(True)
            w = t(x["weight"]).T.contiguous().requires_grad_(True)                 # TRL's lm_head weight is [V, D]
            div, _ = ChunkedDivergenceFunction.apply(h, w, None, t(x["teacher_hidden"]).reshape(B * T, Dt),
                                                     t(x["teacher_weight"]).T.contiguous(), None, beta, tau, 1.0, None, 1.0, None)
            (div * t(x["g"]).reshape(-1)).sum().backward()
            s = f"ChunkedDivergenceFunction.apply(student hidden/lm_head, teacher hidden/lm_head, beta={beta}, temperature={tau})"
            put("chunked_divergence", div.reshape(B, T), f"{CDF}:ChunkedDivergenceFunction", s + ", per token", beta=beta, temperature=tau)
            put("chunked_divergence_grad_hidden", h.grad.reshape(B, T, D), f"{CDF}:ChunkedDivergenceFunction",
                s + "; gradient of sum g * value w.r.t. the student's hidden states", beta=beta, temperature=tau)
            put("chunked_divergence_grad_weight", w.grad.T, f"{CDF}:ChunkedDivergenceFunction",
                s + "; gradient w.r.t. the student's lm_head, transposed to [D, V]", beta=beta, temperature=tau)
    rec.attempt(f"{case}: ChunkedDivergenceFunction", chunked)


def main(argv):
    inputs, out_npz, out_json = argv
    for case, x in load_inputs(inputs).items():
        run_case(case, x)
    rec.save(out_npz, out_json, extra=dict(torch=torch.__version__, files=[GKD, CDF]))


if __name__ == "__main__":
    main(sys.argv[1:])
