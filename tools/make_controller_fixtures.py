"""Freeze verl 0.9.1's and OpenRLHF 0.11.2's adaptive KL controllers on a seeded KL sequence
(tests/fixtures/kl_controller.npz).

Both frameworks keep the coefficient in a mutable object (`AdaptiveKLController.value`) that
`update(current_kl, n_steps)` rescales in place. This script drives each framework's own class
through the same sequence of measured KLs and step counts, in that framework's own environment
(tools/refenvs.py), and stores the coefficient after every update. No framework code is copied.

    python tools/make_controller_fixtures.py      # runs both environments, writes the fixture

The chapter nbs/03b_kl.ipynb and tests/test_kl_controller.py compare `dew_rl.adaptive_kl_update`
with the stored trajectories.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "kl_controller.npz"
sys.path.insert(0, str(ROOT / "tools"))
import refenvs  # noqa: E402

# a KL that overshoots the target, then undershoots, with a spike that the clip at +-20 % limits
rng = np.random.default_rng(20261202)
KL = np.concatenate([np.linspace(0.02, 0.12, 10), np.linspace(0.12, 0.01, 10), [1.5], rng.uniform(0.0, 0.2, 9)])
N_STEPS = np.full(KL.size, 256)
N_STEPS[5:8] = 1024  # a larger batch: a larger step
SETTINGS = dict(init_kl_coef=0.05, target_kl=0.06, horizon=10000)

CHILD = {
    "verl": """
import json, sys, numpy as np
from verl.trainer.ppo.core_algos import AdaptiveKLController
import verl
s = json.loads(sys.argv[1])
c = AdaptiveKLController(init_kl_coef=s["init_kl_coef"], target_kl=s["target_kl"], horizon=s["horizon"])
out = []
for kl, n in zip(s["kl"], s["n_steps"]):
    c.update(current_kl=kl, n_steps=n)
    out.append(float(c.value))
print(json.dumps({"version": verl.__version__, "values": out}))
""",
    "openrlhf": """
import json, sys, importlib.util, numpy as np
from importlib.metadata import version, files
path = [f for f in files("openrlhf") if str(f).endswith("trainer/ppo_utils/kl_controller.py")][0].locate()
spec = importlib.util.spec_from_file_location("kl_controller", path)
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)   # the module imports numpy only
s = json.loads(sys.argv[1])
c = mod.AdaptiveKLController(s["init_kl_coef"], s["target_kl"], s["horizon"])
out = []
for kl, n in zip(s["kl"], s["n_steps"]):
    c.update(kl, n)
    out.append(float(c.value))
print(json.dumps({"version": version("openrlhf"), "values": out}))
""",
}


def main() -> int:
    args = json.dumps({**SETTINGS, "kl": KL.tolist(), "n_steps": N_STEPS.tolist()})
    store = {"kl": KL, "n_steps": N_STEPS, **{f"setting/{k}": np.asarray(v) for k, v in SETTINGS.items()}}
    for name, code in CHILD.items():
        py = refenvs.build(name)
        res = subprocess.run([str(py), "-c", code, args], env=refenvs.env_for(name), check=True,
                             capture_output=True, text=True)
        got = json.loads(res.stdout.strip().splitlines()[-1])
        store[f"{name}/values"] = np.asarray(got["values"], np.float64)
        store[f"{name}/version"] = np.asarray(got["version"])
        print(f"{name} {got['version']}: {len(got['values'])} updates, final coefficient {got['values'][-1]:.8f}")
    np.savez(OUT, **store)
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
