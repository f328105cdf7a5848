"""Private helpers stay out of the reader's way: under its heading, a public function's definition comes
before the private helpers it uses.

For every exported cell (`#| export`, `#| exports`) of every notebook, each public name of `dew_rl` or
`dew_rl.objectives` (its `__all__`) that the cell defines (`def` or `class`) is checked: between the
closest heading above it and its `def` line, no shown cell defines a private function or class (a
top-level name starting with `_`), and no private definition precedes it in its own cell. A cell whose
code is folded on the site (`hide-input` or `hide-cell` tag, `#| hide`) is out of the way already.
Helpers shared by several public functions go after the first of them, or into a folded cell.

`misplaced` is the check; a test feeds it a chapter that breaks the rule, so it cannot pass vacuously.
"""
import ast
import re
from pathlib import Path

import pytest

import dew_rl
import dew_rl.objectives

ROOT = Path(__file__).resolve().parent.parent
PUBLIC = set(dew_rl.__all__) | set(dew_rl.objectives.__all__)
FENCE = re.compile(r"^(`{3,})\{code-cell\}")
HEADING = re.compile(r"^#{1,6} +(.+)")


def _cells(text: str):
    """(kind, tags, source lines) of each cell of a MyST notebook, markdown between code cells."""
    lines, i, md = text.split("\n"), 0, []
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            md.append(lines[i])
            i += 1
            continue
        yield "markdown", set(), md
        md, tags, j = [], set(), i + 1
        if j < len(lines) and lines[j] == "---":
            j += 1
            while lines[j] != "---":
                t = re.match(r"tags:\s*\[(.*)\]", lines[j])
                tags |= {x.strip().strip("'\"") for x in t.group(1).split(",")} if t else set()
                j += 1
            j += 1
        while j < len(lines) and re.match(r"^:[\w-]+:", lines[j]):
            t = re.match(r"^:tags:\s*\[(.*)\]", lines[j])
            tags |= {x.strip().strip("'\"") for x in t.group(1).split(",")} if t else set()
            j += 1
        k = j
        while lines[k] != m.group(1):
            k += 1
        yield "code", tags, lines[j:k]
        i = k + 1
    yield "markdown", set(), md


def _names(node) -> set:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _defs(src: list[str]):
    """(name, names its body uses, names needed when it is defined) of each top-level def or class, and
    the names the cell's other top-level statements use when the module is imported."""
    try:
        tree = ast.parse("\n".join(src))
    except SyntaxError:
        return [], set()
    defs, eager = [], set()
    for n in tree.body:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            at_def = set().union(*map(_names, n.decorator_list), set())
            if isinstance(n, ast.ClassDef):
                at_def |= set().union(*map(_names, n.bases), set()) | set().union(
                    *(_names(b) for b in n.body if not isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef))), set())
            else:
                at_def |= set().union(*map(_names, n.args.defaults + [d for d in n.args.kw_defaults if d]), set())
            defs.append((n.name, _names(n), at_def))
        else:
            eager |= _names(n)
    return defs, eager


def misplaced(text: str, public=PUBLIC) -> list[str]:
    """The public definitions that come after private ones they do not need first, under their heading.

    Under a heading, a private definition shown before the heading's first public one is in the way,
    unless a later definition or a module-level statement needs it when the module is imported (a
    decorator, a base class, a default); one between two public definitions must serve an earlier one
    (be used by it, directly or through other helpers)."""
    out, heading, in_fence = [], "(top of the chapter)", False
    private, served, needed = [], set(), set()
    for kind, tags, src in _cells(text):
        if kind == "markdown":
            for line in src:
                if line.lstrip().startswith(("```", "~~~")):
                    in_fence = not in_fence
                elif not in_fence and (h := HEADING.match(line)):
                    heading, private, served, needed = h.group(1).strip(), [], set(), set()
            continue
        directives = [l[3:].strip() for l in src if l.startswith("#| ")]
        folded = tags & {"hide-input", "hide-cell", "remove-cell", "remove-input"} or "hide" in directives
        exported = any(d.split()[0] in ("export", "exports") for d in directives if d)
        if not exported:
            continue
        defs, eager = _defs(src)
        needed |= eager
        for name, uses, at_def in defs:
            needed |= at_def
            if name.startswith("_"):
                if not folded:
                    private.append((name, uses))
                continue
            if name not in public:
                continue
            # helpers that serve an earlier public definition (transitively) are where they belong
            changed = True
            while changed:
                changed = False
                for pname, puses in private:
                    if pname in served and not puses <= served:
                        served |= puses
                        changed = True
                for pname, puses in private:  # what a helper needed at import time calls is needed too
                    if pname in needed and not puses <= needed:
                        needed |= puses
                        changed = True
            bad = [p for p, _ in private if p not in served and p not in needed]
            if bad:
                out.append(f"{name} (under '{heading}') after {', '.join(bad)}")
            served |= uses | {name}
            served |= {p for p, _ in private}
            private = []
    return out


CHAPTERS = sorted((ROOT / "nbs").glob("[0-9]*.md"))


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_public_definitions_come_before_their_private_helpers(path):
    bad = misplaced(path.read_text(encoding="utf-8"))
    assert not bad, f"{path.name}: move these private helpers after the public function " \
                    f"(or into a folded cell): {bad}"


def test_the_check_finds_a_helper_before_its_function():
    chapter = "\n".join([
        "## The loss", "", "Prose.", "",
        "```{code-cell} ipython3", "#| export", "def _helper(x):", "    return x", "```", "",
        "```{code-cell} ipython3", "#| export", "def loss(x):", "    return _helper(x)", "```", "",
        "## Another", "",
        "```{code-cell} ipython3", "#| export", "def other(x):", "    return _tail(x)", "",
        "def _tail(x):", "    return x", "```", "",
        "```{code-cell} ipython3", "---", "tags: [hide-input]", "---", "#| export",
        "def _folded(x):", "    return x", "```", "",
        "```{code-cell} ipython3", "#| export", "def third(x):", "    return _folded(x)", "```",
    ])
    assert misplaced(chapter, public={"loss", "other", "third"}) == ["loss (under 'The loss') after _helper"]
