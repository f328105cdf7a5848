/* dew_rl's page script.

   1. Search-result snippets from the page's own text. Sphinx's searchtools takes the text of the
   fetched page's [role=main], which in this theme also holds the article header (".ipynb .pdf",
   "Light Dark", the contents list) and the maths as raw TeX (MathJax typesets it only in a browser
   window). This takes the article body alone, drops the header, the contents, the "Show code" bars and
   the heading anchors, writes inline and display maths as plain text (\(\pi_\theta\) -> pi_theta),
   and collapses white space. tests/test_site_browser.py checks the snippets of a search.
   2. A printed output (a table or an array a cell prints) wider than the column is set smaller, down
      to 80% of the code font, until it fits; one still wider scrolls. tools/site_layout.py counts what
      scrolls after this has run. */
(function () {
  const LAYOUT = /\\(?:left|right|big|Big|bigg|Bigg|mathrm|mathbf|mathit|mathcal|mathbb|operatorname|text|textrm|boldsymbol|displaystyle|limits|nolimits|quad|qquad|,|;|!)(?![a-zA-Z])/g;
  function plainMath(tex) {
    return tex.replace(/^\s*\\[\(\[]|\\[\)\]]\s*$/g, "").replace(/^\$\$?|\$\$?$/g, "")
      .replace(LAYOUT, " ").replace(/\\frac\s*/g, "").replace(/\\([a-zA-Z]+)/g, "$1")
      .replace(/\\(.)/g, "$1").replace(/[{}]/g, "").replace(/\s+/g, " ").trim();
  }
  function htmlToText(htmlString, anchor) {
    const doc = new DOMParser().parseFromString(htmlString, "text/html");
    const body = doc.querySelector("article.bd-article") || doc.querySelector('[role="main"]');
    if (!body) return "";
    body.querySelectorAll(".headerlink, script, style, .header-article, .bd-toc, .toggle-details__summary, " +
                          "summary.tag_hide-input, details.hide > summary, mjx-container").forEach((e) => e.remove());
    body.querySelectorAll(".math").forEach((e) => { e.textContent = " " + plainMath(e.textContent) + " "; });
    let node = body;
    if (anchor) node = body.querySelector(anchor) || body;
    return node.textContent.replace(/\s+/g, " ").trim();
  }
  function patch() {
    if (typeof Search !== "undefined" && Search.htmlToText !== htmlToText) Search.htmlToText = htmlToText;
  }
  patch();
  document.addEventListener("DOMContentLoaded", patch);

  function fitOutputs() {
    document.querySelectorAll(".cell_output pre").forEach((pre) => {
      if (pre.scrollWidth <= pre.clientWidth + 1) return;
      const base = parseFloat(getComputedStyle(pre).fontSize);
      const pad = parseFloat(getComputedStyle(pre).paddingLeft) + parseFloat(getComputedStyle(pre).paddingRight);
      const want = base * (pre.clientWidth - pad) / (pre.scrollWidth - pad);
      if (want >= 0.8 * base) pre.style.fontSize = Math.floor(want * 10) / 10 + "px";
    });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", fitOutputs);
  else fitOutputs();
})();
