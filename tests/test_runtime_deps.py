"""The runtime dependencies are `jax` and `numpy` only.

Importing every module of `dew_rl` in a fresh interpreter must load nothing outside the standard
library, JAX (with its own dependencies) and NumPy: no matplotlib, fastcore, nbdev or IPython, which
are development extras. `settings.ini` must declare exactly `jax numpy` as requirements. The one
exception is the optional adapter `dew_rl.tunix` (`pip install ".[tunix]"`): `import dew_rl` never
loads it or Tunix, and without Tunix importing it is an ImportError that says what to install.
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
    if m.name != "dew_rl.tunix":  # the optional extra, checked below
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


def test_import_dew_rl_never_loads_tunix():
    probe = "import sys, dew_rl, dew_rl.objectives; print(sorted(m for m in sys.modules if m.split('.')[0] in ('tunix', 'flax') or m == 'dew_rl.tunix'))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout


def test_without_tunix_the_adapter_says_what_to_install():
    # sys.modules["tunix"] = None makes `import tunix...` fail as it does where the package is absent
    probe = ("import sys; sys.modules['tunix'] = None\n"
             "try:\n    import dew_rl.tunix\nexcept ImportError as e:\n    print('ImportError:', e)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT)
    assert 'ImportError: dew_rl.tunix needs Tunix' in out.stdout and 'pip install ".[tunix]"' in out.stdout, out.stdout


def test_the_tunix_extra_is_declared():
    cfg = configparser.ConfigParser(delimiters=["="])
    cfg.read(ROOT / "settings.ini")
    assert cfg["DEFAULT"]["tunix_requirements"].split() == ["google-tunix==0.1.7"]
    assert "google-tunix==0.1.7" in cfg["DEFAULT"]["dev_requirements"].split()  # make test installs it
