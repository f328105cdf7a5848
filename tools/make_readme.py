"""Generate README.md from nbs/index.ipynb (Quarto, and so `nbdev_readme`, is not available here).

    python tools/make_readme.py           # write README.md
    python tools/make_readme.py --check   # exit 1 if README.md is stale

Markdown cells are copied with two changes: MyST citation roles are dropped (every citation in the
notebooks carries a plain-text fallback beside its role), and links to sibling notebooks are
rewritten to point into nbs/. Visible code cells become Python blocks followed by their text
output; cells hidden with nbdev's `#| hide` are left out.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "nbs" / "index.ipynb"
TARGET = ROOT / "README.md"
BANNER = "<!-- Generated from nbs/index.ipynb by tools/make_readme.py: edit the notebook, then `make readme`. -->\n"

_CITE = re.compile(r"\s*\{cite(?::[a-z]+)?\}`[^`]*`")
_LINK = re.compile(r"\]\((?!https?://|#|/)([^)\s]+\.(?:ipynb|md))(#[^)]*)?\)")
_DIRECTIVE = re.compile(r"^#\|\s*(.*)$")
_NBVAL = re.compile(r"^#\s*NBVAL_[A-Z_]+\s*$")


def _src(cell) -> str:
    s = cell.get("source", "")
    return s if isinstance(s, str) else "".join(s)


def _markdown(text: str) -> str:
    text = _CITE.sub("", text)
    return _LINK.sub(lambda m: f"](nbs/{m.group(1)}{m.group(2) or ''})", text)


def _code(cell) -> str | None:
    lines = _src(cell).splitlines()
    directives = [m.group(1).strip() for l in lines if (m := _DIRECTIVE.match(l))]
    if any(d.startswith(("hide", "default_exp")) or d.replace(" ", "") == "include:false" for d in directives):
        return None
    body = "\n".join(l for l in lines if not _DIRECTIVE.match(l) and not _NBVAL.match(l)).strip()
    parts = [f"```python\n{body}\n```"] if body and "echo:false" not in [d.replace(" ", "") for d in directives] else []
    texts, markdown = [], []
    for out in cell.get("outputs", []):
        md = out.get("data", {}).get("text/markdown")
        if md:  # a rendered Markdown output (a computed table) is Markdown in the README too
            markdown.append(md if isinstance(md, str) else "".join(md))
            continue
        text = out.get("text") or out.get("data", {}).get("text/plain")
        if text:
            texts.append(text if isinstance(text, str) else "".join(text))
    if texts:  # consecutive stream chunks are one block of output
        parts.append("```\n" + "".join(texts).rstrip() + "\n```")
    parts += [m.strip() for m in markdown]
    return "\n\n".join(parts) or None


def render() -> str:
    nb = json.loads(SOURCE.read_text(encoding="utf-8"))
    blocks = []
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            blocks.append(_markdown(_src(cell)).strip())
        elif cell["cell_type"] == "code":
            block = _code(cell)
            if block:
                blocks.append(block)
    return BANNER + "\n" + "\n\n".join(b for b in blocks if b) + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if not TARGET.exists() or TARGET.read_text(encoding="utf-8") != text:
            print("README.md is stale: run `make readme` (tools/make_readme.py)", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
