"""Freeze Relax's M2PO, PPO clip and RLOO primitives on inputs drawn here: tests/fixtures/ppo2_relax.npz.

Relax (redai-studio/Relax) is not on the package index. These primitives live in relax/utils/training/ppo_utils.py,
which at REVISION imports Relax's own logging module at its top (`from relax.utils.logging_utils import get_logger`),
so the file cannot be executed whole outside a Relax install. This script takes as first argument either the git
directory of a Relax checkout (it then reads the file at REVISION with
`git --git-dir D show REVISION:relax/utils/training/ppo_utils.py`) or the path of that file, takes the definitions
it needs (DEFINITIONS) from the file's syntax tree (`ast`), checks that the sha256 of their source text (the
concatenation, in file order, of `ast.get_source_segment(text, node)` for each, decorators excluded, UTF-8) is SHA256
and that their decorators are as pinned (DECORATORS), and executes those nodes unchanged (decorators included) in a
fresh module namespace holding what their bodies name from the file's imports: `torch`, `math`, `dist`
(torch.distributed), `F` (torch.nn.functional), `Namespace` (`compile(..., dont_inherit=True)`, so none of this
script's future flags leak in). It runs in the `trl` environment of tools/refenvs.py (torch 2.13.0):

    ~/.cache/dew_rl/refenvs/trl/bin/python tools/make_relax_ppo2_fixtures.py /path/to/relax/utils/training/ppo_utils.py

`torch.compile` is the identity decorator while the definitions execute (restored right after, even on an error):
`compute_rloo_loss` and `compute_policy_loss` carry `@torch.compile(dynamic=True)`, and compiling them runs
TorchInductor, which generates C++ and builds it (it needs a working C++ toolchain and a writable build cache, which
a reference environment cannot be assumed to have), while compilation does not change what they compute: they are
element-wise float32 torch code, here run eagerly exactly as written (tools/make_relax_ppo_fixtures.py says the same
of the earlier revision, and what an inductor cache did there to a compiled function called with new constants).

Nothing of Relax is copied into this repository: the outputs go to the fixture, with the revision, the file, the
definitions, their sha256 and the settings in the .json next to it.

Relax's token functions take flat [total_tokens] tensors (its packed layout). Every token input is stored [B, T] with
its mask; Relax is given the valid tokens (mask > 0) flattened in row order, `x[mask > 0]`, and its outputs are
stored in that packed layout (tests/test_ppo2_relax.py packs dew_rl's [B, T] outputs the same way).

Inputs (drawn by the torch-free `make_inputs` with a fixed seed, stored under in/<case>/<name>; float32 except the
int32 group ids):

* token cases (log_probs, old_log_probs, advantages, mask [B, T]; log-ratio l = log pi - log pi_old):
  `a` (B 6, T 8): l ~ N(0, 0.35) with a few far from 0 (+1.6, -1.4, +2.2, -0.9), interior holes, advantages of both
  signs with exact zeros, one token with l exactly 0 (ratio exactly 1: not "harmful" for M2PO);
  `b` (B 8, T 9): every |l| in [0.5, 3] (ratios 0.05 to 20), both signs, a fully masked row, a row of zero
  advantages, a masked position with l = +15 that must not count;
  `c` (B 5, T 7): the "harmful" tokens (A > 0 with l > 0, A < 0 with l < 0) drift little (|l| <= 0.12), so M2PO's
  budget holds for every kl2_budget below, while non-harmful tokens sit far from 1 (A < 0 with ratios 4 to 12, which
  PPO's dual clip caps; A > 0 with ratios 0.05 to 0.3);
* RLOO case `r`: rewards [N] and group ids [N] (int32; contiguous groups of sizes 2, 3, 4, 5, 6, 6, 2), with ties:
  groups of equal non-dyadic rewards (0.9 x 3, 0.7 x 4, 0.6 x 6, 0.2 x 2; the float32 mean of some of them is not
  the reward), partial ties (0.3, 1.2, 0.3, -0.5, 1.2; a random group with one repeated value).

Recorded (key relax/<case>/<kind>/<param>=<v>, float64 copies of Relax's outputs; per-token outputs packed):

* `compute_m2po_loss(ppo_kl, advantages, kl2_budget)` (miniclip_low 0.3, miniclip_high 0.5, the defaults) with
  ppo_kl = old_log_probs - log_probs (Relax's convention, built from the differentiable log-probs): kinds `m2po_loss`
  (pg_loss), `m2po_clipfrac`, `m2po_grad` (d/d log_probs of pg_loss.sum(), torch autograd), and the scalars
  `m2po_m2_now`, `m2po_m2_after`, `m2po_eps_low`, `m2po_eps_high` (Python floats), for kl2_budget in
  KL2_BUDGETS, cases a, b, c;
* `compute_policy_loss(ppo_kl, advantages, eps_clip, eps_clip_high, eps_clip_c)`: kinds `ppo_loss` (pg_losses),
  `ppo_clipfrac`, `ppo_grad`, for PPO_SETTINGS, cases a, b, c;
* `compute_rloo_loss(log_probs, advantages)`: kinds `rloo_loss` (pg_loss), `rloo_loss_clipfrac`, `rloo_loss_grad`,
  cases a, b, c;
* `compute_rloo_leave_one_out_rewards(group_rewards)`, one call per group: kind `rloo_loo` (param group=<g>), case r.

tests/test_ppo2_relax.py compares dew_rl's `m2po_clip_bounds`, `m2po_terms`, `clipped_surrogate_terms`,
`reinforce_terms` and `rloo_advantage` with the frozen outputs.
"""
from __future__ import annotations

import ast
import hashlib
import sys
import types
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import relax_source  # noqa: E402  (tools/relax_source.py)

ROOT = Path(__file__).resolve().parent.parent
REPOSITORY = "redai-studio/Relax"
REVISION = "2854c256da903068a91490adfe4a6274258f3862"
FILE = "relax/utils/training/ppo_utils.py"
DEFINITIONS = ("compute_rloo_loss", "compute_policy_loss", "_solve_tau_from_sorted_delta2",  # in file order
               "_get_trust_region_delta_sq", "kpo_clip_harmful_tokens", "compute_m2po_loss",
               "compute_rloo_leave_one_out_rewards")
# ast.unparse of each definition's decorators (the others have none); not part of the hash, checked apart
DECORATORS = {"compute_rloo_loss": ["torch.compile(dynamic=True)"],
              "compute_policy_loss": ["torch.compile(dynamic=True)"]}
SHA256 = "9d5879edcfa122445b3211d6fdf0db6b2c8dc8d936bcf00eadd855d8757a923a"  # the definitions' source segments
OUT = ROOT / "tests" / "fixtures" / "ppo2_relax.npz"
SEED = 20260519
TOKEN_CASES = ("a", "b", "c")
KL2_BUDGETS = (0.02, 0.3, 2.0)
PPO_SETTINGS = ((0.2, 0.2, None), (0.2, 0.28, 3.0))  # (eps_clip, eps_clip_high, eps_clip_c)
RLOO_GROUPS = (2, 3, 4, 5, 6, 6, 2)


def make_inputs() -> dict:
    """Every input under in/<case>/<name>; numpy only (tests/test_ppo2_relax.py re-draws them)."""
    rng = np.random.default_rng(SEED)
    f32 = lambda a: np.asarray(a, np.float32)  # noqa: E731
    x = {}

    def put(case, lp, l, adv, mask):
        "l: log pi - log pi_old."
        relax_source.put_token_case(x, case, lp, l, adv, mask)

    # a: moderate log-ratios with a few far from 0; one exact l = 0
    B, T = 6, 8
    lp = -rng.gamma(1.5, 0.8, (B, T))
    l = rng.normal(0.0, 0.35, (B, T))
    l[0, 1], l[1, 3], l[3, 2], l[4, 4] = 1.6, -1.4, 2.2, -0.9
    l[2, 3] = 0.0
    adv = rng.normal(0.0, 1.0, (B, T))
    adv[1, 0] = adv[3, 5] = adv[5, 1] = 0.0
    adv[0, 1], adv[1, 3], adv[3, 2], adv[4, 4], adv[2, 3] = 0.8, -1.1, 1.3, -0.6, 0.9  # the far ones are harmful
    put("a", lp, l, adv, relax_source.prefix_mask([8, 6, 8, 7, 5, 8], T, [(0, 3), (2, 1), (3, 4), (5, 5)]))

    # b: every |l| in [0.5, 3], a fully masked row 3, a row of zero advantages (5), a masked l = +15 at [0, 7]
    B, T = 8, 9
    lp = -rng.gamma(1.5, 0.8, (B, T))
    l = rng.uniform(0.5, 3.0, (B, T)) * rng.choice([-1.0, 1.0], (B, T))
    l[0, 7] = 15.0
    adv = rng.normal(0.0, 1.0, (B, T))
    adv[5] = 0.0
    adv[2, 4] = 0.0
    mask = relax_source.prefix_mask([6, 9, 5, 0, 8, 4, 9, 7], T, [(1, 4), (2, 2), (4, 3), (6, 2), (7, 5)])
    assert mask[0, 7] == 0
    put("b", lp, l, adv, mask)

    # c: harmful tokens near ratio 1, non-harmful tokens far from it
    B, T = 5, 7
    lp = -rng.gamma(1.5, 0.8, (B, T))
    adv = rng.normal(0.0, 1.0, (B, T))
    adv[0, 2] = adv[4, 0] = 0.0
    l = np.abs(rng.uniform(0.01, 0.12, (B, T))) * np.sign(adv)  # harmful: l has A's sign
    far = rng.random((B, T)) < 0.4
    l = np.where(far & (adv < 0), np.log(rng.uniform(4.0, 12.0, (B, T))), l)
    l = np.where(far & (adv > 0), np.log(rng.uniform(0.05, 0.3, (B, T))), l)
    l[0, 2] = 2.5  # A = 0: neither harmful nor clipped
    put("c", lp, l, adv, relax_source.prefix_mask([7, 5, 7, 4, 6], T, [(0, 3), (2, 1), (4, 2)]))

    # r: RLOO groups with ties
    rewards = [np.array([1.0, 0.0]), np.full(3, 0.9), np.full(4, 0.7), np.array([0.3, 1.2, 0.3, -0.5, 1.2]),
               rng.normal(0.0, 1.0, 6), np.full(6, 0.6), np.array([0.2, 0.2])]
    rewards[4][3] = rewards[4][1]
    assert tuple(len(g) for g in rewards) == RLOO_GROUPS
    x["in/r/rewards"] = f32(np.concatenate(rewards))
    x["in/r/group"] = np.repeat(np.arange(len(RLOO_GROUPS)), RLOO_GROUPS).astype(np.int32)
    return x


def cases_of(inputs: dict) -> dict:
    return {c: {k.split("/")[-1]: v for k, v in inputs.items() if k.startswith(f"in/{c}/")}
            for c in TOKEN_CASES + ("r",)}


def packed(a, mask):
    "Relax's layout: the valid tokens (mask > 0), flattened in row order."
    return np.asarray(a)[np.asarray(mask) > 0]


def read_text(source: str) -> str:
    "The file's text, from a git dir (at REVISION) or from a path."
    return relax_source.read_text(source, REVISION, FILE)


def definitions(text: str) -> tuple[list, str]:
    """The DEFINITIONS' top-level nodes in file order and the sha256 of their source segments; checked against the
    pins (the hash and the decorators)."""
    tree = ast.parse(text)
    nodes = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name in DEFINITIONS]
    names = tuple(n.name for n in nodes)
    if names != DEFINITIONS:
        raise SystemExit(f"{FILE}: found the definitions {names}, not {DEFINITIONS} in this order")
    digest = hashlib.sha256("".join(ast.get_source_segment(text, n) for n in nodes).encode("utf-8")).hexdigest()
    if digest != SHA256:
        raise SystemExit(f"{FILE}: sha256 of the definitions {digest} is not the pinned {SHA256} (@{REVISION})")
    for n in nodes:
        got = [ast.unparse(d) for d in n.decorator_list]
        if got != DECORATORS.get(n.name, []):
            raise SystemExit(f"{FILE}: {n.name} is decorated {got}, not {DECORATORS.get(n.name, [])}")
    return nodes, digest


def load_relax(nodes: list) -> types.ModuleType:
    """Execute the definitions unchanged in a fresh module holding torch, math, dist, F and Namespace, with
    torch.compile the identity for the duration of the exec (see the module docstring) and restored afterwards."""
    import math
    from argparse import Namespace

    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    name = "relax_ppo_utils_" + REVISION[:12]
    mod = types.ModuleType(name)
    mod.__file__ = f"{REPOSITORY}@{REVISION[:12]}:{FILE}"
    mod.__dict__.update(torch=torch, math=math, dist=dist, F=F, Namespace=Namespace)
    sys.modules[name] = mod
    compile_ = torch.compile
    with relax_source.torch_compile_is_identity():
        code = compile(ast.Module(body=nodes, type_ignores=[]), mod.__file__, "exec", dont_inherit=True)
        exec(code, mod.__dict__)
    assert torch.compile is compile_
    for fn in DEFINITIONS:
        assert getattr(mod, fn).__code__.co_filename == mod.__file__, fn  # the plain function, not a wrapper
    return mod


def main(argv: list[str]) -> int:
    import torch
    nodes, digest = definitions(read_text(argv[0]))
    relax = load_relax(nodes)
    inputs = make_inputs()
    arrays, records = dict(inputs), []

    def put(case, kind, value, function, settings, **params):
        key = "/".join(["relax", case, kind] + [f"{k}={params[k]}" for k in sorted(params)])
        assert key not in arrays, key
        if isinstance(value, torch.Tensor):
            value = value.detach()
            dtype = str(value.dtype)
            value = value.numpy()
        else:
            assert type(value) is float, (key, type(value))
            dtype = "python float"
        arrays[key] = np.asarray(value, np.float64)
        records.append(dict(key=key, framework="relax", case=case, kind=kind, params=params,
                            framework_function=f"{FILE}:{function}", settings=settings, dtype=dtype))

    cases = cases_of(inputs)
    packed_note = "inputs packed: the valid tokens (mask > 0) in row order, Relax's [total_tokens] layout"
    for case in TOKEN_CASES:
        x = cases[case]
        m = x["mask"]
        lp0, old = torch.tensor(packed(x["log_probs"], m)), torch.tensor(packed(x["old_log_probs"], m))
        adv = torch.tensor(packed(x["advantages"], m))
        for budget in KL2_BUDGETS:
            lp = lp0.clone().requires_grad_(True)
            pg_loss, clipfrac, m2_now, m2_after, eps_low, eps_high = relax.compute_m2po_loss(old - lp, adv, budget)
            pg_loss.sum().backward()
            s = (f"kl2_budget={budget}, miniclip_low=0.3, miniclip_high=0.5 (defaults); ppo_kl = old_log_probs - "
                 f"log_probs (from the differentiable log_probs); {packed_note}")
            fn = "compute_m2po_loss"
            put(case, "m2po_loss", pg_loss, fn, s + "; pg_loss", kl2_budget=budget)
            put(case, "m2po_clipfrac", clipfrac, fn, s + "; clipfrac", kl2_budget=budget)
            put(case, "m2po_grad", lp.grad, fn, s + "; d/d log_probs of pg_loss.sum(), torch autograd",
                kl2_budget=budget)
            for kind, v in (("m2po_m2_now", m2_now), ("m2po_m2_after", m2_after), ("m2po_eps_low", eps_low),
                            ("m2po_eps_high", eps_high)):
                put(case, kind, v, fn, s + "; " + kind[5:], kl2_budget=budget)
        for eps_clip, eps_clip_high, eps_clip_c in PPO_SETTINGS:
            lp = lp0.clone().requires_grad_(True)
            pg_losses, clipfrac = relax.compute_policy_loss(old - lp, adv, eps_clip, eps_clip_high, eps_clip_c)
            pg_losses.sum().backward()
            s = (f"eps_clip={eps_clip}, eps_clip_high={eps_clip_high}, eps_clip_c={eps_clip_c}; ppo_kl = "
                 f"old_log_probs - log_probs (from the differentiable log_probs); {packed_note}")
            p = dict(eps_clip=eps_clip, eps_clip_high=eps_clip_high, eps_clip_c=eps_clip_c)
            put(case, "ppo_loss", pg_losses, "compute_policy_loss", s + "; pg_losses", **p)
            put(case, "ppo_clipfrac", clipfrac, "compute_policy_loss", s + "; clipfrac", **p)
            put(case, "ppo_grad", lp.grad, "compute_policy_loss",
                s + "; d/d log_probs of pg_losses.sum(), torch autograd", **p)
        lp = lp0.clone().requires_grad_(True)
        pg_loss, clipfrac = relax.compute_rloo_loss(lp, adv)
        pg_loss.sum().backward()
        s = f"log_probs (differentiable), advantages = the case's advantages; {packed_note}"
        put(case, "rloo_loss", pg_loss, "compute_rloo_loss", s + "; pg_loss")
        put(case, "rloo_loss_clipfrac", clipfrac, "compute_rloo_loss", s + "; clipfrac")
        put(case, "rloo_loss_grad", lp.grad, "compute_rloo_loss",
            s + "; d/d log_probs of pg_loss.sum(), torch autograd")

    r, group = cases["r"]["rewards"], cases["r"]["group"]
    for g in range(len(RLOO_GROUPS)):
        put("r", "rloo_loo", relax.compute_rloo_leave_one_out_rewards(torch.tensor(r[group == g])),
            "compute_rloo_leave_one_out_rewards", f"group_rewards = rewards[group == {g}] (1-D float32)", group=g)

    not_run = [dict(framework="relax", framework_function=f"{FILE}:{f}", dew_rl="-", why=why) for f, why in (
        ("compute_cispo_loss, compute_sapo_loss, compute_approx_kl, compute_opsm_mask, vanilla_gae, chunked_gae",
         "frozen at an earlier revision by tools/make_relax_ppo_fixtures.py (tests/fixtures/ppo_relax.npz)"),
        ("the rest of the file", "megatron plumbing, torch.distributed all-reduces, checkpoint helpers; outside "
         "this fixture's brief"))]
    relax_source.save_fixture(OUT, ROOT, arrays, dict(
        framework="relax", version=f"Relax {REPOSITORY}@{REVISION}", revision=REVISION, file=FILE,
        definitions=list(DEFINITIONS), sha256=digest,
        how=f"the definitions above taken from the syntax tree of {FILE} at the revision (sha256 of their source "
        "segments checked) and executed unchanged (decorators included) in a fresh module namespace holding torch, "
        "math, dist, F, Namespace, torch.compile the identity decorator during the exec (the functions run "
        "eagerly), and called (tools/make_relax_ppo2_fixtures.py), torch " + torch.__version__,
        records=records, failed=[], not_run=not_run))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
