"""Import OpenRLHF's loss and advantage code without running its package `__init__`.

The package `__init__` of OpenRLHF 0.11.2 (and bc71bb1) needs CUDA-only and distributed packages
(flash-attn, DeepSpeed, Ray). The loss math does not: this module registers empty package modules
for the packages on the way (so no `__init__` runs), in-memory stubs for `deepspeed`, `ray`, the
experience module and the Ray launcher, and loads the six source files the loss and advantage code
need from the installed wheel by path. No OpenRLHF code is copied. Used by
tools/make_openrlhf_fixtures.py and tools/conformance_adapters/general/openrlhf_adapter.py, in an
environment with torch and `openrlhf` installed with --no-deps.
"""
import importlib.util
import sys
import types
from pathlib import Path


class _Refuse(types.ModuleType):
    "A stub module: any attribute not set explicitly is a loud error, so nothing silently uses the stub."

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise RuntimeError(f"stub module {self.__name__!r} has no {name!r}: this code path is not part of the oracle")


def load_openrlhf():
    """Register the stubs and load the files; returns (models.utils, models.loss, experience_maker, root)."""
    root = Path(importlib.util.find_spec("openrlhf").submodule_search_locations[0])
    for pkg in ("openrlhf", "openrlhf.models", "openrlhf.utils", "openrlhf.trainer", "openrlhf.trainer.ppo_utils",
                "openrlhf.trainer.ray"):
        mod = types.ModuleType(pkg)
        mod.__path__ = [str(root.joinpath(*pkg.split(".")[1:]))]
        sys.modules[pkg] = mod
    for name in ("deepspeed", "ray"):
        sys.modules[name] = _Refuse(name)
    experience = _Refuse("openrlhf.trainer.ppo_utils.experience")
    experience.Experience = type("Experience", (), {})
    sys.modules[experience.__name__] = experience
    launcher = _Refuse("openrlhf.trainer.ray.launcher")
    launcher.RayActorGroup = type("RayActorGroup", (), {})
    sys.modules[launcher.__name__] = launcher

    def load(relpath):
        name = "openrlhf." + relpath[:-3].replace("/", ".")
        spec = importlib.util.spec_from_file_location(name, root / relpath)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        return mod

    load("utils/logging_utils.py")
    load("utils/seqlen_balancing.py")
    models_utils = load("models/utils.py")
    loss = load("models/loss.py")
    load("trainer/ppo_utils/length_penalty.py")
    experience_maker = load("trainer/ppo_utils/experience_maker.py")
    return models_utils, loss, experience_maker, root
