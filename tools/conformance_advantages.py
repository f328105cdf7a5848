"""The advantage-frontier conformance suite: dew_rl's reward-scaling and per-token-baseline estimators against the
frameworks that ship them.

    python tools/conformance_advantages.py                 # every framework with an environment (tools/refenvs.py)
    python tools/conformance_advantages.py verl areal      # only these (the data file keeps the others' last results)

What is this suite's own (the running, hashing, merging and comparing are tools/conformance_harness.py's):

1. `make_inputs`: three cases (fixed seed, float32). "c": 12 rows in contiguous groups of 4 (a graded group, one
   correct answer of four, a tied group), right-padded masks; "i": 10 rows grouped by shuffled prompt ids, ragged,
   with a group of one, and masks with interior holes (multi-turn); "p": 6 rows in groups of 2. Each case has
   outcome rewards, three reward components (GDPO), token rewards (the outcome on the last kept token plus a small
   per-token shaping), greedy-baseline rewards (ReMax), old log-probs with the exact sum_v pi_v^2 of the same
   softmax (OTB), truncated IS weights, and critic values (GAE).
2. verl 0.9.1, TRL 1.16.0 and AReaL 1.0.4 run live in their own interpreters (tools/conformance_adapters/advantages/).
   NeMo-RL is not on the package index: tools/make_nemo_rl_advantage_fixtures.py runs its estimators from a source
   checkout of NVIDIA-NeMo/RL@7ea279abfbeb once, and its outputs are frozen in tests/fixtures/advantages_nemo_rl.npz
   (with the revision in the .json next to it); the suite reads them from there.
3. dew_rl's side of every record (`dew_rl_side`): the call that reproduces the framework's convention, and dew_rl's
   own default, compared at the positions the framework's output is defined on.
4. data/conformance_advantages.json (the tables chapters 02f and 02g print) and data/conformance_advantages_outputs.npz.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from conformance_harness import cases_of, compare, frozen_fixture, run, Suite  # noqa: F401

ROOT = Path(__file__).resolve().parent.parent
NEMO_FIXTURE = ROOT / "tests" / "fixtures" / "advantages_nemo_rl.npz"
FRAMEWORKS = ("verl", "trl", "areal")  # run live; "nemo_rl" comes from its frozen fixture
SEED = 20261202
V = 5  # the vocabulary of the softmax whose sum_v pi_v^2 the OTB inputs hold


# --------------------------------------------------------------------------------------------------------
# 1. Inputs
# --------------------------------------------------------------------------------------------------------
def make_inputs() -> dict[str, np.ndarray]:
    out = {}
    specs = {"c": (12, 8, 4), "i": (10, 7, 0), "p": (6, 5, 2)}  # name -> (B, T, contiguous G or 0 for ids)
    for k, (case, (B, T, G)) in enumerate(specs.items()):
        rng = np.random.default_rng(SEED + k)
        if G:
            ids = np.arange(B) // G
        else:
            ids = rng.permutation(np.array([3, 3, 3, 9, 9, 1, 1, 1, 1, 5]))  # ragged, a group of one (5)
        R = rng.normal(0.5, 0.5, B).round(2)
        if case == "c":
            R[:4] = [0.2, 0.9, 0.4, 0.7]; R[4:8] = [1.0, 0.0, 0.0, 0.0]; R[8:12] = 0.7
        if case == "i":
            R[ids == 1] = 0.7  # a tied group
        lengths = rng.integers(1, T + 1, size=B)
        lengths[0] = T
        mask = (np.arange(T)[None, :] < lengths[:, None]).astype(np.float64)
        if case == "i":  # multi-turn holes inside three responses
            mask[0, 2] = 0.0; mask[1, 1] = 0.0; mask[4, 3] = 0.0
            for i in range(B):
                if mask[i].sum() == 0:
                    mask[i, 0] = 1.0
        last = T - 1 - np.argmax(mask[:, ::-1] > 0, axis=1)
        outcome = np.zeros((B, T))
        outcome[np.arange(B), last] = R
        shaping = np.where(mask > 0, rng.normal(0.0, 0.02, (B, T)), 0.0)
        comps = np.stack([(R > 0.5).astype(float), rng.integers(0, 2, B).astype(float), R + rng.normal(0, 0.1, B)], 1)
        if case == "c":
            comps[8:12] = [1.0, 1.0, 0.7]  # the tied group is tied in every component
        logits = rng.normal(0.0, 1.5, (B, T, V))
        p = np.exp(logits - logits.max(-1, keepdims=True)); p /= p.sum(-1, keepdims=True)
        tokens = np.array([[rng.choice(V, p=p[b, t]) for t in range(T)] for b in range(B)])
        old = np.log(np.take_along_axis(p, tokens[..., None], -1)[..., 0])
        vals = dict(mask=mask, ids=ids, rewards=R, components=comps, outcome=outcome, token_rewards=outcome + shaping,
                    baselines=R + rng.normal(0.0, 0.2, B), old=old, sum_pi2=(p ** 2).sum(-1),
                    rho=rng.uniform(0.5, 2.0, (B, T)), values=rng.normal(0.3, 0.3, (B, T)))
        for name, v in vals.items():
            out[f"in/{case}/{name}"] = np.asarray(v, np.int64 if name == "ids" else np.float32)
        out[f"in/{case}/G"] = np.asarray(G, np.int64)
    return out


# --------------------------------------------------------------------------------------------------------
# 2. dew_rl's side
# --------------------------------------------------------------------------------------------------------
def _group(x):
    "dew_rl's `group`: the static G of a contiguous case, else the prompt ids."
    return int(x["G"]) if int(x["G"]) else x["ids"]


def dew_rl_side(framework: str, kind: str, p: dict, x: dict) -> dict:
    """dew_rl's value of one framework output: `conv` (the call configured to the framework's convention),
    `default` (dew_rl's defaults), the calls as text, and `where` (the positions compared; None = all)."""
    import jax.numpy as jnp

    import dew_rl as rl

    m, g, R = x["mask"], _group(x), x["rewards"]
    keep = m > 0
    B = m.shape[0]
    rows = lambda a: np.asarray(a, np.float64)[:, None] * keep  # noqa: E731  (a row value at its kept tokens)
    gtxt = f"group={'G' if int(x['G']) else 'ids'}"
    where = keep  # every framework here writes the advantage at the kept tokens; compared there
    if kind == "gdpo":
        w = p.get("weights")
        wt = None if w is None else np.asarray(w, np.float32)
        if framework == "verl":
            conv = rl.gdpo_advantage(x["components"], m, g, wt, eps=1e-6, whiten="tokens")
            call = f"gdpo_advantage(components, mask, {gtxt}, reward_weights={w}, eps=1e-6, whiten='tokens')"
        elif framework == "trl":
            conv = rl.gdpo_advantage(x["components"], m, g, wt, eps=1e-4)
            call = f"gdpo_advantage(components, mask, {gtxt}, reward_weights={w}, eps=1e-4)"
        else:  # nemo_rl
            if p.get("leave_one_out"):
                z = sum((1.0 if w is None else w[k]) * np.asarray(rl.leave_one_out_advantage(x["components"][:, k], g))
                        for k in range(x["components"].shape[1]))
                conv = rows(np.asarray(rl.global_masked_whiten(jnp.asarray(z, jnp.float32), np.ones(B, bool))))
                call = "global_masked_whiten(sum_k w_k leave_one_out_advantage(components[:, k], group)) over rows"
            else:
                conv = rl.gdpo_advantage(x["components"], m, g, wt, eps=1e-6)
                call = f"gdpo_advantage(components, mask, {gtxt}, reward_weights={w}, eps=1e-6)"
        return dict(conv=np.asarray(conv, np.float64), default=np.asarray(rl.gdpo_advantage(x["components"], m, g, wt)),
                    function="gdpo_advantage", convention=call, default_call="gdpo_advantage(components, mask, group)",
                    where=where)
    if kind == "batch_std":
        conv = rows(rl.batch_std_advantage(R, g))
        return dict(conv=conv, default=conv, function="batch_std_advantage", convention=f"batch_std_advantage(R, {gtxt})",
                    default_call="the same", where=where)
    if kind == "levels":
        kw = dict(mean_level=p["mean_level"], std_level=p["std_level"], mean_leave1out=p["leave1out"],
                  std_unbiased=p["unbiased"], eps=1e-5)
        conv = rows(rl.level_normalize(R, g, **kw))
        return dict(conv=conv, default=conv, function="level_normalize",
                    convention=f"level_normalize(R, {gtxt}, " + ", ".join(f"{k}={v!r}" for k, v in kw.items()) + ")",
                    default_call="the same", where=where)
    if kind == "grpo_loo":
        conv = rows(rl.leave_one_out_advantage(R, g, normalize_rewards=p["normalize"]))
        return dict(conv=conv, default=conv, function="leave_one_out_advantage",
                    convention=f"leave_one_out_advantage(R, {gtxt}, normalize_rewards={p['normalize']})",
                    default_call="the same", where=where)
    if kind == "grpo":
        eps = 1e-4 if framework == "trl" else 1e-6
        conv = rows(rl.group_advantage(R, g, eps=eps))
        return dict(conv=conv, default=rows(rl.group_advantage(R, g)), function="group_advantage",
                    convention=f"group_advantage(R, {gtxt}, eps={eps})", default_call="group_advantage(R, group)",
                    where=where)
    if kind == "passk":
        conv = rows(rl.passk_advantage(R, g, normalise_by_std=p["norm"]))
        return dict(conv=conv, default=rows(rl.passk_advantage(R, g)), function="passk_advantage",
                    convention=f"passk_advantage(R, {gtxt}, normalise_by_std={p['norm']})",
                    default_call="passk_advantage(R, group)", where=where)
    if kind == "opo":
        conv = np.asarray(rl.opo_advantage(R, m, g), np.float64)
        return dict(conv=conv, default=conv, function="opo_advantage", convention=f"opo_advantage(R, mask, {gtxt})",
                    default_call="the same", where=where)
    if kind == "gpg":
        conv = rows(rl.gpg_advantage(R, g))
        return dict(conv=conv, default=conv, function="gpg_advantage", convention=f"gpg_advantage(R, {gtxt})",
                    default_call="the same", where=where)
    if kind == "remax":
        conv = np.asarray(rl.remax_advantage(x["token_rewards"], x["baselines"], m)[0], np.float64)
        return dict(conv=conv, default=conv, function="remax_advantage",
                    convention="remax_advantage(token_rewards, baselines, mask)[0]", default_call="the same", where=where)
    if kind == "otb":
        kw = dict(rollout_is_weights=x["rho"] if p["is"] else None, handle_zero_tail=p["zero_tail"],
                  multi_turn=p["multi_turn"])
        conv = np.asarray(rl.optimal_token_baseline_advantage(x["token_rewards"], m, x["old"], x["sum_pi2"], g, **kw)[0],
                          np.float64)
        dflt = np.asarray(rl.optimal_token_baseline_advantage(x["token_rewards"], m, x["old"], x["sum_pi2"], g)[0])
        return dict(conv=conv, default=dflt, function="optimal_token_baseline_advantage",
                    convention=f"optimal_token_baseline_advantage(token_rewards, mask, old, sum_pi2, {gtxt}, "
                    f"rollout_is_weights={'rho' if p['is'] else None}, handle_zero_tail={p['zero_tail']}, "
                    f"multi_turn={p['multi_turn']})[0]",
                    default_call="optimal_token_baseline_advantage(token_rewards, mask, old, sum_pi2, group)[0]",
                    where=where)
    if kind in ("gae_advantages", "gae_returns"):
        lam_p = p["lam_policy"]
        if p.get("alpha"):
            lam_p = rl.length_adaptive_lambda(m, p["alpha"])
        adv, ret = rl.decoupled_gae(x["outcome"], x["values"], m, p["gamma"], lam_p, p["lam_value"])
        out = adv if kind == "gae_advantages" else ret
        lam_txt = f"length_adaptive_lambda(mask, {p['alpha']})" if p.get("alpha") else p["lam_policy"]
        return dict(conv=np.asarray(out, np.float64), default=np.asarray(out, np.float64), function="decoupled_gae",
                    convention=f"decoupled_gae(outcome, values, mask, {p['gamma']}, {lam_txt}, {p['lam_value']})"
                    f"[{0 if kind == 'gae_advantages' else 1}]", default_call="the same", where=where)
    raise KeyError(f"no dew_rl side for {framework}/{kind}")


# Differences under the framework's convention that are known and explained in a chapter (still listed as DIFFERS).
DOCUMENTED = {
    ("verl", "opo", "i"): "verl gives a group of one its raw reward (a baseline of 0); dew_rl gives it 0 (02f).",
    ("verl", "gpg", "i"): "verl gives a group of one alpha * R (a mean of 0); dew_rl gives it 0 (02f).",
    ("verl", "gdpo", "i"): "verl z-scores a group of one as R / (1 + 1e-6) (mean 0, std 1) before the sum, which "
    "moves every row's whitened value; dew_rl gives it z = 0 (02f).",
    ("verl", "otb", "i"): "on rows with interior holes verl's single-turn OTB applies its zero tail by lengths (the "
    "columns from the second-longest length on), dew_rl where one row of the group is valid; and verl gives a group "
    "of one its return (02g).",
    ("trl", "gdpo", "c"): "TRL whitens over rows by (s - mean) / (std + 1e-4); dew_rl by rsqrt(var + 1e-8) (02f).",
    ("trl", "gdpo", "p"): "TRL whitens over rows by (s - mean) / (std + 1e-4); dew_rl by rsqrt(var + 1e-8) (02f).",
}


def note_for(rec: dict) -> str:
    return DOCUMENTED.get((rec["framework"], rec["kind"], rec["case"]), "")


def _outside_groups_of_one(rec, side, theirs, x, c) -> dict:
    alone = np.array([(x["ids"] == u).sum() == 1 for u in x["ids"]])  # the rows of a group of one
    o = compare(side["conv"], theirs, side["where"] & ~alone[:, None]) if alone.any() else c
    return dict(max_abs_outside_groups_of_one=o["max_abs"])


SUITE = Suite(
    "advantages", "conformance_advantages", FRAMEWORKS, make_inputs,
    side=lambda rec, x: dew_rl_side(rec["framework"], rec["kind"], rec["params"], x),
    about="dew_rl's advantage frontier against the frameworks' own code", note=note_for, extra=_outside_groups_of_one,
    header=lambda ctx: dict(seed=SEED), default_where=True,
    frozen=lambda inputs: frozen_fixture(NEMO_FIXTURE, "nemo_rl", inputs, "tools/make_nemo_rl_advantage_fixtures.py"),
    frozen_names=("nemo_rl",), fixtures=("tests/fixtures/advantages_nemo_rl.npz", "tests/fixtures/advantages_nemo_rl.json"),
    env=dict(TORCHDYNAMO_DISABLE="1"), log="advantages")

if __name__ == "__main__":
    sys.exit(run("conformance_advantages", sys.argv[1:]))
