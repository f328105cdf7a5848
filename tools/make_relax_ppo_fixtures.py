"""Freeze Relax's PPO-family primitives (CISPO, SAPO, OPSM, the approximate KL, GAE) on inputs drawn here:
tests/fixtures/ppo_relax.npz.

Relax (redai-infra/Relax) is not on the package index. These primitives live in one file,
relax/utils/training/ppo_utils.py, whose top-level imports are `argparse.Namespace`, `torch`, `torch.distributed` and
`torch.nn.functional` (the functions that need megatron import it lazily in their bodies; none of them is called
here). This script takes as first argument either the git directory of a Relax checkout (it then reads the file at
REVISION with `git --git-dir D show REVISION:relax/utils/training/ppo_utils.py`) or the path of that file, checks
that the text's sha256 is SHA256 (the text at REVISION; the frozen outputs are tied to it), executes the text
unchanged in a fresh module namespace (`compile(..., dont_inherit=True)`, so none of this script's future flags leak
in) and calls Relax's own functions. It runs in the `trl` environment of tools/refenvs.py (torch 2.13.0):

    ~/.cache/dew_rl/refenvs/trl/bin/python tools/make_relax_ppo_fixtures.py /path/to/relax/utils/training/ppo_utils.py

`torch.compile` is the identity decorator while the text executes (restored right after, even on an error): several
of the functions carry `@torch.compile(dynamic=True)`, and compiling them runs TorchInductor, which generates C++ and
builds it (it needs a working C++ toolchain and a writable build cache, which a reference environment cannot be
assumed to have), while compilation does not change what the functions compute: they are element-wise float32 torch
code, here run eagerly exactly as written. Checked once outside this script (torch 2.13.0+cpu, g++ present, the
inductor FX-graph and AOT-autograd caches off: TORCHINDUCTOR_FX_GRAPH_CACHE=0 TORCHINDUCTOR_AUTOGRAD_CACHE=0): the
compiled functions reproduce every frozen CISPO, SAPO and approximate-KL output within 3.8e-6 (float32 round-off of
outputs up to 3e5). With those caches on (torch's default), the compiled `compute_cispo_loss`, called again with
another eps_clip, returned a pg_loss whose A < 0 clamp kept an eps_clip compiled earlier (in the same process, or in
an earlier one through the on-disk cache) while its clipfrac followed the new one (off by up to 4.5 in case c):
one more reason to freeze the code as written rather than what a compiler cache hands back.

Nothing of Relax is copied into this repository: the outputs go to the fixture, with the revision, the file, its
sha256 and the settings in the .json next to it.

Inputs (drawn by the torch-free `make_inputs` with a fixed seed, stored under in/<case>/<name>; float32 except the
int32 OPSM lengths):

* token cases `a` (B 6, T 7), `b` (B 8, T 9), `c` (B 5, T 6): log_probs, old_log_probs, ref_log_probs, advantages,
  mask [B, T]. Interior holes in every mask, a fully masked row in `b`, log-ratios log pi - log pi_old far from 0
  both ways (+3.0, -4.0 in `b`; every |l| in [1.5, 4] in `c`), advantages of both signs with exact zeros (a row of
  zeros in `b`), ref log-ratios d = log pi_ref - log pi with k3 = e^d - 1 - d above 10 (d = 3.0 in `a`, 4.0 in
  `b`) and with pi/pi_old * k3 above 10 while k3 is below (`a` [0, 1]);
* OPSM case `o` (B 8, T 9; row i is the sample of length lengths[i], the rest of the row is padding): log_probs,
  old_log_probs, advantages, mask, lengths. Row 3 is fully loss-masked; rows 5 and 6 have advantages of both signs
  (row 5 with a positive mean, row 6 with a negative one); row 0 is dropped and has negative advantages on loss-masked
  positions;
* GAE cases `g1` (B 5, T 11, lengths 11, 7, 11, 0, 4) and `g2` (B 4, T 6): rewards, values, mask. Rewards and values
  are zero past each row's length, as Relax's `get_advantages_and_returns_batch` pads them; mask is the prefix mask.

Recorded (key relax/<case>/<kind>/<param>=<v>, float64 copies of Relax's float32 outputs):

* `compute_cispo_loss(log_probs, ppo_kl, advantages, eps_clip, eps_clip_high)` with ppo_kl = old_log_probs -
  log_probs (Relax's convention, built from the differentiable log-probs): kinds `cispo_loss` (pg_loss),
  `cispo_clipfrac` and `cispo_grad` (d/d log_probs of (pg_loss * mask).sum(), torch autograd), for (eps_clip,
  eps_clip_high) = (0.2, 0.28) and (1.0, 0.28), cases a, b, c;
* `compute_sapo_loss(ppo_kl, advantages, tau_pos, tau_neg)`: kinds `sapo_loss`, `sapo_clipfrac`, `sapo_grad` (the
  gradient reaches log_probs through ppo_kl), tau (1.0, 1.05), cases a, b, c;
* `compute_approx_kl(log_probs, ref_log_probs, kl_loss_type, importance_ratio)` for kl_loss_type k1, k2, k3,
  low_var_kl, with importance_ratio None (param importance=none) and exp(log_probs - old_log_probs) with its
  gradient (importance=ratio, as Relax's loss builds it under --use-unbiased-kl): kinds `approx_kl` and
  `approx_kl_grad` (d/d log_probs of (kl * mask).sum()), cases a, b, c;
* `compute_opsm_mask(Namespace(opsm_delta=delta), ...)` on the per-sample lists (row i cut to lengths[i]): kinds
  `opsm_mask` (Relax's concatenated per-token mask, length sum(lengths)) and `opsm_clipfrac` (scalar), delta 0.1 and
  0.3, case o;
* `vanilla_gae(rewards, values, gamma, lambd)` and `chunked_gae(..., chunk_size=4)` (param impl; T = 11 and 6 are
  not multiples of 4, so the padding is exercised): kinds `gae_adv`, `gae_ret`, for (gamma, lambd) = (1.0, 1.0),
  (1.0, 0.95), (0.99, 0.9), (0.9, 0.0) (the last takes chunked_gae's w == 0 branch), cases g1, g2.

tests/test_ppo_relax.py compares dew_rl's `signed_cispo_terms`, `sapo_terms`, `kl_penalty`,
`importance_weighted_kl`, `opsm_mask`, `gae_raw` and `gae` with the frozen outputs.
"""
from __future__ import annotations

import sys
import types
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import relax_source  # noqa: E402  (tools/relax_source.py)

ROOT = Path(__file__).resolve().parent.parent
REVISION = "d09ff62a4942d01b5bebe963b14d03fa30f25ebe"
FILE = "relax/utils/training/ppo_utils.py"
SHA256 = "d18932ce31601763e770840e95220ca7e6a60b4f6ed05a92000ff9052f610140"
OUT = ROOT / "tests" / "fixtures" / "ppo_relax.npz"
SEED = 20260518
TOKEN_CASES = ("a", "b", "c")
GAE_CASES = ("g1", "g2")
CISPO_SETTINGS = ((0.2, 0.28), (1.0, 0.28))   # (eps_clip, eps_clip_high)
SAPO_SETTINGS = ((1.0, 1.05),)                # (tau_pos, tau_neg)
KL_TYPES = ("k1", "k2", "k3", "low_var_kl")
IMPORTANCE = ("none", "ratio")
OPSM_DELTAS = (0.1, 0.3)
GAE_SETTINGS = ((1.0, 1.0), (1.0, 0.95), (0.99, 0.9), (0.9, 0.0))  # (gamma, lambd)
GAE_IMPLS = ("vanilla", "chunked")
CHUNK_SIZE = 4


def make_inputs() -> dict:
    """Every input under in/<case>/<name>; numpy only (tests/test_ppo_relax.py re-draws them)."""
    rng = np.random.default_rng(SEED)
    f32 = lambda a: np.asarray(a, np.float32)  # noqa: E731
    x = {}

    def put(case, lp, l, d, adv, mask):
        "l: log pi - log pi_old; d: log pi_ref - log pi."
        x[f"in/{case}/log_probs"] = f32(lp)
        x[f"in/{case}/old_log_probs"] = f32(lp - l)
        x[f"in/{case}/ref_log_probs"] = f32(lp + d)
        x[f"in/{case}/advantages"] = f32(adv)
        x[f"in/{case}/mask"] = f32(mask)

    # a: moderate log-ratios with a few far from 0; k3 > 10 at [2, 5]; r * k3 > 10 > k3 at [0, 1]
    B, T = 6, 7
    lp = -rng.gamma(1.5, 0.8, (B, T))
    l = rng.normal(0.0, 0.4, (B, T))
    l[0, 1], l[1, 3], l[3, 2], l[4, 4] = 1.2, -2.0, 0.6, -0.7
    d = rng.normal(0.0, 0.5, (B, T))
    d[0, 1], d[2, 5], d[5, 3] = 2.0, 3.0, -3.0
    adv = rng.normal(0.0, 1.0, (B, T))
    adv[1, 0] = adv[3, 5] = adv[5, 1] = 0.0
    put("a", lp, l, d, adv, relax_source.prefix_mask([7, 5, 7, 6, 5, 7], T, [(0, 3), (2, 1), (3, 4), (5, 5)]))

    # b: fully masked row 3, GRPO-like per-row advantages (row 5 all exact zeros), ratios 20 and 0.018,
    #    k3 ~ 49.6 at [6, 6], a masked log-ratio +15 at [0, 7]
    B, T = 8, 9
    lp = -rng.gamma(1.5, 0.8, (B, T))
    l = rng.normal(0.0, 0.7, (B, T))
    l[1, 2], l[6, 4], l[0, 7] = 3.0, -4.0, 15.0
    d = rng.normal(0.0, 0.8, (B, T))
    d[4, 1], d[6, 6] = -5.0, 4.0
    adv = np.repeat(rng.normal(0.0, 1.0, (B, 1)), T, 1)
    adv[5] = 0.0
    adv[2, 4] = 0.0
    mask = relax_source.prefix_mask([6, 9, 5, 0, 8, 4, 9, 7], T, [(1, 4), (2, 2), (4, 3), (6, 2), (7, 5)])
    assert mask[0, 7] == 0 and mask[1, 2] == 1 and mask[6, 4] == 1 and mask[6, 6] == 1 and mask[4, 1] == 1
    put("b", lp, l, d, adv, mask)

    # c: every ratio far from 1 (|l| in [1.5, 4], both signs)
    B, T = 5, 6
    lp = -rng.gamma(1.5, 0.8, (B, T))
    l = rng.uniform(1.5, 4.0, (B, T)) * rng.choice([-1.0, 1.0], (B, T))
    d = rng.uniform(-2.0, 2.0, (B, T))
    adv = rng.normal(0.0, 1.0, (B, T))
    adv[0, 2] = adv[4, 0] = 0.0
    put("c", lp, l, d, adv, relax_source.prefix_mask([6, 4, 6, 3, 5], T, [(0, 3), (2, 1), (4, 2)]))

    # o: OPSM; row i is a sample of length lengths[i]; per-row drift mean(old - lp) set around the deltas
    B, T = 8, 9
    lengths = np.array([9, 6, 8, 3, 9, 7, 5, 9], np.int32)
    drift = np.array([0.45, 0.2, -0.1, 0.6, 0.38, 0.16, 0.52, 0.04])
    lp = -rng.gamma(1.5, 0.8, (B, T))
    old = lp + drift[:, None] + rng.normal(0.0, 0.05, (B, T))
    sign = np.array([-1, -1, -1, -1, 1, 0, 0, -1], np.float64)
    adv = sign[:, None] * rng.uniform(0.2, 1.5, (B, T))
    adv[5] = rng.uniform(0.2, 1.5, T) * np.array([1, -1, 1, 1, -1, 1, 1, -1, 1])   # mixed, mean > 0
    adv[6] = rng.uniform(0.2, 1.5, T) * np.array([-1, 1, -1, 1, -1, -1, 1, 1, 1])  # mixed, valid mean < 0
    adv[1, 2] = adv[7, 3] = 0.0
    mask = relax_source.prefix_mask(lengths, T, [(0, 2), (0, 6), (1, 3), (4, 5), (5, 2), (6, 3)])
    mask[3] = 0.0  # a sample with no loss token
    pad = np.arange(T)[None, :] >= lengths[:, None]
    old = np.where(pad, lp + 9.0, old)  # padding: never read by Relax, masked for dew_rl
    x["in/o/log_probs"] = f32(lp)
    x["in/o/old_log_probs"] = f32(old)
    x["in/o/advantages"] = f32(adv)
    x["in/o/mask"] = f32(mask)
    x["in/o/lengths"] = lengths

    # g1, g2: GAE on zero-padded rows (Relax's batch padding), prefix masks
    for case, lengths in (("g1", [11, 7, 11, 0, 4]), ("g2", [6, 6, 3, 5])):
        B, T = len(lengths), max(lengths)
        m = relax_source.prefix_mask(lengths, T)
        r = rng.normal(0.0, 0.05, (B, T))  # per-token shaping (a KL penalty, say)
        for i, n in enumerate(lengths):
            if n:
                r[i, n - 1] += rng.choice([-1.0, 1.0, 2.0])  # the outcome reward on the last token
        if case == "g2":
            r += rng.normal(0.0, 1.0, (B, T))  # dense rewards
        v = rng.normal(0.3, 0.8, (B, T))
        x[f"in/{case}/rewards"] = f32(r * m)
        x[f"in/{case}/values"] = f32(v * m)
        x[f"in/{case}/mask"] = f32(m)
    return x


def cases_of(inputs: dict) -> dict:
    cases = TOKEN_CASES + ("o",) + GAE_CASES
    return {c: {k.split("/")[-1]: v for k, v in inputs.items() if k.startswith(f"in/{c}/")} for c in cases}


def read_relax(source: str) -> str:
    "The file's text, from a git dir (at REVISION) or from a path; checked against the pinned sha256."
    return relax_source.read_checked(source, REVISION, FILE, SHA256)


def load_relax(text: str) -> types.ModuleType:
    """Execute the file's text unchanged in a fresh module, with torch.compile the identity for the duration of the
    exec (see the module docstring) and restored afterwards."""
    import torch
    mod = relax_source.fresh_module("relax_ppo_utils_" + REVISION[:12], f"redai-infra/Relax@{REVISION[:12]}:{FILE}")
    compile_ = torch.compile
    with relax_source.torch_compile_is_identity():
        exec(compile(text, mod.__file__, "exec", dont_inherit=True), mod.__dict__)
    assert torch.compile is compile_
    for fn in ("compute_cispo_loss", "compute_sapo_loss", "compute_approx_kl", "compute_policy_loss"):
        assert getattr(mod, fn).__code__.co_filename == mod.__file__, fn  # the plain function, not a wrapper
    return mod


def main(argv: list[str]) -> int:
    from argparse import Namespace

    import torch
    relax = load_relax(read_relax(argv[0]))
    inputs = make_inputs()
    arrays, records = dict(inputs), []

    def put(case, kind, value, function, settings, **params):
        key = "/".join(["relax", case, kind] + [f"{k}={params[k]}" for k in sorted(params)])
        assert key not in arrays, key
        value = value.detach()
        arrays[key] = np.asarray(value.numpy(), np.float64)
        records.append(dict(key=key, framework="relax", case=case, kind=kind, params=params,
                            framework_function=f"{FILE}:{function}", settings=settings, dtype=str(value.dtype)))

    cases = cases_of(inputs)
    for case in TOKEN_CASES:
        x = cases[case]
        old, ref = torch.tensor(x["old_log_probs"]), torch.tensor(x["ref_log_probs"])
        adv, mask = torch.tensor(x["advantages"]), torch.tensor(x["mask"])
        for eps_clip, eps_clip_high in CISPO_SETTINGS:
            lp = torch.tensor(x["log_probs"], requires_grad=True)
            pg_loss, clipfrac = relax.compute_cispo_loss(lp, old - lp, adv, eps_clip, eps_clip_high)
            (pg_loss * mask).sum().backward()
            s = (f"eps_clip={eps_clip}, eps_clip_high={eps_clip_high}; ppo_kl = old_log_probs - log_probs (from the "
                 "differentiable log_probs); unmasked per-token output")
            p = dict(eps_clip=eps_clip, eps_clip_high=eps_clip_high)
            put(case, "cispo_loss", pg_loss, "compute_cispo_loss", s + "; pg_loss", **p)
            put(case, "cispo_clipfrac", clipfrac, "compute_cispo_loss", s + "; clipfrac", **p)
            put(case, "cispo_grad", lp.grad, "compute_cispo_loss",
                s + "; d/d log_probs of (pg_loss * mask).sum(), torch autograd", **p)
        for tau_pos, tau_neg in SAPO_SETTINGS:
            lp = torch.tensor(x["log_probs"], requires_grad=True)
            pg_loss, clipfrac = relax.compute_sapo_loss(old - lp, adv, tau_pos, tau_neg)
            (pg_loss * mask).sum().backward()
            s = (f"tau_pos={tau_pos}, tau_neg={tau_neg}; ppo_kl = old_log_probs - log_probs (from the differentiable "
                 "log_probs); unmasked per-token output")
            p = dict(tau_pos=tau_pos, tau_neg=tau_neg)
            put(case, "sapo_loss", pg_loss, "compute_sapo_loss", s + "; pg_loss", **p)
            put(case, "sapo_clipfrac", clipfrac, "compute_sapo_loss", s + "; clipfrac (4 s (1 - s) < 0.9)", **p)
            put(case, "sapo_grad", lp.grad, "compute_sapo_loss",
                s + "; d/d log_probs of (pg_loss * mask).sum() through ppo_kl, torch autograd", **p)
        for kl_type in KL_TYPES:
            for importance in IMPORTANCE:
                lp = torch.tensor(x["log_probs"], requires_grad=True)
                ratio = torch.exp(lp - old) if importance == "ratio" else None
                kl = relax.compute_approx_kl(lp, ref, kl_loss_type=kl_type, importance_ratio=ratio)
                (kl * mask).sum().backward()
                s = (f"kl_loss_type={kl_type!r}, importance_ratio="
                     + ("torch.exp(log_probs - old_log_probs) (gradient through it, as Relax's loss builds it)"
                        if ratio is not None else "None") + "; log_probs_base = ref_log_probs; unmasked output")
                p = dict(kl_loss_type=kl_type, importance=importance)
                put(case, "approx_kl", kl, "compute_approx_kl", s, **p)
                put(case, "approx_kl_grad", lp.grad, "compute_approx_kl",
                    s + "; d/d log_probs of (kl * mask).sum(), torch autograd", **p)

    x = cases["o"]
    n = [int(v) for v in x["lengths"]]
    cut = lambda a: [torch.tensor(a[i, :n[i]]) for i in range(len(n))]  # noqa: E731
    for delta in OPSM_DELTAS:
        opsm, clipfrac = relax.compute_opsm_mask(Namespace(opsm_delta=delta), cut(x["log_probs"]),
                                                 cut(x["old_log_probs"]), cut(x["advantages"]), cut(x["mask"]))
        s = (f"args = Namespace(opsm_delta={delta}); per-sample lists: row i of log_probs, old_log_probs, advantages, "
             "mask cut to lengths[i]")
        put("o", "opsm_mask", opsm, "compute_opsm_mask", s + "; opsm_mask (concatenated over the samples)",
            opsm_delta=delta)
        put("o", "opsm_clipfrac", clipfrac, "compute_opsm_mask", s + "; opsm_clipfrac", opsm_delta=delta)

    for case in GAE_CASES:
        x = cases[case]
        r, v = torch.tensor(x["rewards"]), torch.tensor(x["values"])
        for gamma, lambd in GAE_SETTINGS:
            for impl in GAE_IMPLS:
                if impl == "vanilla":
                    adv, ret = relax.vanilla_gae(r, v, gamma, lambd)
                    fn, s = "vanilla_gae", f"gamma={gamma}, lambd={lambd}"
                else:
                    adv, ret = relax.chunked_gae(r, v, gamma, lambd, chunk_size=CHUNK_SIZE)
                    fn, s = "chunked_gae", f"gamma={gamma}, lambd={lambd}, chunk_size={CHUNK_SIZE}"
                s += "; rewards, values zero past each row's length (Relax's batch padding)"
                p = dict(impl=impl, gamma=gamma, lambd=lambd)
                put(case, "gae_adv", adv, fn, s + "; advantages", **p)
                put(case, "gae_ret", ret, fn, s + "; returns", **p)

    not_run = [dict(framework="relax", framework_function=f"{FILE}:{f}", dew_rl="-", why=why) for f, why in (
        ("compute_policy_loss", "PPO's clipped surrogate: outside this fixture's brief (dew_rl's "
         "clipped_surrogate_terms is compared against other frameworks)"),
        ("compute_gspo_kl", "a per-sequence mean broadcast to tokens; outside this fixture's brief"),
        ("get_advantages_and_returns, get_advantages_and_returns_batch, get_reinforce_plus_plus_returns",
         "import megatron (mpu) in their bodies; their GAE core, vanilla_gae / chunked_gae, is run"),
        ("compute_log_probs, compute_entropy_from_logits, calculate_log_probs_and_entropy",
         "megatron's fused vocab-parallel cross entropy and torch.distributed all-reduces"),
        ("get_grpo_returns, get_reinforce_plus_plus_baseline_advantages", "broadcasts; outside this fixture's brief"))]
    relax_source.save_fixture(OUT, ROOT, arrays, dict(
        framework="relax", version=f"Relax redai-infra/Relax@{REVISION}", revision=REVISION, file=FILE,
        sha256=SHA256, how=f"the text of {FILE} at the revision (sha256 checked) executed unchanged in a fresh module "
        "namespace, torch.compile the identity decorator during the exec (the functions run eagerly), and its "
        "functions called (tools/make_relax_ppo_fixtures.py), torch " + torch.__version__,
        records=records, failed=[], not_run=not_run))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
