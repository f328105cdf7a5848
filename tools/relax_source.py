"""Shared by the fixture scripts that run Relax's code (tools/make_relax_*_fixtures.py).

redai-infra/Relax and redai-studio/Relax are not on the package index and cannot be cloned in this project's
environment. Each script therefore takes either the git directory of a Relax checkout (the file is read at the
script's pinned revision) or the path of the file's text at that revision, checks a pinned sha256, and executes the
code unchanged. Nothing of Relax is copied into this repository.
"""
from __future__ import annotations

import contextlib
import hashlib
import subprocess
from pathlib import Path


def read_text(source: str, revision: str, path: str) -> str:
    "The text of `path` at `revision`, from a git dir (`git show`) or, when `source` is a file, that file's text."
    p = Path(source)
    if p.is_dir():
        return subprocess.run(["git", "--git-dir", str(p), "show", f"{revision}:{path}"], check=True,
                              capture_output=True, text=True).stdout
    return p.read_bytes().decode("utf-8")


def check_sha256(text: str, pinned: str, what: str) -> None:
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    if digest != pinned:
        raise SystemExit(f"{what}: sha256 {digest} is not the pinned {pinned}")


def _identity_compile(fn=None, **kwargs):
    "Stands in for torch.compile: `@torch.compile(...)` and `torch.compile(fn)` both leave the function as written."
    return fn if fn is not None else (lambda f: f)


@contextlib.contextmanager
def torch_compile_is_identity():
    """`torch.compile` as the identity while Relax's definitions are executed, restored afterwards. Inductor needs a
    C++ toolchain, does not change the computed values, and (torch 2.13.0, CPU, its caches on) was seen to reuse a
    compiled `compute_cispo_loss` with a stale `eps_clip`; the plain functions are what the fixtures record."""
    import torch
    compile_ = torch.compile
    torch.compile = _identity_compile
    try:
        yield
    finally:
        torch.compile = compile_


def prefix_mask(lengths, T, holes=()):
    "A float32 [B, T] prefix mask of the given lengths with interior holes at (row, col), each inside its row's prefix."
    import numpy as np
    m = (np.arange(T)[None, :] < np.asarray(lengths)[:, None]).astype(np.float32)
    for r, c in holes:
        assert 0 < c < lengths[r] - 1, (r, c)
        m[r, c] = 0.0
    return m


def read_checked(source: str, revision: str, path: str, pinned: str) -> str:
    "The text of `path` at `revision` (from a git dir or a file, as `read_text`), checked against the pinned sha256."
    text = read_text(source, revision, path)
    check_sha256(text, pinned, f"{source} ({path}@{revision})")
    return text


def fresh_module(name: str, file: str):
    "An empty module registered in sys.modules under `name` (so that @dataclass can resolve it), `__file__` = `file`."
    import sys
    import types
    mod = types.ModuleType(name)
    mod.__file__ = file
    sys.modules[name] = mod
    return mod


def put_token_case(x: dict, case: str, lp, l, adv, mask, older: str = "old_log_probs") -> None:
    "Store a token case under in/<case>/, float32: log_probs `lp`, `older` = lp - l, advantages, mask."
    import numpy as np
    x[f"in/{case}/log_probs"] = np.asarray(lp, np.float32)
    x[f"in/{case}/{older}"] = np.asarray(lp - l, np.float32)
    x[f"in/{case}/advantages"] = np.asarray(adv, np.float32)
    x[f"in/{case}/mask"] = np.asarray(mask, np.float32)


def save_fixture(out: Path, root: Path, arrays: dict, meta: dict) -> None:
    "Write the fixture: the arrays to `out` (.npz, compressed), `meta` to its .json, and say so."
    import json

    import numpy as np
    np.savez_compressed(out, **arrays)
    out.with_suffix(".json").write_text(json.dumps(meta, indent=1) + "\n")
    print(f"[relax] {len(meta['records'])} outputs frozen in {out.relative_to(root)} ({out.stat().st_size} bytes)")
