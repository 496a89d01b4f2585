// semcal leaderboard: sort (click a header) and filter (search box, task, reference rows).
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
  function applyFilter() {
    var table = document.getElementById("board");
    if (!table) return;
    var q = document.getElementById("q").value.trim().toLowerCase();
    var task = document.getElementById("task").value;
    var showRef = document.getElementById("show-ref").checked;
    var shown = 0, rows = table.tBodies[0].rows;
    for (var i = 0; i < rows.length; i++) {
      var r = rows[i];
      var ok = (!task || r.getAttribute("data-task") === task) &&
               (showRef || !r.classList.contains("ref")) &&
               (!q || r.textContent.toLowerCase().indexOf(q) !== -1);
      r.hidden = !ok;
      if (ok) shown++;
    }
    document.getElementById("count").textContent = shown + " of " + rows.length + " rows";
  }
  document.addEventListener("DOMContentLoaded", function () {
    var tables = document.querySelectorAll("table#board, table#entry");
    Array.prototype.forEach.call(tables, function (table) {
      Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th) {
        th.addEventListener("click", function () { sortTable(table, th); });
      });
    });
    ["q", "task", "show-ref"].forEach(function (id) {
      var el = document.getElementById(id);
      if (el) el.addEventListener("input", applyFilter);
      if (el) el.addEventListener("change", applyFilter);
    });
    applyFilter();
  });
})();
