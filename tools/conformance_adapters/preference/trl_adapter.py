"""Preference conformance adapter for TRL 1.16.0: DPO's loss types, KTO, CPO/SimPO/AlphaPO, ORPO and TPO, run by TRL.

Runs in the `trl` environment of tools/refenvs.py (torch 2.13.0 CPU, `trl==1.16.0`). TRL has no standalone
preference loss function: each loss is a trainer method that calls the model. Each is called unbound, with a
stand-in `self` holding the fields its `__init__` would set from the config, and a stand-in model that returns
the given per-token log-probabilities instead of running a network:

- `DPOTrainer._compute_loss` (trl/trainer/dpo_trainer.py): the model and the reference model return
  `FusedCausalLMOutput`-like records whose `log_probs` are the given log-probs, zero where the shifted label is
  -100 (as TRL's fused head writes them), and whose `log_sum_sq_probs` are the given WPO inputs;
- `KTOTrainer._compute_loss` (trl/trainer/kto_trainer.py), the same way, with the KL completions;
- `CPOTrainer.get_batch_loss_metrics` and `ORPOTrainer.get_batch_loss_metrics` (trl/experimental/cpo,
  trl/experimental/orpo), which take logits: the stand-in model returns logits over a two-word vocabulary,
  `[lp, log(1 - e^lp)]`, whose log-softmax at word 0 is `lp` exactly (the normaliser is log 1), with every
  label 0; so TRL's own `get_batch_logps`, cross-entropy and loss see the given log-probs;
- `TPOTrainer._compute_loss` (trl/experimental/tpo), which takes logits as well: the same two-word stand-in over
  the batch `[chosen, rejected, gold]` (`[chosen, rejected]` when `tpo_alpha=0`, as TRL's collator lays it out),
  every token id 0, so TRL's `selective_log_softmax_and_entropy` and the gold response's `F.cross_entropy` see
  the given log-probs.

Everything after the log-probs is TRL's code; nothing is copied. float32 throughout; one process (gather and
reduce are the identity; tools/conformance_adapters/_trl.py). Besides each loss, the gradient of the loss with
respect to the per-token log-probs of the chosen and rejected responses (torch autograd through TRL's code) is
recorded.

    <trl-python> tools/conformance_adapters/preference/trl_adapter.py INPUTS.npz OUTPUTS.npz OUTPUTS.json
"""
import dataclasses
import sys
import types
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _trl import OneProcess, load_inputs, rec, t  # noqa: E402
from trl.experimental.cpo.cpo_trainer import CPOTrainer  # noqa: E402
from trl.experimental.orpo.orpo_trainer import ORPOTrainer  # noqa: E402
from trl.experimental.tpo.tpo_trainer import TPOTrainer  # noqa: E402
from trl.trainer.dpo_trainer import DPOTrainer  # noqa: E402
from trl.trainer.kto_trainer import KTOTrainer  # noqa: E402

DPO_FN = "trl/trainer/dpo_trainer.py:DPOTrainer._compute_loss"
KTO_FN = "trl/trainer/kto_trainer.py:KTOTrainer._compute_loss"
CPO_FN = "trl/experimental/cpo/cpo_trainer.py:CPOTrainer.get_batch_loss_metrics"
ORPO_FN = "trl/experimental/orpo/orpo_trainer.py:ORPOTrainer.get_batch_loss_metrics"
TPO_FN = "trl/experimental/tpo/tpo_trainer.py:TPOTrainer._compute_loss"
torch.set_grad_enabled(True)


class _Model:
    """A stand-in causal LM with TRL's fused head: `log_probs` of the given tokens, zero where the label is -100."""

    training = True
    is_gradient_checkpointing = False

    def __init__(self, table, extra=None):
        self.table, self.extra = table, extra or {}  # id(input_ids tensor) -> [rows, T] per-token values

    def __call__(self, input_ids=None, labels=None, fused_lm_head=False, **kwargs):
        keep = labels[:, 1:] != -100
        lp = self.table[id(input_ids)]
        z = torch.zeros(keep.shape)
        out = dict(log_probs=torch.where(keep, lp, z), entropy=z, mean_logits=z, is_top1=torch.zeros(keep.shape,
                   dtype=torch.bool), aux_loss=None)
        if id(input_ids) in self.extra:
            out["log_sum_sq_probs"] = torch.where(keep, self.extra[id(input_ids)], z)
        return types.SimpleNamespace(**out)


def _pad(a, width):
    a = np.asarray(a)
    return np.pad(a, ((0, 0), (0, width - a.shape[1])))


# ------------------------------------------------------------------------------------------------------- DPO
def dpo(x, loss_type, beta=0.1, loss_weights=None, label_smoothing=0.0, f_divergence_type="reverse_kl",
        f_alpha_divergence_coef=0.5, ld_alpha=None, use_weighting=False, discopop_tau=0.05, keys=("pc", "pr")):
    """TRL's DPO loss and its gradient w.r.t. the chosen and rejected per-token log-probs."""
    P, Tc = x["pc"].shape
    T = max(Tc, x["pr"].shape[1])
    lp = torch.tensor(np.concatenate([_pad(x[keys[0]], T), _pad(x[keys[1]], T)]), dtype=torch.float32,
                      requires_grad=True)
    ref = t(np.concatenate([_pad(x["rc"], T), _pad(x["rr"], T)]))
    cmask = np.concatenate([_pad(x["mc"], T), _pad(x["mr"], T)])
    completion_mask = t(np.concatenate([np.zeros((2 * P, 1)), cmask], 1), torch.long)  # one prompt token
    input_ids = torch.zeros((2 * P, T + 1), dtype=torch.long)
    extra = {}
    if use_weighting:
        extra[id(input_ids)] = t(np.concatenate([_pad(x["lsq_c"], T), _pad(x["lsq_r"], T)]))
    types_ = [loss_type] if isinstance(loss_type, str) else list(loss_type)
    me = types.SimpleNamespace(
        model=_Model({id(input_ids): lp}, extra), ref_model=_Model({id(input_ids): ref}), accelerator=OneProcess(),
        aux_loss_enabled=False, precompute_ref_logps=False, ld_alpha=ld_alpha, loss_types=types_,
        loss_weights=loss_weights or [1.0] * len(types_), beta=beta, f_divergence_type=f_divergence_type,
        f_alpha_divergence_coef=f_alpha_divergence_coef, label_smoothing=label_smoothing, use_weighting=use_weighting,
        args=types.SimpleNamespace(discopop_tau=discopop_tau, gradient_checkpointing_kwargs=None),
        _metrics={"train": defaultdict(list), "eval": defaultdict(list)}, _total_train_tokens=0, _tp_size=1)
    inputs = dict(input_ids=input_ids, attention_mask=torch.ones_like(input_ids), completion_mask=completion_mask)
    loss = DPOTrainer._compute_loss(me, me.model, inputs, False)
    loss.backward()
    g = lp.grad.detach().numpy()
    return loss.detach(), g[:P, :Tc], g[P:, :x["pr"].shape[1]], me._metrics["train"]


def run_dpo(case, x):
    put = lambda *a, **k: rec.put(case, *a, **k)  # noqa: E731
    one = "one prompt token, chosen and rejected padded to a common width, float32, one process"
    settings = []
    for lt in ("sigmoid", "hinge", "ipo", "nca_pair", "bco_pair", "sppo_hard", "aot", "aot_unpaired", "apo_zero",
               "apo_down", "discopop", "sft", "sigmoid_norm"):
        settings.append(dict(loss_type=lt))
    settings += [dict(loss_type="exo_pair", label_smoothing=1e-3), dict(loss_type="exo_pair", label_smoothing=0.1),
                 dict(loss_type="robust", label_smoothing=0.1), dict(loss_type="aot", label_smoothing=0.1),
                 dict(loss_type="aot_unpaired", label_smoothing=0.1), dict(loss_type="sigmoid", label_smoothing=0.1),
                 dict(loss_type="sigmoid", beta=0.5), dict(loss_type="ipo", beta=0.5),
                 dict(loss_type="discopop", beta=0.5, discopop_tau=0.2),
                 dict(loss_type="sigmoid", f_divergence_type="forward_kl"),
                 dict(loss_type="sigmoid", f_divergence_type="js_divergence"),
                 dict(loss_type="sigmoid", f_divergence_type="alpha_divergence"),
                 dict(loss_type="sigmoid", f_divergence_type="alpha_divergence", f_alpha_divergence_coef=0.3),
                 dict(loss_type="ipo", f_divergence_type="js_divergence"),
                 dict(loss_type="hinge", f_divergence_type="forward_kl"),
                 dict(loss_type="sigmoid_norm", f_divergence_type="alpha_divergence"),
                 dict(loss_type="sigmoid", ld_alpha=0.5), dict(loss_type="sigmoid", ld_alpha=0.0),
                 dict(loss_type="ipo", ld_alpha=0.3), dict(loss_type="aot", ld_alpha=0.5),
                 dict(loss_type="sigmoid", use_weighting=True), dict(loss_type="ipo", use_weighting=True),
                 dict(loss_type="sft", use_weighting=True),
                 dict(loss_type=("sigmoid", "bco_pair", "sft"), loss_weights=[0.8, 0.2, 1.0]),
                 dict(loss_type=("sigmoid", "ipo"), loss_weights=[1.0, 0.5], ld_alpha=0.5, use_weighting=True)]
    if int(x["empty_pair_case"]):  # a pair with two empty responses: how the mean over pairs treats it
        settings = [dict(loss_type=lt) for lt in ("sigmoid", "hinge", "ipo", "sigmoid_norm", "bco_pair")]
    elif int(x["extreme_case"]):  # beta * margin below -88
        settings = [dict(loss_type=lt) for lt in ("sigmoid", "hinge", "discopop", "apo_zero")] + [
            dict(loss_type="sigmoid", f_divergence_type="js_divergence")]
    for kw in settings:
        def one_setting(kw=kw):
            loss, gc, gr, met = dpo(x, **kw)
            params = {k: (list(v) if isinstance(v, tuple) else v) for k, v in kw.items()}
            params["loss_type"] = "+".join(params["loss_type"]) if isinstance(params["loss_type"], list) \
                else params["loss_type"]
            s = ", ".join(f"{k}={v!r}" for k, v in kw.items()) + "; other DPOConfig fields at their defaults; " + one
            put("dpo_loss", loss, DPO_FN, s, **params)
            put("dpo_grad_chosen", gc, DPO_FN + " (torch autograd)", s, **params)
            put("dpo_grad_rejected", gr, DPO_FN + " (torch autograd)", s, **params)
            if kw == dict(loss_type="sigmoid"):
                for name in ("rewards/chosen", "rewards/rejected", "rewards/margins", "rewards/accuracies"):
                    put("dpo_metric", met[name][0], DPO_FN + f" (metric {name})", s, metric=name, **params)
        rec.attempt(f"{case}: dpo {kw}", one_setting)


# ------------------------------------------------------------------------------------------------------- KTO
def kto(x, loss_type="kto", beta=0.1, desirable_weight=1.0, undesirable_weight=1.0):
    B, T = x["k_lp"].shape
    Tk = x["k_klp"].shape[1]
    lp = torch.tensor(x["k_lp"], dtype=torch.float32, requires_grad=True)
    input_ids = torch.zeros((B, T + 1), dtype=torch.long)
    kl_ids = torch.ones((x["k_klp"].shape[0], Tk + 1), dtype=torch.long)
    cm = t(np.concatenate([np.zeros((B, 1)), x["k_mask"]], 1), torch.long)
    kcm = t(np.concatenate([np.zeros((kl_ids.shape[0], 1)), x["k_klmask"]], 1), torch.long)
    calc = loss_type == "kto"
    me = types.SimpleNamespace(
        model=_Model({id(input_ids): lp, id(kl_ids): t(x["k_klp"])}),
        ref_model=_Model({id(input_ids): t(x["k_ref"]), id(kl_ids): t(x["k_klref"])}),
        accelerator=OneProcess(), aux_loss_enabled=False, precompute_ref_logps=False, calculate_KL=calc,
        loss_type=loss_type, beta=beta, desirable_weight=desirable_weight, undesirable_weight=undesirable_weight,
        args=types.SimpleNamespace(gradient_checkpointing_kwargs=None),
        _metrics={"train": defaultdict(list), "eval": defaultdict(list)}, _total_train_tokens=0, _tp_size=1)
    me._compute_kl_logps = lambda model, batch: KTOTrainer._compute_kl_logps(me, model, batch)
    inputs = dict(input_ids=input_ids, attention_mask=torch.ones_like(input_ids), completion_mask=cm,
                  label=torch.tensor(x["k_label"] > 0))
    if calc:
        inputs.update(KL_input_ids=kl_ids, KL_attention_mask=torch.ones_like(kl_ids), KL_completion_mask=kcm)
    loss = KTOTrainer._compute_loss(me, me.model, inputs, False)
    loss.backward()
    return loss.detach(), lp.grad.detach().numpy(), me._metrics["train"]


def run_kto(case, x):
    put = lambda *a, **k: rec.put(case, *a, **k)  # noqa: E731
    for kw in (dict(), dict(beta=0.5, desirable_weight=1.33, undesirable_weight=0.75),
               dict(loss_type="apo_zero_unpaired"), dict(loss_type="apo_zero_unpaired", desirable_weight=2.0)):
        def one_setting(kw=kw):
            loss, g, met = kto(x, **kw)
            s = ", ".join(f"{k}={v!r}" for k, v in kw.items()) + "; other KTOConfig fields at their defaults; " \
                "one prompt token; KL completions given (loss_type='kto'); float32, one process"
            params = dict(kw, loss_type=kw.get("loss_type", "kto"))
            put("kto_loss", loss, KTO_FN, s, **params)
            put("kto_grad", g, KTO_FN + " (torch autograd)", s, **params)
            if params["loss_type"] == "kto":
                put("kto_kl", met["kl"][0], KTO_FN + " (metric kl)", s, **params)
        rec.attempt(f"{case}: kto {kw}", one_setting)


# ------------------------------------------------------------------------------------------------------- CPO / ORPO
def ref_free(x, trainer, **cfg):
    P, Tc = x["pc"].shape
    Tr = x["pr"].shape[1]
    T = max(Tc, Tr)
    src = torch.tensor(np.concatenate([_pad(x["pc"], T), _pad(x["pr"], T)]), dtype=torch.float32, requires_grad=True)
    batch = {}
    for side, key, m in (("chosen", "pc", x["mc"]), ("rejected", "pr", x["mr"])):
        L = 1 + m.shape[1]
        att = np.concatenate([np.ones((P, 1)), m], 1)  # a one-token prompt, then the response (no holes)
        labels = np.where(np.concatenate([np.zeros((P, 1)), m], 1) > 0, 0, -100)
        batch[f"{side}_input_ids"] = torch.zeros((P, L), dtype=torch.long)
        batch[f"{side}_attention_mask"] = t(att, torch.long)
        batch[f"{side}_labels"] = t(labels, torch.long)

    def model(input_ids, attention_mask=None, use_cache=False, **kw):
        # the logits as a differentiable function of the per-token log-probs: word 0 = lp, word 1 = log(1 - e^lp)
        w0 = torch.cat([src, torch.zeros((2 * P, 1))], 1)
        keep = t(np.concatenate([_pad(x["mc"], T), _pad(x["mr"], T)]) > 0, torch.bool)
        keep = torch.cat([keep, torch.zeros((2 * P, 1), dtype=torch.bool)], 1)
        w0 = torch.where(keep, w0, torch.full_like(w0, -1.0))
        w1 = torch.where(w0 < -0.6931471805599453, torch.log1p(-torch.exp(w0)), torch.log(-torch.expm1(w0)))
        return types.SimpleNamespace(logits=torch.stack([w0, w1], -1)[:, : input_ids.shape[1]])

    me = types.SimpleNamespace(is_encoder_decoder=False, pad_token_id=0, padding_value=0, aux_loss_enabled=False,
                               accelerator=OneProcess(), **cfg)
    cls = CPOTrainer if trainer == "cpo" else ORPOTrainer
    me.concatenated_inputs = cls.concatenated_inputs
    me.get_batch_logps = cls.get_batch_logps
    me.concatenated_forward = lambda m, b: cls.concatenated_forward(me, m, b)
    if trainer == "cpo":
        me.cpo_loss = lambda *a: CPOTrainer.cpo_loss(me, *a)
    else:
        me.odds_ratio_loss = lambda *a: ORPOTrainer.odds_ratio_loss(me, *a)
    loss, metrics = cls.get_batch_loss_metrics(me, model, batch)
    loss.backward()
    g = src.grad.detach().numpy()
    return loss.detach(), g[:P, :Tc], g[P:, :Tr], metrics


def run_ref_free(case, x):
    put = lambda *a, **k: rec.put(case, *a, **k)  # noqa: E731
    common = "one prompt token, responses without interior holes, a two-word vocabulary whose log-softmax is the " \
             "given log-prob, float32, one process"
    cpo_defaults = dict(beta=0.1, label_smoothing=0.0, loss_type="sigmoid", cpo_alpha=1.0, simpo_gamma=0.5, alpha=0.0)
    for kw in (dict(), dict(loss_type="hinge"), dict(loss_type="ipo"), dict(loss_type="simpo", cpo_alpha=0.0),
               dict(loss_type="simpo"), dict(loss_type="sigmoid", label_smoothing=0.1),
               dict(loss_type="simpo", cpo_alpha=0.0, alpha=0.25), dict(loss_type="sigmoid", alpha=-0.5, beta=0.5),
               dict(loss_type="simpo", simpo_gamma=1.0, beta=2.0, cpo_alpha=0.0)):
        def one_setting(kw=kw):
            cfg = dict(cpo_defaults, **kw)
            loss, gc, gr, _ = ref_free(x, "cpo", **cfg)
            s = ", ".join(f"{k}={v!r}" for k, v in kw.items()) + "; other CPOConfig fields at their defaults; " + common
            put("cpo_loss", loss, CPO_FN, s, **cfg)
            put("cpo_grad_chosen", gc, CPO_FN + " (torch autograd)", s, **cfg)
            put("cpo_grad_rejected", gr, CPO_FN + " (torch autograd)", s, **cfg)
        rec.attempt(f"{case}: cpo {kw}", one_setting)
    for beta in (0.1, 0.5):
        def one_orpo(beta=beta):
            loss, gc, gr, _ = ref_free(x, "orpo", beta=beta)
            s = f"beta={beta}; " + common
            put("orpo_loss", loss, ORPO_FN, s, beta=beta)
            put("orpo_grad_chosen", gc, ORPO_FN + " (torch autograd)", s, beta=beta)
            put("orpo_grad_rejected", gr, ORPO_FN + " (torch autograd)", s, beta=beta)
        rec.attempt(f"{case}: orpo beta={beta}", one_orpo)


# ------------------------------------------------------------------------------------------------------- TPO
def _two_words(lp, keep):
    "Logits over a two-word vocabulary whose log-softmax at word 0 is `lp` (a constant -1 where `keep` is False)."
    w0 = torch.where(keep, lp, torch.full_like(lp, -1.0))
    w1 = torch.where(w0 < -0.6931471805599453, torch.log1p(-torch.exp(w0)), torch.log(-torch.expm1(w0)))
    return torch.stack([w0, w1], -1)


def tpo(x, loss_type="sigmoid", beta=0.01, label_smoothing=0.0, tpo_alpha=1.0, tpo_l_gamma=0.5):
    """TRL's TPO loss, its gradients w.r.t. the per-token log-probs of each branch, and its metrics."""
    P = x["pc"].shape[0]
    branches = [("tpo_pc", "mc"), ("tpo_pr", "mr")] + ([("pg", "mg")] if tpo_alpha != 0.0 else [])
    T = max(x[k].shape[1] for k, _ in branches)
    src = torch.tensor(np.concatenate([_pad(x[k], T) for k, _ in branches]), dtype=torch.float32, requires_grad=True)
    m = np.concatenate([_pad(x[mk], T) for _, mk in branches])
    keep = t(m > 0, torch.bool)
    n = len(branches) * P
    input_ids = torch.zeros((n, T + 1), dtype=torch.long)  # one prompt token; every completion token is word 0
    completion_mask = t(np.concatenate([np.zeros((n, 1)), m], 1), torch.long)

    def model(input_ids=None, attention_mask=None, use_cache=False, **kw):
        # position j predicts token j + 1: the completion's token j; the last position predicts nothing
        lp = torch.cat([src, torch.zeros((n, 1))], 1)
        return types.SimpleNamespace(logits=_two_words(lp, torch.cat([keep, torch.zeros((n, 1), dtype=torch.bool)], 1)))

    me = types.SimpleNamespace(
        model=types.SimpleNamespace(training=True), loss_type=loss_type, beta=beta, label_smoothing=label_smoothing,
        tpo_alpha=tpo_alpha, tpo_l_gamma=tpo_l_gamma, accelerator=OneProcess(),
        _metrics={"train": defaultdict(list), "eval": defaultdict(list)}, _total_train_tokens=0, _tp_size=1)
    inputs = dict(input_ids=input_ids, attention_mask=torch.ones_like(input_ids), completion_mask=completion_mask)
    loss = TPOTrainer._compute_loss(me, model, inputs, False)
    loss.backward()
    g = src.grad.detach().numpy()
    grads = [g[i * P:(i + 1) * P, : x[k].shape[1]] for i, (k, _) in enumerate(branches)]
    return loss.detach(), grads, me._metrics["train"]


def run_tpo(case, x):
    put = lambda *a, **k: rec.put(case, *a, **k)  # noqa: E731
    common = "one prompt token, the branches padded to a common width, a two-word vocabulary whose log-softmax is " \
             "the given log-prob, float32, one process"
    tpo_defaults = dict(beta=0.01, loss_type="sigmoid", label_smoothing=0.0, tpo_alpha=1.0, tpo_l_gamma=0.5)
    settings = [dict(loss_type=lt, tpo_alpha=a) for lt in ("sigmoid", "hinge", "ipo", "tpo-l") for a in (1.0, 0.0)]
    if case == "a":
        settings += [dict(loss_type="sigmoid", label_smoothing=0.1, beta=0.5),
                     dict(loss_type="tpo-l", label_smoothing=0.1, beta=0.5),
                     dict(loss_type="tpo-l", tpo_l_gamma=1.5, beta=2.0, tpo_alpha=0.3),
                     dict(loss_type="ipo", beta=0.1), dict(loss_type="hinge", beta=0.5, tpo_alpha=0.0)]
    for kw in settings:
        def one_setting(kw=kw):
            cfg = dict(tpo_defaults, **kw)
            loss, grads, met = tpo(x, **cfg)
            s = ", ".join(f"{k}={v!r}" for k, v in kw.items()) + "; other TPOConfig fields at their defaults; " + common
            put("tpo_loss", loss, TPO_FN, s, **cfg)
            for name, g in zip(("chosen", "rejected", "gold"), grads):
                put(f"tpo_grad_{name}", g, TPO_FN + " (torch autograd)", s, **cfg)
            if kw == dict(loss_type="sigmoid", tpo_alpha=1.0):
                for name in ("rewards/chosen", "rewards/rejected", "rewards/accuracies"):
                    put("tpo_metric", met[name][0], TPO_FN + f" (metric {name})", s, metric=name, **cfg)
        rec.attempt(f"{case}: tpo {kw}", one_setting)


cases = load_inputs(sys.argv[1])
for case, x in cases.items():
    if "pc" in x:
        run_dpo(case, x)
    if "k_lp" in x:
        run_kto(case, x)
    if "pc" in x and x.get("ref_free", np.array(False)).item():
        run_ref_free(case, x)
    if "tpo_pc" in x:
        run_tpo(case, x)
def config_defaults(cls, names):
    "The defaults of `cls`'s dataclass fields `names`, as the config class declares them."
    out = {}
    for f in dataclasses.fields(cls):
        if f.name in names:
            out[f.name] = f.default if f.default is not dataclasses.MISSING else f.default_factory()
    return out


from trl.experimental.cpo import CPOConfig  # noqa: E402
from trl.experimental.orpo import ORPOConfig  # noqa: E402
from trl.experimental.tpo import TPOConfig  # noqa: E402
from trl.trainer.dpo_config import DPOConfig  # noqa: E402
from trl.trainer.kto_config import KTOConfig  # noqa: E402

defaults = dict(
    DPOConfig=config_defaults(DPOConfig, ("beta", "loss_type", "loss_weights", "label_smoothing", "f_divergence_type",
                                          "f_alpha_divergence_coef", "ld_alpha", "use_weighting", "discopop_tau")),
    KTOConfig=config_defaults(KTOConfig, ("beta", "loss_type", "desirable_weight", "undesirable_weight")),
    CPOConfig=config_defaults(CPOConfig, ("beta", "loss_type", "label_smoothing", "cpo_alpha", "simpo_gamma",
                                          "alpha")),
    ORPOConfig=config_defaults(ORPOConfig, ("beta",)),
    TPOConfig=config_defaults(TPOConfig, ("beta", "loss_type", "label_smoothing", "tpo_alpha", "tpo_l_gamma")))
rec.save(sys.argv[2], sys.argv[3], dict(torch=torch.__version__, config_defaults=defaults))
print(f"[trl] {len(rec.records)} outputs, {len(rec.failed)} failures")
