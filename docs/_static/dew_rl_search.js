/* dew_rl: search-result snippets from the page's own text. Sphinx's searchtools takes the text of the
   fetched page's [role=main], which in this theme also holds the article header (".ipynb .pdf",
   "Light Dark", the contents list) and the maths as raw TeX (MathJax typesets it only in a browser
   window). This takes the article body alone, drops the header, the contents, the "Show code" bars and
   the heading anchors, writes inline and display maths as plain text (\(\pi_\theta\) -> pi_theta),
   and collapses white space. tests/test_site_browser.py checks the snippets of a search. */
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
})();
