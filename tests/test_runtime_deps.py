"""The runtime dependencies are `jax` and `numpy` only.

Importing every module of `dew_rl` in a fresh interpreter must load nothing outside the standard
library, JAX (with its own dependencies) and NumPy: no matplotlib, fastcore, nbdev or IPython, which
are development extras. `settings.ini` must declare exactly `jax numpy` as requirements.
"""
import configparser
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# What importing jax itself brings in: its declared dependencies, their helpers, and what jax imports
# opportunistically when present (pygments, for coloured tracebacks; cython_runtime, from scipy).
JAX_STACK = {"pygments", "cython_runtime", "jax", "jaxlib", "numpy", "ml_dtypes", "opt_einsum", "scipy", "_cffi_backend", "typing_extensions",
             "importlib_metadata", "zipp", "google", "absl"}

PROBE = """
import json, pkgutil, sys, importlib
import jax
baseline = set(sys.modules)
import dew_rl
for m in pkgutil.walk_packages(dew_rl.__path__, "dew_rl."):
    importlib.import_module(m.name)
print(json.dumps(sorted({name.split(".")[0] for name in set(sys.modules) - baseline})))
"""


def test_importing_every_module_needs_only_jax_and_numpy():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, cwd=ROOT)
    loaded = set(json.loads(out.stdout.strip().splitlines()[-1]))  # what dew_rl adds beyond jax itself
    foreign = sorted(n for n in loaded - set(sys.stdlib_module_names) - JAX_STACK - {"dew_rl"} if not n.startswith("_"))
    assert not foreign, f"dew_rl imports non-runtime packages: {foreign}"


def test_declared_requirements():
    cfg = configparser.ConfigParser(delimiters=["="])
    cfg.read(ROOT / "settings.ini")
    assert sorted(cfg["DEFAULT"]["requirements"].split()) == ["jax", "numpy"]
