"""Fail when generated files are out of step with the notebooks.

1. `nbdev_export` would change dew_rl/ (the library is generated from nbs/ and never edited).
2. A jupytext twin (nbs/*.md) differs from the text form of its .ipynb.
3. README.md differs from what tools/make_readme.py generates from nbs/index.ipynb.

Run from the repository root with the project's virtual environment.
"""
from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
JUPYTEXT_OPTS = ["--opt", "notebook_metadata_filter=-jupytext.text_representation.jupytext_version"]


def tree_digest(path: Path) -> dict[str, str]:
    return {str(p.relative_to(ROOT)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(path.rglob("*.py")) if "__pycache__" not in p.parts}


def check_export() -> list[str]:
    before = tree_digest(ROOT / "dew_rl")
    subprocess.run([str(BIN / "nbdev_export")], cwd=ROOT, check=True)
    after = tree_digest(ROOT / "dew_rl")
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    return [f"nbdev_export changed {c}: dew_rl/ was out of step with nbs/" for c in changed]


def markdown_twin(nb: Path) -> str:
    out = subprocess.run([str(BIN / "jupytext"), "--quiet", "--to", "md:myst", *JUPYTEXT_OPTS,
                          "--output", "-", str(nb)], cwd=ROOT, check=True,
                         capture_output=True, text=True)
    return out.stdout


def check_twins() -> list[str]:
    problems = []
    for nb in sorted((ROOT / "nbs").rglob("*.ipynb")):
        if ".ipynb_checkpoints" in nb.parts:
            continue
        md = nb.with_suffix(".md")
        if not md.exists():
            problems.append(f"{nb.relative_to(ROOT)} has no MyST twin {md.name}")
        elif markdown_twin(nb) != md.read_text(encoding="utf-8"):
            problems.append(f"{md.relative_to(ROOT)} has drifted from its .ipynb: run `jupytext --sync`")
    for md in sorted((ROOT / "nbs").rglob("*.md")):
        if not md.with_suffix(".ipynb").exists():
            problems.append(f"{md.relative_to(ROOT)} has no .ipynb: run `make nb NB={md.relative_to(ROOT)}`")
    return problems


def check_readme() -> list[str]:
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "make_readme.py"), "--check"], cwd=ROOT)
    return [] if r.returncode == 0 else ["README.md is stale: run `make readme`"]


def main() -> int:
    problems = check_export() + check_twins() + check_readme()
    for p in problems:
        print(f"check_sync: {p}", file=sys.stderr)
    if not problems:
        print("check_sync: dew_rl/, jupytext twins and README.md are in step with nbs/")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
