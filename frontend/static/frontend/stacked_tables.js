// Phone tables: each cell of a table.stacked-table gets its column's heading as data-label (unless the template
// gave one), which onefold.css shows before the cell's value when a narrow screen stacks the rows. Tables that
// htmx swaps in (the job page's progress) are labelled as they arrive.
(function () {
  "use strict";
  function label(root) {
    root.querySelectorAll("table.stacked-table").forEach(function (table) {
      var names = Array.prototype.map.call(table.querySelectorAll("thead th"), function (heading) {
        return heading.textContent.trim();
      });
      table.querySelectorAll("tbody tr").forEach(function (row) {
        Array.prototype.forEach.call(row.children, function (cell, index) {
          if (!cell.hasAttribute("data-label") && names[index] && !cell.hasAttribute("colspan")) {
            cell.setAttribute("data-label", names[index]);
          }
        });
      });
    });
  }
  document.addEventListener("DOMContentLoaded", function () { label(document); });
  document.addEventListener("htmx:load", function (event) { label(event.target); });
})();
