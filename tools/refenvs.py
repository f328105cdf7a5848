"""The reference frameworks' environments, in one place: pins, creation, reuse (`make bench`, `make conformance`).

Each reference framework gets its own virtual environment outside the repository, under
``$DEW_RL_REFENVS`` (default ``~/.cache/dew_rl/refenvs``). None of them is a dependency of
dew_rl: they exist only so that the benchmark and the conformance run can call the framework's
own code in its own interpreter, exchanging ``.npz`` files. No framework code is copied into the
project; where a package's ``__init__`` needs a heavy dependency that the loss code never uses,
the adapter registers a stub module (``tools/stubs``).

    python tools/refenvs.py            # create or reuse every environment, with progress
    python tools/refenvs.py verl rlax  # only these
    python tools/refenvs.py --list     # name, pins, interpreter, whether it is ready

An environment is ready when its stamp file records exactly the pins below; changing a pin
rebuilds it. torch is always the CPU wheel ``torch==2.13.0`` and is installed first, so that no
other package can pull a CUDA build.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STUBS = ROOT / "tools" / "stubs"
HOME = Path(os.environ.get("DEW_RL_REFENVS", Path.home() / ".cache" / "dew_rl" / "refenvs"))

TORCH = "torch==2.13.0"

# name -> (the version compared, [pip steps]); each step is (no_deps, [requirements]).
ENVS: dict[str, dict] = {
    "verl": dict(version="verl 0.9.1", steps=[
        (False, [TORCH]),
        (True, ["verl==0.9.1"]),
        (True, ["packaging", "numpy", "tensordict", "pyvers", "cloudpickle", "omegaconf", "pyyaml",
                "transformers==5.24.0", "regex", "huggingface-hub", "tqdm", "httpx2", "httpcore2", "truststore",
                "h11", "idna", "safetensors", "codetiming", "orjson"]),
    ]),
    "openrlhf": dict(version="OpenRLHF 0.11.2", steps=[
        (False, [TORCH, "numpy"]),
        (True, ["openrlhf==0.11.2"]),
    ]),
    "trl": dict(version="TRL 1.16.0", steps=[
        (False, [TORCH, "numpy"]),
        (True, ["trl==1.16.0"]),
        (False, [TORCH, "packaging", "pandas==3.1.1", "transformers==5.24.0", "accelerate==1.15.0", "datasets==5.2.0"]),
    ]),
    "tunix": dict(version="Tunix 0.1.7", steps=[
        (True, ["google-tunix==0.1.7"]),
        (False, ["jax==0.10.2", "jaxlib==0.10.2", "flax==0.12.8", "absl-py", "humanize", "fsspec", "huggingface_hub"]),
    ]),
    "rlax": dict(version="rlax 0.1.9", steps=[
        (False, ["jax==0.10.2", "jaxlib==0.10.2", "rlax==0.1.9"]),
    ]),
    # AReaL's wheel pins torch < 2.11 and a large agent stack; its loss helpers need only torch, so --no-deps.
    # (The package index's `roll` 0.13.4 is an unrelated HTTP framework, not alibaba/ROLL: there is no ROLL env.)
    "areal": dict(version="AReaL 1.0.4", steps=[
        (False, [TORCH, "numpy"]),
        (True, ["areal==1.0.4"]),
    ]),
}

# Environment variables the framework's interpreter needs (stub directory first on the path).
RUN_ENV = {
    "verl": dict(PYTHONPATH=str(STUBS / "ray_only"), VERL_USE_EXTERNAL_PLUGINS="none"),
    "openrlhf": {},  # its adapter registers in-memory stubs itself (tools/make_openrlhf_fixtures.py)
    "trl": {},
    "tunix": {},
    "rlax": {},
    "areal": {},
}


def pins_hash(name: str) -> str:
    return hashlib.sha256(json.dumps(ENVS[name]["steps"]).encode()).hexdigest()[:16]


def python(name: str) -> Path:
    return HOME / name / "bin" / "python"


def stamp(name: str) -> Path:
    return HOME / name / ".dew_rl-pins"


def ready(name: str) -> bool:
    return python(name).exists() and stamp(name).exists() and stamp(name).read_text().strip() == pins_hash(name)


def env_for(name: str) -> dict:
    """The process environment to run `name`'s interpreter with."""
    env = dict(os.environ)
    env.update(RUN_ENV[name])
    env.pop("VIRTUAL_ENV", None)
    env["PYTHONNOUSERSITE"] = "1"
    return env


def build(name: str) -> Path:
    """Create or reuse the environment for `name`; returns its interpreter."""
    if ready(name):
        print(f"[refenvs] {name}: ready ({ENVS[name]['version']}, {python(name)})", flush=True)
        return python(name)
    target = HOME / name
    t0 = time.time()
    print(f"[refenvs] {name}: creating {target} for {ENVS[name]['version']} (a few minutes)", flush=True)
    if not python(name).exists():
        subprocess.run([sys.executable, "-m", "venv", str(target)], check=True)
    pip = [str(python(name)), "-m", "pip", "install", "--progress-bar", "off", "--disable-pip-version-check"]
    steps = ENVS[name]["steps"]
    for i, (no_deps, reqs) in enumerate(steps, 1):
        shown = " ".join(reqs) if len(reqs) < 6 else " ".join(reqs[:5]) + f" ... ({len(reqs)} packages)"
        print(f"[refenvs] {name}: step {i}/{len(steps)}: pip install {'--no-deps ' if no_deps else ''}{shown}",
              flush=True)
        proc = subprocess.Popen(pip + (["--no-deps"] if no_deps else []) + reqs, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        for line in proc.stdout:
            if line.startswith(("Collecting", "Successfully installed", "ERROR")):
                print(f"[refenvs] {name}:   {line.rstrip()[:150]}", flush=True)
        if proc.wait():
            raise SystemExit(f"[refenvs] {name}: pip failed at step {i}")
    stamp(name).write_text(pins_hash(name) + "\n")
    print(f"[refenvs] {name}: ready after {time.time() - t0:.0f} s", flush=True)
    return python(name)


def main(argv: list[str]) -> int:
    if "--list" in argv:
        for name, spec in ENVS.items():
            print(f"{name:<9} {spec['version']:<16} {'ready' if ready(name) else 'absent':<7} {python(name)}")
        return 0
    names = [a for a in argv if not a.startswith("-")] or list(ENVS)
    unknown = sorted(set(names) - set(ENVS))
    if unknown:
        raise SystemExit(f"unknown environment(s) {unknown}; known: {sorted(ENVS)}")
    for name in names:
        build(name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
