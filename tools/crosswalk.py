"""The crosswalk: every loss option of verl, TRL and OpenRLHF, mapped to what reproduces it in dew_rl.

    python tools/crosswalk.py            # validate data/crosswalk.json, print the counts

`data/crosswalk.json` holds one record per option of a framework's loss configuration:

- `framework` (verl, TRL, OpenRLHF), `section` (where the option lives: `algorithm`, `actor`, `GRPOConfig`, ...),
  `option` (its full name as the framework spells it at the pinned revision), `name` (the part a reader searches
  for; a dotted suffix of `option`), `alias` (OpenRLHF's flat name before its dotted CLI, or null), `default`;
- `dew_rl`: what reproduces it, each `ObjectiveConfig.<field>`, `Rollout.<field>`, `dew_rl.objectives.<name>` or
  `dew_rl.<name>`; `status`: same (same name, same meaning), renamed (another field or value), partial, none,
  or not loss math; `note`: how, or why not;
- `chapter`: the chapter that derives it (`nbs/<chapter>.ipynb`), which names it literally;
- `source`: `owner/repo@revision:path:line` at the framework's pinned revision.

`validate` checks every claim against the installed library, the chapters and the pins, so the table cannot
drift: a target that no longer exists, a chapter that stopped naming the option, a source at another revision,
a "same" row whose dew_rl field is spelled differently, or a missing reason fails it. The chapter
nbs/06c_crosswalk.md imports this file by path and renders the tables with `render_section`.
"""
from __future__ import annotations

import json
import re
import sys
from collections import Counter
from functools import lru_cache
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tools/, for the chapter and tests that load this file by path
from record_tables import cell as _cell, raise_problems, source_url  # noqa: E402,F401

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "data" / "crosswalk.json"

FRAMEWORKS = ("verl", "TRL", "OpenRLHF")
PINS = {"verl": "verl-project/verl@1dda039b9c63", "TRL": "huggingface/trl@f2cd57710ae3",
        "OpenRLHF": "OpenRLHF/OpenRLHF@3c3be6234e0c"}
# OpenRLHF's flat option names (`--eps_clip`) before its dotted CLI (ed62d0e2, 2026-04-19): the aliases
ALIAS_PIN = "OpenRLHF/OpenRLHF@76351db1ffe8:openrlhf/cli/train_ppo_ray.py"
STATUSES = ("same", "renamed", "partial", "none", "not loss math")
KEYS = ("framework", "section", "option", "name", "alias", "default", "dew_rl", "status", "note", "chapter", "source")
# the part of `option` the section's heading already says (shown once above the table, not in every row)
PREFIX = {("verl", "algorithm"): "algorithm.", ("verl", "algorithm.rollout_correction"): "algorithm.rollout_correction.",
          ("verl", "actor"): "actor_rollout_ref.actor.", ("verl", "actor.policy_loss"): "actor_rollout_ref.actor.policy_loss.",
          ("verl", "critic"): "critic.", ("verl", "rollout"): "actor_rollout_ref.rollout.", ("verl", "reward"): "reward.reward_kwargs."}
SECTION_TEXT = {"verl": "verl's Hydra config (`verl/trainer/config/*.yaml` and the dataclasses behind it)",
                "TRL": "TRL's trainer configs (dataclass fields)",
                "OpenRLHF": "OpenRLHF's `train_ppo_ray` command line (the flat name before its dotted CLI in brackets)"}
SOURCE_RE = re.compile(r"^(?P<pin>[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+@[0-9a-f]{12}):(?P<path>[^:\s]+):(?P<line>\d+)$")


def load(path=DATA) -> list:
    "The records of data/crosswalk.json, in file order."
    return json.loads(Path(path).read_text(encoding="utf-8"))


@lru_cache(maxsize=None)
def chapter_text(stem: str) -> str:
    """What the site renders of a chapter: every cell's source and every text output of nbs/<stem>.ipynb."""
    nb = json.loads((ROOT / "nbs" / f"{stem}.ipynb").read_text(encoding="utf-8"))
    parts = []
    for cell in nb["cells"]:
        parts.append("".join(cell.get("source", "")))
        for out in cell.get("outputs", []):
            parts.append("".join(out.get("text", "")))
            for mime in ("text/markdown", "text/plain", "text/html"):
                parts.append("".join((out.get("data") or {}).get(mime, "")))
    return "\n".join(parts)


def chapter_title(stem: str) -> str:
    "The chapter's H1 up to its first colon (`# KL estimators: k1, k2, k3` -> `KL estimators`)."
    md = (ROOT / "nbs" / f"{stem}.md").read_text(encoding="utf-8")
    title = next(line[2:].strip() for line in md.splitlines() if line.startswith("# "))
    return title.split(":")[0].strip()


def resolve(target: str):
    """The object a `dew_rl` entry names, or raise: `ObjectiveConfig.<field>`, `Rollout.<field>`,
    `dew_rl.objectives.<name>` (in its `__all__`), `dew_rl.<name>` (in its `__all__`)."""
    import dataclasses

    import dew_rl
    import dew_rl.objectives as obj
    kind, _, name = target.rpartition(".")
    if kind in ("ObjectiveConfig", "Rollout"):
        fields = {f.name: f for f in dataclasses.fields(getattr(obj, kind)) if not f.name.startswith("_")}
        if name not in fields:
            raise ValueError(f"{kind} has no field {name!r}")
        return fields[name]
    if kind in ("dew_rl", "dew_rl.objectives"):
        mod = dew_rl if kind == "dew_rl" else obj
        if name not in mod.__all__:
            raise ValueError(f"{name!r} is not in {kind}.__all__")
        return getattr(mod, name)
    raise ValueError(f"{target!r} is not ObjectiveConfig.<field>, Rollout.<field>, dew_rl.<name> or dew_rl.objectives.<name>")


def validate(records=None) -> Counter:
    """Check every record against the library, the chapters and the pins; raise AssertionError listing every problem.

    Returns the count of records per framework.
    """
    records = load() if records is None else records
    problems = []
    seen = Counter((r.get("framework"), r.get("option")) for r in records)
    problems += [f"duplicate option {fw} {opt!r}" for (fw, opt), n in seen.items() if n > 1]
    for r in records:
        rid = f"{r.get('framework')} {r.get('option')!r}"
        if set(r) != set(KEYS):
            problems.append(f"{rid}: keys {sorted(set(r) ^ set(KEYS))} missing or unexpected")
            continue
        fw = r["framework"]
        if fw not in FRAMEWORKS:
            problems.append(f"{rid}: unknown framework")
            continue
        if not r["option"].endswith(r["name"]) or not r["name"]:
            problems.append(f"{rid}: name {r['name']!r} is not a suffix of the option")
        prefix = PREFIX.get((fw, r["section"]), f"{r['section']}." if fw == "TRL" else "")
        if not r["option"].startswith(prefix):
            problems.append(f"{rid}: the option does not start with its section's prefix {prefix!r}")
        if fw == "OpenRLHF" and not (r["alias"] is None or re.fullmatch(r"[a-z_]+", r["alias"])):
            problems.append(f"{rid}: alias {r['alias']!r} is not a flat option name")
        if fw != "OpenRLHF" and r["alias"] is not None:
            problems.append(f"{rid}: only OpenRLHF options have an alias")
        m = SOURCE_RE.match(r["source"])
        if not m or m["pin"] != PINS[fw]:
            problems.append(f"{rid}: source {r['source']!r} is not {PINS[fw]}:path:line")
        if r["status"] not in STATUSES:
            problems.append(f"{rid}: status {r['status']!r} not one of {STATUSES}")
            continue
        for t in r["dew_rl"]:
            try:
                resolve(t)
            except Exception as e:  # noqa: BLE001 - any failure to resolve is the finding
                problems.append(f"{rid}: dew_rl target {t!r} does not resolve: {e}")
        if r["status"] in ("same", "renamed", "partial") and not r["dew_rl"]:
            problems.append(f"{rid}: status {r['status']!r} names no dew_rl target")
        if r["status"] == "none" and r["dew_rl"]:
            problems.append(f"{rid}: status 'none' but names a dew_rl target")
        if r["status"] in ("partial", "none", "not loss math") and not r["note"].strip():
            problems.append(f"{rid}: status {r['status']!r} needs a note that says why")
        leaf = r["name"].rpartition(".")[2]
        if r["status"] == "same" and not any(t.rpartition(".")[2] == leaf for t in r["dew_rl"]):
            problems.append(f"{rid}: status 'same' but no dew_rl target is spelled {leaf!r}")
        try:
            text = chapter_text(r["chapter"])
        except FileNotFoundError:
            problems.append(f"{rid}: no chapter nbs/{r['chapter']}.ipynb")
        else:
            if r["name"] not in text:
                problems.append(f"{rid}: chapter {r['chapter']} never names {r['name']!r}")
    raise_problems(problems, "data/crosswalk.json")
    return Counter(r["framework"] for r in records)


# ---------------------------------------------------------------------------------------------- rendering
def _target(t: str) -> str:
    kind, _, name = t.rpartition(".")
    return {"ObjectiveConfig": f"`{name}`", "Rollout": f"`Rollout.{name}`",
            "dew_rl.objectives": f"`obj.{name}`", "dew_rl": f"`rl.{name}`"}[kind]


def sections(records, framework: str) -> list:
    "The sections of one framework, in file order."
    return list(dict.fromkeys(r["section"] for r in records if r["framework"] == framework))


def render_section(records, framework: str, section: str) -> str:
    """The Markdown table of one section: each option (linked to its source line at the pinned revision), its
    default, the dew_rl fields or functions that reproduce it, the status, the chapter that derives it, and a note."""
    rows = [r for r in records if r["framework"] == framework and r["section"] == section]
    prefix = PREFIX.get((framework, section), f"{section}." if framework == "TRL" else "")
    head = "| option | default | `dew_rl` | status | derived in | note |\n|---|---|---|---|---|---|"
    out = [head]
    for r in rows:
        opt = r["option"][len(prefix):]
        opt = f"`--{opt}`" if framework == "OpenRLHF" else f"`{opt}`"
        if r["alias"]:
            opt += f" (`--{r['alias']}`)"
        cells = (f"[{opt}]({source_url(r['source'])})", f"`{r['default']}`" if r["default"] else "—",
                 ", ".join(_target(t) for t in r["dew_rl"]) or "—", r["status"],
                 f"[{chapter_title(r['chapter'])}]({r['chapter']}.ipynb)", r["note"] or "")
        out.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(out)


def summary(records) -> dict:
    "The numbers of the chapter's count sentence."
    st = Counter(r["status"] for r in records)
    return dict(total=len(records), per_framework=Counter(r["framework"] for r in records),
                **{k.replace(" ", "_"): st.get(k, 0) for k in STATUSES},
                chapters=len({r["chapter"] for r in records}))


def main(argv) -> int:
    counts = validate()
    print(f"data/crosswalk.json: {sum(counts.values())} options valid; " + ", ".join(f"{k}: {counts[k]}" for k in FRAMEWORKS))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
