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

It reuses tools/conformance.py's pieces (`compare`, `ROUNDOFF`, the environments) and the Recorder of the
adapters, writes data/conformance_entropy.json (read by the chapters 03b_kl and 03k_entropy) and
data/conformance_entropy_outputs.npz (inputs and framework outputs), which tests/test_conformance_entropy.py
uses to recompute dew_rl's side without any framework installed. `input_hash` covers this file, its two
adapters (tools/conformance_adapters/entropy/, a folder of its own so that tools/conformance.py's hash
does not cover them), tools/conformance_adapters/_common.py and the pins of tools/refenvs.py.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
ADAPTERS = ROOT / "tools" / "conformance_adapters"
DATA = ROOT / "data" / "conformance_entropy.json"
OUTPUTS = ROOT / "data" / "conformance_entropy_outputs.npz"
FRAMEWORKS = ("verl", "trl")
SEED = 20261219
# name -> (B rows, T positions, R simulated data-parallel ranks for the entropy mask)
CASES = {"a": (8, 12, 4), "b": (6, 7, 2), "c": (12, 5, 3)}


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


conf = _load("dew_rl_conformance_driver", ROOT / "tools" / "conformance.py")


# --------------------------------------------------------------------------------------------------------
# 1. Inputs
# --------------------------------------------------------------------------------------------------------
def make_inputs() -> dict[str, np.ndarray]:
    out = {}
    for k, (case, (B, T, R)) in enumerate(CASES.items()):
        rng = np.random.default_rng(SEED + k)
        lengths = rng.integers(1, T + 1, size=B)
        lengths[0] = T
        mask = (np.arange(T)[None, :] < lengths[:, None]).astype(np.float32)
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


def input_hash() -> str:
    h = hashlib.sha256()
    for f in hashed_files():
        h.update(f.relative_to(ROOT).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    h.update(json.dumps({k: v for k, v in conf._refenvs().ENVS.items() if k in FRAMEWORKS}, sort_keys=True).encode())
    return h.hexdigest()


def hashed_files() -> list[Path]:
    return [ROOT / "tools" / "conformance_entropy.py", ADAPTERS / "_common.py",
            ADAPTERS / "entropy" / "trl_adapter.py", ADAPTERS / "entropy" / "verl_adapter.py"]


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


def evaluate(records, arrays, cases):
    rows = []
    for rec in records:
        side = dew_rl_side(rec["framework"], rec["kind"], rec["params"], cases[rec["case"]])
        theirs = arrays[rec["key"]]
        c = conf.compare(side["conv"], theirs, side["where"])
        exact = c["max_abs"] == 0 and not c["special_mismatch"]
        status = "exact" if exact else ("round-off" if conf.agrees(c) else "DIFFERS")
        rows.append(dict(key=rec["key"], framework=rec["framework"], case=rec["case"], kind=rec["kind"],
                         params=rec["params"], dew_rl=side["function"], framework_function=rec["framework_function"],
                         framework_settings=rec["settings"], dew_rl_convention=side["convention"],
                         max_abs=c["max_abs"], max_rel=c["max_rel"], special_mismatch=c["special_mismatch"],
                         scale=c["scale"], n=c["n"], status=status))
    return rows


# --------------------------------------------------------------------------------------------------------
# 3. Running the adapters
# --------------------------------------------------------------------------------------------------------
def run_adapter(name, inputs, work, refenvs) -> dict:
    t0 = time.time()
    py = refenvs.build(name)
    out_npz, out_json = work / f"{name}.npz", work / f"{name}.json"
    cmd = [str(py), str(ADAPTERS / "entropy" / f"{name}_adapter.py"), str(inputs), str(out_npz), str(out_json)]
    env = refenvs.env_for(name)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), str(ADAPTERS)) if p)
    proc = subprocess.run(cmd, env=env, cwd=str(work), capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"the {name} entropy adapter failed:\n" + "\n".join((proc.stderr or proc.stdout).splitlines()[-15:]))
    print(proc.stdout.strip(), flush=True)
    meta = json.loads(out_json.read_text())
    with np.load(out_npz) as f:
        meta["arrays"] = {k: f[k] for k in f.files}
    print(f"[conformance_entropy] {name}: {len(meta['records'])} outputs in {time.time() - t0:.0f} s", flush=True)
    return meta


def main(argv: list[str]) -> int:
    try:
        import dew_rl  # noqa: F401
    except ImportError:
        venv = ROOT / ".venv" / "bin" / "python"
        if venv.exists() and Path(sys.prefix).resolve() != venv.parent.parent.resolve():
            os.execv(str(venv), [str(venv), __file__, *argv])
        raise
    names = [a for a in argv if not a.startswith("-")] or list(FRAMEWORKS)
    refenvs = conf._refenvs()
    inputs = make_inputs()
    cases = conf.cases_of(inputs)
    previous = json.loads(DATA.read_text()) if DATA.exists() else {}
    old_arrays = {}
    if OUTPUTS.exists():
        with np.load(OUTPUTS) as f:
            old_arrays = {k: f[k] for k in f.files}
    metas = {}
    with tempfile.TemporaryDirectory(prefix="dew_rl_conformance_entropy_") as tmp:
        work = Path(tmp)
        np.savez(work / "inputs.npz", **inputs)
        for name in names:
            metas[name] = run_adapter(name, work / "inputs.npz", work, refenvs)
    arrays, frameworks, records = dict(inputs), {}, []
    for name in FRAMEWORKS:
        if name in metas:
            meta = metas[name]
            arrays.update(meta.pop("arrays"))
            records += meta.pop("records")
            frameworks[name] = meta
        elif name in previous.get("frameworks", {}):
            frameworks[name] = previous["frameworks"][name]
            arrays.update({k: v for k, v in old_arrays.items() if k.startswith(f"{name}/")})
            records += [dict(key=r["key"], framework=name, case=r["case"], kind=r["kind"], params=r["params"],
                             framework_function=r["framework_function"], settings=r["framework_settings"])
                        for r in previous["results"] if r["framework"] == name]
    rows = evaluate(records, arrays, cases)
    data = dict(about="dew_rl against verl 0.9.1 and TRL 1.16.0 (entropy / KL-placement family); written by "
                      "tools/conformance_entropy.py", input_hash=input_hash(),
                hashed_files=[f.relative_to(ROOT).as_posix() for f in hashed_files()] + ["tools/refenvs.py:ENVS"],
                seed=SEED, cases={k: dict(B=v[0], T=v[1], ranks=v[2]) for k, v in CASES.items()},
                roundoff=conf.ROUNDOFF, frameworks=frameworks, results=rows)
    DATA.write_text(json.dumps(data, indent=1) + "\n")
    np.savez_compressed(OUTPUTS, **arrays)
    bad = [r for r in rows if r["status"] == "DIFFERS"]
    print(f"[conformance_entropy] {len(rows)} comparisons, {len(bad)} not at round-off; wrote {DATA.relative_to(ROOT)}")
    for r in bad:
        print(f"  DIFFERS {r['key']}: max abs {r['max_abs']:.3g} (scale {r['scale']:.3g})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
