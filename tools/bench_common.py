"""What every side of `make bench` shares: the seeded inputs, the case list, and the timing loop.

Imported by the driver (tools/bench.py) and by each framework's side (tools/bench_sides/*.py), which
run in different interpreters; it needs NumPy only. A side is a process that loads the inputs once,
then answers requests on stdin, one JSON object per line:

    {"case": "gae@64x2048", "repeat": 20}  ->  {"case": ..., "times": [...], "compile": s or null}

`compile` is the compilation of a case where the side can time it alone (dew_rl: `jit(...).lower().compile()`),
otherwise its first call (tracing + compilation inside rlax's and Tunix's own jit, the first eager call
for torch); either way it is kept out of the steady-state times. A JAX side may add `temp_bytes`, the compiled
function's temporary memory (`memory_analysis()`), which is deterministic.
"""
from __future__ import annotations

import json
import sys
import time

import numpy as np

SEED = 20261201
GROUP = 8
KL_COEF = 0.001

# name -> (B, T): the shapes the cases read. "...@64xT" rows form the sweeps over T, "...@Bx2048" the sweeps over B.
SHAPES = {
    "64x2048": (64, 2048),
    "256x8192": (256, 8192),
    "256x4096": (256, 4096),
    "8x128": (8, 128),  # the per-call overhead, where the work does not dominate
    **{f"64x{t}": (64, t) for t in (256, 512, 1024, 4096, 8192)},
    **{f"{b}x2048": (b, 2048) for b in (16, 256, 1024)},
}
T_SWEEP = (256, 512, 1024, 2048, 4096, 8192)
B_SWEEP = (16, 64, 256, 1024)
GROUP_B = 4096

CASES = [
    *[f"gae@64x{t}" for t in T_SWEEP],
    *[f"gae@{b}x2048" for b in B_SWEEP if b != 64],
    "gae@256x8192",
    # the same outputs by the two-level recursion (nbs/02a_gae: C + T/C sequential steps instead of T)
    *[f"gae_two_level@64x{t}" for t in T_SWEEP],
    *[f"gae_two_level@{b}x2048" for b in B_SWEEP if b != 64],
    "gae_two_level@256x8192",
    "gae@8x128",
    # two more formulations of the same outputs, timed here only (tools/gae_forms.py): an associative scan over
    # the affine maps of the recursion, and blocks of 8 positions scanned associatively, joined by a scan
    *[f"{form}@{s}" for form in ("gae_associative", "gae_blocked8") for s in ("64x2048", "64x8192", "256x2048")],
    "group_advantage@4096",
    "global_normalize@256x4096",
    *[f"aggregate:{m}@256x4096" for m in ("token-mean", "token-sum", "seq-mean-token-sum", "seq-mean-token-mean",
                                          "seq-mean-token-sum-norm")],
    "masked_mean@256x4096",
    "masked_whiten@256x4096",
    *[f"aggregate:seq-mean-token-mean@64x{t}" for t in T_SWEEP],
    *[f"aggregate:seq-mean-token-mean@{b}x2048" for b in B_SWEEP if b != 64],
    "aggregate:seq-mean-token-mean@8x128",
    *[f"{k}@256x4096" for k in ("k1", "k2", "k3")],
    "k3@64x2048",
    "ppo_dual_clip+token_mean:fwd@256x4096",
    "ppo_dual_clip+token_mean:fwd+bwd@256x4096",
    "ppo_dual_clip+response_mean:fwd@256x4096",
    "ppo_dual_clip+response_mean:fwd+bwd@256x4096",
    "objective:grpo:fwd+bwd@256x4096",
    "objective:reinforce_plus_plus_baseline:fwd+bwd@256x4096",
    # What one pass costs on this machine: the building blocks every loss above is made of.
    "primitive:copy@256x4096",
    "primitive:masked_sum@256x4096",
    "primitive:masked_sum+count@256x4096",
    "primitive:scan@64x2048",
    "primitive:gather@64x2048",
    "primitive:blocked_matmul@64x2048",
    "primitive:masked_whiten@64x2048",
    # the one-pass masked sum and count (tools/reduction_forms.py: a variadic reduction over 16 slices of each
    # row; reverted from the library), and the same variadic reduction over the whole row and over 32 slices
    "primitive:masked_row_sums@256x4096",
    "primitive:variadic_row@256x4096",
    "primitive:variadic_slices32@256x4096",
    # the same two forms on exp(x): a value computed in front of the reduction, as in a loss
    "primitive:exp_masked_sum+count@256x4096",
    "primitive:exp_masked_row_sums@256x4096",
]

# cases that a dew_rl checkout from before the formulation existed cannot run (`bench.py --baseline`)
NEW_CASES = ("gae_associative", "gae_blocked8", "primitive:")


# XLA:CPU settings the dew_rl side is also run under, on the cases below (label -> XLA_FLAGS): what the
# compiler's own switches change on this machine. A library cannot set them for its user; a user can.
XLA_VARIANTS = {
    "dew_rl[ynn off]": "--xla_cpu_experimental_ynn_fusion_type=",
    "dew_rl[xnnpack on]": "--xla_cpu_use_xnnpack=true",
    "dew_rl[no eigen threads]": "--xla_cpu_multi_thread_eigen=false",
    "dew_rl[no fusion emitters]": "--xla_cpu_use_fusion_emitters=false",
}
VARIANT_CASES = [
    "gae@64x2048",
    "aggregate:token-mean@256x4096",
    "aggregate:seq-mean-token-mean@256x4096",
    "k3@256x4096",
    "ppo_dual_clip+token_mean:fwd@256x4096",
    "primitive:copy@256x4096",
    "primitive:masked_sum@256x4096",
]


def shape_of(case: str) -> str:
    return case.rsplit("@", 1)[1]


def inputs(shape: str) -> dict:
    """Seeded float32 inputs of one shape: a mask with padding, interior holes and one empty row."""
    if shape == str(GROUP_B):
        rng = np.random.default_rng(SEED + 1)
        return {"scores": rng.normal(size=GROUP_B).astype(np.float32)}
    B, T = SHAPES[shape]
    rng = np.random.default_rng(SEED + B * 100003 + T)
    lengths = rng.integers(max(T // 4, 1), T + 1, size=B)
    mask = np.arange(T)[None, :] < lengths[:, None]
    mask &= rng.random((B, T)) >= 0.02  # holes: tool-output or padding tokens inside a response
    mask[min(3, B - 1)] = False  # an empty row
    f = lambda *s: rng.normal(size=s).astype(np.float32)
    lp = (f(B, T) * 0.5 - 1.0).astype(np.float32)
    return {
        "mask": mask.astype(np.float32),
        "token_rewards": (f(B, T) * 0.1 * mask).astype(np.float32),
        "values": f(B, T),
        "log_probs": lp,
        "old_log_probs": (lp + f(B, T) * 0.05).astype(np.float32),
        "ref_log_probs": (lp + f(B, T) * 0.1).astype(np.float32),
        "advantages": f(B, T),
        "rewards": rng.integers(0, 2, size=B).astype(np.float32),
    }


def timed(fn, repeat: int) -> list:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def serve(build, has) -> None:
    """The side's request loop. `build(case, inputs) -> zero-argument callable that blocks until done`;
    `has(case) -> bool`. Prints the cases it has, then answers requests until stdin closes."""
    print(json.dumps({"cases": [c for c in CASES if has(c)]}), flush=True)
    cache, data = {}, {}
    for line in sys.stdin:
        req = json.loads(line)
        case = req["case"]
        compile_s = None
        if case not in cache:
            shape = shape_of(case)
            if shape not in data:
                data[shape] = inputs(shape)
            fn = build(case, data[shape])
            extra = {}
            if isinstance(fn, tuple):
                fn, extra = fn
            t0 = time.perf_counter()
            fn()
            compile_s = extra.pop("compile_s", time.perf_counter() - t0)
            fn()  # one more warm-up call: allocator and caches
            cache[case] = fn, extra
        fn, extra = cache[case]
        print(json.dumps({"case": case, "times": timed(fn, int(req["repeat"])), "compile": compile_s, **extra}),
              flush=True)


# The vocabulary-path benchmarks' torch side (tools/bench_logits.py, bench_logits_forms.py, bench_accel.py):
# the naive step, spliced into each child script at module level, where `h`, `w` and `tok` are defined.
TORCH_NAIVE_STEP = """
def torch_naive_step():
    logp = torch.log_softmax(h @ w, dim=-1)
    lp = logp.gather(-1, tok[:, None])[:, 0]
    ent = -(logp.exp() * logp).sum(-1)
    (lp.sum() + ent.sum()).backward()
    h.grad = None; w.grad = None
"""
NO_TORCH = "no torch: DEW_RL_TORCH_PYTHON not set and the verl environment of tools/refenvs.py not built"


def torch_python():
    "(interpreter, None): DEW_RL_TORCH_PYTHON, else the verl environment's python; (None, why) without either."
    import os
    py = os.environ.get("DEW_RL_TORCH_PYTHON")
    if py:
        return py, None
    import refenvs  # tools/ is on the path of every bench script
    if refenvs.ready("verl"):
        return str(refenvs.python("verl")), None
    return None, NO_TORCH
