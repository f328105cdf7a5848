"""Freeze Relax's P3O (ESS cap + adaptive k3 trust region) on inputs drawn here: tests/fixtures/p3o_relax.npz.

Relax (redai-infra/Relax) is not on the package index. Its P3O primitives live in one file,
relax/utils/training/p3o_utils.py, which imports only `dataclasses` and `torch`. This script takes as first argument
either the git directory of a Relax checkout (it then reads the file at REVISION with
`git --git-dir D show REVISION:relax/utils/training/p3o_utils.py`) or the path of that file, checks that the text's
sha256 is SHA256 (the text at REVISION; the frozen outputs are tied to it), executes the text unchanged in a fresh
module namespace (`compile(..., dont_inherit=True)`, so none of this script's future flags leak in) and calls
Relax's own functions. It runs in the `trl` environment of tools/refenvs.py (torch 2.13.0):

    ~/.cache/dew_rl/refenvs/trl/bin/python tools/make_relax_p3o_fixtures.py /path/to/relax/utils/training/p3o_utils.py

Nothing of Relax is copied into this repository: the outputs go to the fixture, with the revision, the file, its
sha256 and the settings in the .json next to it.

Recorded, per case and (for the token terms) per KL mode `proxy` / `proxy_safe` (param `mode`):

* `ess`: `finalize_p3o_step_context(compute_p3o_sufficient_stats(lp, beh, mask)).normalized_ess` (float64 scalar;
  the step ESS of one micro-batch on one rank, i.e. the paper's micro-batch ESS);
* from `compute_p3o_token_terms(lp, beh, adv, mask, ctx, kl_mode=mode)` (float32, [B, T]): `score_loss`,
  `behavior_kl_proxy`, `adaptive_kl_loss`, `cap_hits`, `total` (= score_loss + adaptive_kl_loss, the per-token loss
  Relax's P3O objective sums, computed in torch float32) and `grad`, the torch autograd gradient of
  `(total * mask).sum()` w.r.t. the float32 log-probs.

Inputs (float32, drawn by the torch-free `make_inputs` with a fixed seed, stored under in/<case>/<name>: log_probs,
behavior_log_probs, advantages, mask [B, T]):

* `a` (B 8, T 7): log-ratios ~ N(0, 0.4) with a few far from 0 (+1.1, +0.9, -2.5), interior holes in the mask,
  advantages of both signs: ESS well inside (0, 1), tokens on both sides of the cap;
* `b` (B 10, T 9): a fully masked row, interior holes, one valid log-ratio +12.5 and one -10.5 (both beyond the
  k3 exponent clamp BEHAVIOR_KL_EXP_CLAMP = 10), a masked position with log-ratio +30 (must not count): ESS ~ 1/N,
  most tokens capped;
* `c` (B 6, T 5): every valid ratio far below 1 (log-ratios in [-9, -6], one -11 beyond the clamp): S2 ~ 1e-5, so
  the 1e-8 in the ESS denominator moves the ESS by ~1e-3 relative (visible), no cap hit.

tests/test_p3o_relax.py compares dew_rl's `p3o_ess` and `p3o_terms` with the frozen outputs.
"""
from __future__ import annotations

import sys
import types
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import relax_source  # noqa: E402  (tools/relax_source.py)

ROOT = Path(__file__).resolve().parent.parent
REVISION = "2765d18a5fa57b0c3b7b5f6d310d60ee6c1dfcec"
FILE = "relax/utils/training/p3o_utils.py"
SHA256 = "14caa2a065c0c528071601b8a067ba50a974217ec4c002dae3c5bd992d5f941a"
OUT = ROOT / "tests" / "fixtures" / "p3o_relax.npz"
SEED = 20260517
CASES = ("a", "b", "c")
MODES = ("proxy", "proxy_safe")
TOKEN_KINDS = ("score_loss", "behavior_kl_proxy", "adaptive_kl_loss", "cap_hits", "total", "grad")


def make_inputs() -> dict:
    """Every input, float32, under in/<case>/<name>; numpy only (tests/test_p3o_relax.py re-draws them)."""
    rng = np.random.default_rng(SEED)
    x = {}

    def put(case, lp, l, adv, mask):
        relax_source.put_token_case(x, case, lp, l, adv, mask, older="behavior_log_probs")

    # a: moderate off-policy batch, a few ratios far from 1 either way
    B, T = 8, 7
    lp = -rng.gamma(1.5, 0.8, (B, T))
    l = rng.normal(0.0, 0.4, (B, T))
    l[0, 1], l[2, 3], l[5, 0] = 1.1, -2.5, 0.9
    adv = rng.normal(0.0, 1.0, (B, T))
    put("a", lp, l, adv, relax_source.prefix_mask([7, 3, 5, 7, 2, 6, 4, 7], T, [(0, 2), (3, 4), (5, 1), (7, 5)]))

    # b: fully masked row 3, ratios beyond the k3 exponent clamp both ways, a masked +30 that must not count
    B, T = 10, 9
    lp = -rng.gamma(1.5, 0.8, (B, T))
    l = rng.normal(0.0, 0.7, (B, T))
    l[1, 2], l[6, 4], l[4, 1] = 12.5, -10.5, 3.0
    l[0, 8] = 30.0  # masked (row 0 has length 6)
    adv = np.repeat(rng.normal(0.0, 1.0, (B, 1)), T, 1) + rng.normal(0.0, 0.1, (B, T))
    mask = relax_source.prefix_mask([6, 9, 4, 0, 8, 3, 9, 5, 7, 9], T, [(1, 4), (2, 1), (4, 3), (6, 2), (9, 7)])
    assert mask[0, 8] == 0 and mask[1, 2] == 1 and mask[6, 4] == 1
    put("b", lp, l, adv, mask)

    # c: every ratio far below 1 (small S2: the 1e-8 of the ESS is visible), one log-ratio -11 beyond the clamp
    B, T = 6, 5
    lp = -rng.gamma(1.5, 0.8, (B, T))
    l = rng.uniform(-9.0, -6.0, (B, T))
    l[2, 1] = -11.0
    adv = rng.normal(0.0, 1.0, (B, T))
    put("c", lp, l, adv, relax_source.prefix_mask([5, 4, 5, 2, 5, 3], T, [(0, 2), (2, 3), (4, 1)]))
    return x


def cases_of(inputs: dict) -> dict:
    return {c: {k.split("/")[-1]: v for k, v in inputs.items() if k.startswith(f"in/{c}/")} for c in CASES}


def read_relax(source: str) -> str:
    "The file's text, from a git dir (at REVISION) or from a path; checked against the pinned sha256."
    return relax_source.read_checked(source, REVISION, FILE, SHA256)


def load_relax(text: str) -> types.ModuleType:
    "Execute the file's text unchanged in a fresh module (registered so that @dataclass can resolve its module)."
    mod = relax_source.fresh_module("relax_p3o_utils_" + REVISION[:12], f"redai-infra/Relax@{REVISION[:12]}:{FILE}")
    exec(compile(text, mod.__file__, "exec", dont_inherit=True), mod.__dict__)
    return mod


def main(argv: list[str]) -> int:
    import torch
    relax = load_relax(read_relax(argv[0]))
    inputs = make_inputs()
    arrays, records = dict(inputs), []

    def put(case, kind, value, function, settings, dtype, **params):
        key = "/".join(["relax", case, kind] + [f"{k}={params[k]}" for k in sorted(params)])
        arrays[key] = np.asarray(value, np.float64)
        records.append(dict(key=key, framework="relax", case=case, kind=kind, params=params,
                            framework_function=function, settings=settings, dtype=dtype))

    fn_stats = f"{FILE}:compute_p3o_sufficient_stats + finalize_p3o_step_context"
    fn_terms = f"{FILE}:compute_p3o_token_terms"
    for case, x in cases_of(inputs).items():
        beh = torch.tensor(x["behavior_log_probs"])
        adv = torch.tensor(x["advantages"])
        mask = torch.tensor(x["mask"]).bool()
        ctx = relax.finalize_p3o_step_context(
            relax.compute_p3o_sufficient_stats(torch.tensor(x["log_probs"]), beh, mask))
        assert torch.equal(ctx.adaptive_cap, ctx.normalized_ess)
        put(case, "ess", ctx.normalized_ess.numpy(), fn_stats,
            "one micro-batch on one rank (step ESS = micro-batch ESS); valid_mask = mask.bool(); float64 statistics",
            str(ctx.normalized_ess.dtype))
        for mode in MODES:
            lp = torch.tensor(x["log_probs"], requires_grad=True)
            t = relax.compute_p3o_token_terms(lp, beh, adv, mask, ctx, kl_mode=mode)
            total = t.score_loss + t.adaptive_kl_loss
            (total * mask).sum().backward()
            settings = (f"kl_mode={mode!r}, clip_low=clip_high=0.2 (defaults; clip_hits is monitoring only), "
                        "step_context from this case's ess; valid_mask = mask.bool()")
            for kind, v in (("score_loss", t.score_loss), ("behavior_kl_proxy", t.behavior_kl_proxy),
                            ("adaptive_kl_loss", t.adaptive_kl_loss), ("cap_hits", t.cap_hits)):
                put(case, kind, v.detach().numpy(), fn_terms, settings + f"; P3OTokenTerms.{kind}", str(v.dtype),
                    mode=mode)
            put(case, "total", total.detach().numpy(), fn_terms,
                settings + "; score_loss + adaptive_kl_loss (torch float32)", str(total.dtype), mode=mode)
            put(case, "grad", lp.grad.numpy(), fn_terms,
                settings + "; d/d log_probs of ((score_loss + adaptive_kl_loss) * mask).sum(), torch autograd",
                str(lp.grad.dtype), mode=mode)
    relax_source.save_fixture(OUT, ROOT, arrays, dict(
        framework="relax", version=f"Relax redai-infra/Relax@{REVISION}", revision=REVISION, file=FILE,
        sha256=SHA256, how=f"the text of {FILE} at the revision (sha256 checked) executed unchanged in a fresh module "
        "namespace and its functions called (tools/make_relax_p3o_fixtures.py), torch " + torch.__version__,
        records=records, failed=[],
        not_run=[dict(framework="relax", framework_function=f"{FILE}:compute_p3o_exact_kl", dew_rl="-",
                      why="full-vocabulary KL from logits: Relax's loss rejects kl_mode='exact'; dew_rl's p3o_terms "
                      "has only the sampled-token proxy modes"),
                 dict(framework="relax", framework_function=f"{FILE}:P3OTokenTerms.clip_hits", dew_rl="-",
                      why="a monitoring count outside the objective (ratio outside [0.8, 1.2]); dew_rl has none")]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
