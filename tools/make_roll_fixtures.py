"""Freeze alibaba/ROLL's policy-gradient variants on the policy-loss conformance inputs (tests/fixtures/policyloss_roll.*).

ROLL is not on the package index (the index's `roll` 0.13.4 is pyrates/roll, an HTTP framework), so it is run
from a git checkout of alibaba/ROLL at the revision below:

    python tools/make_roll_fixtures.py /path/to/ROLL/.git      # or a bare mirror

The per-token losses of `roll/pipeline/agentic/agentic_actor_pg_worker.py` (pg_variant "vanilla", "topr",
"kimi15") are methods of a Ray worker whose module imports ROLL's distributed stack. The script reads that file
at the revision (`git show`), takes the three method definitions from its syntax tree and executes them, unchanged,
in a namespace that holds `torch` and the two names they use (`get_episode_scores`, which returns the given
scores, and `current_platform.device_type = "cpu"`), with a stand-in `self` that returns each option's default
(`_get_or_cache_config`). It runs in the `verl` environment of tools/refenvs.py (for its torch). Nothing of ROLL is
copied into this repository; the outputs and the revision are.
"""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tempfile
import types
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
REVISION = "8eb27cc2dc34c4d1310b169d9b86d339004d811a"
PATH = "roll/pipeline/agentic/agentic_actor_pg_worker.py"
METHODS = {"vanilla_terms": "_compute_vanilla_pg_loss", "topr_terms": "_compute_topr_loss",
           "kimi15_terms": "_compute_kimi15_loss"}
OUT = ROOT / "tests" / "fixtures" / "policyloss_roll.npz"


def worker(source_file: str, inputs: str, out: str) -> None:
    import torch

    tree = ast.parse(Path(source_file).read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ActorWorker")
    defs = [n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name in METHODS.values()]
    assert {d.name for d in defs} == set(METHODS.values()), "the methods moved"
    with np.load(inputs) as f:
        data = {k: f[k] for k in f.files}
    arrays, records = {}, []
    for case in sorted({k.split("/")[1] for k in data}):
        x = {k.split("/", 2)[2]: v for k, v in data.items() if k.startswith(f"in/{case}/")}
        ns = {"torch": torch, "current_platform": types.SimpleNamespace(device_type="cpu"),
              "get_episode_scores": lambda d: torch.tensor(d.scores)}
        exec(compile(ast.Module(body=defs, type_ignores=[]), f"{PATH}@{REVISION[:12]}", "exec"), ns)
        me = types.SimpleNamespace(_get_or_cache_config=lambda key, default: default, _topr_sample_logged=True,
                                   _kimi15_config_logged=True, _cached_metrics={},
                                   logger=types.SimpleNamespace(info=lambda *a, **k: None))
        t = lambda a: torch.tensor(np.asarray(a, np.float32))  # noqa: E731
        lp, old, adv = t(x["lp"]), t(x["old"]), t(x["adv"])
        ratio = (lp - old).exp()
        outs = {"vanilla_terms": ns["_compute_vanilla_pg_loss"](me, ratio, lp, adv),
                "topr_terms": ns["_compute_topr_loss"](me, ratio, lp, old, adv, types.SimpleNamespace(scores=x["scores"])),
                "kimi15_terms": ns["_compute_kimi15_loss"](me, ratio, lp, old, adv)}
        settings = {"vanilla_terms": "pg_variant='vanilla' (per-token loss before agg_loss)",
                    "topr_terms": "pg_variant='topr', topr_positive_weight=1.0, topr_negative_weight=1.0 (defaults), "
                                  "ratio = exp(lp - old) (ratio_type token), scores = the given per-row scores",
                    "kimi15_terms": "pg_variant='kimi15', kimi15_tau=0.1 (default)"}
        for loss, v in outs.items():
            key = f"roll/{case}/terms/loss={loss}"
            arrays[key] = v.detach().numpy().astype(np.float64)
            records.append(dict(key=key, framework="roll", case=case, kind="terms", params={"loss": loss},
                                framework_function=f"alibaba/ROLL@{REVISION[:12]}:{PATH}:ActorWorker.{METHODS[loss]}",
                                settings=settings[loss], dtype="float32"))
    np.savez(out, **arrays)
    Path(out).with_suffix(".json").write_text(json.dumps(dict(records=records, torch=torch.__version__), indent=1))


def main(argv: list[str]) -> int:
    if argv and argv[0] == "--worker":
        worker(*argv[1:4])
        return 0
    git_dir = argv[0] if argv else os.environ.get("DEW_RL_ROLL_GIT")
    if not git_dir:
        raise SystemExit("usage: python tools/make_roll_fixtures.py /path/to/alibaba/ROLL/.git")
    import conformance_policyloss as driver  # tools/ is on the path when this script runs
    import refenvs
    inputs = driver.make_inputs()
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "worker.py"
        src.write_text(subprocess.run(["git", "--git-dir", git_dir, "show", f"{REVISION}:{PATH}"], check=True,
                                      capture_output=True, text=True).stdout)
        np.savez(Path(tmp) / "in.npz", **inputs)
        out = Path(tmp) / "out.npz"
        subprocess.run([str(refenvs.build("verl")), __file__, "--worker", str(src), str(Path(tmp) / "in.npz"), str(out)],
                       check=True, env=refenvs.env_for("verl"))
        with np.load(out) as f:
            arrays = {k: f[k] for k in f.files}
        meta = json.loads(out.with_suffix(".json").read_text())
    meta.update(framework="roll", version=f"alibaba/ROLL@{REVISION} (source checkout; not on the package index)",
                revision=REVISION, file=PATH, failed=[], not_run=[])
    np.savez_compressed(OUT, **inputs, **arrays)
    OUT.with_suffix(".json").write_text(json.dumps(meta, indent=1) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)} ({len(meta['records'])} outputs) from alibaba/ROLL@{REVISION[:12]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
