"""Shared by tests/test_conventions.py and tests/test_crosswalk.py: load a table's validator (tools/<name>.py) by
path, and check that it rejects a broken copy of the table, so that a check that stopped checking fails."""
from __future__ import annotations

import copy
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def load_tool(name: str):
    "The module tools/<name>.py, loaded by path."
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rejects(validate, records: list, mutate, match: str) -> None:
    "`validate` raises an AssertionError matching `match` on a copy of `records` changed by `mutate`."
    bad = copy.deepcopy(records)
    mutate(bad)
    with pytest.raises(AssertionError, match=match):
        validate(bad)
