// Privacy budget dashboard: the per-job timeline (Chart.js 4, vendored) and the limit dialog.
// The strip of every silo's bar is SVG drawn by the server; the data comes from json_script elements
// (no inline script: the CSP forbids it).
(function () {
  "use strict";

  var STATES = [
    {kind: "charge", label: "Charged", colour: "#b3261e", shape: "circle"},
    {kind: "reserve", label: "Reserved (running)", colour: "#d08a00", shape: "triangle"},
    {kind: "release", label: "Released (failed or cancelled)", colour: "#556070", shape: "crossRot"}
  ];

  var HOUR = 3600 * 1000;

  function readJson(id) {
    var element = document.getElementById(id);
    return element ? JSON.parse(element.textContent) : null;
  }

  function timelineChart(canvas, points) {
    var datasets = STATES.map(function (state) {
      return {label: state.label, backgroundColor: state.colour, borderColor: state.colour, pointStyle: state.shape,
              pointRadius: 5, data: points.filter(function (point) { return point.state === state.kind; })
                .map(function (point) { return {x: Date.parse(point.at), y: point.epsilon, point: point}; })};
    }).filter(function (dataset) { return dataset.data.length; });
    var times = points.map(function (point) { return Date.parse(point.at); });
    var padding = Math.max(HOUR, (Math.max.apply(null, times) - Math.min.apply(null, times)) * 0.05);
    return new window.Chart(canvas, {
      type: "scatter",
      data: {datasets: datasets},
      options: {
        responsive: true, maintainAspectRatio: false, animation: false, parsing: false,
        plugins: {tooltip: {callbacks: {label: function (item) {
          var point = item.raw.point;
          return point.label + ": ε " + point.epsilon.toPrecision(3) + " for " + point.silos + " silo" +
            (point.silos === 1 ? "" : "s");
        }}}},
        scales: {
          x: {type: "linear", title: {display: true, text: "date (UTC)"},
              min: Math.min.apply(null, times) - padding, max: Math.max.apply(null, times) + padding,
              ticks: {maxTicksLimit: 6, callback: function (value) {
                return new Date(value).toISOString().slice(5, 16).replace("T", " "); }}},
          y: {beginAtZero: true, title: {display: true, text: "ε per silo"}}
        }
      }
    });
  }

  function limitDialog() {
    var dialog = document.getElementById("limit-dialog");
    if (!dialog || typeof dialog.showModal !== "function") { return; }
    var form = document.getElementById("limit-form");
    document.querySelectorAll("[data-limit-edit]").forEach(function (link) {
      link.addEventListener("click", function (event) {
        event.preventDefault();
        form.action = link.dataset.limitAction;
        document.getElementById("limit-dialog-name").textContent = link.dataset.limitName;
        document.getElementById("limit-value").value = link.dataset.limitValue;
        document.getElementById("limit-reason").value = "";
        if (dialog.open) { dialog.close(); }
        dialog.showModal();
        document.getElementById("limit-value").focus();
      });
    });
    document.getElementById("limit-cancel").addEventListener("click", function (event) {
      event.preventDefault();
      dialog.close();
    });
  }

  function start() {
    limitDialog();
    var timeline = readJson("budget-timeline-data");
    var canvas = document.getElementById("budget-timeline");
    if (window.Chart && timeline && canvas && timeline.length) { timelineChart(canvas, timeline); }
    document.documentElement.dataset.budgetCharts = "ready";
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
