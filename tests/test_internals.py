"""The library's internals: one public surface, documented functions, one rule for hyper-parameters.

- The implementation modules are private (`dew_rl._reductions`, `dew_rl._advantages.gae`, ...); the
  public namespaces are `dew_rl`, `dew_rl.objectives`, `dew_rl.testing` and the optional `dew_rl.tunix`. Every layer module's
  `__all__` lists only names that `dew_rl` exports (the shared internals `_checks` and `_ops` list
  their own), and no module imports an underscored name from another layer: only from the shared
  internals or from its own layer.
- Every public function's `__doc__` carries a summary, a Parameters section naming each argument,
  and a Returns section (what `help()` and an editor's hover show).
- A concrete JAX array passed as a hyper-parameter is treated as a traced one by every function:
  its value is never read back from the device.
"""
import ast
import importlib
import inspect
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dew_rl as rl

PKG = Path(rl.__file__).resolve().parent
MODULES = sorted(p for p in PKG.rglob("*.py") if "__pycache__" not in p.parts and p.name != "_modidx.py")


def _name(path: Path) -> str:
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


SHARED_INTERNALS = ("dew_rl._checks", "dew_rl._ops")


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _may_import_private(importer: str, module: str) -> bool:
    "Underscored names may come only from the shared internals or from the importer's own layer."
    return module in SHARED_INTERNALS or _layer(module) == _layer(importer)


# test tooling: `dew_rl.testing` (public) and the exact-gradient harness `dew_rl._exact` (private; chapters import it,
# the library never does); neither is a layer whose names `dew_rl` re-exports
TOOLING = ("dew_rl.testing", "dew_rl._exact")
LAYER_MODULES = [m for m in map(_name, MODULES)
                 if m not in ("dew_rl", *TOOLING, *SHARED_INTERNALS) and _layer(m) not in ("objectives", "tunix")]
PUBLIC_MODULES = LAYER_MODULES + ["dew_rl.objectives"]


def test_implementation_modules_are_private():
    public = sorted(m for m in map(_name, MODULES) if not any(p.startswith("_") for p in m.split(".")[1:]))
    assert public == ["dew_rl", "dew_rl.objectives", "dew_rl.testing", "dew_rl.tunix"], public


@pytest.mark.parametrize("module", PUBLIC_MODULES)
def test_module_all_lists_only_public_api(module):
    mod = importlib.import_module(module)
    if not hasattr(mod, "__all__"):        # a package whose __init__ only groups modules
        assert not [n for n in vars(mod) if not n.startswith("_") and not inspect.ismodule(getattr(mod, n))], module
        return
    exported = set(rl.__all__)
    if module == "dew_rl.objectives":      # its own namespace: nothing in it is re-exported by dew_rl
        assert all(not n.startswith("_") for n in mod.__all__), mod.__all__
        return
    stray = sorted(set(mod.__all__) - exported)
    assert not stray, f"{module}.__all__ lists {stray}, which are not public names of dew_rl"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PKG.parent)))
def test_no_private_name_imported_from_a_public_module(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    here = _name(path).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("dew_rl")):
            base = package[: len(package) - (node.level - 1)] if node.level else []
            module = ".".join(base + ([node.module] if node.module else [])) if node.level else node.module
            if _may_import_private(_name(path), module):
                continue
            bad += [f"{module}.{a.name}" for a in node.names if a.name.startswith("_")]
    assert not bad, f"{path.name} imports private names of another layer: {bad}"


def test_the_private_import_check_can_fail(tmp_path):
    probe = ("from dew_rl._surrogates.ppo import _prepare\nfrom dew_rl._checks import _under_checkify\n"
             "from dew_rl._surrogates.ratios import _x\n")
    tree = ast.parse(probe)
    names = [f"{n.module}.{a.name}" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
             for a in n.names if a.name.startswith("_") and not _may_import_private("dew_rl._advantages.gae", n.module)]
    assert names == ["dew_rl._surrogates.ppo._prepare", "dew_rl._surrogates.ratios._x"]


PUBLIC_FUNCTIONS = sorted(n for n in rl.__all__ if inspect.isfunction(getattr(rl, n)))


def test_there_are_public_functions():
    assert len(PUBLIC_FUNCTIONS) >= 30, PUBLIC_FUNCTIONS


@pytest.mark.parametrize("name", PUBLIC_FUNCTIONS)
def test_docstring_documents_every_argument_and_the_return(name):
    fn = getattr(rl, name)
    doc = inspect.getdoc(fn)
    assert doc, f"{name} has no docstring"
    summary, _, rest = doc.partition("\n\n")
    assert summary and "\n" not in summary.strip(), f"{name}: the first paragraph must be a one-line summary"
    assert "Parameters\n----------" in rest and "Returns\n-------" in rest, f"{name}: Parameters/Returns missing"
    params = rest.split("Parameters\n----------")[1].split("Returns\n-------")[0]
    documented = {line.strip() for line in params.splitlines() if line and not line.startswith(" ")}
    wanted = set(inspect.signature(fn).parameters)
    assert documented == wanted, f"{name}: documents {sorted(documented)}, signature has {sorted(wanted)}"
    for line in params.splitlines():
        if line.startswith("    "):
            assert line.strip(), name
    returns = rest.split("Returns\n-------")[1].strip().splitlines()
    assert len(returns) >= 2 and returns[1].startswith("    "), f"{name}: Returns must describe the value"


def test_package_docstring_and_version():
    assert rl.__doc__ and rl.__doc__.startswith("Every public name")
    settings = (PKG.parent / "settings.ini").read_text()
    assert f"version = {rl.__version__}" in settings


# --------------------------------------------------------------------------- hyper-parameter rule
B, T = 4, 5
_m = np.ones((B, T), np.float32)
_x = np.linspace(-1.0, 1.0, B * T, dtype=np.float32).reshape(B, T)
_r = np.arange(B, dtype=np.float32)

# (function, the hyper-parameter, a value a host number would be refused for): each is called with the
# value as a concrete JAX array, under a guard that fails on any device-to-host copy
CASES = {
    "gae gamma": lambda v: rl.gae(_x, _x, _m, v, 0.95),
    "gae lam": lambda v: rl.gae_raw(_x, _x, _m, 1.0, v),
    "reinforce_plus_plus_returns beta": lambda v: rl.reinforce_plus_plus_returns(_r, _x, _m, -v),
    "reinforce_plus_plus_returns gamma": lambda v: rl.reinforce_plus_plus_returns(_r, _x, _m, 0.1, v),
    "group_advantage eps": lambda v: rl.group_advantage(_r, 2, eps=-v),
    "global_masked_normalize var_floor": lambda v: rl.global_masked_normalize(_x, _m, var_floor=-v),
    "behavior_importance_weights cap": lambda v: rl.behavior_importance_weights(_x, _x, _m, -v),
    "preference_logsigmoid beta": lambda v: rl.preference_logsigmoid(_x, _x, _x, _x, _m, _m, -v),
}


@pytest.fixture
def read_back_of(monkeypatch):
    """`read_back_of(x)` makes the scalar conversions of the JAX array `x` (float, int, bool) fail: how a check reads."""
    from jax._src.array import ArrayImpl
    value = ArrayImpl._value
    watched = []

    def guarded(self):
        if any(self is w for w in watched):
            raise AssertionError("a hyper-parameter was read back from the device")
        return value.fget(self)

    monkeypatch.setattr(ArrayImpl, "_value", property(guarded))
    return watched.append


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_concrete_jax_hyper_parameter_is_never_read_back(case, read_back_of):
    value = jnp.asarray(1.5, jnp.float32)      # outside every range above (negated, or as gamma/lam)
    read_back_of(value)
    jax.block_until_ready(CASES[case](value))   # accepted, as a traced value would be


@pytest.mark.parametrize("case", ["gae gamma", "reinforce_plus_plus_returns gamma"])
def test_the_same_host_value_is_refused(case):
    with pytest.raises(ValueError, match="must be in"):
        CASES[case](1.5)


def test_the_guard_catches_a_read_back(read_back_of):
    value = jnp.asarray(1.5)
    read_back_of(value)
    with pytest.raises(AssertionError, match="read back"):
        float(value)
    with pytest.raises(AssertionError, match="read back"):
        int(value)
    float(jnp.asarray(2.0))                     # other arrays are not watched
