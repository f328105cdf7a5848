"""Conformance of the distillation family: dew_rl against verl, TRL, NeMo-RL and slime on shared inputs.

    python tools/conformance_distill.py            # verl and TRL live (tools/refenvs.py), NeMo-RL and slime frozen
    python tools/conformance_distill.py verl       # only verl live; the others keep their last results
    python tools/conformance_distill.py --no-live  # re-evaluate the stored outputs (after a change on dew_rl's side)

What is this suite's own (the running, hashing, merging and comparing are tools/conformance_harness.py's):

1. Draws the shared inputs (`make_inputs`: fixed seed, two cases of [B, T] = [3, 5] positions over a
   vocabulary of 37, the student's logits as hidden @ weight, a teacher's, the teacher's top-6, sampled
   tokens, a mask with a hole and an empty row; case "b" has logits near +-1e4 and one masked (-inf)
   student logit outside the teacher's top-k).
2. Runs tools/conformance_adapters/distill/verl_adapter.py in verl 0.9.1's interpreter and
   distill/trl_adapter.py in TRL 1.16.0's: each calls the framework's own functions on the inputs.
3. Reads NeMo-RL's and slime's outputs from tests/fixtures/distill_frameworks.npz, written by
   tools/make_distill_fixtures.py from git snapshots of their repositories (revisions recorded there):
   neither is on the package index, so they are run once and frozen. Their inputs must be these inputs.
4. For every framework output computes dew_rl twice (`dew_rl_side`): configured to the framework's
   convention, and with dew_rl's defaults; records both differences.
5. Writes data/conformance_distill.json (the rows the chapters nbs/03p_distillation and nbs/03h_logits
   print) and data/conformance_distill_outputs.npz (inputs and framework outputs), so that
   tests/test_conformance.py recomputes dew_rl's side without any framework installed.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from conformance_harness import cases_of, check_fixture_inputs, load_npz, note_by_param, run, Suite  # noqa: F401

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "distill_frameworks.npz"
FIXTURE_META = ROOT / "tests" / "fixtures" / "distill_frameworks.json"
LIVE = ("verl", "trl")  # run live (tools/conformance_adapters/distill/)
FROZEN = ("nemo_rl", "slime")
FRAMEWORKS = ("verl", "trl", "nemo_rl", "slime")
SEED = 20261215
CASES = {"a": dict(B=3, T=5, V=37, K=6, D=8, Dt=6, offset=0.0), "b": dict(B=3, T=5, V=37, K=6, D=8, Dt=6, offset=1e4)}
TOP_P = 0.8  # the nucleus the sampler's support is drawn with (case inputs `support`)


# --------------------------------------------------------------------------------------------------------
# 1. Inputs
# --------------------------------------------------------------------------------------------------------
def _log_softmax64(z):
    z = np.asarray(z, np.float64)
    m = np.max(np.where(np.isfinite(z), z, -np.inf), -1, keepdims=True)
    return z - m - np.log(np.exp(z - m).sum(-1, keepdims=True))


def make_inputs() -> dict[str, np.ndarray]:
    """The shared inputs, ``in/<case>/<name>``."""
    out = {}
    for k, (case, c) in enumerate(CASES.items()):
        rng = np.random.default_rng(SEED + k)
        B, T, V, K, D, Dt = (c[n] for n in ("B", "T", "V", "K", "D", "Dt"))
        f32 = lambda a: np.asarray(a, np.float32)  # noqa: E731
        h = rng.normal(size=(B, T, D))
        w = rng.normal(size=(D, V)) * 2.5 / np.sqrt(D)
        if c["offset"]:  # a constant feature carries logits of +-1e4 through hidden @ weight
            h[:, :, -1] = np.where(np.arange(B)[:, None] % 2 == 0, 1.0, -1.0)
            w[-1] = c["offset"]
        ht = rng.normal(size=(B, T, Dt))
        wt = rng.normal(size=(Dt, V)) * 3.0 / np.sqrt(Dt)
        h, w, ht, wt = f32(h), f32(w), f32(ht), f32(wt)
        logits = h @ w                                   # float32, as a trainer's matmul gives them
        t_logits = ht @ wt
        lt = _log_softmax64(t_logits)
        order = np.argsort(-lt, -1, kind="stable")[..., :K]
        mask = np.ones((B, T), np.float32)
        mask[1, 2] = 0.0                                 # a hole
        mask[2, 3:] = 0.0                                # a short row
        ls = _log_softmax64(logits)
        tokens = np.stack([[rng.choice(V, p=np.exp(ls[b, t])) for t in range(T)] for b in range(B)])
        if case == "b":                                  # a masked vocabulary entry, outside the teacher's top-k
            free = next(v for v in range(V) if v not in order[0, 0] and v != tokens[0, 0])
            logits = logits.copy(); logits[0, 0, free] = -np.inf  # noqa: E702
            ls = _log_softmax64(logits)
        # the sampler's support: the student's nucleus of mass TOP_P (ids sorted by probability, -1 padded)
        sup = np.full((B, T, V), -1, np.int64)
        for b in range(B):
            for t in range(T):
                p = np.exp(ls[b, t])
                o = np.argsort(-p, kind="stable")
                n = int(np.searchsorted(np.cumsum(p[o]), TOP_P) + 1)
                sup[b, t, :n] = o[:n]
        Ks = int((sup >= 0).sum(-1).max())
        vals = dict(hidden=h, weight=w, teacher_hidden=ht, teacher_weight=wt, logits=f32(logits), teacher_logits=t_logits,
                    mask=mask, tokens=tokens.astype(np.int32),
                    teacher_ids=order.astype(np.int32), teacher_topk=f32(np.take_along_axis(lt, order, -1)),
                    lp=f32(np.take_along_axis(ls, tokens[..., None], -1)[..., 0]),
                    tlp=f32(np.take_along_axis(lt, tokens[..., None], -1)[..., 0]),
                    adv=f32(rng.normal(size=(B, T))), support=sup[..., :Ks].astype(np.int32))
        vals["old"] = f32(vals["lp"] + rng.normal(0.0, 0.3, size=(B, T)))
        vals["g"] = f32(rng.normal(size=(B, T)))          # a cotangent for per-token outputs
        for name, v in vals.items():
            out[f"in/{case}/{name}"] = v
    return out


# --------------------------------------------------------------------------------------------------------
# 2. dew_rl's side
# --------------------------------------------------------------------------------------------------------
def dew_rl_side(framework: str, kind: str, p: dict, x: dict) -> dict:
    """dew_rl's value of a framework output: `conv` under the framework's convention (`convention`), `default`
    with dew_rl's defaults (`default_call`), `where` (positions compared; None = all) and `function`."""
    import jax
    import jax.numpy as jnp

    import dew_rl as rl

    a = lambda v: np.asarray(v, np.float64)  # noqa: E731
    m, V = x["mask"], x["logits"].shape[-1]
    ones = np.ones_like(m)
    valid = m > 0
    r = dict(where=None)
    every = np.broadcast_to(np.arange(V, dtype=np.int32), m.shape + (V,))

    def same():
        r["default"], r["default_call"] = r["conv"], "same call (the convention is dew_rl's default)"

    if kind == "kl_terms":  # verl's kl_penalty(student, teacher, mode): the per-token estimate, every position
        mode = p["mode"]
        ours = "abs" if mode == "abs" else mode
        r.update(function="distillation_kl_terms", conv=a(rl.distillation_kl_terms(x["lp"], x["tlp"], ones, ours)[0]),
                 convention=f"distillation_kl_terms(lp, teacher_lp, ones, {ours!r})",
                 default=a(rl.distillation_kl_terms(x["lp"], x["tlp"], ones)[0]), default_call="distillation_kl_terms(lp, teacher_lp, ones) (k3)")
    elif kind in ("estimator_loss", "estimator_loss_grad"):
        mode, c = p["mode"], p["clamp"]
        f = lambda lp: rl.aggregate(rl.distillation_kl_terms(lp, x["tlp"], m, mode, c)[0], m, "token-mean")  # noqa: E731
        d = lambda lp: rl.aggregate(rl.distillation_kl_terms(lp, x["tlp"], m)[0], m, "token-mean")  # noqa: E731
        pick = (lambda fn: a(fn(x["lp"]))) if kind == "estimator_loss" else (lambda fn: a(jax.grad(fn)(x["lp"])))
        r.update(function="distillation_kl_terms", conv=pick(f), default=pick(d),
                 convention=f"aggregate(distillation_kl_terms(lp, teacher_lp, mask, {mode!r}, loss_max_clamp={c}), mask, "
                            "'token-mean')" + (", its gradient w.r.t. lp" if kind.endswith("grad") else ""),
                 default_call="the same with kind='k3', no clamp")
    elif kind in ("pg_loss", "pg_loss_grad"):  # verl: a vanilla (dual-clip) PPO term with A = -clamp(k1(current, teacher))
        mode, c = p["mode"], p["clamp"]

        def f(lp, task=None, coef=1.0):
            A = rl.distillation_advantage(jax.lax.stop_gradient(lp), x["tlp"], m, task, coef, mode, c)
            return rl.clipped_surrogate(rl.token_log_ratio(lp, x["old"]), A, m, 0.2, 0.2, 3.0)[0]
        pick = (lambda fn: a(fn(x["lp"]))) if kind == "pg_loss" else (lambda fn: a(jax.grad(fn)(x["lp"])))
        r.update(function="distillation_advantage", conv=pick(f),
                 convention=f"clipped_surrogate(token_log_ratio(lp, old), distillation_advantage(sg(lp), teacher_lp, mask, "
                            f"kind={mode!r}, loss_max_clamp={c}), mask, 0.2, 0.2, 3.0)" + (", gradient" if "grad" in kind else ""))
        same()
    elif kind in ("topk_forward_tokens", "topk_forward_tokens_grad"):  # verl's fsdp compute_forward_kl_topk, per token
        lo = p.get("log_prob_min_clamp")
        lo = None if lo in (None, "None") else float(lo)

        def f(z, nm="trunc", lo=lo):
            return rl.top_k_kl(rl.log_probs_at(z, x["teacher_ids"]), x["teacher_topk"], ones, "forward", nm, log_prob_min_clamp=lo)
        if kind.endswith("grad"):
            g = lambda nm, lo: a(jax.grad(lambda z: jnp.sum(f(z, nm, lo) * x["g"]))(x["logits"]))  # noqa: E731
            conv, default = g("trunc", lo), g("tail", None)
        else:
            conv, default = a(f(x["logits"])), a(f(x["logits"], "tail", None))
        r.update(function="top_k_kl", conv=conv, default=default,
                 convention=f"top_k_kl(log_probs_at(logits, teacher_ids), teacher_topk, ones, 'forward', 'trunc', "
                            f"log_prob_min_clamp={lo})" + (" (gradient of sum g * value w.r.t. logits)" if "grad" in kind else ""),
                 default_call="top_k_kl(..., 'forward', 'tail') (dew_rl's default norm_mode)")
    elif kind in ("topk_loss", "topk_loss_grad"):  # verl's distillation_loss with loss_mode='forward_kl_topk'
        lo, c = p["log_prob_min_clamp"], p["clamp"]

        def f(z):
            d = rl.top_k_kl(rl.log_probs_at(z, x["teacher_ids"]), x["teacher_topk"], m, "forward", "trunc", log_prob_min_clamp=lo)
            d = jnp.where(d > 0, d, 0.0)                   # verl: clamp_min(0) (no gradient where negative)
            return rl.aggregate(jnp.clip(d, -c, c), m, "token-mean")

        def d(z):
            return rl.aggregate(rl.top_k_kl(rl.log_probs_at(z, x["teacher_ids"]), x["teacher_topk"], m), m, "token-mean")
        pick = (lambda fn: a(fn(x["logits"]))) if kind == "topk_loss" else (lambda fn: a(jax.grad(fn)(x["logits"])))
        r.update(function="top_k_kl", conv=pick(f), default=pick(d),
                 convention=f"aggregate(clip(max(top_k_kl(log_probs_at(logits, ids), teacher_topk, mask, 'forward', 'trunc', "
                            f"log_prob_min_clamp={lo}), 0), -{c}, {c}), mask, 'token-mean')",
                 default_call="aggregate(top_k_kl(..., mask) ('forward', 'tail', no clamp), mask, 'token-mean')")
    elif kind == "sum_pi_squared":
        tau = p.get("temperature", 1.0)
        r.update(function="sum_pi_squared_from_logits", conv=a(rl.sum_pi_squared_from_logits(x["logits"], tau)),
                 convention=f"sum_pi_squared_from_logits(logits, {tau})")
        same()
    elif kind == "post_process_log_probs":  # verl: temperature only, top_k / top_p ignored
        tau = p["temperature"]
        r.update(function="log_probs_on_support", conv=a(rl.log_probs_from_logits(x["logits"], x["tokens"], tau)),
                 convention=f"log_probs_from_logits(logits, tokens, {tau}): verl's post_process_logits divides by the "
                            "temperature and does not truncate",
                 default=a(rl.log_probs_on_support(x["logits"], x["tokens"], rl.sampler_support(
                     x["logits"], p["top_k"], p["top_p"], tau)[0], tau)),
                 default_call=f"log_probs_on_support(logits, tokens, sampler_support(logits, {p['top_k']}, {p['top_p']}, {tau})[0], {tau})")
    elif kind in ("gkd_jsd", "gkd_jsd_grad", "chunked_divergence", "chunked_divergence_grad_hidden",
                  "chunked_divergence_grad_weight"):
        beta, tau = p["beta"], p["temperature"]
        t_lp, ids = rl.top_k_log_probs(x["teacher_logits"], V, tau)   # the teacher's whole distribution, sorted

        def per_token(s_lp, nm="trunc", b=beta):
            return rl.top_k_kl(s_lp, t_lp, ones, "jsd", nm, beta=b)
        if kind.startswith("gkd"):
            f = lambda z, nm="trunc": rl.aggregate(per_token(rl.log_probs_at(z, ids, tau), nm), m, "token-mean")  # noqa: E731
            pick = (lambda fn: a(fn(x["logits"]))) if kind == "gkd_jsd" else (lambda fn: a(jax.grad(fn)(x["logits"])))
            conv, default = pick(f), pick(lambda z: f(z, "tail"))
            call = f"aggregate(top_k_kl(log_probs_at(logits, ids, {tau}), teacher_lp, ones, 'jsd', 'trunc', beta={beta}), mask, 'token-mean')"
        else:
            f = lambda h, w, nm="trunc": per_token(rl.linear_log_probs_at(h, w, ids, tau, 8), nm)  # noqa: E731
            if kind == "chunked_divergence":
                conv, default = a(f(x["hidden"], x["weight"])), a(f(x["hidden"], x["weight"], "tail"))
            else:
                i = 0 if kind.endswith("hidden") else 1
                g = lambda nm: a(jax.grad(lambda h, w: jnp.sum(f(h, w, nm) * x["g"]), (0, 1))(x["hidden"], x["weight"])[i])  # noqa: E731
                conv, default = g("trunc"), g("tail")
            call = f"top_k_kl(linear_log_probs_at(hidden, weight, ids, {tau}), teacher_lp, ones, 'jsd', 'trunc', beta={beta})"
        r.update(function="top_k_kl", conv=conv, default=default,
                 convention=call + ", ids = all V tokens (top_k_log_probs(teacher_logits, V))",
                 default_call="the same with norm_mode='tail' (1e-7 tail floor)")
    elif kind == "opd_advantage":
        coef = p.get("coef", 1.0)
        task = x["adv"] if p.get("task") else None
        lp, tlp = x["lp"], x["tlp"]
        if p.get("poisoned"):
            lp = np.where(valid, lp, np.nan).astype(np.float32)
            tlp = np.where(valid, tlp, np.inf).astype(np.float32)
        r.update(function="distillation_advantage", conv=a(rl.distillation_advantage(lp, tlp, m, task, coef)),
                 convention=f"distillation_advantage(lp, teacher_lp, mask{', adv' if task is not None else ''}, coef={coef})"
                            + (" (NaN / inf stored at the masked positions)" if p.get("poisoned") else ""))
        same()
        if framework == "slime":
            r["where"] = valid
    elif kind in ("nemo_distill", "nemo_distill_grad"):
        kt, zot = p["kl_type"], p["zero_outside_topk"]
        nm = "trunc" if zot else "norm"
        # NeMo-RL always renormalises the teacher over its top-k (log_softmax of the top-k logits); with
        # zero_outside_topk the student is not renormalised: dew_rl's 'trunc' on a renormalised teacher
        t_k = x["teacher_topk"].astype(np.float64)
        teacher = (t_k - np.log(np.exp(t_k).sum(-1, keepdims=True))).astype(np.float32) if zot else x["teacher_topk"]

        def f(z, nm=nm, kt=kt, teacher=teacher):
            return rl.aggregate(rl.top_k_kl(rl.log_probs_at(z, x["teacher_ids"]), teacher, m, kt, nm, 0.5), m, "token-mean")
        pick = (lambda fn: a(fn(x["logits"]))) if kind == "nemo_distill" else (lambda fn: a(jax.grad(fn)(x["logits"])))
        r.update(function="top_k_kl", conv=pick(f), default=pick(lambda z: f(z, "tail", teacher=x["teacher_topk"])),
                 convention=f"aggregate(top_k_kl(log_probs_at(logits, teacher_ids), {'renormalised ' if zot else ''}teacher_topk, "
                            f"mask, {kt!r}, {nm!r}, 0.5), mask, 'token-mean')",
                 default_call="aggregate(top_k_kl(..., teacher_topk, mask, kl_type, 'tail'), mask, 'token-mean')")
    elif kind == "nemo_support_log_probs":  # NeMo-RL: the support recomputed from the logits by vLLM's rule
        k_, p_ = p["top_k"], p["top_p"]
        k_ = None if k_ in (None, "None", -1) else int(k_)
        sup, _ = rl.sampler_support(x["logits"], k_, p_, 1.0, None if k_ else V)
        ours = a(rl.log_probs_on_support(x["logits"], x["tokens"], sup))
        inside = np.array([[x["tokens"][b, t] in set(np.asarray(sup)[b, t]) for t in range(m.shape[1])] for b in range(m.shape[0])])
        r.update(function="log_probs_on_support", conv=ours, where=inside,
                 convention=f"log_probs_on_support(logits, tokens, sampler_support(logits, {k_}, {p_}{', max_support=V' if not k_ else ''})[0]); "
                            "compared where the sampled token is in the recomputed support (NeMo-RL gives -inf elsewhere, "
                            "dew_rl puts the token back)")
        r.update(default=ours, default_call="the same, every position")
    elif kind == "nemo_support_mask":
        k_, p_ = p["top_k"], p["top_p"]
        k_ = None if k_ in (None, "None", -1) else int(k_)
        sup, _ = rl.sampler_support(x["logits"], k_, p_, 1.0, None if k_ else V)
        sup = np.asarray(sup)
        keep = np.zeros(m.shape + (V,))
        for idx in np.ndindex(m.shape):
            keep[idx][sup[idx][sup[idx] >= 0]] = 1.0
        r.update(function="sampler_support", conv=keep, convention=f"sampler_support(logits, {k_}, {p_}) as a keep-mask [B, T, V]")
        same()
    elif kind in ("slime_support_log_probs", "slime_support_log_probs_grad", "slime_support_entropy"):
        if kind == "slime_support_entropy":
            r.update(function="entropy_from_logits", conv=a(rl.entropy_from_logits(x["logits"])),
                     convention="entropy_from_logits(logits) (slime's entropy is unmasked)")
            same()
        else:
            f = lambda z: rl.log_probs_on_support(z, x["tokens"], x["support"])  # noqa: E731
            conv = a(f(x["logits"])) if kind == "slime_support_log_probs" else \
                a(jax.grad(lambda z: jnp.sum(f(z) * x["g"]))(x["logits"]))
            default = a(rl.log_probs_from_logits(x["logits"], x["tokens"])) if kind == "slime_support_log_probs" else \
                a(jax.grad(lambda z: jnp.sum(rl.log_probs_from_logits(z, x["tokens"]) * x["g"]))(x["logits"]))
            r.update(function="log_probs_on_support", conv=conv, default=default,
                     convention="log_probs_on_support(logits, tokens, support)" + (" (gradient of sum g * value)" if "grad" in kind else ""),
                     default_call="log_probs_from_logits(logits, tokens) (no truncation)")
    else:
        raise KeyError(f"no dew_rl side for {framework}/{kind}")
    return r


# Differences under the framework's convention that are known and explained in a chapter.
_ZOT = ("NeMo-RL's zero_outside_topk=True adds, to the reverse (and mixed) KL, the student's tail measured against a "
        "teacher log-prob of -100 on every token outside the top-k (sum over the tail of p (log p + 100), from the full "
        "entropy); dew_rl has no such mode ('trunc' drops the tail, 'tail' bins it). In case b a masked (-inf) student logit "
        "makes that entropy 0 * -inf = NaN.")
_LARGE = "at logits near 1e4 (case b)"
DOCUMENTED = {
    ("nemo_rl", "nemo_distill", "kl_type=reverse"): _ZOT, ("nemo_rl", "nemo_distill_grad", "kl_type=reverse"): _ZOT,
    ("nemo_rl", "nemo_distill", "kl_type=mixed"): _ZOT, ("nemo_rl", "nemo_distill_grad", "kl_type=mixed"): _ZOT,
    ("nemo_rl", "opd_advantage", "poisoned=True"): "NeMo-RL multiplies by the mask, so a NaN or inf stored at a masked "
    "position becomes NaN there (0 * NaN); dew_rl selects first and gives 0.",
    ("verl", "sum_pi_squared", "case=b"): f"verl's exp(lse(2z) - 2 lse(z)) is a difference of two numbers near 2e4 {_LARGE}: "
    "float32 keeps about 1e-3 of it; dew_rl accumulates shifted sums (no cancellation).",
    ("verl", "post_process_log_probs", "case=b"): f"torch's float32 log_softmax of z / 0.7 rounds at ulp(1.4e4) {_LARGE}; "
    "dew_rl shifts before dividing. Away from that, verl's values are dew_rl's untruncated log-probs: post_process_logits "
    "ignores top_k and top_p (commented out, 'TODO: add them back').",
    ("trl", "gkd_jsd", "case=b"): "a masked (-inf) student logit (case b): F.kl_div computes 0 * -inf = NaN for every beta > 0, "
    "so the batch loss and its gradient are NaN; dew_rl takes 0 log 0 = 0.",
    ("trl", "gkd_jsd_grad", "case=b"): "as for the value: NaN in the row of the masked logit.",
    ("trl", "chunked_divergence", "case=b"): f"{_LARGE} the kernel's float32 tiles lose about 2e-3 of the divergence; against "
    "a float64 reference dew_rl is closer (chapter 03p_distillation).",
    ("trl", "chunked_divergence_grad_hidden", "case=b"): f"{_LARGE} the gradient w.r.t. the hidden states is off by O(1) "
    "(the backward pass's softmax rows do not sum to 0 exactly, times the 1e4 column of the head); dew_rl's error against "
    "a float64 reference is a small fraction of the gradient (chapter 03p_distillation).",
    ("trl", "chunked_divergence_grad_weight", "case=b"): f"{_LARGE}, as for the value.",
    ("slime", "slime_support_log_probs_grad", "case=b"): "a masked (-inf) logit in the row: slime's backward gives NaN for "
    "the whole row's gradient; dew_rl's is finite.",
    ("slime", "slime_support_entropy", "case=b"): "slime's entropy is lse - sum p z: NaN with a masked (-inf) logit "
    "(0 * -inf) and about 2e-3 off at logits near 1e4; dew_rl's is finite and exact there (chapter 03h_logits).",
}


def frozen(inputs: dict) -> tuple[list, dict, dict]:
    "NeMo-RL's and slime's outputs from the fixture, after checking that they were computed from these inputs."
    meta = json.loads(FIXTURE_META.read_text())
    arrays = load_npz(FIXTURE)
    check_fixture_inputs(FIXTURE, arrays, inputs, script="tools/make_distill_fixtures.py")
    records = [r for r in meta["records"] if r["framework"] in FROZEN]
    return records, {k: v for k, v in arrays.items() if k.split("/")[0] in FROZEN}, \
        {name: meta["frameworks"][name] for name in FROZEN}


SUITE = Suite(
    "distill", "conformance_distill", LIVE, make_inputs,
    side=lambda rec, x: dew_rl_side(rec["framework"], rec["kind"], rec["params"], x),
    about="dew_rl's distillation and logit-level functions against verl, TRL, NeMo-RL and slime",
    note=lambda rec: note_by_param(DOCUMENTED, rec["key"]),
    extra=lambda rec, side, theirs, x, c: dict(compared="every position" if side["where"] is None
                                               else "where marked in the convention"),
    header=lambda ctx: dict(seed=SEED, cases=CASES), frozen=frozen, frozen_names=FROZEN,
    fixtures=("tests/fixtures/distill_frameworks.npz", "tests/fixtures/distill_frameworks.json"),
    log="conformance_distill")

if __name__ == "__main__":
    sys.exit(run("conformance_distill", sys.argv[1:]))
