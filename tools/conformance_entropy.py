"""`make conformance` for the entropy / KL-placement family: dew_rl against verl 0.9.1 and TRL 1.16.0 themselves.

    python tools/conformance_entropy.py            # both frameworks (creates or reuses tools/refenvs.py's envs)
    python tools/conformance_entropy.py trl        # only this one (the data file keeps the other's last results)

Compared, on inputs drawn here with a fixed seed (float32):

* verl `kl_penalty` for every kind, `abs` and the `+` forms included (value and gradient), and
  `apply_kl_penalty` (the KL in the reward with `algorithm.kl_penalty`) against `kl_penalty` and
  `kl_shaped_token_rewards`;
* TRL `get_high_entropy_mask` over several simulated ranks (one of them without a valid token), mask and
  threshold, against `top_entropy_mask` (the threshold must be identical, bit for bit);
* TRL's adaptive entropy coefficient and entropy bonus (`_compute_loss`, `use_adaptive_entropy=True`) over
  several optimizer steps of two micro-batches, against `entropy_control_update` / `entropy_bonus_coef`.

The running, hashing, merging and comparing are tools/conformance_harness.py's; the adapters are in
tools/conformance_adapters/entropy/. The suite writes data/conformance_entropy.json (read by the chapters 03b_kl and
03k_entropy) and data/conformance_entropy_outputs.npz (inputs and framework outputs), which tests/test_conformance.py
uses to recompute dew_rl's side without any framework installed.
"""
from __future__ import annotations

import sys

import numpy as np

from conformance_harness import cases_of, drawn_cases, ragged_mask, run, Suite  # noqa: F401

FRAMEWORKS = ("verl", "trl")
SEED = 20261219
# name -> (B rows, T positions, R simulated data-parallel ranks for the entropy mask)
CASES = {"a": (8, 12, 4), "b": (6, 7, 2), "c": (12, 5, 3)}


# --------------------------------------------------------------------------------------------------------
# 1. Inputs
# --------------------------------------------------------------------------------------------------------
def make_inputs() -> dict[str, np.ndarray]:
    out = {}
    for case, (B, T, R), rng in drawn_cases(CASES, SEED):
        lengths, mask = ragged_mask(rng, B, T, 1)
        rows = B // R
        mask[rows:2 * rows] = 0.0  # the second rank holds no valid token
        last = np.where(mask.sum(1) > 0, T - 1 - np.argmax(mask[:, ::-1], axis=1), 0)
        token_scores = np.zeros((B, T))
        token_scores[np.arange(B), last] = rng.normal(size=B).round(2) * (mask.sum(1) > 0)
        lp = rng.normal(-1.0, 0.8, size=(B, T))
        ref = lp + rng.normal(0.0, 0.7, size=(B, T))
        old = lp + rng.normal(0.0, 0.3, size=(B, T))
        ref[0, 0], old[0, 0] = lp[0, 0] - 30.0, lp[0, 0]  # beyond every clamp
        lp[0, 1] = ref[0, 1]  # d = 0 exactly: the derivative of |d| at 0
        H = rng.exponential(size=(B, T)) * 1.5
        if case == "a":
            H = np.round(H, 1)  # ties at the threshold
        if case == "c":  # ulp-adjacent entropies: the interpolation's float32 rounding decides the mask
            H = np.float32(0.75) + rng.integers(0, 4, size=(B, T)) * np.spacing(np.float32(0.75))
        vals = dict(mask=mask, token_scores=token_scores, lp=lp, ref=ref, old=old, H=H)
        out.update({f"in/{case}/{n}": np.asarray(v, np.float32) for n, v in vals.items()})
        out[f"in/{case}/ranks"] = np.array(R, np.int64)
        if case == "a":  # the controller: 7 optimizer steps of 2 micro-batches [6, 9] with unequal token counts
            steps, accum = 7, 2
            means = np.repeat([0.5, 0.3, 0.18, 0.1, 0.15, 0.22, 0.4], accum)
            ctl_H = rng.exponential(size=(steps * accum, 6, 9)) * means[:, None, None]
            ctl_len = rng.integers(1, 10, size=(steps * accum, 6))
            ctl_mask = (np.arange(9)[None, None, :] < ctl_len[:, :, None]).astype(np.float32)
            out.update({f"in/{case}/ctl_H": ctl_H.astype(np.float32), f"in/{case}/ctl_mask": ctl_mask,
                        f"in/{case}/ctl_steps": np.array(steps, np.int64), f"in/{case}/ctl_accum": np.array(accum, np.int64)})
    return out


# --------------------------------------------------------------------------------------------------------
# 2. dew_rl's side
# --------------------------------------------------------------------------------------------------------
def controller(x, rho):
    "dew_rl's entropy bonus and controller over the steps TRL ran: per micro-batch loss, coefficient, last entropy."
    import jax.numpy as jnp

    import dew_rl as rl
    Hs, ms, steps, accum = x["ctl_H"], x["ctl_mask"], int(x["ctl_steps"]), int(x["ctl_accum"])
    state = rl.entropy_control_init(0.01)
    losses, coefs, lasts = [], [], []
    for s in range(steps):
        a = rl.entropy_bonus_coef(state, 0.2)
        total, count = 0.0, 0
        for i in range(s * accum, (s + 1) * accum):
            keep = ms[i] > 0 if rho >= 1.0 else np.asarray(rl.top_entropy_mask(Hs[i], ms[i], rho)[0])
            S, n = float(jnp.where(keep, Hs[i], 0).sum()), int(keep.sum())
            losses.append(-float(a) * (S / max(n, 1)) / accum)
            total, count = total + S, count + n
            if i < (s + 1) * accum - 1:
                coefs.append(float(state.entropy_coef)); lasts.append(float(state.last_entropy))
        state = rl.entropy_control_update(state, total, count, 0.2, 0.005, 0.0, 0.02)
        coefs.append(float(state.entropy_coef)); lasts.append(float(state.last_entropy))
    return np.array(losses), np.array(coefs), np.array(lasts)


def dew_rl_side(framework: str, kind: str, p: dict, x: dict) -> dict:
    import dew_rl as rl
    import jax
    import jax.numpy as jnp

    a = lambda v: np.asarray(v, np.float64)  # noqa: E731
    m = x["mask"]
    r = dict(where=None)
    if kind == "kl_penalty":
        r.update(function="kl_penalty", conv=a(rl.kl_penalty(x["lp"], x["ref"], p["estimator"])),
                 convention=f"kl_penalty(lp, ref, {p['estimator']!r})")
    elif kind == "kl_penalty_grad":
        g = jax.grad(lambda v: rl.kl_penalty(v, x["ref"], p["estimator"]).sum())(jnp.asarray(x["lp"]))
        r.update(function="kl_penalty", conv=a(g), convention=f"jax.grad of kl_penalty(lp, ref, {p['estimator']!r}).sum()")
    elif kind == "kl_reward":
        r.update(function="kl_shaped_token_rewards",
                 conv=a(rl.kl_shaped_token_rewards(x["token_scores"], x["old"], x["ref"], m, p["kl_coef"], p["estimator"])),
                 convention=f"kl_shaped_token_rewards(scores, old, ref, mask, {p['kl_coef']}, {p['estimator']!r})")
    elif kind == "kl_reward_metric":
        r.update(function="response_mean", conv=a(rl.response_mean(rl.kl_penalty(x["old"], x["ref"], p["estimator"]), m)),
                 convention=f"response_mean(kl_penalty(old, ref, {p['estimator']!r}), mask)")
    elif kind in ("top_entropy_mask", "top_entropy_threshold"):
        keep, thr = rl.top_entropy_mask(x["H"], m, p["rho"])
        r.update(function="top_entropy_mask", conv=a(keep) if kind == "top_entropy_mask" else a(thr),
                 convention=f"top_entropy_mask(entropy, mask, {p['rho']})" + ("[1] (the threshold)" if kind.endswith("threshold") else "[0]"))
    elif kind in ("entropy_bonus_loss", "entropy_coef", "last_world_entropy"):
        losses, coefs, lasts = controller(x, p["rho"])
        r.update(function="entropy_control_update", conv={"entropy_bonus_loss": losses, "entropy_coef": coefs,
                                                          "last_world_entropy": lasts}[kind],
                 convention="entropy_bonus_coef / entropy_control_update(state, window sum, window count, 0.2, 0.005, "
                            f"0.0, 0.02), bonus = -coef * mean entropy over {'the mask' if p['rho'] >= 1 else 'top_entropy_mask(0.2)'} / 2")
    elif kind == "limit":
        r.update(function="masked_quantile", conv=np.float64(1.0), convention="no size limit")
    else:
        raise KeyError(f"no dew_rl side for {framework}/{kind}")
    r["default"], r["default_call"] = r["conv"], "same call"
    return r


SUITE = Suite(
    "entropy", "conformance_entropy", FRAMEWORKS, make_inputs,
    side=lambda rec, x: dew_rl_side(rec["framework"], rec["kind"], rec["params"], x),
    about="dew_rl against verl 0.9.1 and TRL 1.16.0 (entropy / KL-placement family)",
    header=lambda ctx: dict(seed=SEED, cases={k: dict(B=v[0], T=v[1], ranks=v[2]) for k, v in CASES.items()}),
    log="conformance_entropy")

if __name__ == "__main__":
    sys.exit(run("conformance_entropy", sys.argv[1:]))
