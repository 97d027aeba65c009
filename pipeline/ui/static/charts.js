/* imgpipe ui: draws every <figure class="chart"> with the vendored uPlot from the JSON data
   block inside it (written by pipeline/ui/curves.py). Axes and ticks by uPlot, values on hover
   in the legend, drag across to zoom, double-click to zoom out. */
(function () {
  "use strict";
  var COLORS = ["#2f6fdb", "#e8590c", "#2f9e5b", "#9c36b5", "#d6336c", "#0c8599", "#868e96", "#5c940d"];
  var HEIGHT = 220;

  function readable(value) {  // 4 significant digits: enough to tell 0.9886 from 0.9993
    return value == null ? "-" : String(Number(value.toPrecision(4)));
  }

  /* One x array (every x any series has) and each series' values on it (null where absent). */
  function aligned(series) {
    var xs = [];
    series.forEach(function (s) { s.points.forEach(function (p) { xs.push(p[0]); }); });
    xs = Array.from(new Set(xs)).sort(function (a, b) { return a - b; });
    var at = new Map(xs.map(function (x, i) { return [x, i]; }));
    return [xs].concat(series.map(function (s) {
      var ys = xs.map(function () { return null; });
      s.points.forEach(function (p) { ys[at.get(p[0])] = p[1]; });
      return ys;
    }));
  }

  function options(spec, width) {
    var names = spec.names;
    var xAxis = { label: spec.x, stroke: "#667085", grid: { stroke: "#eaecf0" } };
    if (names.length) {  // runs: whole numbers only, each named on hover
      xAxis.incrs = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000];
      xAxis.values = function (u, ticks) { return ticks.map(function (t) { return Number.isInteger(t) ? t : ""; }); };
    }
    var yScale = spec.range ? { range: spec.range } : {};
    return {
      width: width,
      height: HEIGHT,
      scales: { x: { time: false }, y: yScale },
      axes: [xAxis, { label: spec.title, size: 64, stroke: "#667085", grid: { stroke: "#eaecf0" } }],
      cursor: { drag: { x: true, y: false } },
      series: [{
        label: spec.x,
        value: function (u, v) { return v == null ? "-" : (names.length ? names[v] || "" : readable(v)); }
      }].concat(spec.series.map(function (s, i) {
        return {
          label: s.label,
          stroke: COLORS[i % COLORS.length],
          width: 1.6,
          spanGaps: true,
          points: { show: s.points.length <= 40, size: 5 },
          value: function (u, v) { return readable(v); }
        };
      }))
    };
  }

  function draw(figure) {
    var spec = JSON.parse(figure.querySelector("script.chart-data").textContent);
    var box = figure.querySelector(".plot");
    var plot = new uPlot(options(spec, box.clientWidth), aligned(spec.series), box);
    window.addEventListener("resize", function () { plot.setSize({ width: box.clientWidth, height: HEIGHT }); });
  }

  function drawAll() { document.querySelectorAll("figure.chart").forEach(draw); }
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", drawAll); } else { drawAll(); }
})();
