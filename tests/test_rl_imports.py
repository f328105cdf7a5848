"""The import arrow of dew_rl points one way.

    _checks, _ops  <-  _reductions  <-  _advantages, _surrogates, _logits  <-  objectives  <-  tunix

- Nothing outside `dew_rl/objectives` imports `dew_rl.objectives`, not even `dew_rl/__init__.py`, but the
  optional adapter `dew_rl.tunix`, which sits above it (nothing imports the adapter).
- The private internals (`_checks`: input checking; `_ops`: shared numerics) import nothing from
  `dew_rl`, and every layer may import them.
- The reductions layer imports nothing else from `dew_rl`.
- Advantages and surrogates import only the reductions layer (and themselves).
- Every implementation module is private (its name starts with `_`); the public namespaces are
  `dew_rl`, `dew_rl.objectives` and `dew_rl.testing`.

The walk reads every module's syntax tree, so a lazy import inside a function counts too.
"""
import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "dew_rl"


def _module_name(path: Path, pkg: Path = PKG) -> str:
    parts = path.relative_to(pkg.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, pkg: Path = PKG) -> set[str]:
    """Absolute names of every dew_rl module `path` imports (relative imports resolved)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    here = _module_name(path, pkg).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            found.add(mod)
            found.update(f"{mod}.{a.name}" for a in node.names)
    return {m for m in found if m == "dew_rl" or m.startswith("dew_rl.")}


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


MODULES = sorted(p for p in PKG.rglob("*.py") if "__pycache__" not in p.parts)
PRIVATE = {"_checks", "_ops"}  # shared internals (input checks, numerics) that every layer may import
ALLOWED = {  # layer -> layers it may import from
    "_checks": set(),
    "_ops": set(),
    "_reductions": {"_reductions"} | PRIVATE,
    "_advantages": {"_advantages", "_reductions"} | PRIVATE,
    "_surrogates": {"_surrogates", "_reductions"} | PRIVATE,
    "_logits": {"_logits", "_reductions"} | PRIVATE,
    "objectives": {"objectives", "_advantages", "_surrogates", "_reductions", "_logits"} | PRIVATE,
    "_exact": {"_checks", "_ops"},
    # the optional Tunix adapter (`pip install ".[tunix]"`): above objectives, imported by nothing in the package
    "tunix": {"tunix", "objectives"} | PRIVATE,  # test tooling (the exact-gradient harness): the library never imports it
}


def test_walk_finds_the_package():
    names = {_module_name(p) for p in MODULES}
    assert "dew_rl._reductions" in names, names


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PKG.parent)))
def test_nothing_outside_objectives_imports_objectives(path):
    if _layer(_module_name(path)) in ("objectives", "tunix"):
        return
    bad = sorted(m for m in _imports(path) if m == "dew_rl.objectives" or m.startswith("dew_rl.objectives."))
    assert not bad, f"{path.relative_to(PKG.parent)} imports {bad}: nothing outside dew_rl/objectives may"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PKG.parent)))
def test_layers_import_only_downwards(path):
    layer = _layer(_module_name(path))
    assert layer in ALLOWED or layer in ("__init__", "testing", "_modidx"), (
        f"{path.relative_to(PKG.parent)}: layer {layer!r} has no place in the import arrow (add it to ALLOWED)")
    if layer not in ALLOWED:
        return
    bad = sorted(m for m in _imports(path)
                 if m != "dew_rl" and _layer(m) not in ALLOWED[layer] and _layer(m) != "_modidx")
    if layer not in ("objectives", "tunix"):  # the top layers may use the public namespace (`import dew_rl as rl`); nothing below may
        bad += sorted(m for m in _imports(path) if m == "dew_rl")
    assert not bad, f"{path.relative_to(PKG.parent)} ({layer}) imports {bad}; allowed: {sorted(ALLOWED[layer])}"


def test_the_checker_sees_a_violation(tmp_path):
    """The walk must be able to fail: planted imports of objectives (relative, lazy) are reported."""
    probe = tmp_path / "dew_rl" / "reductions.py"
    probe.parent.mkdir()
    probe.write_text("import jax\n\ndef _late():\n    from .objectives import x\n    import dew_rl._advantages\n")
    found = _imports(probe, probe.parent)
    assert "dew_rl.objectives" in found and "dew_rl._advantages" in found, found


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PKG.parent)))
def test_nothing_imports_the_tunix_adapter(path):
    if _layer(_module_name(path)) == "tunix":
        return
    bad = sorted(m for m in _imports(path) if m == "dew_rl.tunix" or m.startswith("dew_rl.tunix."))
    assert not bad, f"{path.relative_to(PKG.parent)} imports {bad}: dew_rl.tunix is optional, nothing may import it"
