// Privacy budget dashboard: a stacked bar chart per silo and a timeline of spends (Chart.js 4, vendored).
// The data comes from json_script elements the page renders; no inline script (the CSP forbids it).
(function () {
  "use strict";

  var COLOURS = {spent: "#b3261e", reserved: "#d08a00", remaining: "#2e7d4f"};
  var SERIES = ["#1f5fae", "#8e44ad", "#00838f", "#6d4c41", "#c2185b", "#558b2f", "#ef6c00", "#37474f"];

  function readJson(id) {
    var element = document.getElementById(id);
    return element ? JSON.parse(element.textContent) : null;
  }

  function budgetChart(canvas, data) {
    return new window.Chart(canvas, {
      type: "bar",
      data: {
        labels: data.labels,
        datasets: ["spent", "reserved", "remaining"].map(function (name) {
          return {label: name.charAt(0).toUpperCase() + name.slice(1) + " ε", data: data[name],
                  backgroundColor: COLOURS[name]};
        })
      },
      options: {
        indexAxis: "y", responsive: true, maintainAspectRatio: false, animation: false,
        scales: {x: {stacked: true, beginAtZero: true, title: {display: true, text: "ε"}}, y: {stacked: true}}
      }
    });
  }

  function timelineChart(canvas, timeline) {
    var names = Object.keys(timeline);
    var datasets = [];
    names.forEach(function (name, index) {
      var colour = SERIES[index % SERIES.length];
      var points = timeline[name];
      datasets.push({label: name + " · spent", borderColor: colour, backgroundColor: colour, stepped: true,
                     data: points.map(function (point) { return {x: Date.parse(point.at), y: point.spent}; })});
      datasets.push({label: name + " · spent + reserved", borderColor: colour, borderDash: [6, 4], stepped: true,
                     pointRadius: 0, data: points.map(function (point) {
                       return {x: Date.parse(point.at), y: point.spent + point.reserved}; })});
    });
    return new window.Chart(canvas, {
      type: "line",
      data: {datasets: datasets},
      options: {
        responsive: true, maintainAspectRatio: false, animation: false, parsing: false,
        scales: {
          x: {type: "linear", title: {display: true, text: "time (UTC)"},
              ticks: {callback: function (value) { return new Date(value).toISOString().slice(5, 19).replace("T", " "); }}},
          y: {beginAtZero: true, title: {display: true, text: "ε"}}
        }
      }
    });
  }

  function start() {
    if (!window.Chart) { return; }
    var chartData = readJson("budget-chart-data");
    var barCanvas = document.getElementById("budget-chart");
    if (chartData && barCanvas) { budgetChart(barCanvas, chartData); }
    var timeline = readJson("budget-timeline-data");
    var lineCanvas = document.getElementById("budget-timeline");
    if (timeline && lineCanvas && Object.keys(timeline).length) { timelineChart(lineCanvas, timeline); }
    document.documentElement.dataset.budgetCharts = "ready";
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
