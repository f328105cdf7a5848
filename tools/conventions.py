"""The feature table: one record per convention the frameworks ship, validated against the library and the data.

    python tools/conventions.py                       # validate data/conventions.json, print the counts
    python tools/conventions.py --write-conformance   # recompute each record's `conformance` from the data

`data/conventions.json` holds one record per convention: its id (A1 ... I3), name, section, paper
(arXiv id or null), the frameworks that ship it and their sources (`owner/repo@revision:path[:line]`),
the public `dew_rl` functions that implement it, how to reach it from `dew_rl.objectives` (entry
points and `ObjectiveConfig` settings), its status, and the frameworks the conformance data ran it
against. `validate` checks every one of those claims against the installed library and the data
files, so the table cannot drift from either: a renamed function, a removed config field or loss
mode, a missing reason, or a conformance list that no longer matches the data fails it.

`read` maps a framework whose code was read at its pinned revision but could not be run here to the reason (for
example a repository that cannot be fetched); the table says "read, not run" for it. An implemented record must be
run against some framework, or say for each framework that ships it why it was only read.

`conformance_match` says which entries of the conformance data belong to a record: selectors
`{"file": "data/conformance_X.json", "kind": ..., "dew_rl": ..., "framework": ..., "params": {...}}`
(every given key must match; `kind` may be a list; `params` is a subset match) or, for outputs frozen
in an `.npz` fixture, `{"file": "tests/fixtures/X.npz", "prefix": "verl/..."}` (the first path
component of a matching key names the framework). `conformance` must equal the frameworks they select.

The chapter nbs/06b_features.md imports this file by path and renders the table with `render_section`.
"""
from __future__ import annotations

import ast
import itertools
import json
import re
import sys
from collections import Counter
from functools import lru_cache
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tools/, for the chapter and tests that load this file by path
from record_tables import SOURCE_RE, cell as _cell, raise_problems, source_url  # noqa: E402,F401

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "data" / "conventions.json"

SECTIONS = {"A": "Advantage estimators and reward normalisation", "B": "Policy losses and ratio forms",
            "C": "KL estimators and where the KL goes", "D": "Rollout and off-policy corrections, rejection masks",
            "E": "Entropy-based token selection and entropy regularisation", "F": "Reductions and weighting",
            "G": "Distillation losses", "H": "Preference losses", "I": "Log-prob and logit conventions"}
EXPECTED = {"A": 21, "B": 20, "C": 9, "D": 9, "E": 4, "F": 2, "G": 2, "H": 11, "I": 3}  # 81 conventions
FRAMEWORKS = ("verl", "TRL", "OpenRLHF", "NeMo-RL", "slime", "Tunix", "rlax", "AReaL", "ROLL", "Relax")
STATUSES = ("yes", "partial", "no", "not loss math")
KEYS = ("id", "name", "section", "paper", "papers", "frameworks", "sources", "dew_rl", "objectives", "status",
        "reason", "conformance", "conformance_match", "read")
ARXIV_RE = re.compile(r"^\d{4}\.\d{4,5}$")
REPOSITORIES = {"verl-project/verl": "verl", "huggingface/trl": "TRL", "OpenRLHF/OpenRLHF": "OpenRLHF",
                "NVIDIA-NeMo/RL": "NeMo-RL", "THUDM/slime": "slime", "google/tunix": "Tunix",
                "inclusionAI/AReaL": "AReaL", "alibaba/ROLL": "ROLL", "redai-infra/Relax": "Relax",
                "redai-studio/Relax": "Relax"}


def framework_name(raw: str) -> str:
    "The display name of a framework as the data files spell it (`nemo_rl`, `nemo-rl`, `NeMo-RL` -> `NeMo-RL`)."
    key = re.sub(r"[^a-z]", "", raw.lower())
    for name in FRAMEWORKS:
        if re.sub(r"[^a-z]", "", name.lower()) == key:
            return name
    raise ValueError(f"unknown framework {raw!r}")


def load(path=DATA) -> list:
    "The records of data/conventions.json, in file order."
    return json.loads(Path(path).read_text(encoding="utf-8"))


def expected_ids() -> list:
    return [f"{s}{i}" for s, n in EXPECTED.items() for i in range(1, n + 1)]


@lru_cache(maxsize=None)
def _results(file: str) -> tuple:
    return tuple(json.loads((ROOT / file).read_text(encoding="utf-8"))["results"])


@lru_cache(maxsize=None)
def _npz_keys(file: str) -> tuple:
    import numpy as np
    with np.load(ROOT / file) as f:
        return tuple(f.files)


def _matches(entry: dict, sel: dict) -> bool:
    kinds = sel.get("kind")
    if kinds is not None and entry.get("kind") not in ([kinds] if isinstance(kinds, str) else kinds):
        return False
    if "dew_rl" in sel and entry.get("dew_rl") != sel["dew_rl"]:
        return False
    if "framework" in sel and framework_name(entry["framework"]) != framework_name(sel["framework"]):
        return False
    params = entry.get("params") or {}
    return all(k in params and params[k] == v for k, v in (sel.get("params") or {}).items())


def selected(sel: dict) -> list:
    "The (framework, entry) pairs a selector picks from its data file or fixture."
    file = sel["file"]
    if file.endswith(".npz"):
        return [(framework_name(k.split("/")[0]), k) for k in _npz_keys(file) if k.startswith(sel["prefix"])]
    return [(framework_name(e["framework"]), e) for e in _results(file) if _matches(e, sel)]


def conformance_frameworks(rec: dict) -> list:
    "The frameworks the conformance data ran a record against, from its selectors; a selector that selects nothing is an error."
    found = set()
    for sel in rec.get("conformance_match") or []:
        hits = selected(sel)
        if not hits:
            raise ValueError(f"{rec['id']}: conformance selector {sel} selects no entry")
        found.update(f for f, _ in hits)
    return sorted(found, key=FRAMEWORKS.index)


def parse_objectives(entries) -> tuple:
    "Split an `objectives` list into entry points and settings {field: [values]} (a repeated field lists alternatives)."
    points, fields = [], {}
    for e in entries:
        if "=" in e:
            name, value = e.split("=", 1)
            fields.setdefault(name.strip(), []).append(ast.literal_eval(value.strip()))
        else:
            points.append(e.strip())
    return points, fields


def check_objectives(entries) -> None:
    """Raise unless every entry resolves: an entry point is a callable of `dew_rl.objectives`, and the settings
    construct a valid `ObjectiveConfig` (through the named estimator's entry point, else through some estimator)."""
    import dataclasses

    import dew_rl.objectives as obj
    if not isinstance(entries, list) or not entries or not all(isinstance(e, str) and e for e in entries):
        raise ValueError(f"objectives must be null or a non-empty list of strings; got {entries!r}")
    points, fields = parse_objectives(entries)
    for p in points:
        if not callable(getattr(obj, p, None)):
            raise ValueError(f"dew_rl.objectives has no entry point {p!r}")
    known = {f.name for f in dataclasses.fields(obj.ObjectiveConfig) if not f.name.startswith("_")}
    for name in fields:
        if name not in known:
            raise ValueError(f"ObjectiveConfig has no field {name!r}")
    estimators = [p for p in points if p in obj.ESTIMATORS]
    names = list(fields)
    for values in itertools.product(*(fields[n] for n in names)):
        cfg = dict(zip(names, values))
        if estimators:
            for est in estimators:
                getattr(obj, est)(**cfg)  # raises on a field the estimator never reads or a bad value
        elif cfg:
            errors = []
            for est in obj.ESTIMATORS:
                try:
                    obj.ObjectiveConfig(est, **cfg)
                    break
                except (ValueError, TypeError) as e:
                    errors.append(f"{est}: {e}")
            else:
                raise ValueError(f"no estimator accepts {cfg}: " + "; ".join(errors[:3]))


def validate(records=None) -> Counter:
    """Check every record against the library and the data; raise AssertionError listing every problem.

    Returns the count of records per status.
    """
    import dew_rl
    records = load() if records is None else records
    public = set(dew_rl.__all__)
    problems = []
    ids = [r.get("id") for r in records]
    if len(records) != sum(EXPECTED.values()):
        problems.append(f"{len(records)} records; expected {sum(EXPECTED.values())}")
    if len(set(ids)) != len(ids):
        problems.append(f"duplicate ids: {sorted(k for k, n in Counter(ids).items() if n > 1)}")
    if set(ids) != set(expected_ids()):
        problems.append(f"ids differ from A1..I3: missing {sorted(set(expected_ids()) - set(ids))}, "
                        f"unexpected {sorted(set(ids) - set(expected_ids()), key=str)}")
    for r in records:
        rid = r.get("id")
        if set(r) != set(KEYS):
            problems.append(f"{rid}: keys {sorted(set(r) ^ set(KEYS))} missing or unexpected")
            continue
        letter = rid[0]
        if r["section"] != f"{letter}. {SECTIONS.get(letter)}":
            problems.append(f"{rid}: section {r['section']!r}")
        if not r["name"]:
            problems.append(f"{rid}: no name")
        if r["paper"] is not None and (not ARXIV_RE.match(r["paper"]) or r["papers"][:1] != [r["paper"]]):
            problems.append(f"{rid}: paper {r['paper']!r} is not an arXiv id, or not the first of `papers`")
        if r["paper"] is None and r["papers"]:
            problems.append(f"{rid}: papers listed but no paper")
        problems += [f"{rid}: bad arXiv id {p!r}" for p in r["papers"] if not ARXIV_RE.match(p)]
        if not r["frameworks"]:
            problems.append(f"{rid}: no framework ships it")
        problems += [f"{rid}: unknown framework {f!r}" for f in r["frameworks"] if f not in FRAMEWORKS]
        for s in r["sources"]:
            m = SOURCE_RE.match(s)
            if not m or m["repo"] not in REPOSITORIES:
                problems.append(f"{rid}: source {s!r} is not owner/repo@revision:path[:line] of a known repository")
            elif REPOSITORIES[m["repo"]] not in r["frameworks"]:
                problems.append(f"{rid}: source {s!r} is from a framework the record does not list")
        problems += [f"{rid}: {n!r} is not in dew_rl.__all__" for n in r["dew_rl"] if n not in public]
        if r["status"] not in STATUSES:
            problems.append(f"{rid}: status {r['status']!r} not one of {STATUSES}")
        elif r["status"] != "yes" and not (isinstance(r["reason"], str) and r["reason"].strip()):
            problems.append(f"{rid}: status {r['status']!r} needs a reason")
        if r["status"] in ("yes", "partial") and not r["dew_rl"]:
            problems.append(f"{rid}: status {r['status']!r} names no dew_rl function")
        if r["status"] in ("no", "not loss math") and (r["dew_rl"] or r["objectives"]):
            problems.append(f"{rid}: status {r['status']!r} but names an implementation")
        if r["objectives"] is not None:
            try:
                check_objectives(r["objectives"])
            except Exception as e:  # noqa: BLE001 - any failure to resolve is the finding
                problems.append(f"{rid}: objectives {r['objectives']} do not resolve: {type(e).__name__}: {e}")
        try:
            derived = conformance_frameworks(r)
        except Exception as e:  # noqa: BLE001
            problems.append(f"{rid}: {e}")
        else:
            if r["conformance"] != derived:
                problems.append(f"{rid}: conformance {r['conformance']} but the data selects {derived}")
            problems += [f"{rid}: run against {f}, which the record does not list as shipping it"
                         for f in derived if f not in r["frameworks"]]
            read = r["read"]
            if not isinstance(read, dict) or not all(isinstance(v, str) and v.strip() for v in read.values()):
                problems.append(f"{rid}: read must map a framework to the reason it was not run; got {read!r}")
            else:
                problems += [f"{rid}: read {f!r}, which the record does not list as shipping it, or also ran it"
                             for f in read if f not in r["frameworks"] or f in derived]
                if r["status"] in ("yes", "partial") and not derived and set(read) != set(r["frameworks"]):
                    problems.append(f"{rid}: implemented but run against no framework, and no reason given for "
                                    f"{sorted(set(r['frameworks']) - set(read))}")
    raise_problems(problems, "data/conventions.json")
    return Counter(r["status"] for r in records)


# ---------------------------------------------------------------------------------------------- rendering
def _repo_framework(src: str) -> str:
    return REPOSITORIES[SOURCE_RE.match(src)["repo"]]


def _shipped(r: dict) -> str:
    first = {}
    for s in r["sources"]:
        first.setdefault(_repo_framework(s), s)
    parts = [f"[{f}]({source_url(first[f])})" if f in first else f for f in r["frameworks"]]
    return ", ".join(parts)


def render_row(r: dict) -> str:
    paper = ", ".join(f"[{p}](https://arxiv.org/abs/{p})" for p in r["papers"]) or "—"
    funcs = ", ".join(f"`{n}`" for n in r["dew_rl"]) or "—"
    objs = ", ".join(f"`{e}`" for e in r["objectives"]) if r["objectives"] else "—"
    ran = ", ".join(r["conformance"] + [f"{f} (read, not run: {why})" for f, why in r["read"].items()]) or "—"
    status = f"**{r['status']}**" + (f": {r['reason']}" if r["reason"] else "")
    return "| " + " | ".join(_cell(c) for c in (r["id"], r["name"], paper, _shipped(r), funcs, objs, ran, status)) + " |"


def render_section(records, letter: str, heading: bool = True) -> str:
    """The Markdown of one section: its heading (unless the page has it as a heading of its own), the table,
    and every row's sources as `repo@revision:path[:line]`, folded (a `<details>` block the reader opens)."""
    rows = [r for r in records if r["id"][0] == letter]
    head = ("| id | convention | paper | who ships it | `dew_rl` | `dew_rl.objectives` | run against | status |\n"
            "|---|---|---|---|---|---|---|---|")
    out = ([f"### {letter}. {SECTIONS[letter]}", ""] if heading else []) + [head] + [render_row(r) for r in rows]
    src = [f"{r['id']}: " + ", ".join(f"[`{s}`]({source_url(s)})" for s in r["sources"]) for r in rows if r["sources"]]
    if src:
        n = sum(len(r["sources"]) for r in rows)
        out += ["", f"<details><summary>Sources of section {letter} ({n} files at pinned revisions)</summary>", "",
                "; ".join(src) + ".", "", "</details>"]
    return "\n".join(out)


def summary(records) -> dict:
    "The numbers of the chapter's count sentence."
    st = Counter(r["status"] for r in records)
    return dict(total=len(records), **{k.replace(" ", "_"): st.get(k, 0) for k in STATUSES},
                objectives=sum(r["objectives"] is not None for r in records),
                conformance=sum(bool(r["conformance"]) for r in records),
                read_only=sum(bool(r["read"]) and not r["conformance"] for r in records),
                functions=len({n for r in records for n in r["dew_rl"]}),
                frameworks=len({f for r in records for f in r["conformance"]}))


def write_conformance(path=DATA) -> None:
    "Recompute every record's `conformance` from its selectors and rewrite the file."
    records = load(path)
    for r in records:
        r["conformance"] = conformance_frameworks(r)
    Path(path).write_text(json.dumps(records, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def main(argv) -> int:
    if "--write-conformance" in argv:
        write_conformance()
    counts = validate()
    print(f"data/conventions.json: {sum(counts.values())} conventions valid; "
          + ", ".join(f"{k}: {counts.get(k, 0)}" for k in STATUSES))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
