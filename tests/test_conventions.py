"""data/conventions.json, the feature table of nbs/06b_features: every claim checked against the library and the data.

The validation is tools/conventions.py's; each test below also feeds it a broken copy, so that a check
that stopped checking fails here.
"""
import copy
import json
from pathlib import Path

import numpy as np
import pytest

import dew_rl

from validated_tables import load_tool, rejects

ROOT = Path(__file__).resolve().parent.parent
cv = load_tool("conventions")


@pytest.fixture(scope="module")
def records():
    return cv.load()


def _fails(records, mutate, match):
    rejects(cv.validate, records, mutate, match)


def test_the_table_validates(records):
    counts = cv.validate(records)
    assert sum(counts.values()) == 81 and len({r["id"] for r in records}) == 81


def test_validation_catches_a_wrong_count(records):
    _fails(records, lambda b: b.pop(), r"80 records")
    _fails(records, lambda b: b.__setitem__(1, copy.deepcopy(b[0])), r"duplicate ids")


def test_validation_catches_a_missing_function(records):
    _fails(records, lambda b: b[0]["dew_rl"].append("no_such_function"), r"'no_such_function' is not in dew_rl.__all__")


@pytest.mark.parametrize("entry, match", [("no_such_entry_point", "no entry point"),
                                          ("no_such_field=1", "no field"),
                                          ('loss_mode="no_such_mode"', "loss_mode"),
                                          ("beta=0.2", "never read")])  # a real field the `ppo` estimator never reads
def test_validation_catches_an_objectives_entry_that_does_not_resolve(records, entry, match):
    row = next(i for i, r in enumerate(records) if r["objectives"] == ["ppo"])
    _fails(records, lambda b: b[row]["objectives"].append(entry), match)


def test_validation_catches_a_missing_reason(records):
    row = next(i for i, r in enumerate(records) if r["status"] != "yes")
    _fails(records, lambda b: b[row].__setitem__("reason", None), r"needs a reason")
    _fails(records, lambda b: b[0].__setitem__("status", "maybe"), r"status 'maybe'")


def test_validation_catches_a_conformance_list_that_is_not_the_data(records):
    row = next(i for i, r in enumerate(records) if r["conformance"])
    _fails(records, lambda b: b[row]["conformance"].append("Relax"), r"the data selects")
    _fails(records, lambda b: b[row]["conformance_match"].append({"file": "data/conformance.json", "dew_rl": "nothing"}),
           r"selects no entry")


def test_every_listed_public_name_is_callable(records):
    names = sorted({n for r in records for n in r["dew_rl"]})
    assert names, "the table lists no function"
    not_callable = [n for n in names if not callable(getattr(dew_rl, n, None))]
    assert not not_callable, f"listed but not callable in dew_rl: {not_callable}"


def _frameworks_in_data(sel):
    "The frameworks a selector picks, read straight from the data file or fixture (not through the tool)."
    file = ROOT / sel["file"]
    if file.suffix == ".npz":
        with np.load(file) as f:
            keys = [k for k in f.files if k.startswith(sel["prefix"])]
        return {cv.framework_name(k.split("/")[0]) for k in keys}
    out = set()
    kinds = sel.get("kind")
    kinds = [kinds] if isinstance(kinds, str) else kinds
    for e in json.loads(file.read_text(encoding="utf-8"))["results"]:
        if kinds is not None and e["kind"] not in kinds:
            continue
        if "dew_rl" in sel and e["dew_rl"] != sel["dew_rl"]:
            continue
        if "framework" in sel and cv.framework_name(e["framework"]) != cv.framework_name(sel["framework"]):
            continue
        if all(e["params"].get(k, object()) == v for k, v in (sel.get("params") or {}).items()):
            out.add(cv.framework_name(e["framework"]))
    return out


def test_every_implemented_row_run_against_a_framework_has_an_entry_in_the_data(records):
    checked = 0
    for r in records:
        if r["status"] != "yes" or not r["conformance"]:
            continue
        assert r["conformance_match"], f"{r['id']}: conformance listed without a selector into the data"
        found = set()
        for sel in r["conformance_match"]:
            hit = _frameworks_in_data(sel)
            assert hit, f"{r['id']}: {sel} selects no entry of {sel['file']}"
            found |= hit
        missing = set(r["conformance"]) - found
        assert not missing, f"{r['id']}: no entry in the conformance data for {sorted(missing)}"
        checked += 1
    assert checked >= 60, f"only {checked} rows checked against the data"


def test_validation_catches_an_implemented_row_neither_run_nor_read(records):
    import copy
    bad = copy.deepcopy(records)
    row = next(r for r in bad if r["id"] == "B20")
    assert row["status"] == "yes" and row["conformance"]
    row["conformance"], row["conformance_match"], row["read"] = [], [], {}
    with pytest.raises(AssertionError, match="B20: implemented but run against no framework"):
        cv.validate(bad)
    row["read"] = {"TRL": " "}
    with pytest.raises(AssertionError, match="B20: read must map a framework to the reason"):
        cv.validate(bad)
    row["read"] = {"TRL": "a reason"}
    cv.validate(bad)  # a row only read, with its reason, is valid


def test_every_implemented_row_is_run_or_says_why_not(records):
    for r in records:
        if r["status"] == "yes":
            assert r["conformance"] or set(r["read"]) == set(r["frameworks"]), r["id"]
