"""Author a notebook: sync its jupytext twin, execute it in place, clean it, export the library.

    python tools/nb.py nbs/01_reductions.md     # or the .ipynb, or several paths

Whichever of the pair was edited last is the source (jupytext --sync decides). Outputs are stored
in the .ipynb so that nbval can compare them; the .md twin holds no outputs.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def run(*args, cwd=ROOT):
    subprocess.run([str(a) for a in args], cwd=cwd, check=True)


def build(path: Path) -> None:
    path = path.resolve()
    run(BIN / "jupytext", "--quiet", "--sync", path)
    nb = path.with_suffix(".ipynb")
    run(BIN / "nbdev_export")  # the notebook imports its own freshly exported module
    # no progress bars in stored outputs (the learning-curve chapter shows one when run by hand)
    subprocess.run([str(BIN / "jupyter"), "execute", "--inplace", "--timeout=900", nb.name], cwd=nb.parent, check=True,
                   env={**os.environ, "DEW_RL_NO_PROGRESS": "1"})
    run(BIN / "nbdev_clean", "--fname", nb)
    # The twin is written exactly as the drift check (tools/check_sync.py) regenerates it.
    twin = subprocess.run([str(BIN / "jupytext"), "--quiet", "--to", "md:myst", "--opt",
                           "notebook_metadata_filter=-jupytext.text_representation.jupytext_version",
                           "--output", "-", str(nb)], cwd=ROOT, check=True, capture_output=True, text=True)
    nb.with_suffix(".md").write_text(twin.stdout, encoding="utf-8")


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    for p in argv:
        build(Path(p))
    run(BIN / "nbdev_export")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
