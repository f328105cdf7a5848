"""Three more formulations of the masked sum and count of `token_mean`, on the plain reduction and inside the dual-clip
PPO loss, forward and forward + backward, in one interleaved run against the library (bench only).

    python tools/bench_reduction_forms.py              # [256, 4096], 30 rounds of 10 calls, appended as one more run
                                                       # to data/bench_reduction_forms.json ("--fresh": start it anew)

* `count by where(k,1,0)`: the count as the row sums of `where(keep, 1.0, 0.0)` (a select of constants, which
  XLA:CPU's reduction kernel might take with the sum), turned into an exact int32 as `count_kept` does;
* `stacked [sum; count]`: the selected values and the float mask stacked into one [2, B, T] array and reduced
  over T in one reduction (the count from the same pass as the sum);
* `row sums by dot with ones`: the selected values' and the float mask's row sums as two matrix-vector products
  with a vector of ones (`[B, T] @ [T]`, the "dot with the mask" of issue 26): XLA:CPU hands a dot to another
  kernel than the row reduction. Added in a later run than the first two forms (the runs before it lack it).

Each is checked NaN-safe (NaN at every masked position of the advantages and of the log-probs: finite value and
gradient) and against the library's value before it is timed.
"""
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import jax, jax.numpy as jnp, numpy as np
import dew_rl as rl
from bench_common import inputs
d = inputs("256x4096")
x, m = jnp.asarray(d["advantages"]), jnp.asarray(d["mask"])
lp, old = jnp.asarray(d["log_probs"]), jnp.asarray(d["old_log_probs"])
def tm_where(t, m):
    k = m != 0
    tot = jnp.where(k, t, 0).sum()
    n = jnp.where(k, 1.0, 0.0).sum(-1).astype(jnp.int32).sum()
    return tot / jnp.maximum(n, 1).astype(jnp.float32)
def tm_stacked(t, m):
    k = m != 0
    s = jnp.stack([jnp.where(k, t, 0), k.astype(jnp.float32)]).sum(-1)   # [2, B]
    return s[0].sum() / jnp.maximum(s[1].astype(jnp.int32).sum(), 1).astype(jnp.float32)
def tm_dot(t, m):
    k = m != 0
    ones = jnp.ones((t.shape[-1],), jnp.float32)
    s, n = jnp.where(k, t, 0) @ ones, k.astype(jnp.float32) @ ones   # [B] each: exact counts below 2^24
    return s.sum() / jnp.maximum(n.astype(jnp.int32).sum(), 1).astype(jnp.float32)
forms = {"library token_mean": rl.token_mean, "count by where(k,1,0)": tm_where, "stacked [sum; count]": tm_stacked,
         "row sums by dot with ones": tm_dot}
def ppo(red):
    def loss(lp, old, a, m):
        terms, _ = rl.clipped_surrogate_terms(rl.token_log_ratio(lp, old), a, m, 0.2, 0.2, 3.0)
        return red(terms, m)
    return loss
cases = {}
for n, f in forms.items():
    cases[f"plain: {n}"] = (f, (x, m))
    cases[f"ppo fwd: {n}"] = (ppo(f), (lp, old, x, m))
    cases[f"ppo fwd+bwd: {n}"] = (jax.value_and_grad(ppo(f)), (lp, old, x, m))
built = {}
for n, (f, args) in cases.items():
    c = jax.jit(f).lower(*args).compile(); built[n] = (c, args); jax.block_until_ready(c(*args))
xn = jnp.where(m != 0, x, jnp.nan)
safe, diff = {}, {}
for n, f in forms.items():
    v, g = jax.value_and_grad(lambda x: ppo(f)(lp, old, x, m))(xn)
    v2, g2 = jax.value_and_grad(lambda l: ppo(f)(l, old, x, m))(jnp.where(m != 0, lp, jnp.nan))
    safe[n] = bool(jnp.isfinite(v) & jnp.isfinite(g).all() & jnp.isfinite(v2) & jnp.isfinite(g2).all())
    diff[n] = float(ppo(f)(lp, old, x, m) - ppo(rl.token_mean)(lp, old, x, m))
    assert safe[n], n
    print(n, "NaN-safe:", safe[n], "value difference to the library", diff[n])
times = {n: [] for n in built}
R = int(sys.argv[1]) if len(sys.argv) > 1 and not sys.argv[1].startswith("--") else 30
for r in range(R):
    for n, (c, args) in built.items():
        for _ in range(10):
            t0 = time.perf_counter(); jax.block_until_ready(c(*args)); times[n].append(time.perf_counter() - t0)
res = {n: statistics.median(ts) * 1e3 for n, ts in times.items()}
for n, v in res.items():
    base = res[n.split(":")[0] + ": library token_mean"]
    print(f"{n:<44}{v:>9.3f} ms  / library {v / base:.3f}")
out = Path(sys.argv[2]) if len(sys.argv) > 2 and not sys.argv[2].startswith("--") else ROOT / "data" / "bench_reduction_forms.json"
run = {"date": time.strftime("%Y-%m-%d %H:%M", time.gmtime()), "shape": [256, 4096], "rounds": R, "calls_per_round": 10,
       "jax": jax.__version__, "backend": jax.default_backend(), "nan_safe": safe, "value_diff_to_library": diff,
       "median_ms": res, "min_ms": {n: min(t) * 1e3 for n, t in times.items()}}
runs = json.loads(out.read_text())["runs"] if out.exists() and "--fresh" not in sys.argv else []
out.write_text(json.dumps({"runs": runs + [run]}, indent=1) + "\n")   # every run is kept: their spread is the noise
print(f"written to {out}")
