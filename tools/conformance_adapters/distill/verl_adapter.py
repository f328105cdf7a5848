"""Conformance adapter for verl 0.9.1's distillation losses and logit helpers (tools/conformance_distill.py).

Runs in the `verl` environment of tools/refenvs.py. Every value below is verl's code from the wheel:
verl/trainer/distillation/losses.py (`distillation_loss`, the end-to-end loss of both modes),
verl/trainer/distillation/fsdp/losses.py (`compute_forward_kl_topk`, the per-token top-k forward KL),
verl/trainer/ppo/core_algos.py (`kl_penalty`) and verl/utils/torch_functional.py
(`calculate_sum_pi_squared_from_logits`, `post_process_logits`). Nothing is copied.

verl's distillation module imports its dataset module, which needs `datasets`, `PIL` and `pandas`; none is
used by a loss, so each is an in-memory stub here. The data are passed in verl's no-padding layout: every
sequence is a prompt of one token followed by its T response tokens, per-token model outputs are
left-shifted by one (verl/workers/utils/padding.py:no_padding_2_padding), the teacher's top-k are nested
(jagged) tensors, and the global counts are given as the trainer gives them.

    <verl-python> tools/conformance_adapters/distill/verl_adapter.py INPUTS.npz OUTPUTS.npz OUTPUTS.json
"""
import importlib.machinery
import sys
import types


class _Stub(types.ModuleType):
    "An import-time stand-in for a package verl's distillation path imports but never calls."

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Stub(f"{self.__name__}.{name}")


for _name in ("datasets", "PIL", "pandas"):
    sys.modules[_name] = _Stub(_name)
    sys.modules[_name].__spec__ = importlib.machinery.ModuleSpec(_name, None)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import verl  # noqa: E402
from tensordict import TensorDict  # noqa: E402
from verl.trainer.distillation import losses as DL  # noqa: E402
from verl.trainer.distillation.fsdp import losses as FL  # noqa: E402
from verl.trainer.ppo import core_algos as ca  # noqa: E402
from verl.utils import tensordict_utils as tu  # noqa: E402
from verl.utils import torch_functional as tf  # noqa: E402
from verl.workers.config import DistillationLossConfig  # noqa: E402
from verl.workers.config.actor import ActorConfig, PolicyLossConfig  # noqa: E402

from _common import Recorder, load_inputs  # noqa: E402

assert verl.__version__ == "0.9.1", verl.__version__
DLF, FLF = "verl/trainer/distillation/losses.py", "verl/trainer/distillation/fsdp/losses.py"
rec = Recorder("verl", f"verl {verl.__version__}")


def t(a, dtype=torch.float32):
    return torch.tensor(np.asarray(a), dtype=dtype)


def nopad(per_token, pad=0.0):
    "[B, T, ...] -> [B * (T + 1), ...]: each row's T values, then one for its last position (verl's left shift)."
    x = np.asarray(per_token)
    tail = np.full((x.shape[0], 1) + x.shape[2:], pad, x.dtype)
    return np.concatenate([x, tail], 1).reshape((-1,) + x.shape[2:])


def nested(per_token, dtype=torch.float32):
    x = np.asarray(per_token)
    tail = np.zeros((x.shape[0], 1) + x.shape[2:], x.dtype)
    rows = np.concatenate([x, tail], 1)
    return torch.nested.nested_tensor([t(r, dtype) for r in rows], layout=torch.jagged)


def batch(x, teacher=None):
    "verl's micro-batch TensorDict: prompts of one token, the responses, the mask, and the global counts."
    B, T = x["mask"].shape
    td = TensorDict({
        "prompts": torch.nested.nested_tensor([torch.zeros(1, dtype=torch.long) for _ in range(B)], layout=torch.jagged),
        "responses": torch.nested.nested_tensor([t(x["tokens"][b], torch.long) for b in range(B)], layout=torch.jagged),
        "response_mask": t(x["mask"]), "old_log_probs": t(x["old"]),
    }, batch_size=[B])
    if teacher is not None:
        td["teacher_logprobs"] = teacher
    tu.assign_non_tensor(td, dp_size=1, batch_num_tokens=int(x["mask"].sum()), global_batch_size=B)
    return td


def actor():
    return ActorConfig(strategy="fsdp", rollout_n=1, ppo_micro_batch_size_per_gpu=1, loss_agg_mode="token-mean",
                       policy_loss=PolicyLossConfig(loss_mode="vanilla"))


def run_case(case, x):
    put = lambda *a, **k: rec.put(case, *a, **k)  # noqa: E731
    B, T = x["mask"].shape
    K = x["teacher_ids"].shape[-1]

    def estimators():
        for mode in ("kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3"):
            put("kl_terms", ca.kl_penalty(t(x["lp"]), t(x["tlp"]), mode), "verl/trainer/ppo/core_algos.py:kl_penalty",
                f"kl_penalty(logprob=student, ref_logprob=teacher, kl_penalty={mode!r}): the per-token distillation loss "
                "of loss_mode in {kl, k1, abs, mse, k2, low_var_kl, k3}", mode=mode)
    rec.attempt(f"{case}: kl_penalty", estimators)

    def end_to_end(loss_mode, use_pg):
        lp = torch.tensor(nopad(x["lp"]), requires_grad=True)
        cfg = DistillationLossConfig(loss_mode=loss_mode, use_policy_gradient=use_pg, topk=K)
        dcfg = types.SimpleNamespace(distillation_loss=cfg)
        loss, _ = DL.distillation_loss(actor(), dcfg, {"log_probs": lp}, batch(x, nested(x["tlp"][..., None])))
        loss.backward()
        grad = DL.no_padding_2_padding(lp.grad, batch(x))
        return loss, grad, cfg

    def estimator_losses():
        for mode in ("k3", "k2"):
            loss, grad, cfg = end_to_end(mode, False)
            s = (f"distillation_loss(ActorConfig(loss_agg_mode='token-mean'), loss_mode={mode!r}, use_policy_gradient=False, "
                 f"loss_max_clamp={cfg.loss_max_clamp} (default)); gradient w.r.t. the student's log-probs")
            put("estimator_loss", loss, f"{DLF}:distillation_loss", s, mode=mode, clamp=cfg.loss_max_clamp)
            put("estimator_loss_grad", grad, f"{DLF}:distillation_loss", s, mode=mode, clamp=cfg.loss_max_clamp)
    rec.attempt(f"{case}: distillation_loss (supervised estimators)", estimator_losses)

    def pg_losses():
        for mode in ("k1", "k3"):
            loss, grad, cfg = end_to_end(mode, True)
            s = (f"distillation_loss(loss_mode={mode!r}, use_policy_gradient=True, policy_loss_mode='vanilla', clip_ratio 0.2/0.2, "
                 f"loss_max_clamp={cfg.loss_max_clamp}): PPO with advantages = -distillation_losses.detach(); gradient w.r.t. "
                 "the student's current log-probs")
            put("pg_loss", loss, f"{DLF}:distillation_loss", s, mode=mode, clamp=cfg.loss_max_clamp)
            put("pg_loss_grad", grad, f"{DLF}:distillation_loss", s, mode=mode, clamp=cfg.loss_max_clamp)
    rec.attempt(f"{case}: distillation_loss (policy gradient)", pg_losses)

    def topk_tokens():
        for lo in (None, -10.0):
            z = torch.tensor(nopad(x["logits"])[None], requires_grad=True)  # [1, B * (T + 1), V] (thd layout)
            cfg = types.SimpleNamespace(distillation_loss=DistillationLossConfig(
                loss_mode="forward_kl_topk", topk=K, log_prob_min_clamp=lo, use_policy_gradient=False))
            out = FL.compute_forward_kl_topk(z, nested(x["teacher_topk"]), nested(x["teacher_ids"], torch.long), cfg, "thd")
            per = out["distillation_losses"][0].reshape(B, T + 1)[:, :T]
            (per * t(x["g"])).sum().backward()
            grad = z.grad[0].reshape(B, T + 1, -1)[:, :T]
            s = f"compute_forward_kl_topk(student_logits, teacher top-{K}, log_prob_min_clamp={lo}): per-token, before clamp_min(0)"
            put("topk_forward_tokens", per, f"{FLF}:compute_forward_kl_topk", s, log_prob_min_clamp=str(lo))
            put("topk_forward_tokens_grad", grad, f"{FLF}:compute_forward_kl_topk", s + "; gradient of sum g * value",
                log_prob_min_clamp=str(lo))
    rec.attempt(f"{case}: compute_forward_kl_topk", topk_tokens)

    def topk_loss():
        z = torch.tensor(nopad(x["logits"])[None], requires_grad=True)
        cfg = DistillationLossConfig(loss_mode="forward_kl_topk", topk=K, use_policy_gradient=False)
        dcfg = types.SimpleNamespace(distillation_loss=cfg)
        data = batch(x)
        data["teacher_logprobs"], data["teacher_ids"] = nested(x["teacher_topk"]), nested(x["teacher_ids"], torch.long)
        out = DL.distillation_ppo_loss(actor(), dcfg, data=data, student_logits=z, data_format="thd")
        loss, _ = DL.distillation_loss(actor(), dcfg, {k: v[0] for k, v in out.items()}, data)
        loss.backward()
        grad = z.grad[0].reshape(B, T + 1, -1)[:, :T]
        s = (f"distillation_ppo_loss (logits processor) then distillation_loss, loss_mode='forward_kl_topk', "
             f"use_policy_gradient=False; defaults log_prob_min_clamp={cfg.log_prob_min_clamp}, loss_max_clamp={cfg.loss_max_clamp}")
        put("topk_loss", loss, f"{DLF}:distillation_loss", s, log_prob_min_clamp=cfg.log_prob_min_clamp, clamp=cfg.loss_max_clamp)
        put("topk_loss_grad", grad, f"{DLF}:distillation_loss", s + "; gradient w.r.t. the student's logits",
            log_prob_min_clamp=cfg.log_prob_min_clamp, clamp=cfg.loss_max_clamp)
    rec.attempt(f"{case}: distillation_loss (forward_kl_topk)", topk_loss)

    def logits_helpers():
        put("sum_pi_squared", tf.calculate_sum_pi_squared_from_logits(t(x["logits"])),
            "verl/utils/torch_functional.py:calculate_sum_pi_squared_from_logits", "exp(logsumexp(2 z) - 2 logsumexp(z))")
        z = tf.post_process_logits(None, t(x["logits"]).clone(), 0.7, 5, 0.8)
        lp = torch.log_softmax(z, -1).gather(-1, t(x["tokens"], torch.long)[..., None])[..., 0]
        put("post_process_log_probs", lp, "verl/utils/torch_functional.py:post_process_logits",
            "post_process_logits(temperature=0.7, top_k=5, top_p=0.8), then log_softmax and the sampled token "
            "(as verl's actor does)", temperature=0.7, top_k=5, top_p=0.8)
    rec.attempt(f"{case}: torch_functional", logits_helpers)


def main(argv):
    inputs, out_npz, out_json = argv
    for case, x in load_inputs(inputs).items():
        run_case(case, x)
    rec.save(out_npz, out_json, extra=dict(torch=torch.__version__, files=[DLF, FLF, "verl/trainer/ppo/core_algos.py",
                                                                         "verl/utils/torch_functional.py"]))


if __name__ == "__main__":
    main(sys.argv[1:])
