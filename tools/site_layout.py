"""How the built site fits a screen: every page opened in headless Chromium at a given window size.

For each page: the code and output blocks (`pre`) that scroll sideways, the tables wider than their
container, the tables that hide a column (their first or last column not fully visible without
scrolling), separately for the Features page and for the tables of "Where the frameworks disagree"
sections, the figures shown smaller than their natural size, the page's length in screens (with its
folded blocks closed) and how many folded blocks (`<details>`) it has.

    python tools/site_layout.py docs/_build/html --size 1400x900 [--size 1920x1080] [--json out.json]

tests/test_site_browser.py uses `measure` for its column-visibility check.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import tempfile
from pathlib import Path

PROBE = r"""<!doctype html><html><body><pre id="result">pending</pre>
<iframe id="f" style="width:%(w)dpx;height:%(h)dpx;border:0"></iframe>
<script>
const pages = %(pages)s, results = {};
const frame = document.getElementById('f');
function visible(cell, box, vw) {
  const r = cell.getBoundingClientRect();
  return r.left >= Math.max(box.left, 0) - 1 && r.right <= Math.min(box.right, vw) + 1;
}
function scroller(el, article) {
  for (let e = el.parentElement; e && e !== article; e = e.parentElement) {
    const ox = getComputedStyle(e).overflowX;
    if (ox === 'auto' || ox === 'scroll' || ox === 'hidden') return e;
  }
  return article;
}
function scrolls(p) { return p.scrollWidth > p.clientWidth + 1; }
function widest(p) {  // a block that scrolls: by how much, and its longest line
  const line = p.textContent.split('\n').reduce((a, b) => b.length > a.length ? b : a, '');
  return {excess: p.scrollWidth - p.clientWidth, chars: line.length, line: line.slice(0, 100)};
}
function measure(doc, win) {
  const article = doc.querySelector('article.bd-article') || doc.querySelector('main') || doc.body;
  const vw = win.innerWidth, vh = win.innerHeight;
  const pres = Array.from(article.querySelectorAll('pre'));
  const tables = Array.from(article.querySelectorAll('table')).filter(t => !t.closest('.highlight, pre'));
  const out = {
    width: (article.querySelector('section') || article).getBoundingClientRect().width, pres: pres.length,
    pres_overflow: pres.filter(p => p.scrollWidth > p.clientWidth + 1).length,
    pres_excess: pres.filter(p => p.scrollWidth > p.clientWidth + 1).map(p => p.scrollWidth - p.clientWidth),
    pres_source: pres.filter(p => p.closest('.cell_input')).length,
    pres_source_overflow: pres.filter(p => p.closest('.cell_input') && scrolls(p)).map(widest),
    pres_output_overflow: pres.filter(p => !p.closest('.cell_input') && scrolls(p)).length,
    pres_output_wide: pres.filter(p => !p.closest('.cell_input') && scrolls(p)).map(widest),
    pre_chars: (() => { const p = article.querySelector('.cell_input pre'); if (!p) return 0;
      const s = doc.createElement('span'); s.textContent = 'x'.repeat(100); p.appendChild(s);
      const w = s.getBoundingClientRect().width / 100; s.remove();
      const st = win.getComputedStyle(p);
      return Math.floor((p.clientWidth - parseFloat(st.paddingLeft) - parseFloat(st.paddingRight)) / w); })(),
    tables: tables.length, tables_overflow: 0, tables_hiding: [], conflict_tables: 0,
    screens: doc.documentElement.scrollHeight / vh,
    folded: article.querySelectorAll('details').length,
    images: 0, images_shrunk: 0, min_image_scale: 1,
    search_boxes: Array.from(doc.querySelectorAll('.search-button__button, input[type=search], #searchbox input')).filter(e => {
      const r = e.getBoundingClientRect(), st = win.getComputedStyle(e);
      return r.width > 0 && r.height > 0 && st.visibility !== 'hidden' && r.bottom > 0 && r.top < vh;
    }).map(e => e.closest('[class]').parentElement.className.slice(0, 40) + ' @' + Math.round(e.getBoundingClientRect().left) + ',' + Math.round(e.getBoundingClientRect().top)),
    sidebar: Array.from(doc.querySelectorAll('.bd-sidebar-primary nav.bd-links p.caption, .bd-sidebar-primary nav.bd-links li.toctree-l1 > a')).map(
      e => e.tagName === 'P' ? '# ' + e.textContent.trim() : (e.getAttribute('href') || '')),
  };
  tables.forEach((t, i) => {
    const box = scroller(t, article);
    const b = box.getBoundingClientRect();
    const wide = t.getBoundingClientRect().width > box.clientWidth + 1;
    if (wide) out.tables_overflow += 1;
    let conflict = false;
    for (let s = t.closest('section'); s; s = s.parentElement && s.parentElement.closest('section')) {
      const h = s.querySelector(':scope > h1, :scope > h2, :scope > h3, :scope > h4');
      if (h && /frameworks disagree/i.test(h.textContent)) { conflict = true; break; }
    }
    if (conflict) out.conflict_tables += 1;
    const row = t.querySelector('thead tr') || t.querySelector('tr');
    const cells = row ? Array.from(row.children) : [];
    if (!cells.length) return;
    const ok = !wide || (visible(cells[0], b, vw) && visible(cells[cells.length - 1], b, vw));
    if (!ok) out.tables_hiding.push({index: i, conflict: conflict,
      head: cells.map(c => c.textContent.trim().slice(0, 20)).join(' | ').slice(0, 120),
      width: Math.round(t.getBoundingClientRect().width), box: Math.round(box.clientWidth)});
  });
  Array.from(article.querySelectorAll('img')).forEach(img => {
    if (!img.naturalWidth) return;
    out.images += 1;
    const scale = img.getBoundingClientRect().width / img.naturalWidth;
    if (scale < 0.99) out.images_shrunk += 1;
    out.min_image_scale = Math.min(out.min_image_scale, scale);
  });
  return out;
}
function next(i) {
  if (i >= pages.length) { document.getElementById('result').textContent = JSON.stringify(results); return; }
  frame.onload = () => {
    const win = frame.contentWindow, doc = frame.contentDocument;
    let tries = 0;
    const done = () => setTimeout(() => { try { results[pages[i]] = measure(doc, win); }
                                          catch (e) { results[pages[i]] = {error: String(e)}; } next(i + 1); }, 50);
    const poll = () => {
      tries += 1;
      const mj = win.MathJax;
      if (mj && mj.startup && mj.startup.promise) { mj.startup.promise.then(done); }
      else if (tries > 30) { done(); }
      else { setTimeout(poll, 100); }
    };
    poll();
  };
  frame.src = pages[i];
}
next(0);
</script></body></html>"""


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if path := shutil.which(name):
            return path
    raise RuntimeError("no Chromium on PATH: `make browser` installs it")


def measure(site: Path, pages: list[str], width: int, height: int) -> dict:
    """Per page (a path relative to the site), the layout figures at a window of width x height."""
    site = Path(site).resolve()
    with tempfile.TemporaryDirectory() as tmp:
        wrapper = Path(tmp) / "probe.html"
        urls = [(site / p).as_uri() for p in pages]
        wrapper.write_text(PROBE % {"w": width, "h": height, "pages": json.dumps(urls)}, encoding="utf-8")
        cmd = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run", "--allow-file-access-from-files",
               f"--user-data-dir={Path(tmp) / 'profile'}", f"--window-size={width + 40},{height + 200}",
               f"--virtual-time-budget={20000 * len(pages)}", "--dump-dom", wrapper.as_uri()]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60 + 10 * len(pages)).stdout
    start = out.index('<pre id="result">') + len('<pre id="result">')
    raw = out[start:out.index("</pre>", start)]
    if raw == "pending":
        raise RuntimeError("the pages never finished loading in Chromium")
    got = json.loads(raw.replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"'))
    return {p: got[u] for p, u in zip(pages, urls)}


def site_pages(site: Path) -> list[str]:
    skip = {"genindex.html", "search.html", "py-modindex.html"}
    return sorted(str(p.relative_to(site)) for p in Path(site).rglob("*.html")
                  if "_static" not in p.parts and p.name not in skip)


def summary(per_page: dict) -> dict:
    tot = lambda k: sum(r.get(k, 0) for r in per_page.values())
    hiding = [(p, t) for p, r in per_page.items() for t in r.get("tables_hiding", [])]
    longest = max(per_page.items(), key=lambda kv: kv[1].get("screens", 0))
    widths = sorted(r.get("width", 0) for r in per_page.values())
    return {"pages": len(per_page), "column_width_median": round(widths[len(widths) // 2]),
            "pres": tot("pres"), "pres_overflow": tot("pres_overflow"),
            "pres_source": tot("pres_source"),
            "pres_source_overflow": sum(len(r.get("pres_source_overflow", [])) for r in per_page.values()),
            "pres_output_overflow": tot("pres_output_overflow"),
            "code_chars_per_line": min((r["pre_chars"] for r in per_page.values() if r.get("pre_chars")), default=0),
            "tables": tot("tables"), "tables_overflow": tot("tables_overflow"),
            "tables_hiding_columns": len(hiding),
            "features_tables_hiding": sum(1 for p, _ in hiding if p.startswith("06b_features")),
            "conflict_tables": tot("conflict_tables"),
            "conflict_tables_hiding": sum(1 for _, t in hiding if t["conflict"]),
            "images_shrunk": tot("images_shrunk"), "images": tot("images"),
            "longest_page": longest[0], "longest_screens": round(longest[1].get("screens", 0), 1),
            "pages_over_20_screens": sum(1 for r in per_page.values() if r.get("screens", 0) > 20),
            "pages_over_20_screens_unfolded": sum(1 for r in per_page.values()
                                                  if r.get("screens", 0) > 20 and not r.get("folded", 0)),
            "site_screens": round(tot("screens"))}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("site", type=Path)
    ap.add_argument("--size", action="append", default=None, help="WIDTHxHEIGHT (default 1400x900 and 1920x1080)")
    ap.add_argument("--json", type=Path, help="write the per-page figures here")
    args = ap.parse_args()
    pages = site_pages(args.site)
    everything = {}
    for size in args.size or ["1400x900", "1920x1080"]:
        w, h = map(int, size.split("x"))
        per_page = measure(args.site, pages, w, h)
        everything[size] = per_page
        print(size, json.dumps(summary(per_page)))
    if args.json:
        args.json.write_text(json.dumps(everything, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
