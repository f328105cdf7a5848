"""`make conformance` for the policy-loss frontier: dew_rl's policy losses against the frameworks that ship them.

    python tools/conformance_policyloss.py                 # every framework with an environment (tools/refenvs.py)
    python tools/conformance_policyloss.py verl trl        # only these (the data file keeps the others' last results)

The running, hashing, merging and comparing are tools/conformance_harness.py's; the adapters of this suite live in
tools/conformance_adapters/policyloss/. What is its own:

1. `make_inputs`: two cases (fixed seed, float32): "a" with token advantages, probabilities spread over (0, 1) and
   planted ratios beyond every cap; "b" with small drifts (sequence ratios inside their bands). Both have interior
   holes and one fully masked row. Each case also carries one advantage per row (`adv_seq`), its broadcast `adv_row`,
   per-row `scores`, sampler log-probs `behavior` and the detached IS `weights` min(exp(old - behavior), 2).
2. Each framework's adapter runs in its own interpreter and records the loss and d loss / d log-probs (autograd),
   the metrics, or the per-token terms. ROLL (alibaba/ROLL is not on the package index: the index's `roll` is an
   unrelated HTTP framework) is run once from a source checkout by tools/make_roll_fixtures.py, frozen in
   tests/fixtures/policyloss_roll.npz with its revision, and read from there.
3. dew_rl's side of every record (`dew_rl_side`) is computed on the same inputs, value and gradient, and compared.
4. data/conformance_policyloss.json (the table the chapters print) and data/conformance_policyloss_outputs.npz (the
   inputs and every framework output, so that tests/test_conformance.py recomputes dew_rl's side without
   any framework installed).
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tools/, for the chapters that load this file by path
from conformance_harness import cases_of, drawn_cases, frozen_fixture, ragged_mask, run, Suite  # noqa: E402, F401

ROOT = Path(__file__).resolve().parent.parent
ROLL_FIXTURE = ROOT / "tests" / "fixtures" / "policyloss_roll.npz"
FRAMEWORKS = ("verl", "trl", "openrlhf", "areal")   # run live; "roll" comes from its frozen fixture
SEED = 20261219
CASES = {"a": (8, 12, 0.35), "b": (6, 7, 0.05)}     # name -> (B, T, std of the log-ratio drift)


# --------------------------------------------------------------------------------------------------------
# 1. Inputs
# --------------------------------------------------------------------------------------------------------
def make_inputs() -> dict[str, np.ndarray]:
    out = {}
    for case, (B, T, drift), rng in drawn_cases(CASES, SEED):
        lengths, mask = ragged_mask(rng, B, T, 2, np.float64)
        mask[1, 1] = 0.0                                  # an interior hole
        mask[B - 2] = 0.0                                 # a fully masked row
        p_old = rng.uniform(0.02, 0.98, size=(B, T))
        old = np.log(p_old)
        lp = np.minimum(old + rng.normal(0.0, drift, size=(B, T)), -1e-4)
        behavior = np.minimum(old + rng.normal(0.0, 0.3, size=(B, T)), -1e-4)
        adv_seq = rng.normal(0.0, 1.0, size=B).round(3)
        adv_seq[B - 2] = 0.0                              # the empty row's advantage (a mean over no token)
        adv = adv_seq[:, None] + rng.normal(0.0, 0.3, size=(B, T))
        if case == "a":                                   # planted: ratios beyond every cap, both signs of A
            old[0, 2], lp[0, 2], adv[0, 2] = np.log(0.1), np.log(0.5), -1.0    # rho = 5, A < 0: dual clip, DPPO truncation
            old[2, 1], lp[2, 1], adv[2, 1] = np.log(0.1), np.log(0.6), 1.0     # rho = 6, A > 0: clipped; TV mask binds
            old[3, 0], lp[3, 0], adv[3, 0] = np.log(0.9), np.log(0.3), -1.0    # a large fall with A < 0
        scores = np.where(adv_seq > 0, 1.0, 0.0)
        scores[1] = -0.5
        weights = np.minimum(np.exp(old - behavior), 2.0) * mask
        vals = dict(mask=mask, lp=lp, old=old, behavior=behavior, adv=adv, adv_seq=adv_seq,
                    adv_row=adv_seq[:, None] * mask, scores=scores, weights=weights)
        for name, v in vals.items():
            out[f"in/{case}/{name}"] = np.asarray(v, np.float32)
    return out


# --------------------------------------------------------------------------------------------------------
# 2. dew_rl's side
# --------------------------------------------------------------------------------------------------------
def dew_rl_side(framework: str, kind: str, p: dict, x: dict) -> dict:
    """dew_rl's value of one framework output: `value` (loss, gradient, metric, mask or terms), `function`,
    `convention` (the call), `where` (the positions compared; None = all)."""
    import jax
    import jax.numpy as jnp

    import dew_rl as rl

    a64 = lambda v: np.asarray(v, np.float64)  # noqa: E731
    m, lp, old, adv = x["mask"], jnp.asarray(x["lp"]), x["old"], x["adv"]
    raw = lambda l: l - jnp.asarray(old)  # noqa: E731  (the frameworks' unclamped log ratio, differentiable in l)
    loss = p.get("loss")
    tm = lambda terms: rl.aggregate(terms, m, "token-mean")  # noqa: E731
    sm = lambda terms: rl.aggregate(terms, m, "seq-mean-token-mean")  # noqa: E731
    # name -> (function of the log-probs giving (scalar loss, dict of metrics), dew_rl function, call as text)
    if loss == "gpg":
        f = lambda l: (tm(rl.reinforce_terms(l, adv, m)[0]), {})  # noqa: E731
        fn, call = "reinforce_terms", "token-mean of reinforce_terms(lp, adv, mask)"
    elif loss == "reinforce_is":
        f = lambda l: (tm(rl.reinforce_terms(l, adv, m, x["weights"])[0]), {})  # noqa: E731
        fn, call = "reinforce_terms", "token-mean of reinforce_terms(lp, adv, mask, weights)"
    elif loss in ("dro", "kimi15"):
        f = lambda l: (tm(rl.dro_terms(l, old, adv, m, p.get("beta", 0.1))[0]), {})  # noqa: E731
        fn, call = "dro_terms", f"token-mean of dro_terms(lp, old, adv, mask, {p.get('beta', 0.1)})"
    elif loss in ("dppo_tv", "dppo_kl"):
        g = rl.dppo_tv_terms if loss == "dppo_tv" else rl.dppo_kl_terms

        def f(l):
            t, i = g(l, old, adv, m, p["lo"], p["hi"], 3.0)
            return tm(t), {"pg_clipfrac": rl.token_mean(i["masked"], m), "pg_clipfrac_lower": rl.token_mean(i["truncated"], m)}
        fn, call = f"{loss}_terms", f"token-mean of {loss}_terms(lp, old, adv, mask, {p['lo']}, {p['hi']}, 3.0); " \
            "pg_clipfrac = token_mean(masked), pg_clipfrac_lower = token_mean(truncated)"
    elif loss == "geo_mean":
        def f(l):
            t, i = rl.gmpo_terms(raw(l), adv, m, p["lo"], p["hi"])
            return sm(t), {"pg_clipfrac": rl.token_mean(i["clipped"] & (jnp.asarray(adv) > 0), m),
                           "pg_clipfrac_lower": rl.token_mean(i["clipped"] & (jnp.asarray(adv) < 0), m)}
        fn, call = "gmpo_terms", f"seq-mean-token-mean of gmpo_terms(lp - old, adv, mask, {p['lo']}, {p['hi']}); " \
            "clip fractions = token_mean(clipped & A > 0), token_mean(clipped & A < 0)"
    elif loss == "gmpo":
        def f(l):
            t, i = rl.gmpo_terms(raw(l), x["adv_row"], m, p["lo"], p["hi"])
            return sm(t), {"clip_ratio/region_mean": rl.token_mean(i["clipped"], m)}
        fn, call = "gmpo_terms", "seq-mean-token-mean of gmpo_terms(lp - old, adv_seq * mask, mask, 0.4, 0.4)"
    elif loss == "clip_cov":
        def f(l):
            t, i = rl.clip_cov_terms(raw(l), l, adv, m, jax.random.key(0), 0.2, 0.2, 1.0, p["lb"], p["ub"])
            return tm(t), {"pg_clipfrac": rl.token_mean(i["cov_clipped"], m)}
        fn, call = "clip_cov_terms", f"token-mean of clip_cov_terms(lp - old, lp, adv, mask, key, 0.2, 0.2, 1.0, " \
            f"{p['lb']}, {p['ub']}); pg_clipfrac = token_mean(cov_clipped)"
    elif loss == "kl_cov":
        f = lambda l: (tm(rl.kl_cov_terms(raw(l), l, adv, m, p["ratio"], p["coef"])[0]), {})  # noqa: E731
        fn, call = "kl_cov_terms", f"token-mean of kl_cov_terms(lp - old, lp, adv, mask, {p['ratio']}, {p['coef']})"
    elif loss == "vespo":
        f = lambda l: (tm(rl.vespo_terms(raw(l), l, adv, m)[0]), {})  # noqa: E731
        fn, call = "vespo_terms", "token-mean of vespo_terms(lp - old, lp, adv, mask) (2, 3, 3, 2)"
    elif loss == "luspo":
        def f(l):
            t, _ = rl.clipped_surrogate_terms(rl.sequence_log_ratio(l, old, m), x["adv_row"], m, p["lo"], p["hi"], None)
            return rl.aggregate(t, m, "seq-mean-token-sum"), {}
        fn, call = "sequence_log_ratio", f"aggregate(clipped_surrogate_terms(sequence_log_ratio(lp, old, mask), adv_seq * " \
            f"mask, mask, {p['lo']}, {p['hi']}, None)[0], mask, 'seq-mean-token-sum') (the LUSPO recipe)"
    elif loss in ("delta", "dual_clip"):
        ratio = raw if framework == "trl" else (lambda l: rl.token_log_ratio(l, old))
        f = lambda l: (rl.clipped_surrogate(ratio(l), adv, m, 0.2, 0.28, p["delta"])[0], {})  # noqa: E731
        fn = "clipped_surrogate"
        call = f"clipped_surrogate({'lp - old' if framework == 'trl' else 'token_log_ratio(lp, old)'}, adv, mask, " \
               f"0.2, 0.28, dual_clip={p['delta']})"
    elif loss == "rloo":
        def f(l):
            t, i = rl.sequence_product_terms(raw(l), x["adv_row"], m, 0.2, 0.2)
            rows = jnp.any(i["clipped"], axis=-1)
            return sm(t), {"clip_ratio/region_mean": rows.mean()}
        fn, call = "sequence_product_terms", "seq-mean-token-mean of sequence_product_terms(lp - old, adv_seq * mask, " \
            "mask, 0.2, 0.2); region_mean = the mean over rows of 'any token clipped'"
    elif loss == "m2po_mask":
        value = a64(rl.m2po_loss_mask(x["behavior"], old, m, p["tau"]))
        return dict(value=value, function="m2po_loss_mask", where=None,
                    convention=f"m2po_loss_mask(behavior, old, mask, {p['tau']})")
    elif loss in ("topr_terms", "vanilla_terms", "kimi15_terms"):
        if loss == "topr_terms":
            v, call = rl.topr_terms(raw(lp), lp, adv, m, x["scores"])[0], "topr_terms(lp - old, lp, adv, mask, scores)"
        elif loss == "vanilla_terms":
            v, call = rl.reinforce_terms(lp, adv, m)[0], "reinforce_terms(lp, adv, mask)"
        else:
            v, call = rl.dro_terms(lp, old, adv, m, 0.1)[0], "dro_terms(lp, old, adv, mask, 0.1)"
        return dict(value=a64(v), function=call.split("(")[0], where=m > 0, convention=call + "; at the valid tokens")
    else:
        raise KeyError(f"no dew_rl side for {framework}/{kind}/{p}")
    val, metrics = f(lp)
    if kind == "loss":
        value = a64(val)
    elif kind == "grad":
        value = a64(jax.grad(lambda l: f(l)[0])(lp))
        call = f"jax.grad of [{call}] w.r.t. lp"
    else:
        value = a64(metrics[p["metric"]])
        call = f"{call} [metric {p['metric']}]"
    return dict(value=value, function=fn, where=None, convention=call)


# Differences that are conventions, explained in a chapter (still listed as DIFFERS).
DOCUMENTED = {
    ("verl", "geo_mean", "pg_clipfrac"): "verl counts x != clip(x) for A > 0 (and A < 0 for the lower fraction), "
    "including the side where nothing binds; dew_rl's `clipped` is the binding side only (TRL's region_mean) "
    "(chapter 03j_sequence_trust_regions)",
    ("verl", "geo_mean", "pg_clipfrac_lower"): "as pg_clipfrac: verl counts both sides of the band for A < 0",
}


def note_for(rec) -> str:
    p = rec["params"]
    return DOCUMENTED.get((rec["framework"], p.get("loss"), p.get("metric")), "")


def _side(rec, x) -> dict:
    side = dew_rl_side(rec["framework"], rec["kind"], rec["params"], x)
    return dict(side, conv=side.pop("value"))


SUITE = Suite(
    "policyloss", "conformance_policyloss", FRAMEWORKS, make_inputs, side=_side,
    about="dew_rl's policy losses against the frameworks' own code", note=note_for,
    extra=lambda rec, side, theirs, x, c: dict(compared="every position" if side["where"] is None else "valid tokens"),
    header=lambda ctx: dict(seed=SEED, cases={k: dict(B=v[0], T=v[1], drift=v[2]) for k, v in CASES.items()}),
    frozen=lambda inputs: frozen_fixture(ROLL_FIXTURE, "roll", inputs, "tools/make_roll_fixtures.py"),
    frozen_names=("roll",), stubs=("openrlhf_lite.py", "tunix_lite.py", "ray_only/ray/__init__.py"),
    fixtures=("tests/fixtures/policyloss_roll.npz", "tests/fixtures/policyloss_roll.json"),
    env=dict(TORCHDYNAMO_DISABLE="1"), log="policyloss")

if __name__ == "__main__":
    sys.exit(run("conformance_policyloss", sys.argv[1:]))
