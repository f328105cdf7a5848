"""The site's API reference: one entry per public name of `dew_rl` and `dew_rl.objectives`.

Read from the built site (DEW_RL_SITE, as `make test` sets it; else docs/_build/html when it is
there; else a site built here): every name of both packages' `__all__` has an entry in `objects.inv`
of the right kind (py:function, py:class or py:exception, py:data), its page holds the entry's
anchor with the signature a reader calls, the Index page and the search index list it, its
"Derived in" link reaches a section that exists, and the names of the API table (99_api) link to
their entries. `missing_entries` is the check itself; a test feeds it an inventory with a name
removed, so the check cannot pass vacuously.
"""
import html
import inspect
import json
import os
import posixpath
import re
import subprocess
import sys
from pathlib import Path

import pytest
from sphinx.util.inventory import InventoryFile

import dew_rl
import dew_rl.objectives

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"dew_rl": dew_rl, "dew_rl.objectives": dew_rl.objectives}
ROLES = {"function": ("py:function",), "class": ("py:class", "py:exception"), "data": ("py:data",)}


def public_names() -> list[tuple[str, str, str]]:
    """(full name, kind, package) of every public name of both packages."""
    out = []
    for package, mod in PACKAGES.items():
        for name in mod.__all__:
            obj = getattr(mod, name)
            kind = "class" if inspect.isclass(obj) else "function" if callable(obj) else "data"
            out.append((f"{package}.{name}", kind, package))
    return out


def missing_entries(names, inventory) -> list[str]:
    """The public names that have no inventory entry of their kind."""
    return [f"{full} ({kind})" for full, kind, _ in names
            if not any(full in inventory.get(role, {}) for role in ROLES[kind])]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    env = os.environ.get("DEW_RL_SITE")
    built = ROOT / "docs" / "_build" / "html"
    if env:
        site = (ROOT / env).resolve()
    elif (built / "objects.inv").exists() and (built / "api" / "index.html").exists():
        site = built
    else:
        site = tmp_path_factory.mktemp("site")
        subprocess.run([sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html", "-D", "nb_execution_mode=off",
                        str(ROOT / "docs"), str(site)], check=True, cwd=ROOT)
    assert (site / "objects.inv").exists(), f"{site} has no objects.inv"
    return site


@pytest.fixture(scope="module")
def inventory(site) -> dict:
    with open(site / "objects.inv", "rb") as f:
        return InventoryFile.load(f, "", posixpath.join)


def _uri(item) -> str:
    return item.uri if hasattr(item, "uri") else item[2]


def test_every_public_name_has_an_entry(inventory):
    names = public_names()
    assert len(names) == len(dew_rl.__all__) + len(dew_rl.objectives.__all__) > 150
    missing = missing_entries(names, inventory)
    assert not missing, f"public names without an API entry: {missing}"


def test_the_check_fails_when_an_entry_is_missing(inventory):
    names = public_names()
    full, kind, _ = next(n for n in names if n[1] == "function")
    role = ROLES[kind][0]
    pruned = {r: {k: v for k, v in items.items() if k != full} for r, items in inventory.items()}
    assert missing_entries(names, pruned) == [f"{full} ({kind})"]


def test_entries_show_their_signature_and_their_section(site, inventory):
    """Each entry's page has its anchor, a function's signature names its arguments, and the
    "Derived in" link of the entry points at a chapter section that exists."""
    pages, broken = {}, []
    for full, kind, _ in public_names():
        role = next(r for r in ROLES[kind] if full in inventory.get(r, {}))
        uri = _uri(inventory[role][full])
        page, _, anchor = uri.partition("#")
        text = pages.setdefault(page, (site / page).read_text(encoding="utf-8"))
        start = text.find(f'id="{anchor}"')
        assert start >= 0, f"{full}: no anchor {anchor} in {page}"
        end = text.find('<dl class="py', start)
        entry = text[start:end if end > 0 else None]
        if kind == "function":
            obj = getattr(PACKAGES[full.rsplit(".", 1)[0]], full.rsplit(".", 1)[1])
            params = [p for p in inspect.signature(obj).parameters if not p.startswith("_")]
            shown = re.sub(r"<[^>]+>", "", entry[: entry.find("</dt>")])
            assert all(p in shown for p in params), f"{full}: signature {shown!r} lacks one of {params}"
        m = re.search(r'Derived in <a class="reference external" href="([^"]+)"', entry)
        assert m, f"{full}: its entry links to no chapter section"
        target, _, section = html.unescape(m.group(1)).partition("#")
        target_page = (site / posixpath.dirname(page) / target).resolve()
        assert target_page.exists(), f"{full}: links to a missing page {target}"
        if section and f'id="{section}"' not in target_page.read_text(encoding="utf-8"):
            broken.append(f"{full} -> {target}#{section}")
    assert not broken, f"entries whose 'Derived in' section does not exist: {broken}"


def test_index_and_search_find_every_public_name(site):
    genindex = (site / "genindex.html").read_text(encoding="utf-8")
    raw = (site / "searchindex.js").read_text(encoding="utf-8")
    search = json.loads(raw[raw.index("(") + 1: raw.rindex(")")])
    objects = {f"{prefix}.{entry[4]}" if prefix else entry[4]
               for prefix, entries in search["objects"].items() for entry in entries}
    not_indexed = [full for full, _, _ in public_names() if f"#{full}\"" not in genindex]
    not_searched = [full for full, _, _ in public_names() if full not in objects]
    assert not not_indexed, f"names missing from the Index page: {not_indexed}"
    assert not not_searched, f"names the site search cannot find: {not_searched}"


def test_api_table_names_link_to_their_entries(site, inventory):
    """The table of 99_api names every public name of dew_rl, and each links to its entry."""
    text = (site / "99_api.html").read_text(encoding="utf-8")
    linked = set(re.findall(r'<a class="api-link reference internal" href="api/[^"#]+#([\w.]+)"', text))
    unlinked = [full for full, _, package in public_names() if package == "dew_rl" and full not in linked]
    assert not unlinked, f"public names the API table does not link to their entry: {unlinked}"


# a sample of the frameworks' option names (issue 24): verl, TRL, OpenRLHF's dotted and flat spellings
OPTION_SAMPLE = ("loss_agg_mode", "norm_adv_by_std_in_grpo", "rollout_is_threshold", "clip_ratio_c", "kl_loss_type",
                 "vllm_importance_sampling_correction", "scale_rewards", "epsilon_high", "use_bias_correction_kl",
                 "actor.eps_clip", "algo.kl.init_coef", "critic.value_clip")


def search_pages(search: dict, query: str) -> set[str]:
    """The pages the site's search returns for `query`, as Sphinx's search does it: the query split and stemmed
    like the index, and the pages that hold every word (in their text or their titles)."""
    from sphinx.search.en import SearchEnglish
    lang = SearchEnglish({})
    found = None
    for word in lang.split(query):
        stem = lang.stem(word.lower())
        hits = set()
        for table in (search["terms"], search["titleterms"]):
            ids = table.get(stem, [])
            hits |= {ids} if isinstance(ids, int) else set(ids)
        found = hits if found is None else found & hits
    return {search["docnames"][i] for i in (found or set())}


def test_search_finds_framework_options_on_the_crosswalk_and_their_chapter(site):
    """The site's own search index finds each sampled option on the crosswalk page and on the chapter that
    derives it (the chapter named by data/crosswalk.json), and an OpenRLHF option by its old flat name."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("crosswalk", ROOT / "tools" / "crosswalk.py")
    cw = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cw)
    rows = cw.load()
    raw = (site / "searchindex.js").read_text(encoding="utf-8")
    search = json.loads(raw[raw.index("(") + 1: raw.rindex(")")])
    crosswalk = next(d for d in search["docnames"] if d.endswith("06c_crosswalk"))
    assert not search_pages(search, "no_such_option_anywhere_xyz")   # the lookup can come back empty
    missing = []
    for name in OPTION_SAMPLE:
        chapters = {r["chapter"] for r in rows if r["name"] == name}
        assert chapters, f"{name} is no option of the crosswalk"
        pages = {d.rpartition("/")[2] for d in search_pages(search, name)}
        missing += [f"{name} not on {c}" for c in sorted(chapters | {crosswalk.rpartition('/')[2]}) if c not in pages]
    for r in rows:
        if r["alias"] in ("init_kl_coef", "eps_clip_low_high"):
            if crosswalk.rpartition("/")[2] not in {d.rpartition("/")[2] for d in search_pages(search, r["alias"])}:
                missing.append(f"{r['alias']} not on the crosswalk")
    assert not missing, f"options the site search does not find where they are derived: {missing}"
