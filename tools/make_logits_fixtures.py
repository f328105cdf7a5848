"""Freeze verl 0.9.1's and TRL 1.16.0's log-prob and entropy functions on one seeded batch
(tests/fixtures/logits_frameworks.npz).

The frameworks are references, not dependencies: this script runs once in each framework's own
environment (torch==2.13.0 CPU; verl==0.9.1 installed with --no-deps and a stub `ray` module that
exposes an empty `ObjectRef`; trl==1.16.0 with transformers, accelerate, datasets and pandas), and
each run adds its framework's outputs to the same file. It stores only the inputs and the
frameworks' outputs (values, output dtypes, and gradients of a fixed linear functional); no
framework code is copied. The chapter nbs/03h_logits.ipynb tabulates them and tests/test_logits.py
compares dew_rl with them.

    PYTHONPATH=<dir with ray stub> VERL_USE_EXTERNAL_PLUGINS=none <verl-python> tools/make_logits_fixtures.py verl
    <trl-python> tools/make_logits_fixtures.py trl

Cases (all [B, T, V] = [2, 5, 257], the vocabulary deliberately odd-sized):
  normal  float32 logits ~ N(0, 3^2), token 0 of each row is its argmax
  bf16    the same logits rounded to bfloat16 (stored as the float32 values they represent), run as bf16
  large   1e4 + N(0, 3^2), with one row at -1e4 + N(0, 3^2): float32 logits of magnitude 1e4
  neginf  the normal logits with a third of the vocabulary set to -inf (a masked vocabulary)
  linear  hidden [2, 5, 16] and weight [16, 257] for verl's FusedLinearForPPO (float32 and bfloat16)
Gradients are of sum(g_lp * log_probs) or sum(g_H * entropy) with fixed float32 cotangents.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "logits_frameworks.npz"
B, T, V, D = 2, 5, 257, 16


def inputs() -> dict:
    rng = np.random.default_rng(20260808)
    z = (3.0 * rng.normal(size=(B, T, V))).astype(np.float32)
    tokens = rng.integers(0, V, size=(B, T))
    tokens[:, 0] = z[:, 0].argmax(-1)  # a token whose logit is the maximum
    bf16 = torch.tensor(z).to(torch.bfloat16).to(torch.float32).numpy()
    large = (1e4 + 3.0 * rng.normal(size=(B, T, V))).astype(np.float32)
    large[1] -= 2e4
    neginf = z.copy()
    neginf[..., rng.permutation(V)[: V // 3]] = -np.inf
    finite = np.isfinite(neginf[0, 0])  # the same columns are masked in every row
    tokens_neginf = np.where(finite[tokens], tokens, np.flatnonzero(finite)[0])  # sampled tokens stay finite
    hidden = rng.normal(size=(B, T, D)).astype(np.float32)
    weight = (rng.normal(size=(D, V)) / np.sqrt(D) * 3.0).astype(np.float32)
    return {
        "in/normal": z, "in/bf16": bf16, "in/large": large, "in/neginf": neginf,
        "in/tokens": tokens.astype(np.int64), "in/tokens_neginf": tokens_neginf.astype(np.int64),
        "in/hidden": hidden, "in/weight": weight,
        "in/g_lp": rng.normal(size=(B, T)).astype(np.float32), "in/g_H": rng.normal(size=(B, T)).astype(np.float32),
    }


CASES = ("normal", "bf16", "large", "neginf")


def tensor(x: np.ndarray, case: str) -> torch.Tensor:
    t = torch.tensor(x)
    return t.to(torch.bfloat16) if case == "bf16" else t


def run_logits(store: dict, x: dict, name: str, f, uses_tokens: bool) -> None:
    """Value, output dtype and gradient of `f` (log-probs if `uses_tokens`, else entropy) on every case."""
    g = torch.tensor(x["in/g_lp" if uses_tokens else "in/g_H"])
    for case in CASES:
        z = tensor(x[f"in/{case}"], case).requires_grad_(True)
        tok = torch.tensor(x["in/tokens_neginf" if case == "neginf" else "in/tokens"])
        out = f(z, tok) if uses_tokens else f(z)
        (dz,) = torch.autograd.grad((out.float() * g).sum(), z)
        store[f"{name}/{case}"] = out.detach().double().numpy()
        store[f"{name}/{case}/dtype"] = np.array(str(out.dtype).removeprefix("torch."))
        store[f"{name}/{case}/grad"] = dz.double().numpy()


def verl(store: dict, x: dict) -> None:
    import verl as _verl
    from verl.utils import torch_functional as F
    from verl.utils.experimental.torch_functional import FusedLinearForPPO

    assert _verl.__version__ == "0.9.1", _verl.__version__
    assert not F.FLAH_ATTN_CROSS_ENTROPY_LOSS_AVAILABLE and not F.NPU_CROSS_ENTROPY_LOSS_AVAILABLE  # CPU path
    run_logits(store, x, "verl/logprobs_from_logits", F.logprobs_from_logits, True)
    run_logits(store, x, "verl/logprobs_from_logits_naive", F.logprobs_from_logits_naive, True)
    run_logits(store, x, "verl/entropy_from_logits", F.entropy_from_logits, False)
    # documented for (batch, vocab): the leading dimensions are flattened here and restored after
    run_logits(store, x, "verl/entropy_from_logits_with_chunking",
               lambda z: F.entropy_from_logits_with_chunking(z.reshape(-1, V)).reshape(B, T), False)
    fused = FusedLinearForPPO()  # torch backend, 512 tokens per chunk
    for dt in ("float32", "bfloat16"):
        h = torch.tensor(x["in/hidden"]).to(getattr(torch, dt)).requires_grad_(True)
        w = torch.tensor(x["in/weight"].T.copy()).to(getattr(torch, dt)).requires_grad_(True)  # verl: [V, D]
        lp, ent = fused(h, w, torch.tensor(x["in/tokens"]), 1.0)
        loss = (lp.float() * torch.tensor(x["in/g_lp"])).sum() + (ent.float() * torch.tensor(x["in/g_H"])).sum()
        dh, dw = torch.autograd.grad(loss, (h, w))
        key = f"verl/FusedLinearForPPO/{dt}"
        store[f"{key}/log_probs"] = lp.detach().double().numpy()
        store[f"{key}/entropy"] = ent.detach().double().numpy()
        store[f"{key}/dtypes"] = np.array([str(lp.dtype).removeprefix("torch."), str(ent.dtype).removeprefix("torch.")])
        store[f"{key}/grad_hidden"] = dh.double().numpy()
        store[f"{key}/grad_weight"] = dw.double().numpy().T.copy()  # back to dew_rl's [D, V]


def trl(store: dict, x: dict) -> None:
    import trl as _trl
    from trl.trainer.utils import entropy_from_logits, selective_log_softmax

    assert _trl.__version__ == "1.16.0", _trl.__version__
    run_logits(store, x, "trl/selective_log_softmax", selective_log_softmax, True)
    run_logits(store, x, "trl/entropy_from_logits", entropy_from_logits, False)


def main(which: str) -> None:
    x = inputs()
    store = dict(np.load(OUT)) if OUT.exists() else {}
    for k, v in x.items():  # the inputs are regenerated by every run: they must not have changed
        assert k not in store or np.array_equal(store[k], v, equal_nan=True), k
    store.update(x)
    store = {k: v for k, v in store.items() if not k.startswith(which + "/")}
    {"verl": verl, "trl": trl}[which](store, x)
    store["versions/torch"] = np.array(torch.__version__)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(OUT, **store)
    print(f"{OUT}: {len(store)} arrays")


if __name__ == "__main__":
    main(sys.argv[1])
