"""The API reference pages of the site, written from the packages' `__all__` at every build.

One page per chapter that defines public names (docs/api/<chapter>.md, ignored by git), each name an
autodoc entry (`dew_rl.masked_mean`, `dew_rl.objectives.grpo`) under a link to the section of the
chapter that defines it, and an index page (docs/api/index.md) with a table of every name. The
entries come from the docstrings (NumPy style, read by napoleon), so the Index page, `objects.inv`
and the search find every public function, class and constant. `entry_targets()` maps each public
name to its entry for the configuration's link transform.
"""
from __future__ import annotations

import ast
import importlib
import inspect
import json
import re
import shutil
from pathlib import Path

from myst_parser.slugs import github_slugify

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
NBS = ROOT / "nbs"
OUT = HERE / "api"
PACKAGES = ("dew_rl", "dew_rl.objectives")
_HEADER = re.compile(r"File to edit: (?:\.\./)+nbs/([\w.-]+)\.ipynb")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def _origins(package: str) -> dict[str, str]:
    """Public name -> the module it is imported from, read from the package's `__init__.py`."""
    mod = importlib.import_module(package)
    init = Path(mod.__file__)
    found = {}
    for node in ast.walk(ast.parse(init.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            for alias in node.names:
                if alias.name == "*":  # a chapter module's whole __all__
                    for name in importlib.import_module(base).__all__:
                        found.setdefault(name, base)
                else:
                    found.setdefault(alias.asname or alias.name, base)
    for name in mod.__all__:  # defined in the __init__ itself (e.g. __version__): its own notebook
        found.setdefault(name, package)
    return found


def _chapter_of(module: str) -> str:
    path = Path(importlib.import_module(module).__file__)
    m = _HEADER.search(path.read_text(encoding="utf-8")[:2000])
    if not m:
        raise RuntimeError(f"{path} names no notebook in its header")
    return m.group(1)


def _plain(title: str) -> str:
    """A heading's text as myst-parser slugs it: text and inline code, without math or markup."""
    title = re.sub(r"\$[^$]*\$", "", title)
    title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", title)
    return title.replace("`", "").replace("*", "")


def _chapter_index(stem: str) -> tuple[str, dict[str, tuple[str, str]]]:
    """A chapter's title, and for each name defined in it the heading (text, slug) it is defined under."""
    nb = json.loads((NBS / f"{stem}.ipynb").read_text(encoding="utf-8"))
    title, slugs, current, defined = stem, set(), ("", ""), {}
    for cell in nb["cells"]:
        src = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            fence = False
            for line in src.splitlines():
                if line.lstrip().startswith(("```", "~~~")):
                    fence = not fence
                    continue
                m = None if fence else _HEADING.match(line)
                if not m:
                    continue
                level, text = len(m.group(1)), m.group(2)
                if level == 1 and title == stem:
                    title = _plain(text).strip()
                if level > 3:
                    continue
                slug = base = github_slugify(_plain(text))
                i = 0
                while slug in slugs:
                    i += 1
                    slug = f"{base}-{i}"
                if slug:
                    slugs.add(slug)
                    current = (_plain(text).strip(), slug)
        elif cell["cell_type"] == "code" and src.lstrip().startswith("#| export"):
            for line in src.splitlines():
                m = re.match(r"^(?:def|class)\s+(\w+)|^(\w+)\s*(?::[^=]*)?=[^#]*(?:#\s*(.*))?$", line)
                if m:
                    comment = (m.group(3) or "").strip()
                    defined.setdefault(m.group(1) or m.group(2), current + (comment,))
    return title, defined


_CODE = re.compile(r"(`[^`]+`)")


def rst_text(line: str) -> str:
    """A line written Markdown-minded as reStructuredText says it: `|d|` is an absolute value, not a
    substitution, `2*x*y` no emphasis, and a word glued to inline code (`aggregate`d) stays glued."""
    parts = _CODE.split(line)
    for j in range(0, len(parts), 2):  # outside inline code
        parts[j] = parts[j].replace("|", "\\|")
        if j and parts[j][:1].isalnum():
            parts[j] = "\\ " + parts[j]
    return "".join(parts)


def _kind(obj) -> str:
    if inspect.isclass(obj):
        return "class"
    if callable(obj):
        return "function"
    return "data"


def _summary(obj, kind: str) -> str:
    doc = inspect.getdoc(obj) if kind != "data" else None
    if not doc:
        return ""
    first = doc.strip().split("\n\n")[0].replace("\n", " ").strip()
    return first.replace("|", "\\|")


def collect() -> list[dict]:
    """Every public name of the two packages: package, name, kind, chapter, section, summary."""
    rows, titles = [], {}
    for package in PACKAGES:
        mod = importlib.import_module(package)
        origins = _origins(package)
        for name in mod.__all__:
            obj = getattr(mod, name)
            kind = _kind(obj)
            source = getattr(obj, "__module__", None) if kind != "data" else None
            stem = _chapter_of(source if source and source.startswith("dew_rl") else origins[name])
            if stem not in titles:
                titles[stem] = _chapter_index(stem)
            title, defined = titles[stem]
            rows.append(dict(package=package, name=name, kind=kind, chapter=stem, chapter_title=title,
                             section=defined.get(name, ("", ""))[:2], summary=_summary(obj, kind), value=obj,
                             comment=defined.get(name, ("", "", ""))[2] if kind == "data" else "",
                             same_as=next((f"dew_rl.{name}" for _ in [0] if package != "dew_rl"
                                           and getattr(importlib.import_module("dew_rl"), name, None) is obj), "")))
    return rows


def _entry(row: dict) -> str:
    """One entry: the autodoc directive, with the constant's comment and the link to the section
    that derives it as the last lines of its content (so they sit inside the entry)."""
    full = f"{row['package']}.{row['name']}"
    text, slug = row["section"]
    href = f"../{row['chapter']}.html" + (f"#{slug}" if slug else "")
    where = f"Derived in `{(text or row['chapter_title']).replace('`', '')} <{href}>`__."
    directive = {"function": "autofunction", "class": "autoclass", "data": "autodata"}[row["kind"]]
    opts = ""
    if row["kind"] == "data" and len(repr(row["value"])) > 160:
        opts = f"   :annotation: : {type(row['value']).__name__}\n"
    body = [rst_text(row["comment"])] if row.get("comment") else []
    if row.get("same_as"):  # the very object of a dew_rl name, re-exported: an entry pointing at that one
        directive = {"function": "py:function", "data": "py:data",
                     "class": "py:exception" if issubclass(row["value"], BaseException) else "py:class"}[row["kind"]]
        body = [f"The same object as :py:obj:`{row['same_as']}`, re-exported so that a trainer needs only "
                f"``import {row['package']}``."]
    content = "".join(f"   {line}\n\n" for line in body + [where])
    return f"```{{eval-rst}}\n.. {directive}:: {full}\n{opts}\n{content}```\n"


_PAGES: dict[str, str] = {}  # full name -> its page under docs/api/


def page_of(full: str) -> str:
    return _PAGES[full]


def write() -> list[dict]:
    """Write docs/api/: one page per chapter and the index table; return the rows."""
    rows = collect()
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir()
    pages = {}
    for row in rows:
        pages.setdefault((row["package"], row["chapter"]), []).append(row)
    order = sorted(pages, key=lambda k: (PACKAGES.index(k[0]), k[1]))
    names = []
    for package, stem in order:
        group = pages[(package, stem)]
        page = f"{'objectives_' if package != 'dew_rl' else ''}{stem}"
        names.append(page)
        _PAGES.update({f"{package}.{row['name']}": page for row in group})
        title = group[0]["chapter_title"]
        lines = [f"# `{package}`: {title}\n",
                 f"The public names of `{package}` that [{title}](../{stem}.ipynb) derives, "
                 "as their docstrings state them.\n"]
        for row in group:
            lines.append(_entry(row))
        (OUT / f"{page}.md").write_text("\n".join(lines), encoding="utf-8")
    table = ["# API reference\n",
             "Every public name of `dew_rl` (`import dew_rl as rl`) and of `dew_rl.objectives` "
             "(`import dew_rl.objectives as obj`), each linked to its entry: signature, parameters and "
             "returns from its docstring, and the chapter section that derives it. The chapter list "
             "and the contract's signatures are on [The public API](../99_api.ipynb).\n"]
    for package in PACKAGES:
        table += [f"## `{package}`\n", "| name | kind | summary | chapter |", "|---|---|---|---|"]
        for package_, stem in order:
            if package_ != package:
                continue
            for row in pages[(package_, stem)]:
                full = f"{package}.{row['name']}"
                table.append(f"| {{py:obj}}`~{full}` | {row['kind']} | {row['summary']} | "
                             f"[{row['chapter_title']}](../{stem}.ipynb) |")
        table.append("")
    table += ["```{toctree}", ":hidden:", ":maxdepth: 1", "", *names, "```", ""]
    (OUT / "index.md").write_text("\n".join(table), encoding="utf-8")
    return rows
