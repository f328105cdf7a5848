"""The general conformance suite (`make conformance`): dew_rl against verl, OpenRLHF, Tunix, rlax and TRL themselves.

    python tools/conformance.py            # every framework (creates or reuses tools/refenvs.py's environments)
    python tools/conformance.py verl rlax  # only these (the data file then keeps the others' last results)

What is this suite's own (the running, hashing, merging and comparing are tools/conformance_harness.py's):

1. The shared inputs (`make_inputs`: fixed seed, three shapes, float32, every mask with variable lengths, interior
   holes and one fully masked row).
2. The adapters, tools/conformance_adapters/general/<framework>_adapter.py, each run in that framework's own
   interpreter (tools/refenvs.py): they read the inputs, call the framework's own functions and record their
   outputs and the settings used. No framework code is in this repository; the adapters only call it.
3. dew_rl's side of every framework output (`dew_rl_side`): configured to the framework's convention, and with
   dew_rl's own defaults (compared at every position).
4. data/conformance.json (the table the chapter nbs/06_conformance prints) and data/conformance_outputs.npz (the
   inputs and the framework outputs), which tests/test_conformance.py re-evaluates without any framework installed.
"""
from __future__ import annotations

import sys

import numpy as np

from conformance_harness import cases_of, drawn_cases, note_by_param, ragged_mask, run, Suite  # noqa: F401

FRAMEWORKS = ("verl", "openrlhf", "tunix", "rlax", "trl")  # also the order of the chapter's tables
# Reference frameworks without an adapter: listed as not run, with the reason (none at present).
NO_ADAPTER: dict[str, dict] = {}
SEED = 20261201
# name -> (B rows, T positions, G group size)
CASES = {"a": (8, 12, 4), "b": (6, 7, 2), "c": (12, 5, 4)}

# --------------------------------------------------------------------------------------------------------
# 1. Inputs
# --------------------------------------------------------------------------------------------------------
def make_inputs() -> dict[str, np.ndarray]:
    """The shared inputs, ``in/<case>/<name>``; float32 values (int for G)."""
    out = {}
    for case, (B, T, G), rng in drawn_cases(CASES, SEED):
        f32 = lambda a: np.asarray(a, np.float32)  # noqa: E731
        lengths, mask = ragged_mask(rng, B, T, 2)
        for r in (1, 3):  # interior holes (e.g. observation spans of a multi-turn rollout)
            if lengths[r] >= 3:
                mask[r, 1] = 0.0
        empty = B - 2  # one fully masked row, inside the last group
        mask[empty] = 0.0
        scores = rng.normal(0.0, 1.0, size=B).round(2)
        scores[:G] = 0.5  # the first group: equal rewards
        last = np.where(mask.sum(1) > 0, T - 1 - np.argmax(mask[:, ::-1], axis=1), 0)
        token_scores = np.zeros((B, T)); token_scores[np.arange(B), last] = scores  # noqa: E702
        lp = rng.normal(-1.0, 0.8, size=(B, T))
        old = lp + rng.normal(0.0, 0.3, size=(B, T))
        ref = lp + rng.normal(0.0, 0.7, size=(B, T))
        rollout = old + rng.normal(0.0, 0.5, size=(B, T))
        adv = rng.normal(0.0, 1.0, size=(B, T))
        if case == "a":  # hand-placed points: the dual clip binds, the KL and ratio clamps
            old[0, 2], adv[0, 2] = lp[0, 2] - 1.5, -1.0  # ratio e^1.5 > 3 with A < 0
            ref[0, 0] = lp[0, 0] - 30.0  # k1 = 30, k3 beyond verl's clamps
            ref[2, 0] = lp[2, 0] + 12.0  # k3 = e^12 - 13
            rollout[0, 3] = old[0, 3] - 25.0  # an IS log ratio beyond the +-20 clamp
        vpred = rng.normal(size=(B, T))
        vals = {"mask": mask, "loss": rng.normal(size=(B, T)), "scores": scores, "token_scores": token_scores,
                "lp": lp, "old": old, "ref": ref, "rollout": rollout, "adv": adv,
                "token_rewards": rng.normal(size=(B, T)) * mask, "values": rng.normal(size=(B, T)),
                "vpred": vpred, "returns": rng.normal(size=(B, T)), "vold": vpred + rng.normal(0, 0.3, size=(B, T))}
        P = B // 2  # preference pairs: per-token log-probs with their own masks
        mc = (np.arange(T)[None, :] < rng.integers(1, T + 1, size=P)[:, None]).astype(np.float32)
        mr = (np.arange(T)[None, :] < rng.integers(1, T + 1, size=P)[:, None]).astype(np.float32)
        pc, pr = rng.normal(-1.5, 0.7, size=(P, T)), rng.normal(-1.5, 0.7, size=(P, T))
        vals.update(mc=mc, mr=mr, pc=pc, pr=pr, rc=pc + rng.normal(0, 0.4, size=(P, T)),
                    rr=pr + rng.normal(0, 0.4, size=(P, T)))
        for name, v in vals.items():
            out[f"in/{case}/{name}"] = f32(v)
        out[f"in/{case}/G"] = np.array(G, np.int64)
    return out


# --------------------------------------------------------------------------------------------------------
# 2. dew_rl's side: the same quantity under the framework's convention, and under dew_rl's defaults
# --------------------------------------------------------------------------------------------------------
def dew_rl_side(framework: str, kind: str, p: dict, x: dict) -> dict:
    """dew_rl's value of a framework output: `conv` (configured to the framework's convention, described
    in `convention`), `default` (dew_rl's defaults, described in `default_call`), and `where` (the
    positions compared; None = all). `function` names the dew_rl function."""
    import jax.numpy as jnp

    import dew_rl as rl
    import dew_rl.objectives as obj

    a = lambda v: np.asarray(v, np.float64)  # noqa: E731
    m, G = x["mask"], int(x["G"])
    B, T = m.shape
    valid = m > 0
    lr = rl.token_log_ratio(x["lp"], x["old"])
    r = dict(where=None)

    def same_as_conv():
        r["default"], r["default_call"] = r["conv"], "same call (the convention is dew_rl's default)"

    if kind == "aggregate":
        mode = p["mode"]
        keep = m.sum(1) > 0
        r["function"] = "aggregate"
        if framework == "tunix" and mode != "token-mean":
            # Tunix's sequence modes divide by the NE non-empty rows; dew_rl counts every row.
            ours = {"sequence-mean-token-mean": "seq-mean-token-mean", "sequence-mean-token-scale":
                    "seq-mean-token-sum-norm", "seq-mean-token-sum": "seq-mean-token-sum",
                    "sequence-mean-token-sum-norm": "seq-mean-token-sum"}[mode]
            r.update(conv=a(rl.aggregate(x["loss"][keep], m[keep], ours)),
                     convention=f"aggregate(x[nonempty], mask[nonempty], {ours!r}): Tunix drops empty rows "
                                "from the row count",
                     default=a(rl.aggregate(x["loss"], m, ours)), default_call=f"aggregate(x, mask, {ours!r})")
        elif mode == "seq-mean-token-mean-local":  # OpenRLHF without global_batch_size
            r.update(conv=a(rl.aggregate(x["loss"][keep], m[keep], "seq-mean-token-mean")),
                     convention="aggregate(x[nonempty], mask[nonempty], 'seq-mean-token-mean'): without "
                                "global_batch_size OpenRLHF counts the non-empty rows",
                     default=a(rl.aggregate(x["loss"], m, "seq-mean-token-mean")),
                     default_call="aggregate(x, mask, 'seq-mean-token-mean')")
        else:
            r.update(conv=a(rl.aggregate(x["loss"], m, mode)), convention=f"aggregate(x, mask, {mode!r})")
            same_as_conv()
    elif kind in ("gae_advantages", "gae_returns") and framework == "openrlhf":
        # OpenRLHF: the outcome reward on the last valid token; values and rewards multiplied by the mask and
        # every position a step (no masked-step carry); population whitening over the valid tokens.
        g, lam = p["gamma"], p["lam"]
        rew = np.clip(x["token_scores"], -10, 10) * m
        raw = rl.gae_raw(rew, x["values"] * m, np.ones_like(m), g, lam)
        adv, ret = rl.gae(x["token_scores"], x["values"], m, g, lam)
        if kind == "gae_advantages":
            r.update(conv=a(rl.global_masked_normalize(raw, m)), default=a(adv),
                     convention=f"global_masked_normalize(gae_raw(rewards * mask, values * mask, ones, {g}, {lam}), mask)")
        else:
            r.update(conv=a(raw) + x["values"] * m, default=a(ret),
                     convention=f"gae_raw(rewards * mask, values * mask, ones, {g}, {lam}) + values * mask")
        r.update(function="gae", where=valid, default_call=f"gae(rewards on the last token, values, mask, {g}, {lam})")
        r["convention"] += "; compared at valid tokens"
    elif kind in ("gae_advantages", "gae_returns"):
        adv, ret = rl.gae(x["token_rewards"], x["values"], m, p["gamma"], p["lam"])
        r.update(function="gae", conv=a(adv if kind == "gae_advantages" else ret),
                 convention=f"gae(token_rewards, values, mask, {p['gamma']}, {p['lam']})")
        same_as_conv()
    elif kind in ("gae_raw", "gae_raw_full_rows"):
        # rlax: one trajectory, no mask, values T+1 long with a 0 bootstrap, discount_t = gamma
        ones = np.ones_like(m)
        r.update(function="gae_raw", conv=a(rl.gae_raw(x["token_rewards"], x["values"], ones, p["gamma"], p["lam"])),
                 convention=f"gae_raw(token_rewards, values, ones, {p['gamma']}, {p['lam']}): every position a "
                            "step (rlax has no mask)")
        adv, _ = rl.gae(x["token_rewards"], x["values"], m, p["gamma"], p["lam"])
        r.update(default=a(adv), default_call=f"gae(token_rewards, values, mask, {p['gamma']}, {p['lam']}) "
                                                "(masked carry, whitened)")
    elif kind == "group_advantage":
        std = p["std"]
        eps = {"openrlhf": 1e-9}.get(framework, rl.GROUP_EPS)
        conv = rl.group_advantage(x["scores"], G, normalise_by_std=std, eps=eps)
        default = rl.group_advantage(x["scores"], G)
        r.update(function="group_advantage", convention=f"group_advantage(rewards, {G}, normalise_by_std={std}"
                 + (f", eps={eps}" if eps != rl.GROUP_EPS else "") + ")",
                 default_call=f"group_advantage(rewards, {G})")
        if framework in ("tunix", "trl_none"):  # per row
            r.update(conv=a(conv), default=a(default))
        else:
            r.update(conv=a(conv)[:, None] * m, default=a(default)[:, None] * m, convention=r["convention"] + " * mask",
                     default_call=r["default_call"] + " * mask")
        if framework == "openrlhf":
            r["where"] = valid
            r["convention"] += "; compared at valid tokens (OpenRLHF's pads carry the row value or 0)"
    elif kind == "rloo_advantage":
        conv = a(rl.rloo_advantage(x["scores"], G))
        if framework == "tunix":
            r.update(conv=conv, convention=f"rloo_advantage(rewards, {G})")
        else:
            r.update(conv=conv[:, None] * m, convention=f"rloo_advantage(rewards, {G}) * mask")
        if framework == "openrlhf":
            r["where"] = valid
            r["convention"] += "; compared at valid tokens"
        r["function"] = "rloo_advantage"
        same_as_conv()
    elif kind == "rfpp_advantages":  # REINFORCE++
        gamma, beta = p["gamma"], p.get("beta", 0.0)
        kl = rl.k1_kl(x["old"], x["ref"]) if beta else np.zeros_like(m)
        rew = x["scores"]
        norm = a(rl.global_masked_normalize(rl.reinforce_plus_plus_returns(rew, kl, m, beta, gamma), m))
        if framework == "openrlhf":  # OpenRLHF clamps the reward and the k1 at +-10
            rew, kl = np.clip(rew, -10, 10), np.clip(kl, -10, 10)
        raw = rl.reinforce_plus_plus_returns(rew, kl, m, beta, gamma)
        r.update(function="reinforce_plus_plus_returns", default=norm,
                 default_call=f"global_masked_normalize(reinforce_plus_plus_returns(rewards, k1, mask, {beta}, {gamma}), "
                              "mask) (population variance, floor 1e-8)")
        if framework == "verl":
            r.update(conv=a(rl.global_masked_whiten(raw, m)) * m,
                     convention=f"global_masked_whiten(reinforce_plus_plus_returns(rewards, 0, mask, 0, {gamma}), mask)"
                                " * mask (verl whitens with Bessel's variance, eps inside the root)")
        else:
            r.update(conv=a(rl.global_masked_normalize(raw, m)), where=valid,
                     convention=f"global_masked_normalize(reinforce_plus_plus_returns(clip(rewards, +-10), clip(k1, +-10), "
                                f"mask, {beta}, {gamma}), mask); compared at valid tokens (OpenRLHF's pads are "
                                "(G - mu) * rstd)")
    elif kind == "rfpp_baseline_advantages":
        raw = rl.group_baseline_advantage(x["scores"], m, G)
        norm = a(rl.global_masked_normalize(raw, m))
        r.update(function="group_baseline_advantage", default=norm,
                 default_call=f"global_masked_normalize(group_baseline_advantage(rewards, mask, {G}), mask)")
        if framework == "verl":
            r.update(conv=a(rl.global_masked_whiten(raw, m)) * m,
                     convention=f"global_masked_whiten(group_baseline_advantage(rewards, mask, {G}), mask) * mask")
        else:
            r.update(conv=norm, where=valid, convention=r["default_call"] + "; compared at valid tokens")
    elif kind == "kl":
        k = p["k"]
        ours = a(getattr(rl, f"{k}_kl")(x["lp"], x["ref"]))
        r.update(function=f"{k}_kl", conv=ours, convention=f"{k}_kl(log_probs, ref_log_probs)", default=ours,
                 default_call=f"{k}_kl(log_probs, ref_log_probs)")
        d = np.asarray(x["ref"], np.float64) - np.asarray(x["lp"], np.float64)
        if framework == "openrlhf" and k in ("k1", "k2"):
            r.update(conv=np.clip(ours, -10, 10), convention=f"clip({k}_kl(log_probs, ref_log_probs), -10, 10) "
                     "(OpenRLHF clamps every estimator's output at +-10)")
        if framework == "tunix" and k == "k3":
            r["where"] = (np.abs(d) <= 20) & (np.expm1(np.clip(d, -50, 50)) - d <= 10)
            r["convention"] += "; compared where verl's clamps do not bind (Tunix's low_var_kl is unclamped)"
    elif kind in ("ppo_loss", "ppo_pg_clipfrac", "ppo_ppo_kl", "ppo_pg_clipfrac_lower"):
        lo, hi, c, mode = p["lo"], p["hi"], p.get("c"), p.get("mode", "token-mean")
        ratio = lr
        if framework == "openrlhf" and kind == "ppo_ppo_kl":
            ratio = jnp.asarray(x["lp"]) - jnp.asarray(x["old"])  # OpenRLHF's ppo_kl is of the unclamped ratio
        if framework == "trl" or p.get("fn") == "ppo":  # TRL, Tunix's ppo_policy_loss_fn: no log-ratio clamp
            ratio = jnp.asarray(x["lp"]) - jnp.asarray(x["old"])
        terms, _ = rl.clipped_surrogate_terms(ratio, x["adv"], m, lo, hi, c)
        loss, met = rl.clipped_surrogate(ratio, x["adv"], m, lo, hi, c)
        dloss, dmet = rl.clipped_surrogate(lr, x["adv"], m)
        call = f"clipped_surrogate(token_log_ratio(lp, old), adv, mask, {lo}, {hi}, {c})"
        if ratio is not lr:
            call = call.replace("token_log_ratio(lp, old)", "lp - old")
        if kind == "ppo_loss":
            if mode == "token-mean":
                conv = a(loss)
            elif mode != "sequence-mean-token-mean":
                conv = a(rl.aggregate(terms, m, mode))
            if mode == "sequence-mean-token-mean":  # Tunix: the mean over the non-empty rows
                keep = m.sum(1) > 0
                conv = a(rl.aggregate(terms[keep], m[keep], "seq-mean-token-mean"))
                call = f"aggregate(clipped_surrogate_terms({call.split('(', 1)[1][:-1]})[0][nonempty], mask[nonempty], " \
                       "'seq-mean-token-mean')"
            elif mode != "token-mean":
                call = f"aggregate(clipped_surrogate_terms({call.split('(', 1)[1][:-1]})[0], mask, {mode!r})"
            r.update(function="clipped_surrogate", conv=conv, convention=call, default=a(dloss),
                     default_call="clipped_surrogate(token_log_ratio(lp, old), adv, mask) (0.2/0.2, dual clip 3, "
                                  "token-mean)")
        else:
            name = kind[4:]
            r.update(function="clipped_surrogate", conv=a(met[name]), convention=call + f"[1][{name!r}]",
                     default=a(dmet[name]), default_call=f"clipped_surrogate(token_log_ratio(lp, old), adv, mask)[1][{name!r}]")
    elif kind == "ppo_rows":  # rlax: one loss per row, the mean over all T positions, symmetric clip
        eps = p["eps"]
        ones = np.ones_like(m)
        terms, _ = rl.clipped_surrogate_terms(lr, x["adv"], ones, eps, eps, None)
        dterms, _ = rl.clipped_surrogate_terms(lr, x["adv"], m)
        r.update(function="clipped_surrogate_terms", conv=a(terms).mean(1),
                 convention=f"clipped_surrogate_terms(token_log_ratio(lp, old), adv, ones, {eps}, {eps}, None)[0]"
                            ".mean(1) (rlax has no mask)",
                 default=a(dterms).sum(1) / np.maximum(m.sum(1), 1),
                 default_call="row means over the mask of clipped_surrogate_terms(token_log_ratio(lp, old), adv, mask)"
                              "[0] (0.2/0.2, dual clip 3)")
    elif kind in ("gspo_loss", "gspo_clipfrac"):
        mode = p.get("mode", "token-mean")
        lo, hi = p.get("lo", 3e-4), p.get("hi", 4e-4)
        s = rl.sequence_log_ratio(x["lp"], x["old"], m)
        terms, _ = rl.clipped_surrogate_terms(s, x["adv"], m, lo, hi, None)
        default = a(rl.aggregate(terms, m, "seq-mean-token-mean"))
        if kind == "gspo_loss" and mode == "sequence-mean-token-mean":  # Tunix: the non-empty rows
            keep = m.sum(1) > 0
            r.update(conv=a(rl.aggregate(terms[keep], m[keep], "seq-mean-token-mean")),
                     convention=f"aggregate(clipped_surrogate_terms(sequence_log_ratio(lp, old, mask), adv, mask, {lo}, "
                                f"{hi}, None)[0][nonempty], mask[nonempty], 'seq-mean-token-mean')")
        elif kind == "gspo_loss":
            r.update(conv=a(rl.aggregate(terms, m, mode)),
                     convention=f"aggregate(clipped_surrogate_terms(sequence_log_ratio(lp, old, mask), adv, mask, {lo}, "
                                f"{hi}, None)[0], mask, {mode!r})")
        else:
            r.update(conv=a(rl.clipped_surrogate(s, x["adv"], m, lo, hi, None)[1]["pg_clipfrac"]),
                     convention=f"clipped_surrogate(sequence_log_ratio(lp, old, mask), adv, mask, {lo}, {hi}, None)"
                                "[1]['pg_clipfrac']")
            default = r["conv"]
        r.update(function="sequence_log_ratio", default=default,
                 default_call="the gspo recipe: seq-mean-token-mean, clip 3e-4/4e-4, no dual clip")
    elif kind == "sapo_loss":
        ratio = lr if framework != "trl" else jnp.asarray(x["lp"]) - jnp.asarray(x["old"])
        terms = rl.sapo_terms(ratio, x["adv"], m, p.get("tau_pos", 1.0), p.get("tau_neg", 1.05))
        r.update(function="sapo_terms", conv=a(rl.aggregate(terms, m, "seq-mean-token-mean")),
                 convention="aggregate(sapo_terms(token_log_ratio(lp, old), adv, mask, 1.0, 1.05), mask, "
                            "'seq-mean-token-mean')")
        same_as_conv()
    elif kind in ("cispo_loss", "cispo_clipfrac"):
        lo, hi = p.get("lo", 0.2), p.get("hi", 0.2)
        mode = p.get("mode", "token-mean")
        ratio = lr if framework != "trl" else jnp.asarray(x["lp"]) - jnp.asarray(x["old"])
        terms, ind = rl.cispo_terms(ratio, x["lp"], x["adv"], m, lo, hi)
        dterms, dind = rl.cispo_terms(lr, x["lp"], x["adv"], m)
        if kind == "cispo_loss":
            r.update(conv=a(rl.aggregate(terms, m, mode)),
                     convention=f"aggregate(cispo_terms(token_log_ratio(lp, old), lp, adv, mask, {lo}, {hi})[0], mask, "
                                f"{mode!r})", default=a(rl.aggregate(dterms, m, "token-mean")),
                     default_call="aggregate(cispo_terms(token_log_ratio(lp, old), lp, adv, mask)[0], mask, "
                                  "'token-mean') (epsilon 1.0/4.0)")
        else:
            r.update(conv=a(rl.token_mean(ind["clipped"], m)),
                     convention=f"token_mean(cispo_terms(..., {lo}, {hi})[1]['clipped'], mask)",
                     default=a(rl.token_mean(dind["clipped"], m)),
                     default_call="token_mean(cispo_terms(...)[1]['clipped'], mask) (epsilon 1.0/4.0)")
        r["function"] = "cispo_terms"
    elif kind in ("value_loss", "value_clipfrac", "value_terms_unclipped"):
        if kind == "value_terms_unclipped":  # rlax.l2_loss(v - R) = 0.5 (v - R)^2 per token
            r.update(function="clipped_value_loss_terms",
                     conv=a(rl.clipped_value_loss_terms(x["vpred"], x["returns"], x["vold"], None)),
                     convention="clipped_value_loss_terms(predicted, returns, old_values, clip=None)",
                     default=a(rl.clipped_value_loss_terms(x["vpred"], x["returns"], x["vold"])),
                     default_call="clipped_value_loss_terms(predicted, returns, old_values) (clip 0.2)")
        else:
            loss, met = rl.clipped_value_loss(x["vpred"], x["returns"], x["vold"], m, clip=0.2)
            r.update(function="clipped_value_loss", conv=a(loss if kind == "value_loss" else met["vf_clipfrac"]),
                     convention="clipped_value_loss(predicted, returns, old_values, mask, clip=0.2)"
                                + ("" if kind == "value_loss" else "[1]['vf_clipfrac']"))
            same_as_conv()
    elif kind == "is_weights":
        if p["level"] == "token":
            r.update(function="behavior_importance_weights",
                     conv=a(rl.behavior_importance_weights(x["old"], x["rollout"], m, 2.0)),
                     convention="behavior_importance_weights(old, rollout, mask, 2.0)")
        else:
            r.update(function="sequence_importance_weights",
                     conv=a(rl.sequence_importance_weights(x["old"], x["rollout"], m, 2.0, "product")),
                     convention="sequence_importance_weights(old, rollout, mask, 2.0, 'product')")
        same_as_conv()
    elif kind in ("dpo_loss", "ipo_loss"):
        args = [x[k] for k in ("pc", "pr", "rc", "rr", "mc", "mr")]
        if kind == "dpo_loss":
            v = a(rl.preference_logsigmoid(*args, 0.1))
            r.update(function="preference_logsigmoid", conv=v, convention="preference_logsigmoid(..., beta=0.1)")
            same_as_conv()
        else:
            ln = bool(p.get("length_normalize", False))
            r.update(function="preference_ipo", conv=a(rl.preference_ipo(*args, 0.1, length_normalize=ln)),
                     convention=f"preference_ipo(..., beta=0.1, length_normalize={ln})",
                     default=a(rl.preference_ipo(*args, 0.1)), default_call="preference_ipo(..., beta=0.1)")
    elif kind == "objective_grpo":
        ro = obj.Rollout(mask=m, old_log_probs=x["old"], ref_log_probs=x["ref"], rewards=x["scores"])
        cfg = obj.grpo(n_samples_per_prompt=G)
        call = f"objectives.objective(objectives.grpo(n_samples_per_prompt={G}), lp, Rollout(mask, old, ref, rewards))"
        r.update(function="objectives", conv=a(obj.objective(cfg, x["lp"], ro)[0]), convention=call)
        same_as_conv()
    else:
        raise KeyError(f"no dew_rl side for {framework}/{kind}")
    return r


# Differences under the framework's convention that are known and explained in a chapter (still listed as DIFFERS).
DOCUMENTED = {
    ("verl", "rfpp_advantages", "gamma=0.9"): "dew_rl's REINFORCE++ return counts positions in the exponent (a masked "
    "hole still advances the discount); verl 0.9.1 discounts only across valid tokens (verl-project/verl#7278). "
    "They agree at gamma = 1 and on rows without holes; no dew_rl setting reproduces verl at gamma < 1 with holes "
    "(chapter 02e_reinforce_plus_plus).",
}


def _compared(rec, side, theirs, x, c) -> dict:
    where = side["where"]
    return dict(compared="every position" if where is None else "valid tokens" if rec["framework"] != "tunix"
                else "where the clamps do not bind")


SUITE = Suite(
    "general", "conformance", FRAMEWORKS, make_inputs,
    side=lambda rec, x: dew_rl_side(rec["framework"], rec["kind"], rec["params"], x),
    about="dew_rl against the reference frameworks' own code", note=lambda rec: note_by_param(DOCUMENTED, rec["key"]), extra=_compared,
    header=lambda ctx: dict(seed=SEED, cases={k: dict(B=v[0], T=v[1], G=v[2]) for k, v in CASES.items()},
                            no_adapter=NO_ADAPTER),
    stubs=("openrlhf_lite.py", "tunix_lite.py", "ray_only/ray/__init__.py"), env=dict(JAX_PLATFORMS="cpu"),
    log="conformance")

if __name__ == "__main__":
    sys.exit(run("conformance", sys.argv[1:]))
