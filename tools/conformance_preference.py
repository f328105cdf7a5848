"""`make conformance` for the preference family: dew_rl's DPO loss types, KTO, CPO/SimPO/AlphaPO, ORPO, TPO and DPO + SFT
against TRL 1.16.0 and OpenRLHF 0.11.2 run live, and NeMo-RL's DPO loss from its frozen fixture.

    python tools/conformance_preference.py            # TRL and OpenRLHF (creates or reuses tools/refenvs.py's envs)
    python tools/conformance_preference.py trl        # only TRL (the data file keeps OpenRLHF's last results)

The running, hashing, merging and comparing are tools/conformance_harness.py's. What is this suite's own:

1. `make_inputs`: preference pairs (per-token log-probs of the policy and the reference, chosen and rejected
   widths that differ, masks with variable lengths and interior holes, a one-sided empty response, WPO's
   log sum_v pi^2 per token), TPO's gold responses, unpaired KTO completions with labels and KL completions, a case
   with a pair whose two responses are empty, and a case with an extreme margin.
2. The adapters in tools/conformance_adapters/preference/ run TRL's and OpenRLHF's own loss code on them.
3. NeMo-RL is not on the package index: tools/make_nemo_preference_fixtures.py ran its `DPOLossFn` from a
   checkout once and froze the outputs in tests/fixtures/nemo_rl_dpo.npz; they enter the table as frozen rows.
4. `dew_rl_side` computes dew_rl's value configured to the framework's convention and with dew_rl's defaults;
   `evaluate` records both differences. Gradients (w.r.t. the per-token log-probs) are compared as well.
5. Writes data/conformance_preference.json and data/conformance_preference_outputs.npz, which
   tests/test_conformance.py re-evaluates without any framework installed.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from conformance_harness import cases_of, check_fixture_inputs, note_by_param, run, Suite  # noqa: F401

ROOT = Path(__file__).resolve().parent.parent
NEMO_FIXTURE = ROOT / "tests" / "fixtures" / "nemo_rl_dpo.npz"
FRAMEWORKS = ("trl", "openrlhf")  # run live; NeMo-RL is read from its fixture
SEED = 20261215


# --------------------------------------------------------------------------------------------------------
# 1. Inputs
# --------------------------------------------------------------------------------------------------------
def _mask(rng, P, T, lo, holes=(), empty=()):
    lengths = rng.integers(lo, T + 1, size=P)
    lengths[0] = T
    m = (np.arange(T)[None, :] < lengths[:, None]).astype(np.float32)
    for r in holes:
        if lengths[r] >= 3:
            m[r, 1] = 0.0
    for r in empty:
        m[r] = 0.0
    return m


def make_inputs() -> dict[str, np.ndarray]:
    """The shared inputs, ``in/<case>/<name>``, float32 (flags as int).

    a: 6 pairs, chosen width 9, rejected width 7, interior holes, pair 3's rejected response empty; KTO inputs.
    b: 5 pairs, widths 6 and 8, right-padded responses (no holes: the reference-free trainers take attention
       masks), every response non-empty; KTO inputs. The reference-free losses run here.
    c: 4 pairs, pair 2 has both responses empty (TRL averages it in; dew_rl leaves it out and counts it); a KTO
       completion with no token.
    d: 3 pairs, pair 0 with a margin of about -1200 nats (beta * margin below -88: e^{-beta margin} overflows
       float32).
    Every case also has a gold response per pair (`pg`, `mg`: TPO's third branch), drawn from a separate stream, and
    TPO's chosen and rejected log-probs `tpo_pc`, `tpo_pr`: `pc` and `pr` capped at -0.01 (log-probs of a
    vocabulary, which TRL's logits-based TPO needs).
    """
    out = {}
    specs = {"a": (6, 9, 7), "b": (5, 6, 8), "c": (4, 5, 5), "d": (3, 4, 4)}
    for k, (case, (P, Tc, Tr)) in enumerate(specs.items()):
        rng = np.random.default_rng(SEED + k)
        if case == "a":
            mc, mr = _mask(rng, P, Tc, 1, holes=(1, 4)), _mask(rng, P, Tr, 1, holes=(2,), empty=(3,))
        elif case == "c":
            mc, mr = _mask(rng, P, Tc, 1, empty=(2,)), _mask(rng, P, Tr, 1, empty=(2,))
        else:
            mc, mr = _mask(rng, P, Tc, 1), _mask(rng, P, Tr, 1)
        pc, pr = rng.normal(-1.4, 0.7, (P, Tc)), rng.normal(-1.6, 0.7, (P, Tr))
        rc, rr = pc + rng.normal(0.0, 0.5, (P, Tc)), pr + rng.normal(0.0, 0.5, (P, Tr))
        if case == "d":
            pc[0] = -300.0  # the chosen response became very unlikely under the policy, not under the reference
            rc[0] = -1.0
        # WPO's per-token log sum_v pi(v)^2: between 2 log pi(y) and 0 for a distribution containing y
        lsq_c = 2 * pc * rng.uniform(0.05, 0.95, (P, Tc))
        lsq_r = 2 * pr * rng.uniform(0.05, 0.95, (P, Tr))
        vals = dict(pc=pc, pr=pr, rc=rc, rr=rr, mc=mc, mr=mr, lsq_c=lsq_c, lsq_r=lsq_r)
        if case in ("a", "b", "c"):
            B, T, Bk, Tk = 8, 7, 8, 6
            km = _mask(rng, B, T, 1, holes=(2,), empty=(5,) if case == "c" else ())
            klm = _mask(rng, Bk, Tk, 1)
            lp = rng.normal(-1.5, 0.7, (B, T))
            kl_lp = rng.normal(-1.5, 0.7, (Bk, Tk))
            vals.update(k_lp=lp, k_ref=lp + rng.normal(0.0, 0.5, (B, T)), k_mask=km,
                        k_label=np.array([1, 0, 1, 1, 0, 1, 0, 0], np.float32) if case != "b" else
                        np.array([1, 1, 1, 0, 1, 0, 1, 1], np.float32),
                        k_klp=kl_lp, k_klref=kl_lp + rng.normal(-0.2, 0.6, (Bk, Tk)), k_klmask=klm)
        # TPO's gold responses, from their own stream (the draws above are unchanged): a hole in case a
        g_rng = np.random.default_rng(SEED + 100 + k)
        Tg = {"a": 8, "b": 6, "c": 5, "d": 4}[case]
        vals.update(pg=g_rng.normal(-1.2, 0.6, (P, Tg)), mg=_mask(g_rng, P, Tg, 1, holes=(1,) if case == "a" else ()))
        # TRL's TPO takes logits: its stand-in needs log-probs of a vocabulary, <= 0 (pc and pr have a few > 0)
        vals.update(tpo_pc=np.minimum(pc, -0.01), tpo_pr=np.minimum(pr, -0.01))
        for name, v in vals.items():
            out[f"in/{case}/{name}"] = np.asarray(v, np.float32)
        out[f"in/{case}/ref_free"] = np.array(int(case == "b"))
        out[f"in/{case}/empty_pair_case"] = np.array(int(case == "c"))
        out[f"in/{case}/extreme_case"] = np.array(int(case == "d"))
    return out


# --------------------------------------------------------------------------------------------------------
# 2. dew_rl's side
# --------------------------------------------------------------------------------------------------------
DPO_ARGS = ("beta", "loss_type", "loss_weights", "label_smoothing", "f_divergence_type", "f_alpha_divergence_coef",
            "ld_alpha", "use_weighting", "discopop_tau")


def _dpo_kwargs(p: dict) -> dict:
    kw = {k: p[k] for k in DPO_ARGS if k in p}
    if "+" in kw["loss_type"]:
        kw["loss_type"] = tuple(kw["loss_type"].split("+"))
    return kw


def _call_text(fn: str, kw: dict) -> str:
    return f"{fn}(..., " + ", ".join(f"{k}={v!r}" for k, v in kw.items()) + ")"


_MEMO: dict = {}


def _memo(x: dict, fn, what: str, kw: dict, compute):
    "One evaluation per input case, function and setting: a loss, its metrics and its gradients are one call."
    key = (id(x), what, repr(sorted(kw.items())))
    if key not in _MEMO:
        _MEMO[key] = compute()
    return _MEMO[key]


def _value_and_grads(f, *args):
    "(loss, metrics, gradient w.r.t. each argument) of `f(*args) -> (loss, metrics)`, in float64 NumPy."
    import jax

    (loss, metrics), grads = jax.value_and_grad(f, argnums=tuple(range(len(args))), has_aux=True)(*args)
    return (np.asarray(loss, np.float64), {k: np.asarray(v, np.float64) for k, v in metrics.items()},
            tuple(np.asarray(g, np.float64) for g in grads))


def dew_rl_side(framework: str, kind: str, p: dict, x: dict) -> dict:
    """dew_rl's value of a framework output: `conv` (configured to the framework's convention, described in
    `convention`), `default` (dew_rl's defaults for the same loss, described in `default_call`), `where` (None)."""
    import jax.numpy as jnp

    from dew_rl._surrogates import preference_family as pf
    from dew_rl._surrogates.preference import preference_ipo

    r = dict(where=None)
    pair = [jnp.asarray(x[k]) for k in ("pc", "pr", "rc", "rr", "mc", "mr")] if "pc" in x else None

    def same():
        r["default"], r["default_call"] = r["conv"], "same call (the framework's convention is dew_rl's)"

    def pick(res, grad_kinds=("_grad_chosen", "_grad_rejected"), metric=None):
        "The loss, a metric, or a gradient of a (loss, metrics, grads) triple, by the record's kind."
        loss, metrics, grads = res
        for i, suffix in enumerate(grad_kinds):
            if kind.endswith(suffix):
                return grads[i]
        return metrics[metric] if metric else loss

    def dpo(kw):
        extra = dict(log_sum_sq_probs_chosen=pair_np["lsq_c"], log_sum_sq_probs_rejected=pair_np["lsq_r"]) \
            if kw.get("use_weighting") else {}
        return _memo(x, pf.dpo_loss, "dpo_loss", kw, lambda: _value_and_grads(
            lambda pc, pr: pf.dpo_loss(pc, pr, *pair[2:], **kw, **extra), pair[0], pair[1]))

    pair_np = x
    if kind.startswith("dpo_") and framework == "trl":
        kw = _dpo_kwargs(p)
        conv_kw, note = dict(kw), ""
        if kw["loss_type"] == "sigmoid" and kw.get("label_smoothing", 0.0):
            conv_kw["label_smoothing"] = 0.0
            note = " (TRL 1.16.0's 'sigmoid' ignores label_smoothing since PR #3906)"
        metric = None
        if kind == "dpo_metric":
            metric = {"rewards/chosen": "rewards_chosen", "rewards/rejected": "rewards_rejected",
                      "rewards/margins": "reward_margin", "rewards/accuracies": "reward_accuracy"}[p["metric"]]
        conv = pick(dpo(conv_kw), metric=metric)
        r.update(function="dpo_loss", convention=_call_text("dpo_loss", conv_kw) + note)
        P = x["mc"].shape[0]
        empty = int(((x["mc"].sum(1) + x["mr"].sum(1)) == 0).sum())
        if empty and kind != "dpo_loss":
            # TRL's gradient and metrics are means over every pair, the empty one included: dew_rl's times N / P
            r.update(conv=conv * (P - empty) / P, default=conv, default_call=r["convention"])
            r["convention"] = (f"{r['convention']} * {P - empty} / {P}: TRL's mean counts the pair with two empty "
                               "responses, dew_rl's does not")
        elif empty:
            # TRL averages a pair whose two responses are empty into the mean, at zero log-ratios;
            # dew_rl leaves it out: TRL = (n_valid * dew_rl + n_empty * loss at zero log-ratios) / P
            z, o = jnp.zeros((1, 1)), jnp.ones((1, 1))
            at_zero = float(pf.dpo_loss(z, z, z, z, o, o, **conv_kw)[0])
            r["conv"] = ((P - empty) * conv + empty * at_zero) / P
            r["convention"] = (f"({P - empty} * {r['convention']} + {empty} * the loss at zero log-ratios) / {P}: TRL "
                               "averages the pair with two empty responses in, dew_rl leaves it out and counts it")
            r["default"], r["default_call"] = conv, _call_text("dpo_loss", conv_kw)
        else:
            r["conv"] = conv
            if note:
                r["default"], r["default_call"] = pick(dpo(kw), metric=metric), _call_text("dpo_loss", kw) + " (cDPO)"
            else:
                same()
    elif framework == "openrlhf":
        beta, eps = p.get("beta", 0.1), p.get("label_smoothing", 0.0)
        if kind.startswith("dpo_"):
            kw = dict(beta=beta, loss_type="sigmoid", label_smoothing=eps)
            r.update(function="dpo_loss", conv=pick(dpo(kw)), convention=_call_text("dpo_loss", kw))
            same()
        elif kind.startswith("ipo_"):
            res = _memo(x, preference_ipo, "preference_ipo", dict(beta=beta), lambda: _value_and_grads(
                lambda pc, pr: (preference_ipo(pc, pr, *pair[2:], beta), {}), pair[0], pair[1]))
            r.update(function="preference_ipo", conv=pick(res),
                     convention=f"preference_ipo(..., beta={beta}) (summed log-probs, the paper's and OpenRLHF's)",
                     default=pick(dpo(dict(beta=beta, loss_type="ipo"))),
                     default_call=f"dpo_loss(..., beta={beta}, loss_type='ipo') (TRL's per-token means)")
        else:  # the trainer's NLL term: mean over pairs of the chosen response's per-token mean
            kw = dict(preference_loss_weight=0.0, sft_loss_weight=1.0, sft_average_log_probs=True)
            res = _memo(x, pf.dpo_sft_loss, "dpo_sft_loss", kw, lambda: _value_and_grads(
                lambda pc, pr: pf.dpo_sft_loss(pc, pr, *pair[2:], **kw), pair[0], pair[1]))
            dkw = dict(loss_type="sft")
            r.update(function="dpo_sft_loss", conv=pick(res), convention=_call_text("dpo_sft_loss", kw),
                     default=pick(dpo(dkw)), default_call=_call_text("dpo_loss", dkw) + " (TRL's token mean over the "
                                                                                     "batch)")
    elif kind.startswith("nemo_"):
        kw = {k: (bool(p[k]) if k.endswith("log_probs") else float(p[k]))
              for k in ("reference_policy_kl_penalty", "preference_loss_weight", "sft_loss_weight",
                        "preference_average_log_probs", "sft_average_log_probs")}
        res = _memo(x, pf.dpo_sft_loss, "dpo_sft_loss", kw, lambda: _value_and_grads(
            lambda pc, pr: pf.dpo_sft_loss(pc, pr, *pair[2:], **kw), pair[0], pair[1]))
        r.update(function="dpo_sft_loss", conv=pick(res), convention=_call_text("dpo_sft_loss", kw))
        same()
    elif kind.startswith("kto_"):
        kw = dict(beta=p.get("beta", 0.1), desirable_weight=p.get("desirable_weight", 1.0),
                  undesirable_weight=p.get("undesirable_weight", 1.0), loss_type=p["loss_type"])
        kl = (x["k_klp"], x["k_klref"], x["k_klmask"]) if kw["loss_type"] == "kto" else (None, None, None)
        res = _memo(x, pf.kto_loss, "kto_loss", kw, lambda: _value_and_grads(
            lambda lp: pf.kto_loss(lp, x["k_ref"], x["k_mask"], x["k_label"], *kl, **kw), jnp.asarray(x["k_lp"])))
        conv = pick(res, grad_kinds=("_grad",), metric="kl" if kind == "kto_kl" else None)
        r.update(function="kto_loss", convention=_call_text("kto_loss", kw))
        B = x["k_mask"].shape[0]
        gone = x["k_mask"].sum(1) == 0
        if gone.any() and kind == "kto_grad":
            r.update(conv=conv * (B - gone.sum()) / B, default=conv, default_call=r["convention"])
            r["convention"] += f" * {B - gone.sum()} / {B}: TRL's mean counts the empty completion, dew_rl's does not"
        elif gone.any() and kind == "kto_loss":
            # TRL averages an empty completion in at a zero log-ratio; dew_rl leaves it out and counts it
            lab, b, z_ref = x["k_label"] > 0, kw["beta"], float(res[1]["kl"])
            if kw["loss_type"] == "kto":
                at0 = np.where(lab, kw["desirable_weight"] / (1 + np.exp(-b * z_ref)),
                               kw["undesirable_weight"] / (1 + np.exp(b * z_ref)))
            else:
                at0 = np.where(lab, kw["desirable_weight"] * 0.5, kw["undesirable_weight"] * 0.5)
            r.update(conv=((B - gone.sum()) * conv + at0[gone].sum()) / B, default=conv,
                     default_call=r["convention"])
            r["convention"] = (f"({B - gone.sum()} * {r['convention']} + the empty completion's loss at a zero "
                               f"log-ratio) / {B}: TRL averages it in, dew_rl leaves it out and counts it")
        else:
            r["conv"] = conv
            same()
    elif kind.startswith(("cpo_", "orpo_")):
        if kind.startswith("cpo_"):
            fn, kw = pf.cpo_loss, {k: p[k] for k in ("beta", "loss_type", "label_smoothing", "cpo_alpha",
                                                     "simpo_gamma", "alpha")}
        else:
            fn, kw = pf.orpo_loss, dict(beta=p["beta"])
        res = _memo(x, fn, fn.__name__, kw, lambda: _value_and_grads(
            lambda pc, pr: fn(pc, pr, pair[4], pair[5], **kw), pair[0], pair[1]))
        r.update(function=fn.__name__, conv=pick(res), convention=_call_text(fn.__name__, kw))
        same()
    elif kind.startswith("tpo_"):
        kw = {k: p[k] for k in ("beta", "loss_type", "label_smoothing", "tpo_alpha", "tpo_l_gamma")}
        lps = (jnp.asarray(x["tpo_pc"]), jnp.asarray(x["tpo_pr"]))
        if kw["tpo_alpha"] != 0.0:
            gold = (jnp.asarray(x["pg"]), jnp.asarray(x["mg"]))
            f, args = (lambda pc, pr, pg: pf.tpo_loss(pc, pr, pair[4], pair[5], pg, gold[1], **kw)), (*lps, gold[0])
        else:
            f, args = (lambda pc, pr: pf.tpo_loss(pc, pr, pair[4], pair[5], **kw)), lps
        res = _memo(x, pf.tpo_loss, "tpo_loss", kw, lambda: _value_and_grads(f, *args))
        metric = {"rewards/chosen": "rewards_chosen", "rewards/rejected": "rewards_rejected",
                  "rewards/accuracies": "reward_accuracy"}.get(p.get("metric"))
        conv = pick(res, grad_kinds=("_grad_chosen", "_grad_rejected", "_grad_gold"), metric=metric)
        r.update(function="tpo_loss", convention=_call_text("tpo_loss", kw))
        P = x["mc"].shape[0]
        empty = int(((x["mc"].sum(1) + x["mr"].sum(1)) == 0).sum())
        if empty and kind == "tpo_loss":
            # TRL averages a pair whose two responses are empty into the pair mean, at u = 0; dew_rl leaves it out
            z, o = jnp.zeros((1, 1)), jnp.ones((1, 1))
            at_zero = float(pf.tpo_loss(z, z, o, o, **dict(kw, tpo_alpha=0.0))[0])
            m = res[1]
            r["conv"] = ((P - empty) * np.float64(m["preference_loss"]) + empty * at_zero) / P \
                + kw["tpo_alpha"] * np.float64(m["nll_loss"])
            r["convention"] = (f"({P - empty} * preference_loss + {empty} * the pair loss at u = 0) / {P} + tpo_alpha * "
                               f"nll_loss of {r['convention']}: TRL averages the pair with two empty responses in, "
                               "dew_rl leaves it out and counts it")
            r["default"], r["default_call"] = conv, _call_text("tpo_loss", kw)
        elif empty and kind != "tpo_grad_gold":
            # TRL's gradient and metrics are means over every pair, the empty one included: dew_rl's times N / P
            r.update(conv=conv * (P - empty) / P, default=conv, default_call=r["convention"])
            r["convention"] = (f"{r['convention']} * {P - empty} / {P}: TRL's mean counts the pair with two empty "
                               "responses, dew_rl's does not")
        else:
            r["conv"] = conv
            same()
    else:
        raise KeyError(f"no dew_rl side for {framework}/{kind}")
    return r


# Differences under the framework's convention that are known and explained in the chapter.
DOCUMENTED = {
    ("trl", "dpo_loss", "loss_type=discopop"): "TRL evaluates e^{-beta Delta} * sigmoid(beta Delta / tau) as a "
    "product, which is inf * 0 = NaN once beta * Delta < -88 in float32; dew_rl takes it in log space, "
    "exp(-beta Delta + log sigmoid(beta Delta / tau)), which is finite (chapter 03o_preference_family).",
    ("trl", "dpo_grad_chosen", "loss_type=discopop"): "the gradient of the same NaN (chapter 03o_preference_family).",
    ("trl", "dpo_grad_rejected", "loss_type=discopop"): "the gradient of the same NaN (chapter "
    "03o_preference_family).",
}


# --------------------------------------------------------------------------------------------------------
# 3. NeMo-RL's frozen outputs
# --------------------------------------------------------------------------------------------------------
def nemo_records() -> tuple[dict, list[dict], dict]:
    """The frozen NeMo-RL outputs as records (framework 'nemo-rl'), their arrays, and the fixture's metadata."""
    with np.load(NEMO_FIXTURE) as f:
        fx = {k: f[k] for k in f.files}
    meta = json.loads(str(fx.pop("meta/json")))
    records = meta.pop("records")
    arrays = {k: v for k, v in fx.items() if not k.startswith("in/")}
    inputs = {k: v for k, v in fx.items() if k.startswith("in/")}
    return arrays, records, dict(meta, inputs=inputs)


def frozen(inputs: dict) -> tuple[list, dict, dict]:
    arrays, records, meta = nemo_records()
    fixture_inputs = meta.pop("inputs")
    check_fixture_inputs(NEMO_FIXTURE, fixture_inputs, inputs, keys=fixture_inputs,
                         script="tools/make_nemo_preference_fixtures.py")
    return records, arrays, {"nemo-rl": meta}


def _header(ctx) -> dict:
    return dict(seed=SEED, cases={c: dict(P=int(v["mc"].shape[0]), T_chosen=int(v["mc"].shape[1]),
                                          T_rejected=int(v["mr"].shape[1])) for c, v in ctx["cases"].items()},
                failed=[f for n, m in ctx["frameworks"].items() if n in FRAMEWORKS for f in m.get("failed", [])])


SUITE = Suite(
    "preference", "conformance_preference", FRAMEWORKS, make_inputs,
    side=lambda rec, x: dew_rl_side(rec["framework"], rec["kind"], rec["params"], x),
    about="dew_rl's preference family against the frameworks' own code", note=lambda rec: note_by_param(DOCUMENTED, rec["key"]),
    extra=lambda rec, side, theirs, x, c: dict(framework_value=float(theirs) if np.ndim(theirs) == 0 else None),
    header=_header, frozen=frozen, frozen_names=("nemo-rl",), store_frozen=False, stubs=("openrlhf_lite.py",),
    fixtures=("tests/fixtures/nemo_rl_dpo.npz",), log="conformance_preference")

if __name__ == "__main__":
    sys.exit(run("conformance_preference", sys.argv[1:]))
