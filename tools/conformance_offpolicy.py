"""`make conformance` for the off-policy family: dew_rl's rollout correction against verl, TRL and OpenRLHF themselves.

    python tools/conformance_offpolicy.py                 # every framework (creates or reuses tools/refenvs.py's envs)
    python tools/conformance_offpolicy.py verl            # only these (the data file keeps the others' last results)

A suite of tools/conformance_harness.py (which runs, hashes, merges and compares): it draws its own inputs (`make_inputs`: the trainer's old log-probs, the sampler's, the current
policy's, the reference's, advantages per token and per row, masks with holes and an empty row, log ratios
beyond the +-20 clamp), runs tools/conformance_adapters/offpolicy/<framework>_adapter.py in each framework's
own interpreter, computes dew_rl's side of every framework output (`dew_rl_side`), and writes
data/conformance_offpolicy.json (the table the chapters 03i, 03j and 03k print) and
data/conformance_offpolicy_outputs.npz (inputs and framework outputs, so that
tests/test_conformance.py recomputes dew_rl's side without any framework installed).

A framework output whose value is a dict of metrics is stored as one vector in sorted key order (the keys are in
the record's settings) and compared key by key; a row lists the keys that differ.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from conformance_harness import (  # noqa: F401
    agrees, cases_of, check_fixture_inputs, drawn_cases, ragged_mask, run, Suite)

ROOT = Path(__file__).resolve().parent.parent
FRAMEWORKS = ("verl", "trl", "openrlhf")
FROZEN = ("nemo_rl", "slime", "areal")   # run from source checkouts by tools/make_offpolicy_fixtures.py
FIXTURE = ROOT / "tests" / "fixtures" / "offpolicy_frameworks"
SEED = 20261818
CASES = {"a": (8, 12), "b": (6, 9)}   # (B, T); "a" has an empty row and log ratios of +-25, "b" has neither


# --------------------------------------------------------------------------------------------------------
# 1. Inputs
# --------------------------------------------------------------------------------------------------------
def make_inputs() -> dict[str, np.ndarray]:
    """The shared inputs, ``in/<case>/<name>``, float32."""
    out = {}
    for case, (B, T), rng in drawn_cases(CASES, SEED):
        lengths, mask = ragged_mask(rng, B, T, 3, np.float64)
        mask[2, 1] = mask[4, 2] = 0.0                        # interior holes
        noise = 0.3 if case == "a" else 0.1
        old = rng.normal(-1.2, 0.8, size=(B, T))
        rollout = old + rng.normal(0.0, noise, size=(B, T))
        lp = old + rng.normal(0.0, 0.2, size=(B, T))
        ref = lp + rng.normal(0.0, 0.4, size=(B, T))
        adv = rng.normal(0.0, 1.0, size=(B, T))
        adv_row = np.repeat(rng.choice([-1.0, 1.0], size=B)[:, None] * rng.uniform(0.2, 1.5, size=(B, 1)), T, 1)
        if case == "a":
            mask[B - 2] = 0.0                                 # an empty row
            rollout[0, 3] = old[0, 3] - 25.0                  # log rho = +25: beyond the +-20 clamp
            rollout[1, 1] = old[1, 1] + 25.0                  # log rho = -25
            ref[2, 0] = lp[2, 0] + 4.0                        # k3(pi_theta || pi_ref) = e^4 - 5 > 10: verl's clamp binds
        vals = dict(mask=mask, old=old, rollout=rollout, lp=lp, ref=ref, adv=adv, adv_row=adv_row)
        for name, v in vals.items():
            out[f"in/{case}/{name}"] = np.asarray(v, np.float32)
    return out


def _num(v: str):
    if v == "None":
        return None
    try:
        f = float(v)
    except ValueError:
        return v
    return int(f) if f.is_integer() and "." not in v and "e" not in v else f


def load_fixture() -> tuple[list[dict], dict, dict]:
    """The frozen framework outputs as records, their arrays, and the fixture's metadata."""
    meta = json.loads(FIXTURE.with_suffix(".json").read_text())
    with np.load(FIXTURE.with_suffix(".npz")) as f:
        arrays = {k: f[k] for k in f.files}
    records = []
    for key, info in meta["outputs"].items():
        fw, case, *rest = key.split("/")
        params = {a.split("=", 1)[0]: _num(a.split("=", 1)[1]) for a in rest if "=" in a}
        kind = "_".join(a for a in rest if "=" not in a)
        settings = json.dumps(dict(settings=info["settings"], keys=info["keys"])) if "keys" in info else info["settings"]
        records.append(dict(key=key, framework=fw, case=case, kind=kind, params=params,
                            framework_function=info["function"], settings=settings,
                            revision=meta["sources"][fw]["revision"]))
    return records, arrays, meta


# --------------------------------------------------------------------------------------------------------
# 2. dew_rl's side
# --------------------------------------------------------------------------------------------------------
def verl_is_args(thr: str) -> dict:
    "verl's rollout_is_threshold (a float, or 'lower_upper' for IcePop) as dew_rl's arguments."
    if "_" in thr:
        lo, hi = (float(v) for v in thr.split("_"))
        return dict(rollout_is_threshold=hi, rollout_is_threshold_lower=lo, rollout_is_mode="mask")
    return dict(rollout_is_threshold=float(thr), rollout_is_threshold_lower=None, rollout_is_mode="truncate")


def verl_rs_args(opts: str, thr: str) -> dict:
    "verl's rollout_rs / rollout_rs_threshold strings as dew_rl's arguments (one bound per option)."
    names = [o.strip() for o in opts.split(",")]
    specs = [s.strip() for s in thr.split(",")]
    specs = specs * len(names) if len(specs) == 1 else specs
    uppers, lowers = [], []
    for name, spec in zip(names, specs):
        if "_" in spec:
            lo, hi = (float(v) for v in spec.split("_"))
        else:
            lo, hi = None, float(spec)
        uppers.append(hi)
        lowers.append(lo)
    return dict(rollout_rs=",".join(names), rollout_rs_threshold=tuple(uppers), rollout_rs_threshold_lower=tuple(lowers))


def preset_from_verl(fields: dict) -> dict:
    "A verl RolloutCorrectionConfig's fields as the entry of dew_rl.ROLLOUT_CORRECTION_PRESETS they should equal."
    out = dict(rollout_is=fields["rollout_is"], rollout_is_batch_normalize=fields["rollout_is_batch_normalize"],
               bypass_mode=fields["bypass_mode"], loss_type=fields["loss_type"])
    out.update(verl_is_args(str(fields["rollout_is_threshold"])))
    if fields["rollout_rs"] is None:
        out.update(rollout_rs=None, rollout_rs_threshold=None, rollout_rs_threshold_lower=None)
    else:
        rs = verl_rs_args(fields["rollout_rs"], str(fields["rollout_rs_threshold"]))
        one = len(rs["rollout_rs_threshold"]) == 1
        out.update(rollout_rs=rs["rollout_rs"], rollout_rs_threshold=rs["rollout_rs_threshold"][0] if one else
                   rs["rollout_rs_threshold"], rollout_rs_threshold_lower=rs["rollout_rs_threshold_lower"][0] if one
                   else rs["rollout_rs_threshold_lower"])
    return out


def correction_args(p: dict) -> dict:
    return {k: v for k, v in p.items() if k not in ("bypass_mode", "loss_type")}


def _vector(metrics: dict, keys: list[str]) -> np.ndarray:
    return np.array([float(metrics[k]) if k in metrics else np.nan for k in keys])


def dew_rl_side(framework: str, kind: str, p: dict, x: dict, settings: str) -> dict:
    """dew_rl's value of one framework output: `conv` (configured to the framework's convention, described by
    `convention`), `keys` (for metric vectors), `where` (compared positions; None = all), `function`."""
    import jax
    import jax.numpy as jnp

    import dew_rl as rl

    a = lambda v: np.asarray(v, np.float64)  # noqa: E731
    m = x["mask"]
    N = float(m.sum())
    r = dict(where=None, keys=None)
    keys = json.loads(settings)["keys"] if kind.endswith("metrics") else None
    if framework == "verl" and kind in ("is_weights", "is_metrics"):
        args = dict(rollout_is=p["level"], rollout_is_batch_normalize=bool(p["norm"]), **verl_is_args(p["thr"]))
        w, met = rl.rollout_is_weights(x["old"], x["rollout"], m, **args)
        call = "rollout_is_weights(old, rollout, mask, " + ", ".join(f"{k}={v!r}" for k, v in args.items()) + ")"
        r.update(function="rollout_is_weights")
        if kind == "is_weights":
            r.update(conv=a(w), convention=call + "[0]")
        else:
            r.update(conv=_vector(met, keys), keys=keys, convention=call + "[1]")
    elif framework == "verl" and kind in ("rs_mask", "rs_metrics"):
        args = verl_rs_args(p["opts"], p["thr"])
        km, met = rl.rollout_rejection_mask(x["old"], x["rollout"], m, **args)
        call = "rollout_rejection_mask(old, rollout, mask, " + ", ".join(f"{k}={v!r}" for k, v in args.items()) + ")"
        r.update(function="rollout_rejection_mask")
        if kind == "rs_mask":
            r.update(conv=a(km), convention=call + "[0]")
        else:
            r.update(conv=_vector(met, keys), keys=keys, convention=call + "[1]")
    elif framework == "verl" and kind == "offpolicy_metrics":
        r.update(function="offpolicy_metrics", conv=_vector(rl.offpolicy_metrics(x["old"], x["rollout"], m), keys),
                 keys=keys, convention="offpolicy_metrics(old, rollout, mask)")
    elif framework == "verl" and kind.startswith("preset_"):
        args = correction_args(rl.ROLLOUT_CORRECTION_PRESETS[p["name"]])
        w, km, met = rl.rollout_correction(x["old"], x["rollout"], m, **args)
        call = f"rollout_correction(old, rollout, mask, **ROLLOUT_CORRECTION_PRESETS[{p['name']!r}])"
        r.update(function="rollout_correction")
        if kind == "preset_weights":
            r.update(conv=a(w), convention=call + "[0]")
        elif kind == "preset_mask":
            r.update(conv=a(km), convention=call + "[1]")
        else:
            r.update(conv=_vector(met, keys), keys=keys, convention=call + "[2]")
    elif framework == "verl" and kind in ("bypass_loss", "bypass_grad"):
        pr = rl.ROLLOUT_CORRECTION_PRESETS[p["name"]]

        def loss(lp):
            sg = jax.lax.stop_gradient(lp)
            kept = jnp.asarray(m)
            if pr["rollout_rs"] is not None:
                kept, _ = rl.rollout_rejection_mask(sg, x["rollout"], m, pr["rollout_rs"], pr["rollout_rs_threshold"],
                                                    pr["rollout_rs_threshold_lower"])
            if pr["loss_type"] == "ppo_clip":
                terms, _ = rl.clipped_surrogate_terms(rl.token_log_ratio(lp, x["rollout"]), x["adv"], kept, 0.2, 0.2, 3.0)
            else:
                w = 1.0
                if pr["rollout_is"] is not None:
                    w, _ = rl.rollout_is_weights(sg, x["rollout"], m, pr["rollout_is"], pr["rollout_is_threshold"],
                                                 pr["rollout_is_threshold_lower"], pr["rollout_is_mode"])
                terms = jnp.where(kept != 0, -x["adv"] * w * jnp.where(kept != 0, lp, 0), 0)
            return terms.sum() / N
        lp = jnp.asarray(x["lp"])
        val = loss(lp) if kind == "bypass_loss" else jax.grad(loss)(lp)
        r.update(function="rollout_rejection_mask + clipped_surrogate_terms / rollout_is_weights", conv=a(val),
                 convention=f"bypass composition with ROLLOUT_CORRECTION_PRESETS[{p['name']!r}]: mask' = "
                 "rollout_rejection_mask(sg(lp), rollout, ...); ppo_clip: clipped_surrogate_terms(token_log_ratio(lp, "
                 "rollout), adv, mask', 0.2, 0.2, 3.0); reinforce: -adv * rollout_is_weights(sg(lp), rollout, ...) * lp "
                 "on mask'; summed and divided by the valid tokens before rejection"
                 + ("" if kind == "bypass_loss" else "; jax.grad w.r.t. lp"))
    elif framework == "verl" and kind in ("decoupled_loss", "decoupled_grad"):
        args = verl_is_args(p["thr"])

        def loss(lp):
            terms, _ = rl.clipped_surrogate_terms(rl.token_log_ratio(lp, x["old"]), x["adv"], m, 0.2, 0.2, 3.0)
            w, _ = rl.rollout_is_weights(x["old"], x["rollout"], m, p["level"], **args)
            return rl.token_mean(terms * w, m)
        lp = jnp.asarray(x["lp"])
        val = loss(lp) if kind == "decoupled_loss" else jax.grad(loss)(lp)
        r.update(function="clipped_surrogate_terms x rollout_is_weights", conv=a(val),
                 convention=f"token_mean(clipped_surrogate_terms(token_log_ratio(lp, old), adv, mask, 0.2, 0.2, 3.0)[0] * "
                 f"rollout_is_weights(old, rollout, mask, {p['level']!r}, **{args})[0], mask)"
                 + ("" if kind == "decoupled_loss" else "; jax.grad w.r.t. lp"))
    elif framework == "trl" and kind in ("opsm_rows", "opsm_tokens"):
        rows = kind == "opsm_rows"
        adv, scope = (x["adv_row"], "sequence") if rows else (x["adv"], "token")
        kept, _ = rl.opsm_mask(x["lp"], x["rollout"], adv, m, p["delta"], scope)
        call = f"opsm_mask(lp, rollout, {'adv_row' if rows else 'adv'}, mask, {p['delta']}, {scope!r})[0]"
        if rows:
            r.update(conv=1.0 - a(((m != 0) & (np.asarray(kept) == 0)).any(1)),
                     convention=f"1 - (any token of the row dropped by {call})")
        else:
            r.update(conv=a(kept), where=m != 0, convention=call + "; compared at valid tokens")
        r["function"] = "opsm_mask"
    elif framework == "trl" and kind in ("opsm_loss", "opsm_grad"):
        def loss(lp):
            kept, _ = rl.opsm_mask(jax.lax.stop_gradient(lp), x["rollout"], x["adv_row"], m, 0.05)
            terms, _ = rl.clipped_surrogate_terms(lp - x["old"], x["adv_row"], kept, 0.2, 0.2, None)
            return terms.sum() / N
        lp = jnp.asarray(x["lp"])
        r.update(function="opsm_mask + clipped_surrogate_terms", conv=a(loss(lp) if kind == "opsm_loss" else jax.grad(loss)(lp)),
                 convention="sum(clipped_surrogate_terms(lp - old, adv_row, opsm_mask(sg(lp), rollout, adv_row, mask, 0.05)[0], "
                 "0.2, 0.2, None)[0]) / valid tokens" + ("" if kind == "opsm_loss" else "; jax.grad w.r.t. lp"))
    elif framework == "trl" and kind in ("kl_loss", "kl_grad"):
        if p["corrected"]:
            f = lambda lp: rl.token_mean(rl.importance_weighted_kl(lp, x["old"], x["ref"], m, "k3"), m)  # noqa: E731
            call = "token_mean(importance_weighted_kl(lp, old, ref, mask, 'k3'), mask)"
        else:
            f = lambda lp: rl.token_mean(jnp.where(m != 0, rl.kl_penalty(lp, x["ref"], "k3"), 0), m)  # noqa: E731
            call = "token_mean(kl_penalty(lp, ref, 'k3'), mask)"
        lp = jnp.asarray(x["lp"])
        r.update(function="importance_weighted_kl" if p["corrected"] else "kl_penalty",
                 conv=a(f(lp) if kind == "kl_loss" else jax.grad(f)(lp)),
                 convention=call + ("" if kind == "kl_loss" else "; jax.grad w.r.t. lp"))
    elif framework == "openrlhf" and kind in ("is_coef", "is_filter_ratio"):
        lo, hi = p["lo"], p["hi"]
        if p["level"] == "token":
            mode = "truncate" if p["mode"] == "clip" else "mask"
            w, met = rl.rollout_is_weights(x["old"], x["rollout"], m, "token", hi, lo, mode)
            call = f"rollout_is_weights(old, rollout, mask, 'token', {hi}, {lo}, {mode!r})"
            conv, stat = a(w), a(met["rollout_is_oob_ratio"])
            r["function"] = "rollout_is_weights"
            stat_call = call + "[1]['rollout_is_oob_ratio']"
        else:
            kept, met = rl.rollout_rejection_mask(x["old"], x["rollout"], m, "seq_mean_ratio", hi, lo)
            w, _ = rl.rollout_is_weights(x["old"], x["rollout"], m, "token", None, None)
            call = (f"rollout_rejection_mask(old, rollout, mask, 'seq_mean_ratio', {hi}, {lo})[0] * "
                    "rollout_is_weights(old, rollout, mask, 'token', None, None)[0]")
            conv, stat = a(kept) * a(w), a(met["rollout_rs_seq_masked_fraction"])
            r["function"] = "rollout_rejection_mask x rollout_is_weights"
            stat_call = f"rollout_rejection_mask(old, rollout, mask, 'seq_mean_ratio', {hi}, {lo})[1]" \
                        "['rollout_rs_seq_masked_fraction']"
        if kind == "is_coef":
            r.update(conv=conv, where=m != 0, convention=call + "; compared at valid tokens")
        else:
            r.update(conv=stat, convention=stat_call)
    elif framework == "openrlhf" and kind == "vllm_kl":
        r.update(function="offpolicy_metrics", conv=a(rl.offpolicy_metrics(x["old"], x["rollout"], m)["kl"]),
                 convention="offpolicy_metrics(old, rollout, mask)['kl']")
    elif framework in FROZEN:
        r.update(frozen_side(framework, kind, p, x, keys))
    else:
        raise KeyError(f"no dew_rl side for {framework}/{kind}")
    return r


def frozen_side(framework: str, kind: str, p: dict, x: dict, keys) -> dict:
    "dew_rl's side of the outputs of NeMo-RL, slime and AReaL (see tools/make_offpolicy_fixtures.py)."
    import jax
    import jax.numpy as jnp

    import dew_rl as rl

    a = lambda v: np.asarray(v, np.float64)  # noqa: E731
    m = x["mask"]
    valid = m != 0
    N = float(m.sum())
    W = lambda level, hi, lo, mode: rl.rollout_is_weights(x["old"], x["rollout"], m, level, hi, lo, mode)  # noqa: E731
    R = lambda opt, hi, lo: rl.rollout_rejection_mask(x["old"], x["rollout"], m, opt, hi, lo)  # noqa: E731
    raw = a(W("token", None, None, "truncate")[0])
    if framework == "nemo_rl" and kind == "weights":
        typ, hi, lo, seq = p["type"], p["hi"], p["lo"], p["seq"]
        if seq:
            w = W("sequence", hi, None, "truncate")[0]
            call = f"rollout_is_weights(old, rollout, mask, 'sequence', {hi}, None, 'truncate')[0]"
        elif typ == "tis":
            w = W("token", hi, lo, "truncate")[0]
            call = f"rollout_is_weights(old, rollout, mask, 'token', {hi}, {lo}, 'truncate')[0]"
        elif typ == "icepop":
            w = W("token", hi, lo, "mask")[0]
            call = f"rollout_is_weights(old, rollout, mask, 'token', {hi}, {lo}, 'mask')[0]"
        else:
            w = a(R("seq_mean_ratio", hi, lo)[0]) * raw
            call = (f"rollout_rejection_mask(old, rollout, mask, 'seq_mean_ratio', {hi}, {lo})[0] * "
                    "rollout_is_weights(old, rollout, mask, 'token', None, None)[0]")
        return dict(function="rollout_is_weights", conv=a(w), where=valid, convention=call + "; at valid tokens")
    if framework == "nemo_rl" and kind == "metrics":
        typ, hi, lo, seq = p["type"], p["hi"], p["lo"], p["seq"]
        om = rl.offpolicy_metrics(x["old"], x["rollout"], m)
        if seq:
            wm = W("sequence", hi, None, "truncate")[1]
            ratio = wm["rollout_is_seq_mean"]
        else:
            wm = W("token", hi, lo, "mask" if typ == "icepop" else "truncate")[1]
            ratio = (a(R("seq_mean_ratio", hi, lo)[0]) * raw)[valid].mean() if typ == "seq-mask-tis" else wm["rollout_is_mean"]
        oob = (R("seq_mean_ratio", hi, lo)[1]["rollout_rs_seq_masked_fraction"] if typ == "seq-mask-tis"
               else wm["rollout_is_oob_ratio"] if typ is not None else np.nan)
        ours = dict(is_oob_ratio=oob, token_mult_prob_error=om["token_mult_prob_error"], gen_kl_error=om["k3_kl"],
                    policy_kl_error=om["policy_kl_error"], js_divergence_error=om["js_divergence_error"],
                    sampling_importance_ratio=ratio)
        return dict(function="offpolicy_metrics, rollout_is_weights", conv=_vector(ours, keys), keys=keys,
                    convention="is_oob_ratio: rollout_is_oob_ratio (rollout_rs_seq_masked_fraction for seq-mask-tis); "
                               "gen_kl_error: k3_kl; policy_kl_error, js_divergence_error, token_mult_prob_error: "
                               "offpolicy_metrics; sampling_importance_ratio: the mean weight (per row at the sequence "
                               "level)")
    if framework == "nemo_rl" and kind in ("kl_loss", "kl_grad"):
        den = "rollout" if p["onpolicy"] else "lp"

        def f(lp):
            return rl.token_mean(rl.importance_weighted_kl(lp, x["rollout"] if p["onpolicy"] else lp, x["ref"], m, "k3"), m)
        lp = jnp.asarray(x["lp"])
        return dict(function="importance_weighted_kl", conv=a(f(lp) if kind == "kl_loss" else jax.grad(f)(lp)),
                    convention=f"token_mean(importance_weighted_kl(lp, {den}, ref, mask, 'k3'), mask)"
                    + ("" if kind == "kl_loss" else "; jax.grad w.r.t. lp"))
    if framework == "slime" and kind in ("mis_weights", "mis_mask"):
        level = {"token": "token", "sequence": "sequence", "geometric": "geometric_mean"}[p["level"]]
        opt = {"token": "token_ratio", "sequence": "seq_sum_ratio", "geometric": "seq_mean_ratio"}[p["level"]]
        mode, lo, hi, norm = p["mode"], p["lo"], p["hi"], bool(p["norm"])
        if mode == "mask":
            w = rl.rollout_is_weights(x["old"], x["rollout"], m, level, None, None)[0]
            kept = R(opt, hi, lo)[0]
            call_w = f"rollout_is_weights(old, rollout, mask, {level!r}, None, None)[0] (slime's mask mode leaves the weight)"
            call_m = f"rollout_rejection_mask(old, rollout, mask, {opt!r}, {hi}, {lo})[0]"
        else:
            w = rl.rollout_is_weights(x["old"], x["rollout"], m, level, hi, lo if mode == "clip" else None,
                                      "truncate", norm)[0]
            kept = m
            call_w = (f"rollout_is_weights(old, rollout, mask, {level!r}, {hi}, {lo if mode == 'clip' else None}, "
                      f"'truncate', {norm})[0]")
            call_m = "mask"
        if kind == "mis_weights":
            return dict(function="rollout_is_weights", conv=a(w), where=valid, convention=call_w + "; at valid tokens")
        return dict(function="rollout_rejection_mask", conv=a(kept), where=valid, convention=call_m + "; at valid tokens")
    if framework == "slime" and kind in ("tis", "icepop"):
        lo = p["lo"] if p["lo"] > 0 else None
        mode = "truncate" if kind == "tis" else "mask"
        return dict(function="rollout_is_weights", conv=a(W("token", p["hi"], lo, mode)[0]), where=valid,
                    convention=f"rollout_is_weights(old, rollout, mask, 'token', {p['hi']}, {lo}, {mode!r})[0]; at valid "
                               "tokens")
    if framework == "slime" and kind in ("unbiased_kl", "unbiased_kl_grad"):
        def f(lp):
            return rl.importance_weighted_kl(lp, x["old"], x["ref"], m, "k3")
        lp = jnp.asarray(x["lp"])
        val = f(lp) if kind == "unbiased_kl" else jax.grad(lambda v: f(v).sum())(lp)
        return dict(function="importance_weighted_kl", conv=a(val), where=valid,
                    convention="importance_weighted_kl(lp, old, ref, mask, 'k3')" + ("" if kind == "unbiased_kl" else
                               " summed; jax.grad w.r.t. lp") + "; at valid tokens")
    if framework == "slime" and kind in ("opsm", "opsm_clipfrac"):
        kept, _ = rl.opsm_mask(x["lp"], x["rollout"], x["adv"], m, p["delta"], "token")
        if kind == "opsm":
            return dict(function="opsm_mask", conv=a(kept), where=valid,
                        convention=f"opsm_mask(lp, rollout, adv, mask, {p['delta']}, 'token')[0]; at valid tokens")
        dropped = (valid & (a(kept) == 0)).sum(1) / np.maximum(valid.sum(1), 1)
        return dict(function="opsm_mask", conv=a(dropped.sum()),
                    convention=f"sum over rows of the row's dropped fraction of valid tokens, from opsm_mask(..., "
                               f"{p['delta']}, 'token')")
    if framework == "areal" and kind in ("rs_mask", "rs_weight", "rs_filtered_fraction"):
        level, action, metric, agg, upper, lower = (p[k] for k in ("level", "action", "metric", "agg", "upper", "lower"))
        if metric == "ratio" and action == "clamp":
            lvl = "token" if level == "token" else "geometric_mean"
            w, met = W(lvl, upper, lower, "truncate")
            kept, frac = m, met["rollout_is_oob_ratio"]
            call = f"rollout_is_weights(old, rollout, mask, {lvl!r}, {upper}, {lower}, 'truncate')"
        else:
            if metric == "ratio":
                opt, hi, lo = ({"token": "token_ratio"}.get(level) or f"seq_{agg}_ratio"), upper, lower
            elif metric == "kl_k1":          # AReaL's k1 is log rho itself, its band a band of log rho
                opt, hi, lo = f"seq_{agg}_ratio" if level == "sequence" else "token_ratio", float(np.exp(upper)), \
                    float(np.exp(lower))
            else:                            # kl_k2, kl_k3 (AReaL's k3 is of the other direction: see the chapter)
                opt, hi, lo = (f"seq_{agg}_{metric[3:]}" if level == "sequence" else f"token_{metric[3:]}"), upper, lower
            kept, met = R(opt, hi, lo)
            frac = met["rollout_rs_masked_fraction"]
            geo = metric == "ratio" and level == "sequence"
            base = a(W("geometric_mean", None, None, "truncate")[0]) if geo else raw
            w = a(kept) * base
            call = (f"rollout_rejection_mask(old, rollout, mask, {opt!r}, {hi}, {lo}) and the "
                    f"{'geometric-mean' if geo else 'token'} weight rollout_is_weights(..., "
                    f"{'geometric_mean' if geo else 'token'!r}, None, None) on the kept tokens")
        val = {"rs_mask": kept, "rs_weight": w, "rs_filtered_fraction": frac}[kind]
        return dict(function="rollout_rejection_mask / rollout_is_weights", conv=a(val),
                    where=None if kind == "rs_filtered_fraction" else valid, convention=call)
    if framework == "areal" and kind in ("ppo_actor_loss_loss", "ppo_actor_loss_grad"):
        level, action = p["level"], p["action"]
        if action == "clamp":
            w, kept = W("token", 5.0, 0.5, "truncate")[0], jnp.asarray(m)
            desc = "rollout_is_weights(old, rollout, mask, 'token', 5.0, 0.5, 'truncate')"
        elif level == "token":
            w, kept = W("token", 5.0, 0.5, "mask")[0], R("token_ratio", 5.0, 0.5)[0]
            desc = "rollout_is_weights(..., 'token', 5.0, 0.5, 'mask') on rollout_rejection_mask(..., 'token_ratio', 5.0, 0.5)"
        else:
            w, kept = W("geometric_mean", 1.1, 0.9, "mask")[0], R("seq_mean_ratio", 1.1, 0.9)[0]
            desc = ("rollout_is_weights(..., 'geometric_mean', 1.1, 0.9, 'mask') on rollout_rejection_mask(..., "
                    "'seq_mean_ratio', 1.1, 0.9)")

        def loss(lp):
            terms, _ = rl.clipped_surrogate_terms(lp - x["old"], x["adv"], kept, 0.2, 0.28, 3.0)
            return (terms * w).sum() / N
        lp = jnp.asarray(x["lp"])
        return dict(function="clipped_surrogate_terms x rollout_is_weights",
                    conv=a(loss(lp) if kind.endswith("loss") else jax.grad(loss)(lp)),
                    convention=f"decoupled PPO: sum(clipped_surrogate_terms(lp - prox, adv, kept, 0.2, 0.28, 3.0)[0] * w) / "
                               f"valid tokens before rejection, with prox = old and w, kept from {desc}"
                               + ("" if kind.endswith("loss") else "; jax.grad w.r.t. lp"))
    if framework == "areal" and kind == "prox_loglinear":
        v = rl.loglinear_proximal_log_probs(x["rollout"], x["lp"], x["versions"].astype(np.int32), p["current"], m)
        return dict(function="loglinear_proximal_log_probs", conv=a(v), where=valid,
                    convention=f"loglinear_proximal_log_probs(rollout, lp, versions, {p['current']}, mask); at valid tokens")
    raise KeyError(f"no dew_rl side for {framework}/{kind}")


# --------------------------------------------------------------------------------------------------------
# 3. Differences
# --------------------------------------------------------------------------------------------------------
DOCUMENTED = {  # (framework, kind, case) -> why the comparison is not at round-off (shown in the chapters)
    ("verl", "is_metrics", "a"): "verl takes its per-row metrics (rollout_is_seq_*, and at the sequence level "
    "rollout_is_max/min and the ratio fractions) over every row, the empty row counting with weight 0 or ratio 1; "
    "dew_rl over the non-empty rows (batch b has no empty row and agrees)",
    ("verl", "rs_metrics", "a"): "verl's rollout_rs_seq_masked_fraction counts every row, the empty row included; "
    "dew_rl counts the non-empty rows",
    ("verl", "offpolicy_metrics", "a"): "verl's perplexity metrics and chi2_seq average over every row, an empty row "
    "counting as perplexity 1 and ratio 1; dew_rl over the non-empty rows",
    ("verl", "preset_metrics", "a"): "the metrics that take rows (see is_metrics, rs_metrics, offpolicy_metrics)",
    ("trl", "kl_loss", "a"): "TRL's k3 is unclamped; dew_rl's kl_penalty clamps k3 at 10 (verl's low_var_kl), which "
    "binds at the token where log pi_ref - log pi_theta = 4 (k3 = e^4 - 5 = 49.6)",
    ("trl", "kl_grad", "a"): "the same token: beyond verl's clamp dew_rl's k3 has no gradient, TRL's does",
    ("nemo_rl", "weights", "c"): "NeMo-RL exponentiates without a clamp and then maps an infinite ratio to 0 "
    "(nan_to_num(posinf=0)) before truncating: a token with log rho = 100 gets weight 0, and so does its row at the "
    "sequence level; dew_rl clamps log rho at 20 and truncates to C_max",
    ("nemo_rl", "weights", "a"): "at the sequence level NeMo-RL exponentiates the row's sum without a clamp: the row "
    "with a log ratio of 25 gets e^25.x untruncated (no truncation type), where dew_rl clamps the sum at 20",
    ("nemo_rl", "metrics", "a"): "NeMo-RL's seq-mask-tis is_oob_ratio is a fraction over every row (sample_mask), the "
    "empty row included, dew_rl's over the non-empty rows; and NeMo-RL's sequence-level sampling_importance_ratio "
    "is the sum of the row weights, not their mean (a [B, 1] x [B] broadcast in masked_mean)",
    ("nemo_rl", "metrics", "b"): "NeMo-RL's sequence-level sampling_importance_ratio is the sum of the row weights, "
    "not their mean (a [B, 1] x [B] broadcast in masked_mean)",
    ("nemo_rl", "kl_loss", "c"): "the KL weight exp(lp - generation) overflows at the token with log rho = 100 and "
    "NeMo-RL maps it to 0; dew_rl clamps the log ratio at 20",
    ("nemo_rl", "kl_grad", "c"): "at that token NeMo-RL's gradient is NaN (exp's derivative at +inf times "
    "nan_to_num's 0); dew_rl's is finite",
    ("nemo_rl", "metrics", "c"): "at the token with log rho = 100 NeMo-RL's weight is 0 (its overflow rule, see the "
    "weights), so that token is neither out of bounds nor more than 0 in the mean weight; dew_rl's weight there is "
    "C_max (and, at the sequence level, the sum-not-mean of batch b)",
    ("nemo_rl", "kl_loss", "a"): "NeMo-RL clamps the weighted KL w * k3 at 10, dew_rl clamps k3 at 10 and then "
    "weights it (kl_penalty's clamp): they differ where k3 > 10 (one token, k3 = e^4 - 5) unless w = 1",
    ("nemo_rl", "kl_grad", "a"): "the same token as kl_loss",
    ("slime", "unbiased_kl", "a"): "slime's k3 is unclamped and its low_var_kl is clamped at 10 after the ratio; "
    "dew_rl clamps k3 at 10 before it: they differ at the one token where k3 = e^4 - 5",
    ("slime", "unbiased_kl_grad", "a"): "the same token as unbiased_kl",
    ("slime", "opsm_clipfrac", "a"): "slime counts the dropped positions of a row over all its positions, padded ones "
    "with a negative advantage included, divided by the valid count",
    ("slime", "opsm_clipfrac", "b"): "as in batch a",
    ("slime", "opsm_clipfrac", "c"): "as in batch a",
    ("slime", "mis_weights", "a"): "slime's sequence-level batch normalisation averages the row weights over every "
    "row, the empty row (weight 0) included; dew_rl over the non-empty rows",
    ("areal", "rs_mask", "a"): "AReaL's k3 is exp(-log rho) - 1 + log rho (KL of the other direction, as NeMo-RL's "
    "policy_kl_error); verl's and dew_rl's k3 is exp(log rho) - 1 - log rho",
    ("areal", "rs_mask", "b"): "as in batch a", ("areal", "rs_mask", "c"): "as in batch a",
    ("areal", "rs_weight", "a"): "as rs_mask", ("areal", "rs_weight", "b"): "as rs_mask",
    ("areal", "rs_weight", "c"): "as rs_mask", ("areal", "rs_filtered_fraction", "a"): "as rs_mask",
    ("areal", "rs_filtered_fraction", "b"): "as rs_mask", ("areal", "rs_filtered_fraction", "c"): "as rs_mask",
    ("openrlhf", "is_filter_ratio", "a"): "at is_correction_level='seq' OpenRLHF takes the fraction over every row, "
    "and an empty row's geometric mean is 0/0 = NaN, outside the band: it counts as filtered; dew_rl counts the "
    "non-empty rows",
}


def check_presets(verl_fields: dict) -> list[dict]:
    "Each verl factory's fields against dew_rl.ROLLOUT_CORRECTION_PRESETS."
    import dew_rl as rl
    out = []
    for name, fields in verl_fields.items():
        want = preset_from_verl(fields)
        ours = rl.ROLLOUT_CORRECTION_PRESETS.get(name)
        diff = sorted(k for k in want if ours is None or ours.get(k) != want[k])
        out.append(dict(name=name, verl=fields, dew_rl=ours, agrees=not diff, differing=diff))
    return out


def frozen(inputs: dict) -> tuple[list, dict, dict]:
    "The frozen outputs with the fixture's own inputs (its cases a and b are these inputs, case c its own)."
    records, arrays, _ = load_fixture()
    check_fixture_inputs(FIXTURE.with_suffix(".npz"), arrays, inputs, script="tools/make_offpolicy_fixtures.py")
    return records, arrays, {}


def _header(ctx) -> dict:
    meta = json.loads(FIXTURE.with_suffix(".json").read_text())
    fw = ctx["frameworks"]
    return dict(seed=SEED, cases={k: dict(B=v[0], T=v[1]) for k, v in CASES.items()},
                frozen=dict(fixture=FIXTURE.relative_to(ROOT).as_posix(), sources=meta["sources"], torch=meta["torch"]),
                presets=check_presets(fw["verl"]["presets"]) if "verl" in fw else [])


SUITE = Suite(
    "offpolicy", "conformance_offpolicy", FRAMEWORKS, make_inputs,
    side=lambda rec, x: dew_rl_side(rec["framework"], rec["kind"], rec["params"], x, rec["settings"]),
    about="dew_rl's off-policy family against the frameworks' own code",
    note=lambda rec: DOCUMENTED.get((rec["framework"], rec["kind"], rec["case"]), ""),
    extra=lambda rec, side, theirs, x, c: dict(frozen=rec["framework"] in FROZEN), header=_header,
    frozen=frozen, frozen_names=FROZEN, store_frozen=False,
    stubs=("openrlhf_lite.py", "tunix_lite.py", "ray_only/ray/__init__.py"),
    fixtures=("tests/fixtures/offpolicy_frameworks.npz", "tests/fixtures/offpolicy_frameworks.json"),
    env=dict(JAX_PLATFORMS="cpu"), log="conformance_offpolicy")

if __name__ == "__main__":
    sys.exit(run("conformance_offpolicy", sys.argv[1:]))
