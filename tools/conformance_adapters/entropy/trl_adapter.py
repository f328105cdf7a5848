"""Conformance adapter of the entropy/KL-placement family for TRL 1.16.0 (tools/conformance_entropy.py).

Runs in the `trl` environment of tools/refenvs.py, in float32. Calls TRL's own code:

* `GRPOTrainer.get_high_entropy_mask` (the `top_entropy_quantile` mask), unbound, with a stand-in `self`
  whose accelerator simulates R data-parallel ranks: each rank's rows are passed in turn, and
  `pad_across_processes` / `gather` act as accelerate's do across the R ranks (pad every rank's vector of
  valid entropies to the longest with the given pad value, concatenate them in rank order). One rank holds
  no valid token. The threshold TRL computes is recorded by wrapping `torch.quantile` during the call.
* `GRPOTrainer._compute_loss` with `use_adaptive_entropy=True` over several optimizer steps of several
  micro-batches (gradient accumulation; `accelerator.sync_gradients` True on a step's last micro-batch),
  with zero advantages and `beta=0`, so that the returned loss is the entropy bonus alone; recorded after
  every micro-batch: the loss, `entropy_coef` and `_last_world_entropy`. Once with every token
  (`top_entropy_quantile=1.0`) and once with `top_entropy_quantile=0.2` (the bonus and the controller then
  use the masked tokens).
* `torch.quantile` on more than 2**24 values, the size TRL's gathered vector reaches with that many valid
  tokens across ranks.

    <trl-python> tools/conformance_adapters/entropy/trl_adapter.py INPUTS.npz OUTPUTS.npz OUTPUTS.json
"""
import sys
import types

import numpy as np
import torch

from _trl import GT, OneProcess, grpo_args, grpo_inputs, grpo_self, load_inputs, rec, t
from trl.trainer.grpo_trainer import GRPOTrainer


class RanksAccelerator:
    "accelerate's pad_across_processes and gather over R simulated ranks, seen from rank `me`."

    def __init__(self, locals_, me):
        self.locals, self.me = locals_, me
        self.num_processes = len(locals_)

    def pad_across_processes(self, x, dim=0, pad_index=0):
        assert torch.equal(x, self.locals[self.me])
        longest = max(v.shape[0] for v in self.locals)
        self._padded = [torch.cat([v, v.new_full((longest - v.shape[0],), pad_index)]) for v in self.locals]
        return self._padded[self.me]

    def gather(self, x):
        return torch.cat(self._padded)


def high_entropy_mask(H, m, ranks, rho):
    "TRL's mask on every rank's rows, and the threshold TRL computed (identical on every rank)."
    Hs, ms = np.split(H, ranks), np.split(m, ranks)
    locals_ = [t(h)[t(k).bool()].float() for h, k in zip(Hs, ms)]
    seen, original = [], torch.quantile

    def spy(input, q, *a, **k):
        out = original(input, q, *a, **k)
        seen.append(float(out))
        return out
    torch.quantile = spy
    try:
        masks = [GRPOTrainer.get_high_entropy_mask(types.SimpleNamespace(accelerator=RanksAccelerator(locals_, r)),
                                                    t(h), t(k), 1 - rho) for r, (h, k) in enumerate(zip(Hs, ms))]
    finally:
        torch.quantile = original
    assert len(set(seen)) <= 1, seen
    return torch.cat(masks), (seen[0] if seen else float("nan"))


def controller_run(x, rho):
    "Steps of `accum` micro-batches each; zero advantages, so the loss is the entropy bonus alone."
    Hs, ms, steps, accum = x["ctl_H"], x["ctl_mask"], int(x["ctl_steps"]), int(x["ctl_accum"])
    B, T = Hs.shape[1:]
    args = grpo_args(entropy_target=0.2, entropy_coef_delta=0.005, entropy_coef_min=0.0, entropy_coef_max=0.02,
                     entropy_coef=0.01, top_entropy_quantile=rho)
    acc = OneProcess()
    me = grpo_self(T, None, loss_type="bnpo", args=args, top_entropy_quantile=rho, accelerator=acc,
                   current_gradient_accumulation_steps=accum, _entropy_bonus_enabled=True, use_adaptive_entropy=True,
                   entropy_coef=args.entropy_coef, _last_world_entropy=float("inf"), _entropy_window_stats=None)
    me.get_high_entropy_mask = lambda *a: GRPOTrainer.get_high_entropy_mask(me, *a)
    losses, coefs, lasts = [], [], []
    for i in range(steps * accum):
        H = t(Hs[i])
        me._get_per_token_logps_and_entropies = lambda *a, H=H, **k: (torch.zeros_like(H), H, None)
        acc.sync_gradients = (i % accum == accum - 1)
        inputs = grpo_inputs(ms[i], torch.zeros(B), torch.zeros((B, T)), ref_per_token_logps=torch.zeros((B, T)))
        loss = GRPOTrainer._compute_loss(me, None, inputs)
        losses.append(float(loss)); coefs.append(float(me.entropy_coef)); lasts.append(float(me._last_world_entropy))
    return np.array(losses), np.array(coefs), np.array(lasts)


def run_case(case, x):
    put = lambda *a, **k: rec.put(case, *a, **k)  # noqa: E731
    ranks = int(x["ranks"])

    def masks():
        for rho in (0.0, 0.2, 0.5, 0.8, 1.0):
            keep, thr = high_entropy_mask(x["H"], x["mask"], ranks, rho)
            s = (f"get_high_entropy_mask(entropies, mask, 1 - top_entropy_quantile), top_entropy_quantile={rho}, "
                 f"{ranks} simulated ranks (rows split evenly; one rank without a valid token)")
            put("top_entropy_mask", keep, f"{GT}:GRPOTrainer.get_high_entropy_mask", s, rho=rho)
            put("top_entropy_threshold", np.float64(thr), f"{GT}:GRPOTrainer.get_high_entropy_mask (torch.quantile)",
                s, rho=rho)
    rec.attempt(f"{case}: get_high_entropy_mask", masks)

    if "ctl_H" in x:
        def control():
            for rho in (1.0, 0.2):
                losses, coefs, lasts = controller_run(x, rho)
                s = (f"_compute_loss, loss_type='bnpo', advantages 0, beta=0, use_adaptive_entropy=True, entropy_coef=0.01, "
                     f"entropy_target=0.2, entropy_coef_delta=0.005, entropy_coef_min=0.0, entropy_coef_max=0.02, "
                     f"top_entropy_quantile={rho}, {int(x['ctl_accum'])} micro-batches per optimizer step, one process")
                put("entropy_bonus_loss", losses, f"{GT}:GRPOTrainer._compute_loss", s, rho=rho)
                put("entropy_coef", coefs, f"{GT}:GRPOTrainer._compute_loss (self.entropy_coef)", s, rho=rho)
                put("last_world_entropy", lasts, f"{GT}:GRPOTrainer._compute_loss (self._last_world_entropy)", s, rho=rho)
        rec.attempt(f"{case}: adaptive entropy", control)


cases = load_inputs(sys.argv[1])
for case, x in cases.items():
    run_case(case, x)


def too_large():
    torch.quantile(torch.zeros(2**24 + 1), 0.8)
    rec.put("limit", "quantile_2pow24_plus_1", np.float64(1.0), "torch.quantile", "2**24 + 1 values")
rec.attempt("torch.quantile of 2**24 + 1 values (the gathered vector of get_high_entropy_mask)", too_large)
rec.save(sys.argv[2], sys.argv[3], dict(torch=torch.__version__))
print(f"[trl] {len(rec.records)} outputs, {len(rec.failed)} failures")
