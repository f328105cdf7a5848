"""Speed of dew_rl against verl 0.9.1, as ratios measured in one run (`make bench`).

dew_rl runs jitted on this machine's default JAX device, float32, at a typical post-training batch
(B = 64 responses of T = 2048 tokens, groups of 8). verl runs in its own interpreter, named by
DEW_RL_VERL_PYTHON (an environment with torch 2.13.0 and verl 0.9.1, see the docstring of
tools/make_verl_fixtures.py), on the same shapes as float32 torch CPU tensors. Without it the
ratios are against float64 NumPy implementations of the same formulas, and say so.

Each timing is the median of repeated calls after a warm-up (compilation excluded, as it is paid
once per shape in training). Speed is reported, never asserted: tests do not time anything.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import dew_rl as rl

B, T, G, REPEAT = 64, 2048, 8, 20


def median_time(fn, repeat=REPEAT):
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def inputs(seed=0):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(T // 4, T + 1, size=B)
    mask = (np.arange(T)[None, :] < lengths[:, None]).astype(np.float32)
    f = lambda *s: rng.normal(size=s).astype(np.float32)
    return dict(mask=mask, rewards=f(B, T) * mask, values=f(B, T), lp=f(B, T) - 1, ref=f(B, T) - 1,
                old=f(B, T) - 1, adv=f(B, T), scores=f(B))


def dew_rl_cases(x):
    j = {k: jnp.asarray(v) for k, v in x.items()}
    block = lambda f: (lambda: jax.block_until_ready(f()))
    gae = jax.jit(lambda r, v, m: rl.gae(r, v, m, 1.0, 0.95))
    grpo = jax.jit(lambda s: rl.group_advantage(s, G))
    k3 = jax.jit(rl.k3_kl)
    agg = jax.jit(lambda l, m: rl.aggregate(l, m, "seq-mean-token-mean"))
    ppo = jax.jit(lambda lp, old, a, m: rl.clipped_surrogate(rl.token_log_ratio(lp, old), a, m, 0.2, 0.28, 3.0))
    return {
        "gae": block(lambda: gae(j["rewards"], j["values"], j["mask"])),
        "group_advantage": block(lambda: grpo(j["scores"])),
        "k3_kl": block(lambda: k3(j["lp"], j["ref"])),
        "aggregate seq-mean-token-mean": block(lambda: agg(j["adv"], j["mask"])),
        "clipped_surrogate (dual clip)": block(lambda: ppo(j["lp"], j["old"], j["adv"], j["mask"])),
    }


def numpy_cases(x):
    m = x["mask"].astype(np.float64)

    def gae():
        r, v = x["rewards"].astype(np.float64), x["values"].astype(np.float64)
        a_next = np.zeros(B); v_next = np.zeros(B); out = np.zeros((B, T))
        for t in reversed(range(T)):
            a = r[:, t] + v_next - v[:, t] + 0.95 * a_next
            a_next = np.where(m[:, t] > 0, a, a_next); v_next = np.where(m[:, t] > 0, v[:, t], v_next)
            out[:, t] = a_next
        mu = (out * m).sum() / m.sum()
        var = ((out - mu) ** 2 * m).sum() / (m.sum() - 1)
        return (out - mu) / np.sqrt(var + 1e-8), out + v

    def grpo():
        s = x["scores"].astype(np.float64).reshape(-1, G)
        return (s - s.mean(1, keepdims=True)) / (s.std(1, ddof=1, keepdims=True) + 1e-6)

    def k3():
        d = np.clip(x["ref"].astype(np.float64) - x["lp"], -20, 20)
        return np.clip(np.expm1(d) - d, -10, 10)

    def agg():
        return ((x["adv"] * m).sum(1) / np.maximum(m.sum(1), 1)).mean()

    def ppo():
        rho = np.exp(np.clip(x["lp"].astype(np.float64) - x["old"], -20, 20)); a = x["adv"]
        l = np.maximum(-a * rho, -a * np.clip(rho, 0.8, 1.28)); l = np.where(a < 0, np.minimum(l, -3 * a), l)
        return (l * m).sum() / m.sum()

    return {"gae": gae, "group_advantage": grpo, "k3_kl": k3, "aggregate seq-mean-token-mean": agg,
            "clipped_surrogate (dual clip)": ppo}


VERL_SIDE = textwrap.dedent('''
    import json, statistics, sys, time
    import numpy as np, torch
    from verl.trainer.ppo import core_algos as ca
    from verl.workers.config.actor import ActorConfig, PolicyLossConfig
    B, T, G, REPEAT = %(B)d, %(T)d, %(G)d, %(REPEAT)d
    x = {k: torch.tensor(np.asarray(v, dtype=np.float32)) for k, v in np.load(sys.argv[1]).items()}
    m = x["mask"]
    index = np.array([str(i // G) for i in range(B)], dtype=object)
    last = m * (torch.cumsum(m, 1) == m.sum(1, keepdim=True))
    cfg = ActorConfig(strategy="fsdp", rollout_n=1, ppo_micro_batch_size_per_gpu=1, clip_ratio=0.2, clip_ratio_low=0.2,
                      clip_ratio_high=0.28, clip_ratio_c=3.0, loss_agg_mode="token-mean",
                      policy_loss=PolicyLossConfig(loss_mode="vanilla"))
    cases = {
        "gae": lambda: ca.compute_gae_advantage_return(x["rewards"], x["values"], m, torch.tensor(1.0), torch.tensor(0.95)),
        "group_advantage": lambda: ca.compute_grpo_outcome_advantage(last * x["scores"][:, None], m, index),
        "k3_kl": lambda: ca.kl_penalty(x["lp"], x["ref"], "low_var_kl"),
        "aggregate seq-mean-token-mean": lambda: ca.agg_loss(x["adv"], m, "seq-mean-token-mean", global_batch_size=B),
        "clipped_surrogate (dual clip)": lambda: ca.compute_policy_loss_vanilla(x["old"], x["lp"], x["adv"], m, "token-mean", cfg),
    }
    out = {}
    with torch.no_grad():
        for name, fn in cases.items():
            fn(); ts = []
            for _ in range(REPEAT if name != "gae" else 3):
                t0 = time.perf_counter(); fn(); ts.append(time.perf_counter() - t0)
            out[name] = statistics.median(ts)
    print(json.dumps(out))
''')


def verl_times(x, python):
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "ray").mkdir()
        (Path(tmp) / "ray" / "__init__.py").write_text("class ObjectRef:\n    pass\n")
        np.savez(Path(tmp) / "x.npz", **x)
        script = Path(tmp) / "bench_verl.py"
        script.write_text(VERL_SIDE % dict(B=B, T=T, G=G, REPEAT=REPEAT))
        env = dict(os.environ, PYTHONPATH=tmp, VERL_USE_EXTERNAL_PLUGINS="none")
        out = subprocess.run([python, str(script), str(Path(tmp) / "x.npz")], env=env, capture_output=True,
                             text=True, check=True, timeout=900)
        return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    x = inputs()
    ours = {name: median_time(fn) for name, fn in dew_rl_cases(x).items()}
    python = os.environ.get("DEW_RL_VERL_PYTHON")
    if python:
        theirs, label = verl_times(x, python), "verl 0.9.1 (torch CPU, float32)"
    else:
        theirs = {name: median_time(fn, repeat=3 if name == "gae" else REPEAT) for name, fn in numpy_cases(x).items()}
        label = "float64 NumPy of the same formulas (set DEW_RL_VERL_PYTHON to compare with verl)"
    print(f"B={B}, T={T}, group={G}; dew_rl jitted on {jax.devices()[0].platform}, float32; baseline: {label}")
    print(f"{'function':<32}{'dew_rl ms':>12}{'baseline ms':>14}{'speed-up':>10}")
    for name in ours:
        print(f"{name:<32}{ours[name] * 1e3:>12.3f}{theirs[name] * 1e3:>14.3f}{theirs[name] / ours[name]:>9.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
