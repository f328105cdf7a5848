"""The site as a reader sees it: the reductions page opened in headless Chromium.

Asserts that display equations are typeset by MathJax (MathJax elements present, no raw TeX left
in the rendered prose), that at least one figure image loads, and that a citation links to the
References page. Every other page is probed too: each math element typeset, no raw TeX, every
image loaded. A second test removes MathJax from a copy of the site and checks that the same
probe then fails, so the check cannot pass vacuously.

At 1400x900 (tools/site_layout.py measures it), no table hides a column: every table of every page,
the nine of the Features page and those of the "Where the frameworks disagree" sections included,
fits its container or shows its first and last columns without scrolling. The same probe on a copy
of the site without the project's stylesheet (docs/_static/dew_rl.css) finds hidden columns on the
Features page, so that check cannot pass vacuously either. At 1400 px the page contents open from
the header's button rather than taking width beside the article. Figure legends are drawn into
PNGs, so their font size is checked in the notebooks' plotting code (every `legend(...)` at 9 pt or
more, no default lowered under it); every figure has a caption and alt text that is not a file name;
the Features page's sections A-I are headings in its page contents; a page longer than 20 screens at
1400x900 has folded blocks (the code of its tests, tables and figures, its source lists).

No code cell's source scrolls sideways at 1400 px (the notebooks are wrapped at 100 characters by
`make wrap`; a probe on a copy with one long line injected finds it). The site's own search shows
snippets of the article's text, with no page chrome and no raw TeX. A printed output a little wider
than the column is set smaller to fit (docs/_static/dew_rl.js), and no printed output scrolls
sideways either (a printed table would hide its right-hand columns; a probe on a copy with one long
output line injected finds it).

Navigation: the sidebar's captioned groups are the ones below, in order, with the contributors'
pages last; the home page lists the chapters in the sidebar's order; one search box is visible.

The site is the one `make test` builds (DEW_RL_SITE); without it the test builds one itself.
"""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import importlib.util

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("dew_rl_site_layout", ROOT / "tools" / "site_layout.py")
site_layout = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(site_layout)
PAGE = "01_reductions.html"

PROBE = """<!doctype html><html><body><pre id="result">pending</pre>
<iframe id="f" src="%(url)s" style="width:1200px;height:900px"></iframe>
<script>
function report(doc) {
  const body = doc.body.cloneNode(true);
  body.querySelectorAll('pre, code, .highlight, mjx-container, script, style').forEach(e => e.remove());
  const text = body.textContent;
  const imgs = Array.from(doc.querySelectorAll('img'));
  const cites = Array.from(doc.querySelectorAll('a')).filter(a => (a.getAttribute('href') || '').includes('references.html#'));
  document.getElementById('result').textContent = JSON.stringify({
    mathjax_loaded: !!(doc.defaultView.MathJax && doc.defaultView.MathJax.version),
    mjx: doc.querySelectorAll('mjx-container').length,
    mjx_display: doc.querySelectorAll('mjx-container[display="true"]').length,
    math: doc.querySelectorAll('.math').length,
    untypeset: Array.from(doc.querySelectorAll('.math')).filter(e => !e.querySelector('mjx-container')).length,
    raw_tex: ['$$', '\\\\frac', '\\\\begin{', '\\\\sum', '\\\\mathbf'].filter(s => text.includes(s)),
    images: imgs.length,
    images_loaded: imgs.filter(i => i.complete && i.naturalWidth > 0).length,
    citations_to_references: cites.length,
  });
}
const frame = document.getElementById('f');
frame.onload = () => {
  const win = frame.contentWindow, doc = frame.contentDocument;
  let tries = 0;
  const poll = () => {
    tries += 1;
    const mj = win.MathJax;
    if (mj && mj.startup && mj.startup.promise) { mj.startup.promise.then(() => report(doc)); }
    else if (tries > 40) { report(doc); }
    else { setTimeout(poll, 100); }
  };
  poll();
};
</script></body></html>"""


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if path := shutil.which(name):
            return path
    pytest.fail("no Chromium on PATH: `apt-get install chromium` (.ci/run does this)")


def _site(tmp_path_factory) -> Path:
    if env := os.environ.get("DEW_RL_SITE"):
        site = (ROOT / env).resolve()
        assert (site / PAGE).exists(), f"DEW_RL_SITE={env} has no {PAGE}"
        return site
    out = tmp_path_factory.mktemp("site")
    subprocess.run([sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html",
                    "-D", "nb_execution_mode=off", str(ROOT / "docs"), str(out)], check=True, cwd=ROOT)
    return out


def _run_probe(wrapper: Path, html: str, tmp: Path, budget_ms: int, timeout: int) -> dict:
    """Open the probe page `html` (written to `wrapper`) in headless Chromium and return the JSON it leaves
    in its `<pre id="result">`."""
    wrapper.write_text(html, encoding="utf-8")
    cmd = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run", "--allow-file-access-from-files",
           f"--user-data-dir={tmp / 'profile'}", f"--virtual-time-budget={budget_ms}", "--dump-dom",
           wrapper.as_uri()]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout).stdout
    start = out.index('<pre id="result">') + len('<pre id="result">')
    raw = out[start:out.index("</pre>", start)]
    assert raw != "pending", f"{wrapper.name}: the page never finished loading in Chromium"
    return json.loads(raw.replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"'))


def probe(site: Path, tmp: Path, page: str = PAGE) -> dict:
    return _run_probe(tmp / "probe.html", PROBE % {"url": (site / page).as_uri()}, tmp, 15000, 120)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    return _site(tmp_path_factory)


def test_reductions_page_renders(site, tmp_path):
    r = probe(site, tmp_path)
    assert r["mathjax_loaded"], r
    assert r["mjx_display"] >= 3, f"display equations not typeset: {r}"
    assert r["raw_tex"] == [], f"raw TeX left in the rendered text: {r}"
    assert r["images_loaded"] >= 1, f"no figure image loaded: {r}"
    assert r["citations_to_references"] >= 1, f"no citation links to the References page: {r}"


CHAPTERS = sorted(p.stem for p in (ROOT / "nbs").glob("*.ipynb")) + ["references"]


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_page_typesets_and_loads_its_figures(site, tmp_path, chapter):
    r = probe(site, tmp_path, f"{chapter}.html")
    assert r["math"] == 0 or r["mathjax_loaded"], r
    assert r["untypeset"] == 0, f"{chapter}: math elements left untypeset: {r}"
    assert r["raw_tex"] == [], f"{chapter}: raw TeX left in the rendered text: {r}"
    assert r["images_loaded"] == r["images"], f"{chapter}: a figure did not load: {r}"


def test_probe_fails_without_mathjax(site, tmp_path):
    broken = tmp_path / "site"
    shutil.copytree(site, broken, ignore=shutil.ignore_patterns("mathjax"))
    r = probe(broken, tmp_path)
    assert not r["mathjax_loaded"] and r["mjx"] == 0 and r["raw_tex"] and r["untypeset"] == r["math"] > 0, r


FEATURES = "06b_features.html"


def _hidden_columns(layout: dict) -> list[str]:
    return [f"{page}: table {t['index']} ({t['head'][:60]}...) {t['width']} px in {t['box']} px"
            for page, r in layout.items() for t in r.get("tables_hiding", [])]


def test_no_table_hides_a_column_at_1400px(site):
    pages = [f"{c}.html" for c in CHAPTERS]
    layout = site_layout.measure(site, pages, 1400, 900)
    errors = [f"{p}: {r['error']}" for p, r in layout.items() if "error" in r]
    assert not errors, errors
    assert layout[FEATURES]["tables"] >= 9, layout[FEATURES]
    assert sum(r["conflict_tables"] for r in layout.values()) >= 50, "the conflict tables were not found"
    hidden = _hidden_columns(layout)
    assert not [h for h in hidden if h.startswith(FEATURES)], f"Features tables hide columns: {hidden}"
    conflict = [f"{p}: table {t['index']}" for p, r in layout.items() for t in r["tables_hiding"] if t["conflict"]]
    assert not conflict, f"conflict tables hide columns at 1400 px: {conflict}"
    assert not hidden, f"tables hide columns at 1400 px: {hidden}"


def test_column_probe_fails_without_the_stylesheet(site, tmp_path):
    broken = tmp_path / "site"
    shutil.copytree(site, broken, ignore=shutil.ignore_patterns("mathjax", "dew_rl.css"))
    layout = site_layout.measure(broken, [FEATURES], 1400, 900)
    assert len(layout[FEATURES]["tables_hiding"]) >= 5, layout[FEATURES]


CAPTIONS = ["Start", "Reductions", "Advantages", "Ratios and KL", "Policy losses", "Off-policy correction",
            "Preference and distillation", "Objectives", "Evidence", "Reference", "For contributors"]
CONTRIBUTORS = ["00_testing", "00a_checks", "00b_ops"]


def _sidebar(layout: dict) -> dict[str, list[str]]:
    groups, current = {}, None
    for item in layout["sidebar"]:
        if item.startswith("# "):
            current = item[2:]
            groups[current] = []
        elif current is not None:
            groups[current].append(item.split("#")[0].removesuffix(".html"))
    return groups


def test_sidebar_is_grouped_in_one_order_with_one_search_box(site):
    import re

    pages = ["genindex.html", "01_reductions.html", FEATURES]
    narrow = site_layout.measure(site, pages, 1400, 900)
    wide = site_layout.measure(site, pages[:1], 1920, 1080)
    groups = _sidebar(narrow["genindex.html"])
    assert list(groups) == CAPTIONS, list(groups)
    assert groups["For contributors"] == CONTRIBUTORS, groups["For contributors"]
    order = [d for docs in groups.values() for d in docs]
    chapters = [c for c in CHAPTERS if c != "index"]
    assert sorted(order) == sorted(chapters + ["api/index"]), sorted(set(order) ^ set(chapters + ["api/index"]))
    home = (site / "index.html").read_text(encoding="utf-8")
    table = home[home.index('<section id="chapters">'):]
    table = table[:table.index("</table>")]
    listed = list(dict.fromkeys(re.findall(r'href="(\w+)\.html"', table)))
    assert listed == [d for d in order if d in listed], f"the home page's chapters are in another order: {listed}"
    assert set(listed) == set(chapters) - {"references"}, set(chapters) ^ set(listed)
    for where, r in [*narrow.items(), ("genindex.html at 1920 px", wide["genindex.html"])]:
        assert len(r["search_boxes"]) == 1, f"{where}: {len(r['search_boxes'])} search boxes: {r['search_boxes']}"


CONTENTS_PROBE = """<!doctype html><html><body><pre id="result">pending</pre>
<iframe id="f" src="%(url)s" style="width:1400px;height:900px"></iframe>
<script>
const f = document.getElementById('f');
f.onload = () => setTimeout(() => {
  const d = f.contentDocument, w = f.contentWindow;
  const beside = d.querySelector('div.bd-sidebar-secondary');
  const button = d.querySelector('.bd-header button.secondary-toggle');
  const shown = button ? button.getBoundingClientRect().width : 0;
  const beside_width = beside ? beside.getBoundingClientRect().width : 0;
  if (button) button.click();
  setTimeout(() => {
    const dialog = d.getElementById('pst-secondary-sidebar-modal');
    document.getElementById('result').textContent = JSON.stringify({
      button: shown, beside: beside_width, open: !!(dialog && dialog.open),
      links: dialog ? dialog.querySelectorAll('a').length : 0,
      article: d.querySelector('article.bd-article').getBoundingClientRect().width});
  }, 500);
}, 1500);
</script></body></html>"""


def test_page_contents_open_from_the_header_at_1400px(site, tmp_path):
    """At 1400 px the page contents are not beside the article (which gets the width) but open
    from the header's button."""
    wrapper = tmp_path / "contents.html"
    wrapper.write_text(CONTENTS_PROBE % {"url": (site / "03l_rollout_correction.html").as_uri()}, encoding="utf-8")
    cmd = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run", "--allow-file-access-from-files",
           f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1450,1000", "--virtual-time-budget=10000",
           "--dump-dom", wrapper.as_uri()]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout
    start = out.index('<pre id="result">') + len('<pre id="result">')
    r = json.loads(out[start:out.index("</pre>", start)])
    assert r["beside"] == 0 and r["button"] > 0, r
    assert r["open"] and r["links"] >= 5, f"the page contents did not open from the header button: {r}"
    assert r["article"] >= 1000, r


# Figure legends: drawn into PNGs, so their size is checked where it is set, in the notebooks' plotting code.
# Every `legend(...)` call of every chapter gives no font size (matplotlib's default, 10 pt) or one of at least
# 9 pt, and no cell lowers the default (`rcParams["legend.fontsize"]`, `["font.size"]`) under 9 pt.
MIN_LEGEND_PT = 9
_NAMED_SIZES = {"xx-small": 5.79, "x-small": 6.94, "small": 8.33, "medium": 10, "large": 12, "x-large": 14.4,
                "xx-large": 17.28, "smaller": 8.33, "larger": 12}


def _code_cells(path: Path):
    import re

    nb = json.loads(path.read_text(encoding="utf-8"))
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "code":
            src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            yield i, "\n".join(line for line in src.splitlines() if not re.match(r"\s*(%{1,2}|!)[A-Za-z]", line))


def _size_pt(node):
    import ast

    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return float(node.value)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return _NAMED_SIZES.get(node.value, float("nan"))
    return None  # computed at run time: not checkable here


def small_legends(source: str, where: str = "") -> list[str]:
    """Legend font sizes under MIN_LEGEND_PT set in one cell's code: `legend(fontsize=...)`,
    `legend(prop={"size": ...})`, `rcParams["legend.fontsize"] = ...`, `rcParams["font.size"] = ...`."""
    import ast

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "legend":
            for kw in node.keywords:
                sizes = [kw.value] if kw.arg == "fontsize" else []
                if kw.arg == "prop" and isinstance(kw.value, ast.Dict):
                    sizes = [v for k, v in zip(kw.value.keys, kw.value.values)
                             if isinstance(k, ast.Constant) and k.value == "size"]
                for s in sizes:
                    pt = _size_pt(s)
                    if pt is not None and not pt >= MIN_LEGEND_PT:
                        found.append(f"{where} line {node.lineno}: legend at {ast.unparse(s)} ({pt} pt)")
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Subscript) and isinstance(t.slice, ast.Constant) \
                        and t.slice.value in ("legend.fontsize", "font.size"):
                    pt = _size_pt(node.value)
                    if pt is not None and not pt >= MIN_LEGEND_PT:
                        found.append(f"{where} line {node.lineno}: {t.slice.value} = {ast.unparse(node.value)}")
    return found


def test_figure_legends_are_at_least_9pt():
    small, legends = [], 0
    for path in sorted((ROOT / "nbs").glob("*.ipynb")):
        for i, src in _code_cells(path):
            legends += src.count(".legend(")
            small += small_legends(src, f"{path.name} cell {i}")
    assert legends >= 30, f"only {legends} legend calls found: the scan missed the plotting code"
    assert not small, "figure legends under 9 pt:\n" + "\n".join(small)


def test_legend_scan_finds_small_legends():
    src = ('ax.legend(fontsize=8)\naxes[0].legend(loc="upper left", fontsize="small")\nax.legend(prop={"size": 7})\n'
           'plt.rcParams["legend.fontsize"] = 6\nax.legend(fontsize=9)\nax.legend()\n')
    assert len(small_legends(src)) == 4, small_legends(src)


def _html(site: Path, page: str) -> str:
    return (site / page).read_text(encoding="utf-8")


def test_features_sections_are_headings_in_the_page_contents(site):
    """The Features page's sections A-I are headings of the page (so its contents list them), titled as
    `tools/conventions.py`'s SECTIONS, and each table's source list is folded."""
    import re

    spec = importlib.util.spec_from_file_location("dew_rl_conventions", ROOT / "tools" / "conventions.py")
    cv = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cv)
    html = _html(site, FEATURES)
    heads = [re.sub(r"<[^>]+>|#$", "", h).strip() for h in re.findall(r"<h3[^>]*>(.*?)</h3>", html, re.S)]
    expected = [f"{k}. {v}" for k, v in cv.SECTIONS.items()]
    assert [h.rstrip("#").strip() for h in heads if re.match(r"^[A-I]\. ", h)] == expected, heads
    toc = html[html.index('id="pst-page-navigation-heading'):] if 'id="pst-page-navigation-heading' in html else html
    ids = re.findall(r'<section id="([^"]+)">\s*<h3', html)
    assert len(ids) >= len(expected) and all(f'href="#{i}"' in toc for i in ids[:len(expected)]), ids
    assert html.count("<summary>Sources of section") == len(expected)


def test_figures_have_captions_and_alt_text(site):
    """Every figure of every chapter has a caption and alt text that describes it (not a file name)."""
    import re

    bad, n = [], 0
    for chapter in CHAPTERS:
        html = _html(site, f"{chapter}.html")
        article = html[html.find("<article"):html.rfind("</article>")]
        for img in re.findall(r"<img [^>]*>", article):
            if "_images/" not in img:
                continue
            n += 1
            alt = (re.search(r'alt="([^"]*)"', img) or [None, ""])[1]
            if len(alt) < 12 or re.search(r"\.(png|svg|jpe?g)\b", alt):
                bad.append(f"{chapter}: alt={alt!r}")
        figures, captions = article.count('<figure'), article.count('<figcaption')
        if figures != captions:
            bad.append(f"{chapter}: {figures} figures, {captions} captions")
    assert n >= 30, f"only {n} figure images found"
    assert not bad, bad


MAX_SCREENS = 20


def test_long_pages_fold_their_detail(site):
    """At 1400x900 a page longer than 20 screens has folded blocks (the code of its tests, tables and
    figures, its source lists) that a reader opens on demand; the figures are recorded in the report."""
    pages = [f"{c}.html" for c in CHAPTERS]
    layout = site_layout.measure(site, pages, 1400, 900)
    long_unfolded = [f"{p}: {r['screens']:.1f} screens" for p, r in layout.items()
                     if r.get("screens", 0) > MAX_SCREENS and not r.get("folded", 0)]
    assert not long_unfolded, f"pages over {MAX_SCREENS} screens with nothing folded: {long_unfolded}"


def test_no_code_cell_source_scrolls_sideways_at_1400px(site):
    """At 1400x900 no code cell's source scrolls sideways: the notebooks' code cells are wrapped at 100
    characters (`make wrap`, tools/wrap_code.py) and the column holds about 120. No printed output
    (a table, an array, a sentence) scrolls either: a printed table that did would hide its columns."""
    pages = [f"{c}.html" for c in CHAPTERS]
    layout = site_layout.measure(site, pages, 1400, 900)
    errors = [f"{p}: {r['error']}" for p, r in layout.items() if "error" in r]
    assert not errors, errors
    summary = site_layout.summary(layout)
    print(f"code blocks: {summary['pres_source']} sources, {summary['pres_source_overflow']} scrolling; "
          f"{summary['pres_output_overflow']} outputs scrolling; {summary['code_chars_per_line']} characters a line")
    assert summary["pres_source"] >= 500, summary
    assert summary["code_chars_per_line"] >= 100, f"a code line of 100 characters does not fit: {summary}"
    wide = [f"{p}: {o['chars']} characters: {o['line'][:70]}" for p, r in layout.items()
            for o in r["pres_source_overflow"]]
    assert not wide, f"{len(wide)} code cell sources scroll sideways at 1400 px:\n" + "\n".join(wide)
    wide_out = [f"{p}: {o['chars']} characters: {o['line'][:70]}" for p, r in layout.items()
                for o in r["pres_output_wide"]]
    assert not wide_out, f"{len(wide_out)} printed outputs scroll sideways at 1400 px:\n" + "\n".join(wide_out)


def test_scroll_probes_find_a_long_line(site, tmp_path):
    copy = tmp_path / "site"
    shutil.copytree(site, copy, ignore=shutil.ignore_patterns("mathjax"))
    page = copy / PAGE
    html = page.read_text(encoding="utf-8")
    at = html.index('<div class="cell_input')
    long = '<div class="cell_input docutils container"><div class="highlight"><pre>' + "x = 1  # " + "y" * 150 + "</pre></div></div>"
    out = '<div class="cell_output docutils container"><div class="output stream highlight-myst-ansi notranslate"><div class="highlight"><pre>' + "z" * 240 + "</pre></div></div></div>"
    page.write_text(html[:at] + long + out + html[at:], encoding="utf-8")
    before = site_layout.measure(site, [PAGE], 1400, 900)[PAGE]
    after = site_layout.measure(copy, [PAGE], 1400, 900)[PAGE]
    assert ([o["chars"] for o in after["pres_source_overflow"]]
            == [159] + [o["chars"] for o in before["pres_source_overflow"]]), after["pres_source_overflow"]
    # the output probe: the injected 240-character output line (set smaller by dew_rl.js, still too wide)
    assert ([o["chars"] for o in after["pres_output_wide"]]
            == [240] + [o["chars"] for o in before["pres_output_wide"]]), after["pres_output_wide"]


SEARCH_PROBE = """<!doctype html><html><body><pre id="result">pending</pre>
<iframe id="f" src="%(url)s" style="width:1400px;height:900px"></iframe>
<script>
const f = document.getElementById('f');
let tries = 0;
const poll = () => {
  tries += 1;
  const d = f.contentDocument;
  const items = d ? Array.from(d.querySelectorAll('#search-results li')) : [];
  const snippets = items.map(li => { const p = li.querySelector('p.context'); return p ? p.textContent : null; });
  if ((items.length && snippets.filter(s => s !== null).length >= Math.min(items.length, 5)) || tries > 150) {
    document.getElementById('result').textContent = JSON.stringify({
      results: items.map(li => (li.querySelector('a') || {}).getAttribute ? li.querySelector('a').getAttribute('href') : ''),
      snippets: snippets});
  } else { setTimeout(poll, 100); }
};
f.onload = () => setTimeout(poll, 200);
</script></body></html>"""

# Text of the page header and of the contents list that Sphinx's default snippet picks up in this theme.
CHROME = [".ipynb", ".pdf", "Light Dark", "System Settings", "Contents", "Show code", "Skip to main"]


def search_snippets(site: Path, tmp: Path, query: str) -> dict:
    html = SEARCH_PROBE % {"url": (site / "search.html").as_uri() + "?q=" + query}
    return _run_probe(tmp / "search_probe.html", html, tmp, 30000, 180)


def snippet_faults(snippets) -> list[str]:
    import re

    bad = []
    for s in snippets:
        if s is None:
            continue
        if re.search(r"\\\(|\\\)|\\\[|\\\]|\$\$|\\[a-zA-Z]+\{", s):
            bad.append(f"raw TeX: {s[:120]!r}")
        bad += [f"page chrome {c!r}: {s[:120]!r}" for c in CHROME if c in s]
    return bad


@pytest.mark.parametrize("query", ["loss_agg_mode", "k3"])
def test_search_snippets_show_the_page_text(site, tmp_path, query):
    """The site's own search: results come with a snippet of the article's text (no header, contents
    list or "Show code" bar), with maths as plain text rather than raw TeX."""
    r = search_snippets(site, tmp_path, query)
    shown = [s for s in r["snippets"] if s]
    assert len(r["results"]) >= 3 and len(shown) >= 3, r
    assert any(query in s for s in shown), r["snippets"][:5]
    assert not snippet_faults(r["snippets"]), snippet_faults(r["snippets"])


def test_snippet_check_finds_chrome_and_tex():
    assert len(snippet_faults([".ipynb .pdf Light Dark Masked reductions", r"the mean \(k\) of x", "plain"])) == 4


def test_wide_printed_outputs_are_set_to_fit(site, tmp_path):
    """docs/_static/dew_rl.js sets a printed output that is a little wider than the column smaller
    (down to 80% of the code font): fewer outputs scroll with it than on a copy of the site without it."""
    pages = [f"{c}.html" for c in CHAPTERS]
    copy = tmp_path / "site"
    shutil.copytree(site, copy, ignore=shutil.ignore_patterns("dew_rl.js", ".doctrees"))
    fitted = site_layout.summary(site_layout.measure(site, pages, 1400, 900))["pres_output_overflow"]
    plain = site_layout.summary(site_layout.measure(copy, pages, 1400, 900))["pres_output_overflow"]
    print(f"printed outputs that scroll at 1400 px: {fitted} (without the fitting: {plain})")
    assert fitted < plain, (fitted, plain)
