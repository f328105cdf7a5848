"""Shared by the two validated tables, tools/conventions.py (data/conventions.json) and tools/crosswalk.py
(data/crosswalk.json): how a validation reports its problems, and how a record becomes a Markdown row."""
from __future__ import annotations

import re

# `owner/repo@revision:path[:line[-line]]`; a path ending in / is a folder (each table checks its own, stricter form)
SOURCE_RE = re.compile(r"^(?P<repo>[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)@(?P<rev>[0-9a-f]{7,40}):(?P<path>[^:\s]+)"
                       r"(?::(?P<line>\d+(?:-\d+)?))?$")


def raise_problems(problems: list, file: str) -> None:
    "Raise one AssertionError that lists every problem found in `file`, if there is any."
    if problems:
        raise AssertionError(f"{len(problems)} problem(s) in {file}:\n  " + "\n  ".join(problems))


def source_url(src: str) -> str:
    "A GitHub URL for `owner/repo@revision:path[:line[-line]]` (a path ending in / is a folder)."
    m = SOURCE_RE.match(src)
    kind = "tree" if m["path"].endswith("/") else "blob"
    url = f"https://github.com/{m['repo']}/{kind}/{m['rev']}/{m['path'].rstrip('/')}"
    if m["line"]:
        a, _, b = m["line"].partition("-")
        url += f"#L{a}" + (f"-L{b}" if b else "")
    return url


def cell(text: str) -> str:
    "`text` as one Markdown table cell (its pipes escaped, its line breaks spaces)."
    return text.replace("|", "\\|").replace("\n", " ")
