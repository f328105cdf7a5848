"""Wrap the source of every code cell of the given MyST notebooks to at most 100 characters a line.

    python tools/wrap_code.py nbs/02b_group_advantage.md [more.md ...]   # rewrite in place
    python tools/wrap_code.py --check nbs/*.md                           # list lines over 100, exit 1 if any

`make wrap NB="nbs/a.md nbs/b.md"` runs it and then `make nb` on the same files (the .ipynb twin takes
the new source and is re-executed; the outputs stay the same because only layout changes).

Only the lines that are too long change, so a notebook's hand alignment survives elsewhere:

1. a comment that pushes its line over (a trailing comment after code that fits) moves onto its
   own line above the code, at the code's indentation, wrapped at 100;
2. a whole-line comment over 100 is re-wrapped (never a `#|` directive or an nbval marker);
3. the statements that still hold a long line are reformatted by black (line length 100, quotes kept,
   long strings split into implicit concatenations, `--line-ranges` so that no other statement moves);
   black checks that the code's syntax tree is unchanged, so exported functions (dew_rl/ is regenerated
   from these cells by nbdev_export) behave exactly as before;
4. a docstring's long line is re-wrapped at its own indentation (a one-line docstring becomes a
   triple-quoted one over several lines); a public function's one-line summary and a parameter's name
   line are left as they are (tests/test_internals.py wants both on one line) and reported, as is any
   other string black cannot split: those are shortened by hand.
5. a `from M import (...)` over several lines keeps its names aligned under the first (nbdev_export
   makes the library's imports relative only in that layout);
6. a bracket that black exploded (one item a line, the closing bracket alone on the last line) is packed
   back into a hanging indent, the items aligned under the first, simple ones joined while they fit,
   where the syntax tree stays the same (each cell is parsed before and after); a bracket of more than
   PACK_MAX_LINES (16) lines, or with a comment or a multi-line string inside, is left as it is.

Running it twice changes nothing the second time. The site's browser test
(tests/test_site_browser.py) checks that no code cell's source scrolls sideways at 1400 px.
"""
from __future__ import annotations

import argparse
import ast
import io
import re
import sys
import textwrap
import tokenize
from pathlib import Path

LIMIT = 100
NAMED = {"Parameters", "Returns", "Yields", "Raises", "Other Parameters", "Attributes"}
FENCE = re.compile(r"^(`{3,})\{code-cell\}")


def cells(lines: list[str]):
    """(start, end) line indices of each code cell's source (between its fences, after its options)."""
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence = m.group(1)
        j = i + 1
        if j < len(lines) and lines[j] == "---":  # a YAML options block
            j += 1
            while j < len(lines) and lines[j] != "---":
                j += 1
            j += 1
        while j < len(lines) and lines[j].startswith(":") and re.match(r"^:[\w-]+:", lines[j]):
            j += 1
        k = j
        while k < len(lines) and lines[k] != fence:
            k += 1
        yield j, k
        i = k + 1


def _protected(line: str) -> bool:
    s = line.lstrip()
    return s.startswith("#|") or s.startswith("# NBVAL_")


def _wrap_comment(indent: str, text: str) -> list[str]:
    width = max(LIMIT - len(indent) - 2, 40)
    return [f"{indent}# {w}" for w in textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False)]


def fix_comments(src: str) -> str:
    """Steps 1 and 2 of the module docstring on one cell's source."""
    lines = src.split("\n")
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(src).readline))
    except (tokenize.TokenError, SyntaxError):
        return src
    comments = {t.start[0] - 1: t for t in toks if t.type == tokenize.COMMENT}
    out: list[str] = []
    for n, line in enumerate(lines):
        tok = comments.get(n)
        if len(line) <= LIMIT or tok is None or _protected(line):
            out.append(line)
            continue
        code = line[: tok.start[1]].rstrip()
        text = tok.string[1:].strip()
        if not code:  # a whole-line comment
            out.extend(_wrap_comment(line[: tok.start[1]], text))
        elif len(code) <= LIMIT:  # a trailing comment: it goes above its code
            indent = re.match(r"\s*", line).group(0)
            out.extend(_wrap_comment(indent, text))
            out.append(code)
        else:
            out.append(line)
    return "\n".join(out)


def _docstrings(tree):
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                    and isinstance(first.value.value, str)):
                yield first.value


def fix_docstrings(src: str) -> str:
    """Step 4 of the module docstring on one cell's source."""
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return src
    lines = src.split("\n")
    edits = []  # (first line, last line, replacement lines), applied bottom up
    for node in _docstrings(tree):
        a, b = node.lineno - 1, node.end_lineno - 1
        if not any(len(lines[n]) > LIMIT for n in range(a, b + 1)):
            continue
        first = lines[a]
        indent = re.match(r"\s*", first).group(0)
        if a == b:  # a one-line docstring: "text" or '''text''' or """text"""
            m = re.fullmatch(r"(\s*)([rRuU]?)(\"\"\"|\'\'\'|\"|\')(.*)\3(\s*)", first)
            if not m or '"""' in m.group(4) or m.group(4).endswith('"') or "\\" in m.group(4):
                continue
            words = textwrap.wrap(m.group(4), LIMIT - len(indent) - 3, break_long_words=False,
                                  break_on_hyphens=False)
            if len(words) < 2:
                continue
            new = [f'{indent}{m.group(2)}"""{words[0]}'] + [f"{indent}{w}" for w in words[1:]]
            new[-1] += '"""'
            edits.append((a, b, new))
            continue
        new = [first]  # a multi-line docstring: its first line is the summary, left as it is
        section, n = "", a + 1
        while n <= b:
            line = lines[n]
            stripped = line.strip()
            nxt = lines[n + 1].strip() if n + 1 <= b else ""
            if nxt and set(nxt) == {"-"}:
                section = stripped
            own = re.match(r"\s*", line).group(0)
            at_base = len(own) <= len(indent)
            n += 1
            if len(line) <= LIMIT or (at_base and section in NAMED) or '"""' in stripped[3:] and n - 1 == b:
                new.append(line)
                continue
            cont = own + ("  " if re.match(r"[-*] ", stripped) else "")
            # the rest of the paragraph (its lines at the continuation's indentation) is re-wrapped with it
            para = [stripped]
            while n <= b and n < b + 1:
                follow = lines[n]
                after = lines[n + 1].strip() if n + 1 <= b else ""
                if (not follow.strip() or re.match(r"\s*", follow).group(0) != cont or re.match(r"[-*] ", follow.strip())
                        or '"""' in follow or (after and set(after) == {"-"})):
                    break
                para.append(follow.strip())
                n += 1
            words = textwrap.wrap(" ".join(para), LIMIT - len(own), break_long_words=False, break_on_hyphens=False)
            new.append(own + words[0])
            rest = textwrap.wrap(" ".join(words[1:]), LIMIT - len(cont), break_long_words=False,
                                 break_on_hyphens=False)
            new.extend(cont + w for w in rest)
        edits.append((a, b, new))
    for a, b, new in sorted(edits, reverse=True):
        lines[a:b + 1] = new
    return "\n".join(lines)


def fix_directives(src: str) -> str:
    """Black writes a cell's `#| export` as `# | export`, which nbdev reads but the site's build does not
    take for a directive: the nbdev spelling is restored."""
    return re.sub(r"(?m)^# \| ", "#| ", src)


def black_wrap(src: str) -> str:
    """Step 3: black on the statements that hold a line over the limit."""
    import black

    long = [n + 1 for n, line in enumerate(src.split("\n")) if len(line) > LIMIT]
    if not long:
        return src
    err = None
    # String splitting is an unstable feature of black: without it if it fails; black's --line-ranges
    # fails on some one-line suites (`if c: x`), then the whole cell is formatted.
    for unstable, ranges in ((True, True), (False, True), (True, False), (False, False)):
        mode = black.Mode(line_length=LIMIT, string_normalization=False, preview=unstable, unstable=unstable)
        try:
            new = black.format_str(src + "\n", mode=mode, lines=[(n, n) for n in long] if ranges else ())
            break
        except Exception as e:  # noqa: BLE001 - report and keep the cell as it is
            err = e
    else:
        print(f"  black left a cell unchanged: {type(err).__name__}: {str(err)[:200]}", file=sys.stderr)
        return src
    return new[:-1] if new.endswith("\n") and not src.endswith("\n") else new


def fix_imports(src: str) -> str:
    """Step 5: a `from M import (...)` over several lines is written with its names aligned under the
    first one and the closing parenthesis on the last name's line. nbdev_export makes an import of the
    library relative by rewriting the first line's text up to the statement's last column: a black-style
    import, whose last line is `)`, would stay absolute in dew_rl/."""
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return src
    lines = src.split("\n")
    for node in sorted((n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)), key=lambda n: -n.lineno):
        a, b = node.lineno - 1, node.end_lineno - 1
        head = f"from {'.' * node.level}{node.module or ''}"
        if a == b or node.end_col_offset > node.col_offset + len(head):
            continue
        if any("#" in lines[n] for n in range(a, b + 1)):
            continue  # a comment among the names: left as it is
        indent = lines[a][: node.col_offset]
        prefix = f"{indent}{head} import ("
        names = [f"{n.name} as {n.asname}" if n.asname else n.name for n in node.names]
        body = textwrap.wrap(", ".join(names) + ")", LIMIT, initial_indent=prefix,
                             subsequent_indent=" " * len(prefix), break_long_words=False, break_on_hyphens=False)
        lines[a:b + 1] = body
    return "\n".join(lines)


_OPENING, _CLOSING = "([{", ")]}"
PACK_MAX_LINES = 16  # a longer bracket is a table laid out one entry a line on purpose; left as it is


def _exploded(tokens):
    """(open, close) token pairs of brackets laid out as black explodes them: the opening bracket ends its
    line, the closing one starts its own, at most PACK_MAX_LINES lines between, no comment and no
    multi-line string inside. Innermost first."""
    stack, pairs = [], []
    for k, t in enumerate(tokens):
        if t.type == tokenize.OP and t.string in _OPENING:
            stack.append(k)
        elif t.type == tokenize.OP and t.string in _CLOSING and stack:
            pairs.append((stack.pop(), k))
    out = []
    for o, c in pairs:
        to, tc = tokens[o], tokens[c]
        if tokens[o + 1].type != tokenize.NL or tokens[c].line[: tc.start[1]].strip():
            continue
        if not 1 <= tc.start[0] - to.start[0] - 1 <= PACK_MAX_LINES:  # the lines between the two
            continue
        inner = tokens[o + 1:c]
        if any(t.type == tokenize.COMMENT or (t.type == tokenize.STRING and t.start[0] != t.end[0])
               for t in inner):
            continue
        if to.line.lstrip().startswith(("from ", "import ")):
            continue
        out.append((to.start[0] - 1, tc.start[0] - 1))
    return sorted(out, key=lambda p: p[1] - p[0])


def _packed(lines, a, b):
    """Lines a..b (the opening bracket's line to the closing one's) as hanging-indent lines: the first
    item after the bracket, the others aligned under it, simple items joined while they fit, the
    closing bracket on the last item's line."""
    head = lines[a].rstrip()
    inner = lines[a + 1:b]
    base = len(inner[0]) - len(inner[0].lstrip())
    col = len(head)
    out = [head + inner[0].strip()]
    prev_simple = True
    for line in inner[1:]:
        rel = len(line) - len(line.lstrip()) - base
        text = line.strip()
        simple = rel == 0 and not any(ch in text for ch in _OPENING + _CLOSING)
        if simple and prev_simple and out[-1].endswith(",") and len(out[-1]) + 1 + len(text) <= LIMIT:
            out[-1] += " " + text
        else:
            out.append(" " * (col + max(rel, 0)) + text)
        prev_simple = simple
    out[-1] += lines[b].strip()
    return out


def pack_brackets(src: str) -> str:
    """Step 6: the brackets black explodes (one item a line, the closing bracket alone) packed back into
    hanging indents, a construct at a time, kept only where every line fits and the syntax tree is
    unchanged (a trailing comma is dropped where that changes nothing)."""
    try:
        tree = ast.dump(ast.parse(src))
    except SyntaxError:
        return src
    skip = set()
    while True:
        lines = src.split("\n")
        try:
            tokens = list(tokenize.generate_tokens(io.StringIO(src + "\n").readline))
        except (tokenize.TokenError, SyntaxError):
            return src
        todo = [p for p in _exploded(tokens) if (p, lines[p[0]]) not in skip]
        if not todo:
            return src
        a, b = todo[0]
        done = False
        for drop_comma in (True, False):
            body = list(lines)
            if drop_comma and body[b - 1].rstrip().endswith(","):
                body[b - 1] = body[b - 1].rstrip()[:-1]
            new = _packed(body, a, b)
            if any(len(l) > LIMIT for l in new):
                continue
            cand = "\n".join(lines[:a] + new + lines[b + 1:])
            try:
                same = ast.dump(ast.parse(cand)) == tree
            except SyntaxError:
                same = False
            if same:
                src, done = cand, True
                break
        if not done:
            skip.add(((a, b), lines[a]))


def wrap_source(src: str) -> str:
    return pack_brackets(fix_directives(fix_imports(black_wrap(fix_comments(fix_docstrings(src))))))


def long_lines(path: Path) -> list[tuple[int, str]]:
    lines = path.read_text(encoding="utf-8").split("\n")
    return [(n + 1, lines[n]) for a, b in cells(lines) for n in range(a, b) if len(lines[n]) > LIMIT]


def wrap_file(path: Path) -> bool:
    changed = False
    for _ in range(3):  # a moved comment can make a line black has to wrap: until nothing changes
        if not _wrap_once(path):
            break
        changed = True
    return changed


def _wrap_once(path: Path) -> bool:
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    out: list[str] = []
    prev = 0
    for a, b in cells(lines):
        out.extend(lines[prev:a])
        src = "\n".join(lines[a:b])
        long = any(len(l) > LIMIT for l in lines[a:b])
        new_src = wrap_source(src) if long else pack_brackets(fix_imports(src))
        # a cell's trailing blank lines go (black would add to them on every run)
        out.extend(new_src.rstrip("\n").split("\n"))
        prev = b
    out.extend(lines[prev:])
    new = "\n".join(out)
    if new != text:
        path.write_text(new, encoding="utf-8")
        return True
    return False


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--check", action="store_true", help="only list the code lines over the limit")
    args = ap.parse_args(argv)
    bad = 0
    for p in args.files:
        if p.suffix != ".md":
            p = p.with_suffix(".md")
        if not args.check and wrap_file(p):
            print(f"wrapped {p}")
        rest = long_lines(p)
        bad += len(rest)
        for n, line in rest:
            print(f"{p}:{n}: {len(line)} characters: {line.strip()[:80]}")
    if args.check and bad:
        print(f"{bad} code line(s) over {LIMIT} characters")
    return 1 if (args.check and bad) else 0


if __name__ == "__main__":
    sys.exit(main())
