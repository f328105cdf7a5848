"""Sphinx configuration for the dew_rl site.

The notebooks in ../nbs are the source of truth. Sphinx does not read them in place: at start-up
this file copies each one next to it (docs/*.ipynb, ignored by git) and translates nbdev's `#|`
directives, which myst-nb does not understand, into myst-nb cell tags:

    #| hide, #| default_exp  -> remove-cell
    #| echo: false           -> remove-input
    #| output: false         -> remove-output
    #| eval: false           -> skip-execution

The directive lines and nbval markers are stripped from what the reader sees. The home page is
nbs/index.ipynb; hidden toctrees, one per group of CHAPTER_GROUPS with its caption, are appended to
its copy so that every chapter is in the sidebar, grouped. The API reference (docs/api/) is written
by docs/api_pages.py from the packages' __all__; docs/_static/dew_rl.css widens the content column.
On the chapters' copies, the code of tests, of conflict tables and of figures is folded (myst-nb's
`hide-input`), long tables of source files are folded (`<details>`), and each figure gets a caption and
alt text from the cell that draws it (myst-nb's `mystnb.figure` / `mystnb.image` cell metadata).
"""
from __future__ import annotations

import ast
import json
import re
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
NBS = ROOT / "nbs"
MATHJAX = ROOT / "node_modules" / "mathjax" / "es5"

project = "dew_rl"
author = "dew_rl contributors"
copyright = "2026, dew_rl contributors"

extensions = ["myst_nb", "sphinxcontrib.bibtex", "sphinx.ext.mathjax", "sphinx.ext.autodoc", "sphinx.ext.napoleon"]
myst_enable_extensions = ["dollarmath", "amsmath", "attrs_inline"]
myst_heading_anchors = 3
nb_render_markdown_format = "myst"
nb_execution_mode = "off"  # `make docs` passes -D nb_execution_mode=force
nb_execution_timeout = 600
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_merge_streams = True

bibtex_bibfiles = ["references.bib"]
bibtex_reference_style = "author_year"
bibtex_default_style = "plain"

html_theme = "sphinx_book_theme"
html_title = "dew_rl"
html_static_path = ["_static"]
html_css_files = ["dew_rl.css"]  # a content column as wide as the screen allows
html_js_files = ["dew_rl.js"]  # search snippets from the article text; printed outputs set to fit
html_theme_options = {"show_toc_level": 2, "home_page_in_toc": True}
# One search box: the header's (the theme's default sidebar has a second one).
html_sidebars = {"**": ["navbar-logo.html", "icon-links.html", "sbt-sidebar-nav.html"]}
# MathJax 3 is served from the site itself: the default CDN does not load offline.
mathjax_path = "mathjax/tex-chtml.js"

# The API reference (docs/api/, written by api_pages.py at start-up from the packages' __all__): the
# docstrings are NumPy style; `x` in a docstring is inline code, as in the notebooks' Markdown.
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False
autodoc_member_order = "bysource"
autodoc_default_options = {"members": False}
default_role = "code"

root_doc = "index"
exclude_patterns = ["_build", "**.ipynb_checkpoints", "Thumbs.db", ".DS_Store"]
suppress_warnings = ["mystnb.unknown_mime_type"]

sys.path.insert(0, str(HERE))
import api_pages  # noqa: E402  (docs/api_pages.py, next to this file)

_DIRECTIVE = re.compile(r"^#\|\s*(.*?)\s*$")
_NBVAL = re.compile(r"^#\s*NBVAL_[A-Z_]+\s*$")


def _source_lines(cell):
    src = cell.get("source", "")
    return (src if isinstance(src, str) else "".join(src)).splitlines()


def _translate_cell(cell):
    """Turn nbdev directives into myst-nb tags and strip them from the shown source."""
    if cell.get("cell_type") != "code":
        return cell
    lines = _source_lines(cell)
    directives, body, in_header = [], [], True
    for line in lines:
        m = _DIRECTIVE.match(line)
        if in_header and m:
            directives.append(m.group(1))
            continue
        if _NBVAL.match(line):
            continue
        in_header = False
        body.append(line)
    tags = list(cell.get("metadata", {}).get("tags", []))
    for d in directives:
        key, _, val = d.partition(":")
        key, val = key.strip(), val.strip().lower()
        if key in ("hide", "default_exp") or (key == "include" and val == "false"):
            tags.append("remove-cell")
        elif key == "echo" and val == "false":
            tags.append("remove-input")
        elif key == "output" and val == "false":
            tags.append("remove-output")
        elif key == "eval" and val == "false":
            tags.append("skip-execution")
    cell = dict(cell)
    cell["metadata"] = dict(cell.get("metadata", {}))
    if tags:
        cell["metadata"]["tags"] = sorted(set(tags))
    cell["source"] = "\n".join(body).strip("\n")
    return cell


# The sidebar, in groups with captions; the home page's chapter table follows the same order
# (tests/test_site_browser.py checks both against this list). Every chapter is in exactly one group.
CHAPTER_GROUPS = [
    ("Start", ["04d_objectives_api", "06b_features", "06c_crosswalk"]),
    ("Reductions", ["01_reductions"]),
    ("Advantages", ["02a_gae", "02b_group_advantage", "02c_rloo", "02d_global_normalize", "02e_reinforce_plus_plus",
                    "02f_reward_scaling", "02g_token_baselines"]),
    ("Ratios and KL", ["03h_logits", "03a_log_ratios", "03b_kl"]),
    ("Policy losses", ["03c_clipped_surrogate", "03d_soft_surrogates", "03e_value_loss",
                       "03i_weighted_policy_gradients", "03j_sequence_trust_regions", "03k_entropy"]),
    ("Off-policy correction", ["03f_importance_weights", "03l_rollout_correction", "03m_mismatch_diagnostics",
                               "03n_off_policy_terms"]),
    ("Preference and distillation", ["03g_preference", "03o_preference_family", "03p_distillation"]),
    ("Objectives", ["04a_objectives", "04b_estimators", "04e_config_fields", "04f_pieces", "04c_monitoring", "05t_tunix"]),
    ("Evidence", ["06_conformance", "08_exact_gradients", "08b_offpolicy_bias", "08c_gradient_claims",
                  "05_learning_curves", "07_benchmarks"]),
    ("Reference", ["99_api", "api/index", "98_sources", "references"]),
    ("For contributors", ["00_testing", "00a_checks", "00b_ops"]),
]


def _toctrees(chapters):
    grouped = [d for _, docs in CHAPTER_GROUPS for d in docs]
    known = set(chapters) | {"api/index", "references"}
    if sorted(grouped) != sorted(known) or len(grouped) != len(set(grouped)):
        raise RuntimeError("docs/conf.py CHAPTER_GROUPS must list every chapter once: "
                           f"missing {sorted(known - set(grouped))}, unknown {sorted(set(grouped) - known)}")
    return "\n\n".join(f"```{{toctree}}\n:hidden:\n:maxdepth: 2\n:caption: {caption}\n\n" + "\n".join(docs) + "\n```"
                       for caption, docs in CHAPTER_GROUPS)


# Long pages fold what a reader opens only when checking: the code of a "Tests" section, the code of
# the cells of "Where the frameworks disagree" that compute a table, and the code that draws a figure
# (each a "Show code" bar; the outputs, tables and figures stay shown). The library's own code
# (`#| export` cells) and every other cell stay open.
_FOLD_SECTIONS = re.compile(r"^(Tests\b|Where the frameworks disagree)", re.IGNORECASE)
_TITLE = re.compile(r"""(?:set_title|suptitle|\btitle)\s*[=(]\s*([rfRF]{0,2})(["'])(.+?)(?<!\\)\2""")


def _outputs(cell, mime):
    return any(mime in o.get("data", {}) for o in cell.get("outputs", []))


def _plain(text):
    """Markdown to one plain sentence or two: links, emphasis, inline code and math markers dropped."""
    text = re.sub(r"\{cite:[a-z]+\}`[^`]*`", "", text)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[*`$\\]|\{[a-z]+\}", "", text)
    text = " ".join(text.split()).rstrip(":")
    return text[:300].rsplit(" ", 1)[0] + " ..." if len(text) > 300 else text


def _figure_text(cell, paragraph):
    """A figure's caption (its panels' titles, or failing those the paragraph that introduces it) and its
    alt text (the titles and that paragraph), computed from the cell that draws it."""
    titles = []
    for prefix, quote, text in _TITLE.findall("\n".join(_source_lines(cell))):
        if "f" in prefix.lower() and "{" in text:
            continue  # a title computed at run time
        try:
            titles.append(ast.literal_eval(prefix.lower().replace("f", "") + quote + text + quote))
        except (SyntaxError, ValueError):
            continue
    lead = _plain(paragraph)
    caption = "; ".join(dict.fromkeys(titles)) or lead.split(". ")[0]
    alt = "Figure: " + "; ".join(x for x in (_plain("; ".join(dict.fromkeys(titles))), lead) if x)
    return caption, alt


def _fold_file_tables(cell):
    """A Markdown table of source files (its first column headed "file ...") of more than a few rows is
    folded: a `<details>` block whose summary counts the files."""
    lines, out, i = _source_lines(cell), [], 0
    while i < len(lines):
        if lines[i].startswith("| file") and i + 1 < len(lines) and lines[i + 1].startswith("|---"):
            j = i + 2
            while j < len(lines) and lines[j].startswith("|"):
                j += 1
            if j - i - 2 > 4:
                out += [f"<details><summary>The table of the {j - i - 2} files and functions</summary>", ""] + lines[i:j] + ["", "</details>"]
                i = j
                continue
        out.append(lines[i])
        i += 1
    cell["source"] = "\n".join(out)


def _fold_and_caption(cells):
    section, paragraph, in_fence = "", "", False
    for cell in cells:
        if cell.get("cell_type") == "markdown":
            _fold_file_tables(cell)
            for line in _source_lines(cell):
                if line.lstrip().startswith(("```", "~~~")):
                    in_fence = not in_fence
                elif not in_fence and line.startswith("## "):
                    section = line[3:].strip()
            paras = [p for p in "\n".join(_source_lines(cell)).split("\n\n") if p.strip() and not p.lstrip().startswith(("#", "|", "```", "<", ">", "$$"))]
            paragraph = paras[-1] if paras else paragraph
            continue
        if cell.get("cell_type") != "code":
            continue
        meta = cell.setdefault("metadata", {})
        tags = set(meta.get("tags", []))
        directives = [m.group(1) for m in map(_DIRECTIVE.match, _source_lines(cell)) if m]
        exported = any(d.startswith(("export", "exports")) for d in directives)
        hidden = any(d.startswith(("hide", "default_exp")) or d.replace(" ", "") in ("echo:false", "include:false")
                     for d in directives)
        shown = not hidden and not tags & {"remove-cell", "remove-input", "hide-input", "hide-cell"}
        figure = _outputs(cell, "image/png") or _outputs(cell, "image/svg+xml")
        table = _outputs(cell, "text/markdown") or _outputs(cell, "text/html")
        if shown and not exported and (figure or (_FOLD_SECTIONS.match(section) and (table or section[:5].lower() == "tests"))):
            tags.add("hide-input")
            meta["tags"] = sorted(tags)
        if figure and "mystnb" not in meta:
            caption, alt = _figure_text(cell, paragraph)
            meta["mystnb"] = {"image": {"alt": alt}, "figure": {"caption": caption}}


def _copy_notebooks():
    for old in HERE.glob("*.ipynb"):
        old.unlink()
    chapters = []
    for src in sorted(NBS.glob("*.ipynb")):
        nb = json.loads(src.read_text(encoding="utf-8"))
        if src.stem != "index":
            _fold_and_caption(nb["cells"])
        nb["cells"] = [_translate_cell(c) for c in nb["cells"]]
        nb.setdefault("metadata", {}).pop("jupytext", None)
        if src.stem == "index":
            home = nb
        else:
            chapters.append(src.stem)
            (HERE / src.name).write_text(json.dumps(nb, indent=1), encoding="utf-8")
    toc = _toctrees(chapters)
    home["cells"].append({"cell_type": "markdown", "id": "dew-rl-toc", "metadata": {}, "source": toc})
    (HERE / "index.ipynb").write_text(json.dumps(home, indent=1), encoding="utf-8")


def _copy_mathjax(app, exception):
    if exception is None and app.builder.format == "html":
        shutil.copytree(MATHJAX, Path(app.outdir) / "_static" / "mathjax", dirs_exist_ok=True)


_API: dict[str, str] = {}  # what a reader writes in inline code -> the API entry's full name


def _api_targets(rows):
    """Inline code that names a public function links to its entry: `masked_mean`, `rl.gae`,
    `dew_rl.objectives.grpo`, `obj.grpo(...)`. A bare name of dew_rl.objectives links only when it is
    a class or a constant (`grpo`, `sapo`, `loss` are also strings and words in the prose)."""
    for row in rows:
        full = f"{row['package']}.{row['name']}"
        if row["package"] == "dew_rl":
            for form in (row["name"], f"rl.{row['name']}", full):
                _API.setdefault(form, full)
        else:
            for form in (f"obj.{row['name']}", full):
                _API.setdefault(form, full)
            if row["kind"] != "function":
                _API.setdefault(row["name"], full)


def _link_api_names(app, doctree, docname):
    from docutils import nodes
    from sphinx import addnodes

    for lit in list(doctree.findall(nodes.literal)):
        if isinstance(lit.parent, (nodes.reference, addnodes.desc_name, addnodes.desc_addname)):
            continue
        if any(isinstance(a, (addnodes.desc_signature, nodes.reference)) for a in _ancestors(lit)):
            continue
        text = lit.astext().strip()
        text = text[:-2] if text.endswith("()") else text
        full = _API.get(text)
        if full is None:
            continue
        page = "api/" + api_pages.page_of(full)
        uri = app.builder.get_relative_uri(docname, page) + "#" + full
        ref = nodes.reference("", "", internal=True, refuri=uri, classes=["api-link"])
        lit.replace_self(ref)
        ref.append(lit)


def _ancestors(node):
    while node.parent is not None:
        node = node.parent
        yield node


def _docstring_as_written(app, what, name, obj, options, lines):
    """Read the docstrings as their authors wrote them (Markdown-minded NumPy style) without
    reStructuredText's surprises: `|d|` is an absolute value, not a substitution; a word glued to
    inline code (`aggregate`d) stays glued; a constant shows no docstring of its type (dict's)."""
    if what == "data" and getattr(obj, "__doc__", None) == getattr(type(obj), "__doc__", None):
        lines[:] = []
        return
    lines[:] = [api_pages.rst_text(line) for line in lines]


def setup(app):
    if not (MATHJAX / "tex-chtml.js").exists():
        raise RuntimeError(f"MathJax not found at {MATHJAX}: run `npm ci` (the Makefile does)")
    _copy_notebooks()
    _api_targets(api_pages.write())
    app.connect("doctree-resolved", _link_api_names)
    app.connect("autodoc-process-docstring", _docstring_as_written)
    app.connect("build-finished", _copy_mathjax)
