"""Import `tunix.rl` without running `tunix/__init__.py`, which imports every trainer.

Registers an empty `tunix` package module whose `__path__` is the installed directory, so that
`from tunix.rl import algo_core, common` loads only those modules and what they import. Used by
tools/make_tunix_fixtures.py, tools/conformance_adapters/general/tunix_adapter.py and
tools/bench_sides/tunix_side.py, in an environment with `google-tunix==0.1.7` installed with
--no-deps plus jax, flax and the few packages the RL modules import.
"""
import importlib.util
import sys
import types


def install() -> None:
    spec = importlib.util.find_spec("tunix")
    shim = types.ModuleType("tunix")
    shim.__path__ = list(spec.submodule_search_locations)
    sys.modules["tunix"] = shim
