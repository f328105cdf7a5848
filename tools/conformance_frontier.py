"""`make conformance` for the last frontier rows: dew_rl against verl 0.9.1, TRL 1.16.0, OpenRLHF 0.11.2, AReaL 1.0.4.

    python tools/conformance_frontier.py             # every framework (creates or reuses tools/refenvs.py's envs)
    python tools/conformance_frontier.py trl areal   # only these (the data file keeps the others' last results)

The conventions compared here are the ones that live in a trainer's code rather than in a loss library, so each
adapter calls the framework's own trainer method or loss function with a stand-in `self` (see each adapter's
docstring); on inputs drawn here with a fixed seed (float32):

* TRL `RLOOTrainer._generate_and_score_completions`: the sequence-summed k1 in the reward (`beta`), the
  leave-one-out advantage, and `mask_truncated_completions` (a completion whose last id is neither EOS nor pad is
  truncated), against `truncated_rows`, `mask_truncated_completions`, `kl_shaped_sequence_rewards` and
  `rloo_advantage`;
* TRL `A2POTrainer.compute_loss` (loss and gradient with respect to the logits) and `_estimate_optimal_values`
  (V* from N reference samples per prompt), against `astar_po_loss_terms` and `astar_po_value`;
* OpenRLHF `apply_overlong_penalty` and `apply_stop_properly_penalty`, AReaL `reward_overlong_penalty`, against
  `overlong_penalty` and `stop_properly_rewards`; OpenRLHF's `reinforce` estimator with no KL (the raw reward,
  whitened over the batch) against `reinforce_plus_plus_returns` and `global_masked_whiten`;
* verl `ppo_loss` (verl/workers/utils/losses.py) with `use_kl_loss=True` and zero advantages, so that the loss is
  the KL term alone (value and gradient), against `kl_coef * aggregate(kl_penalty(...))`; and verl's DAPO group
  filter (`_dapo_filtered_keys` of the v1 replay buffer) against `dynamic_sampling_mask`.

The running, hashing, merging and comparing are tools/conformance_harness.py's; the adapters live in
tools/conformance_adapters/frontier/. It writes data/conformance_frontier.json (read by the chapters
02b_group_advantage, 02e_reinforce_plus_plus, 03b_kl and 03i_weighted_policy_gradients) and
data/conformance_frontier_outputs.npz (inputs and framework outputs), which tests/test_conformance.py uses to
recompute dew_rl's side without any framework installed.
"""
from __future__ import annotations

import sys

import numpy as np

from conformance_harness import cases_of, run, Suite  # noqa: F401

FRAMEWORKS = ("verl", "trl", "openrlhf", "areal")
SEED = 20261202
EOS, PAD = 2, 0
# name -> (B rows, T positions, G group size, V vocabulary, P prompts x N reference samples for V*)
CASES = {"a": (8, 10, 4, 11, (4, 6)), "b": (6, 7, 3, 7, (3, 8))}
# (max_response_length, overlong_buffer_len, overlong_penalty_factor) per case: lengths reach into the buffer
OVERLONG = {"a": ((10, 4, 1.0), (12, 6, 0.5)), "b": ((7, 3, 1.0), (9, 5, 2.0))}
STOP_PROPERLY = (0.5, 0.0, 1.0, -0.5)


# --------------------------------------------------------------------------------------------------------
# 1. Inputs
# --------------------------------------------------------------------------------------------------------
def make_inputs() -> dict[str, np.ndarray]:
    out = {}
    for k, (case, (B, T, G, V, (P, N))) in enumerate(CASES.items()):
        rng = np.random.default_rng(SEED + k)
        lengths = rng.integers(1, T + 1, size=B)
        lengths[0], lengths[1] = T, T - 1
        mask = (np.arange(T)[None, :] < lengths[:, None]).astype(np.float32)
        tokens = np.where(mask > 0, rng.integers(3, V, size=(B, T)), PAD).astype(np.int64)
        ends = np.array(["eos", "cut", "eos", "pad", "cut", "eos", "eos", "cut"])[:B]  # how each row stops
        last = lengths - 1
        tokens[np.arange(B), last] = np.where(ends == "eos", EOS, np.where(ends == "pad", PAD, tokens[np.arange(B), last]))
        truncated = (ends == "cut").astype(np.float32)  # the sampler's flag (finish_reason == "length")
        if case == "a":  # binary outcomes: a group all correct (tied), a group mixed
            rewards = np.array([1, 1, 1, 1, 0, 1, 0, 0], np.float32)
            uids = np.repeat(np.arange(B // G), G)
        else:  # graded rewards: a group tied at 0.7 (not a dyadic fraction), a mixed group; verl's uids: a singleton
            rewards = np.array([0.7, 0.7, 0.7, 0.2, 0.9, 0.2], np.float32)
            uids = np.array([5, 1, 1, 2, 2, 2])
        lp = rng.normal(-1.2, 0.7, size=(B, T))
        ref = lp + rng.normal(0.0, 0.4, size=(B, T))
        old = lp + rng.normal(0.0, 0.2, size=(B, T))
        logits = rng.normal(0.0, 2.0, size=(B, T, V))
        ref_rewards = (rng.random((P, N)) < 0.4).astype(np.float32)
        ref_rewards[0], ref_rewards[1] = 0.0, 1.0  # a prompt never solved, a prompt always solved
        v_star = rng.uniform(0.0, 1.0, size=B)
        vals = dict(mask=mask, tokens=tokens, truncated=truncated, rewards=rewards, uids=uids, lp=lp, ref=ref, old=old,
                    logits=logits, ref_rewards=ref_rewards, v_star=v_star)
        out.update({f"in/{case}/{n}": (np.asarray(v, np.int64) if n in ("tokens", "uids") else np.asarray(v, np.float32))
                    for n, v in vals.items()})
        out.update({f"in/{case}/G": np.array(G, np.int64), f"in/{case}/eos": np.array(EOS, np.int64),
                    f"in/{case}/pad": np.array(PAD, np.int64),
                    f"in/{case}/overlong": np.array(OVERLONG[case], np.float64),
                    f"in/{case}/stop_properly": np.array(STOP_PROPERLY, np.float64)})
    return out


# --------------------------------------------------------------------------------------------------------
# 2. dew_rl's side
# --------------------------------------------------------------------------------------------------------
def dew_rl_side(framework: str, kind: str, p: dict, x: dict) -> dict:
    import jax
    import jax.numpy as jnp

    import dew_rl as rl

    a = lambda v: np.asarray(v, np.float64)  # noqa: E731
    m, G = x["mask"], int(x["G"])
    r = dict(where=None)
    if kind in ("rloo_advantages", "completion_mask"):
        cut = rl.truncated_rows(x["tokens"], m, (int(x["eos"]), int(x["pad"])))
        keep = rl.mask_truncated_completions(m, cut) if p["mask_truncated"] else m
        masked = "mask_truncated_completions(mask, cut)" if p["mask_truncated"] else "mask"
        if kind == "completion_mask":
            r.update(function="mask_truncated_completions", conv=a(keep),
                     convention="mask_truncated_completions(mask, truncated_rows(tokens, mask, (eos, pad)))")
        else:
            shaped = rl.kl_shaped_sequence_rewards(x["rewards"], x["old"], x["ref"], keep, p["beta"], "kl")
            r.update(function="kl_shaped_sequence_rewards", conv=a(rl.rloo_advantage(shaped, G)),
                     convention=f"rloo_advantage(kl_shaped_sequence_rewards(R, old, ref, {masked}, {p['beta']}, 'kl'), G); "
                                "cut = truncated_rows(tokens, mask, (eos, pad))")
    elif kind in ("astar_loss", "astar_grad"):
        def loss(logits):
            lpt = rl.log_probs_from_logits(logits, x["tokens"])
            return rl.astar_po_loss_terms(lpt, x["ref"], m, x["rewards"], x["v_star"], p["beta2"])[0].mean()
        f = loss if kind == "astar_loss" else jax.grad(loss)
        r.update(function="astar_po_loss_terms", conv=a(f(jnp.asarray(x["logits"]))),
                 convention=("" if kind == "astar_loss" else "jax.grad of ") + "astar_po_loss_terms(log_probs_from_logits("
                            f"logits, tokens), ref, mask, R, V*, {p['beta2']}).mean()")
    elif kind == "astar_value":
        P, N = x["ref_rewards"].shape
        r.update(function="astar_po_value", conv=a(rl.astar_po_value(x["ref_rewards"].reshape(-1), N, p["beta1"]))[::N],
                 convention=f"astar_po_value(reference rewards, N={N}, {p['beta1']}), one row per prompt")
    elif kind == "overlong_reward":
        L, buf, fac = p["max_response_length"], p["overlong_buffer_len"], p["overlong_penalty_factor"]
        r.update(function="overlong_penalty", conv=a(x["rewards"]) + a(rl.overlong_penalty(m, L, buf, fac)),
                 convention=f"R + overlong_penalty(mask, {L}, {buf}, {fac})")
    elif kind == "stop_properly":
        r.update(function="stop_properly_rewards", conv=a(rl.stop_properly_rewards(x["rewards"], x["truncated"], p["coef"])),
                 convention=f"stop_properly_rewards(R, truncated, {p['coef']})")
    elif kind == "raw_reward":
        zeros = np.zeros(m.shape, np.float32)
        raw = rl.reinforce_plus_plus_returns(x["rewards"], zeros, m, 0.0, 1.0)
        r.update(function="reinforce_plus_plus_returns", conv=a(rl.global_masked_normalize(raw, m)), where=m > 0,
                 convention="global_masked_normalize(reinforce_plus_plus_returns(R, 0, mask, 0, 1), mask): the reward "
                            "broadcast over the response, z-scored over the batch's valid tokens; compared at valid tokens")
    elif kind in ("kl_loss_term", "kl_loss_term_grad"):
        def loss(lp):
            return p["coef"] * rl.aggregate(rl.kl_penalty(lp, x["ref"], p["kl_loss_type"]), m, p["loss_agg_mode"])
        f = loss if kind == "kl_loss_term" else jax.grad(loss)
        r.update(function="kl_penalty", conv=a(f(jnp.asarray(x["lp"]))),
                 convention=("" if kind == "kl_loss_term" else "jax.grad of ") + f"{p['coef']} * aggregate(kl_penalty(lp, ref, "
                            f"{p['kl_loss_type']!r}), mask, {p['loss_agg_mode']!r})")
    elif kind == "dynamic_sampling":
        r.update(function="dynamic_sampling_mask", conv=a(rl.dynamic_sampling_mask(x["rewards"], x["uids"])[0]),
                 convention="dynamic_sampling_mask(R, uids)[0] (a row is kept when its group's rewards are not all equal)")
    else:
        raise KeyError(f"no dew_rl side for {framework}/{kind}")
    return r


# Differences under the framework's convention that are known and explained in a chapter (still listed as DIFFERS).
DOCUMENTED = {
    ("verl", "dynamic_sampling"): "verl keeps a group of one trajectory (its test is `len(values) > 1 and "
    "np.std(values) == 0`); dew_rl's mask drops it (no spread: its GRPO advantage is 0); see 02b_group_advantage",
}


SUITE = Suite(
    "frontier", "conformance_frontier", FRAMEWORKS, make_inputs,
    side=lambda rec, x: dew_rl_side(rec["framework"], rec["kind"], rec["params"], x),
    about="dew_rl against verl 0.9.1, TRL 1.16.0, OpenRLHF 0.11.2 and AReaL 1.0.4 (the conventions that live in a "
          "trainer's code)", note=lambda rec: DOCUMENTED.get((rec["framework"], rec["kind"]), ""),
    header=lambda ctx: dict(seed=SEED, cases={k: dict(B=v[0], T=v[1], G=v[2], V=v[3], P=v[4][0], N=v[4][1])
                                              for k, v in CASES.items()}),
    stubs=("openrlhf_lite.py",), log="conformance_frontier")

if __name__ == "__main__":
    sys.exit(run("conformance_frontier", sys.argv[1:]))
