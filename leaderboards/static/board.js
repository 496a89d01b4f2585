// semcal leaderboard: sort (click a header), filter (search box, task, reference rows) and restrict to
// verified entries (hides other tiers and shows the ranks computed among verified entries only).
// Reads only textContent / data-* attributes and never builds HTML, so cell contents stay inert.
(function () {
  "use strict";
  function sortTable(table, th) {
    var idx = Array.prototype.indexOf.call(th.parentNode.children, th);
    var numeric = th.getAttribute("data-type") === "num";
    var asc = th.getAttribute("aria-sort") !== "ascending";
    var ths = th.parentNode.children;
    for (var i = 0; i < ths.length; i++) ths[i].setAttribute("aria-sort", "none");
    th.setAttribute("aria-sort", asc ? "ascending" : "descending");
    var tbody = table.tBodies[0];
    var rows = Array.prototype.slice.call(tbody.rows);
    function key(row) {
      var v = row.cells[idx].getAttribute("data-v");
      if (v === null) v = row.cells[idx].textContent;
      return numeric ? parseFloat(v) : v.toLowerCase();
    }
    rows.sort(function (a, b) {
      var x = key(a), y = key(b);
      if (numeric) {  // NaN (n/a) always last, whichever direction
        var xn = isNaN(x), yn = isNaN(y);
        if (xn || yn) return xn === yn ? 0 : (xn ? 1 : -1);
        return asc ? x - y : y - x;
      }
      return asc ? x.localeCompare(y) : y.localeCompare(x);
    });
    rows.forEach(function (r) { tbody.appendChild(r); });
  }
  // Rank cells carry both rankings (data-all, data-verified); show one as the cell's text and sort key.
  function showRanks(verifiedOnly) {
    var cells = document.querySelectorAll("td.rank");
    for (var i = 0; i < cells.length; i++) {
      var v = cells[i].getAttribute(verifiedOnly ? "data-verified" : "data-all");
      cells[i].setAttribute("data-v", v);
      cells[i].textContent = v === "NaN" ? "" : String(parseInt(v, 10));
    }
  }
  function applyFilter() {
    var q = document.getElementById("q").value.trim().toLowerCase();
    var task = document.getElementById("task").value;
    var showRef = document.getElementById("show-ref").checked;
    var verifiedOnly = document.getElementById("verified-only").checked;
    var showSelf = document.getElementById("show-self");
    var selfSection = document.getElementById("self-reported-section");
    // self-reported entries live in their own table, shown only on request and never ranked with the others
    if (selfSection) selfSection.hidden = !(showSelf && showSelf.checked) || verifiedOnly;
    showRanks(verifiedOnly);
    ["overall-table", "overall-verified"].forEach(function (id) {
      var t = document.getElementById(id);
      if (t) t.hidden = (id === "overall-verified") !== verifiedOnly;
    });
    ["board", "partial", "self"].forEach(function (id) {
      var table = document.getElementById(id);
      if (!table) return;
      var shown = 0, rows = table.tBodies[0].rows;
      for (var i = 0; i < rows.length; i++) {
        var r = rows[i], ref = r.classList.contains("ref");
        var ok = (!task || r.getAttribute("data-task") === task) &&
                 (showRef || !ref) &&
                 (!verifiedOnly || ref || r.getAttribute("data-tier") === "verified") &&
                 (!q || r.textContent.toLowerCase().indexOf(q) !== -1);
        r.hidden = !ok;
        if (ok) shown++;
      }
      if (id === "board") document.getElementById("count").textContent = shown + " of " + rows.length + " rows";
    });
  }
  document.addEventListener("DOMContentLoaded", function () {
    var tables = document.querySelectorAll("table#board, table#partial, table#self, table#entry");
    Array.prototype.forEach.call(tables, function (table) {
      Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th) {
        th.addEventListener("click", function () { sortTable(table, th); });
      });
    });
    if (!document.getElementById("q")) return;  // entry pages: sorting only
    ["q", "task", "show-ref", "verified-only", "show-self"].forEach(function (id) {
      var el = document.getElementById(id);
      if (!el) return;
      el.addEventListener("input", applyFilter);
      el.addEventListener("change", applyFilter);
    });
    applyFilter();
  });
})();
