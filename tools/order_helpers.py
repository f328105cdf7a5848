"""Move the private helpers that tests/test_chapter_order.py flags to just after the public definition
they serve (same cell), so that a chapter's public `def` comes right after its heading's prose.

    python tools/order_helpers.py nbs/01_reductions.md [more.md ...]    # then: make nb NB="..."

A helper that another cell uses between its place and the public definition is left where it is and
reported (move it by hand, or fold its cell). A cell left with only its `#| export` line is removed.
"""
import ast, re, sys, importlib.util
from pathlib import Path
ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("co", ROOT / "tests" / "test_chapter_order.py")
co = importlib.util.module_from_spec(spec); spec.loader.exec_module(co)
FENCE = co.FENCE

def parse(lines):
    """code cells: dict(start, end (source line range), tags...)"""
    cells, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1; continue
        j = i + 1
        if lines[j] == "---":
            j += 1
            while lines[j] != "---": j += 1
            j += 1
        while re.match(r"^:[\w-]+:", lines[j]): j += 1
        k = j
        while lines[k] != m.group(1): k += 1
        cells.append(dict(open=i, start=j, end=k))
        i = k + 1
    return cells

def segments(lines, c):
    src = "\n".join(lines[c["start"]:c["end"]])
    tree = ast.parse(src)
    segs = []
    for n in tree.body:
        a = (n.decorator_list[0].lineno if getattr(n, "decorator_list", None) else n.lineno) - 1
        # leading comments (not directives) attach to the def
        while a > 0 and lines[c["start"] + a - 1].lstrip().startswith("#") and not lines[c["start"] + a - 1].startswith("#|"):
            a -= 1
        segs.append(dict(name=getattr(n, "name", None), a=c["start"] + a, b=c["start"] + n.end_lineno, node=n))
    return segs

def fix(path):
    text = Path(path).read_text()
    for _ in range(40):
        bad = co.misplaced(text)
        if not bad:
            Path(path).write_text(text)
            return True
        entry = bad[0]
        pub = entry.split(" (under")[0]
        privs = [p.strip() for p in entry.rsplit(" after ", 1)[1].split(",")]
        lines = text.split("\n")
        cells = parse(lines)
        allsegs = [(ci, s) for ci, c in enumerate(cells) for s in segments(lines, c)]
        (pc, ps), = [(ci, s) for ci, s in allsegs if s["name"] == pub]
        moves = [(ci, s) for ci, s in allsegs if s["name"] in privs]
        # intermediate uses
        for ci, s in moves:
            between = "\n".join(lines[s["b"]:ps["a"]])
            # uses inside other moved segments are fine
            for cj, t in moves:
                if t is not s: between = between.replace("\n".join(lines[t["a"]:t["b"]]), "")
            if re.search(r"\b%s\b" % re.escape(s["name"]), between):
                print(f"  {path}: {s['name']} is used between it and {pub}; left for a hand fix")
                return False
        block = []
        for ci, s in moves:
            block += [""] + lines[s["a"]:s["b"]] + [""]
        insert_at = ps["b"]
        new = lines[:]
        new[insert_at:insert_at] = [""] + block[:-1] if block else []
        for ci, s in sorted(moves, key=lambda m: -m[1]["a"]):
            del new[s["a"]:s["b"]]
        text = "\n".join(new)
        text = tidy(text)
    print("  gave up", path); return False

def tidy(text):
    lines = text.split("\n"); cells = parse(lines); out = []; prev = 0
    for c in reversed(cells):
        body = lines[c["start"]:c["end"]]
        code = [l for l in body if l.strip() and not l.startswith("#|")]
        if not code and any(l.startswith("#| export") for l in body):  # an export cell left with only directives: removed, with the blank line after it
            end = c["end"] + 1
            if end < len(lines) and lines[end] == "": end += 1
            del lines[c["open"]:end]
            continue
        # collapse 3+ blank lines inside the cell to 2, strip blank lines at its ends
        b = body
        while b and not b[-1].strip(): b = b[:-1]
        i = 0
        while i < len(b) and not b[i].strip(): i += 1
        b = b[i:]
        nb, blank = [], 0
        for l in b:
            blank = blank + 1 if not l.strip() else 0
            if blank <= 2: nb.append(l)
        lines[c["start"]:c["end"]] = nb
    return "\n".join(lines)

for p in sys.argv[1:]:
    ok = fix(p)
    print(p, "ok" if ok else "NOT FIXED")
