/* Wurk admin pages: confirmations, select-all, small SVG charts and the live
   dashboard poll. Plain JS, no library, no network beyond this site's own
   stats endpoint. */
(function () {
  "use strict";
  var SVG = "http://www.w3.org/2000/svg";

  function el(name, attrs, parent) {
    var node = document.createElementNS(SVG, name);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (parent) { parent.appendChild(node); }
    return node;
  }

  function niceMax(value) {
    if (value <= 0) { return 1; }
    var power = Math.pow(10, Math.floor(Math.log10(value)));
    var steps = [1, 2, 2.5, 5, 10];
    for (var i = 0; i < steps.length; i++) {
      if (steps[i] * power >= value) { return steps[i] * power; }
    }
    return 10 * power;
  }

  function fmt(value, unit) {
    var text = Math.abs(value) >= 1000 ? Math.round(value).toLocaleString() :
      (Math.round(value * 100) / 100).toString();
    return unit ? text + " " + unit : text;
  }

  function legend(container, series) {
    var box = document.createElement("div");
    box.className = "wurk-legend";
    series.forEach(function (s) {
      var item = document.createElement("span");
      item.className = s.cls || "";
      item.textContent = s.name;
      box.appendChild(item);
    });
    container.appendChild(box);
  }

  function frame(container, maxValue, unit) {
    container.textContent = "";
    var width = Math.max(container.clientWidth || 600, 200), height = 220;
    var pad = {left: 56, right: 12, top: 10, bottom: 26};
    var svg = el("svg", {viewBox: "0 0 " + width + " " + height, preserveAspectRatio: "none"}, container);
    var top = niceMax(maxValue);
    var axis = el("g", {"class": "axis"}, svg);
    [0, 0.5, 1].forEach(function (f) {
      var y = pad.top + (height - pad.top - pad.bottom) * (1 - f);
      el("line", {"class": "grid", x1: pad.left, x2: width - pad.right, y1: y, y2: y}, svg);
      var label = el("text", {x: pad.left - 6, y: y + 4, "text-anchor": "end"}, axis);
      label.textContent = fmt(top * f, unit);
    });
    return {svg: svg, axis: axis, width: width, height: height, pad: pad, top: top};
  }

  function xAt(f, i, n) {
    var span = f.width - f.pad.left - f.pad.right;
    return f.pad.left + (n > 1 ? span * i / (n - 1) : span / 2);
  }

  function yAt(f, v) {
    return f.pad.top + (f.height - f.pad.top - f.pad.bottom) * (1 - v / f.top);
  }

  /* data: {labels: [...], series: [{name, cls, values}], marks: [{at, label}]} */
  function lineChart(container, data, unit) {
    var n = data.labels.length, max = 0;
    data.series.forEach(function (s) { s.values.forEach(function (v) { if (v > max) { max = v; } }); });
    var f = frame(container, max, unit);
    [0, Math.floor((n - 1) / 2), n - 1].forEach(function (i, k, all) {
      if (i < 0 || (k > 0 && i === all[k - 1])) { return; }
      var label = el("text", {x: xAt(f, i, n), y: f.height - 6, "text-anchor": k === 0 ? "start" : (k === 2 ? "end" : "middle")}, f.axis);
      label.textContent = data.labels[i];
    });
    (data.marks || []).forEach(function (m) {
      var i = data.labels.indexOf(m.at);
      if (i < 0) { return; }
      var line = el("line", {"class": "mark", x1: xAt(f, i, n), x2: xAt(f, i, n), y1: f.pad.top, y2: f.height - f.pad.bottom}, f.svg);
      el("title", {}, line).textContent = m.at + " " + m.label;
    });
    data.series.forEach(function (s) {
      var points = s.values.map(function (v, i) { return xAt(f, i, n).toFixed(1) + "," + yAt(f, v).toFixed(1); });
      var line = el("polyline", {"class": "line " + (s.cls || ""), points: points.join(" ")}, f.svg);
      el("title", {}, line).textContent = s.name;
    });
    legend(container, data.series);
  }

  /* data: {labels: [...], values: [...]} */
  function barChart(container, data) {
    var n = data.values.length, max = Math.max.apply(null, data.values.concat([0]));
    var f = frame(container, max);
    var span = f.width - f.pad.left - f.pad.right, slot = span / n;
    data.values.forEach(function (v, i) {
      var x = f.pad.left + i * slot + slot * 0.1, y = yAt(f, v);
      var bar = el("rect", {"class": "bar", x: x, y: y, width: slot * 0.8, height: Math.max(yAt(f, 0) - y, 0)}, f.svg);
      el("title", {}, bar).textContent = "< " + data.labels[i] + ": " + v;
      if (i % 3 === 0 || i === n - 1) {
        el("text", {x: x + slot * 0.4, y: f.height - 6, "text-anchor": "middle"}, f.axis).textContent = data.labels[i];
      }
    });
  }

  var parsed = {};
  function readJSON(id) {
    /* Parsed once and kept: the live poll edits the history data in place. */
    if (!(id in parsed)) {
      var node = document.getElementById(id);
      parsed[id] = node ? JSON.parse(node.textContent) : null;
    }
    return parsed[id];
  }

  /* The history chart's last day is today: keep it (and the N-day totals) equal to
     the live "today" numbers instead of the figures of the moment the page loaded. */
  function followToday(today) {
    var data = readJSON("wurk-history-data");
    var chart = document.querySelector('[data-line-chart="wurk-history-data"]');
    if (data && chart && data.labels.length && data.labels[data.labels.length - 1] === today.date) {
      var last = data.labels.length - 1;
      data.series[0].values[last] = today.processed;
      data.series[1].values[last] = today.failed;
      lineChart(chart, data, chart.getAttribute("data-unit"));
    }
    var totals = document.getElementById("wurk-history-totals");
    if (totals) {
      ["processed", "failed"].forEach(function (k) {
        var base = Number(totals.getAttribute("data-base-" + k) || 0);
        totals.querySelector('[data-history-total="' + k + '"]').textContent = base + today[k];
      });
    }
  }

  function drawStatic() {
    document.querySelectorAll("[data-line-chart]").forEach(function (c) {
      var data = readJSON(c.getAttribute("data-line-chart"));
      if (data) { lineChart(c, data, c.getAttribute("data-unit")); }
    });
    document.querySelectorAll("[data-bar-chart]").forEach(function (c) {
      var data = readJSON(c.getAttribute("data-bar-chart"));
      if (data) { barChart(c, data); }
    });
  }

  /* Live dashboard: poll the stats JSON, update every [data-stat] number, plot jobs per second.
     Workers add to the processed/failed counters at their heartbeat, every 10 s, so the change
     from one 2 s poll to the next is 0, 0, 0, 0, then everything: each point is the rate over
     the last RATE_WINDOW seconds of readings instead, which always spans a heartbeat. */
  var RATE_WINDOW = 10;
  function live() {
    var root = document.querySelector(".wurk[data-stats-url]");
    var chart = document.querySelector("[data-live-chart]");
    if (!root || !chart) { return; }
    var url = root.getAttribute("data-stats-url");
    var select = document.getElementById("wurk-poll-interval");
    var status = document.getElementById("wurk-live-status");
    var key = "wurk.pollSeconds";
    var saved = window.localStorage ? localStorage.getItem(key) : null;
    if (saved && select.querySelector('option[value="' + saved + '"]')) { select.value = saved; }
    var samples = {labels: [], processed: [], failed: []}, readings = [], timer = null;

    function set(name, value) {
      document.querySelectorAll('[data-stat="' + name + '"]').forEach(function (n) { n.textContent = value; });
    }

    function render() {
      lineChart(chart, {labels: samples.labels, series: [
        {name: chart.getAttribute("data-name-processed") || "Processed", cls: "ok", values: samples.processed},
        {name: chart.getAttribute("data-name-failed") || "Failed", cls: "bad", values: samples.failed}
      ]});
    }

    function poll() {
      fetch(url, {credentials: "same-origin", headers: {"Accept": "application/json"}})
        .then(function (r) { if (!r.ok) { throw new Error("HTTP " + r.status); } return r.json(); })
        .then(function (data) {
          var s = data.sidekiq;
          ["processed", "failed", "busy", "enqueued", "retries", "scheduled", "dead", "processes"].forEach(function (k) { set(k, s[k]); });
          /* In the page's language, as the server wrote it (0,2 in French). */
          set("default_latency", (Math.round(s.default_latency * 10) / 10).toLocaleString(
            document.documentElement.lang || undefined, {minimumFractionDigits: 1, maximumFractionDigits: 1}));
          set("today_processed", data.today.processed);
          set("today_failed", data.today.failed);
          set("connected_clients", data.redis.connected_clients);
          set("used_memory_human", data.redis.used_memory_human);
          if (data.redis.uptime) { set("uptime", data.redis.uptime); }
          if (data.today.date) { followToday(data.today); }
          var now = Date.now() / 1000;
          readings.push({at: now, processed: s.processed, failed: s.failed});
          /* The newest reading at least RATE_WINDOW old is the base; older ones are not needed. */
          while (readings.length > 2 && now - readings[1].at >= RATE_WINDOW) { readings.shift(); }
          var base = readings[0], span = now - base.at;
          if (span > 0) {
            samples.labels.push(data.server_utc_time.slice(0, 8));
            samples.processed.push(Math.round(Math.max(s.processed - base.processed, 0) / span * 10) / 10);
            samples.failed.push(Math.round(Math.max(s.failed - base.failed, 0) / span * 10) / 10);
            if (samples.labels.length > 50) {
              samples.labels.shift(); samples.processed.shift(); samples.failed.shift();
            }
            render();
          }
          status.textContent = (status.getAttribute("data-text-updated") || "updated") + " " + data.server_utc_time;
          root.setAttribute("data-polls", String(Number(root.getAttribute("data-polls") || 0) + 1));
        })
        .catch(function (err) { status.textContent = (status.getAttribute("data-text-unavailable") || "stats unavailable") + " (" + err.message + ")"; });
    }

    function schedule() {
      if (timer) { clearInterval(timer); }
      timer = setInterval(poll, Number(select.value) * 1000);
    }

    select.addEventListener("change", function () {
      if (window.localStorage) { localStorage.setItem(key, select.value); }
      schedule();
    });
    render();
    poll();
    schedule();
  }

  /* ?poll=true on a list page: fetch the page again every few seconds and swap in its
     content, unless the user is busy with it (a box ticked, a field focused). */
  function pollPage() {
    var root = document.getElementById("wurk-root");
    if (!root || !root.hasAttribute("data-poll")) { return; }
    var seconds = Number(root.getAttribute("data-poll")) || 5;
    function busy() {
      var active = document.activeElement;
      if (active && active.closest && active.closest("#wurk-root form") && active.tagName !== "A") { return true; }
      return document.querySelector('#wurk-root input[type=checkbox]:checked') !== null;
    }
    function refresh() {
      if (busy() || document.hidden) { return; }
      fetch(window.location.href, {credentials: "same-origin", headers: {"Accept": "text/html"}})
        .then(function (r) { if (!r.ok) { throw new Error("HTTP " + r.status); } return r.text(); })
        .then(function (html) {
          var doc = new DOMParser().parseFromString(html, "text/html");
          var fresh = doc.getElementById("wurk-root");
          var current = document.getElementById("wurk-root");
          if (!fresh || !current || busy()) { return; }
          current.innerHTML = fresh.innerHTML;
          parsed = {};
          drawStatic();
          labelCells();
          current.setAttribute("data-polls", String(Number(current.getAttribute("data-polls") || 0) + 1));
        })
        .catch(function () { /* the next tick tries again */ });
    }
    setInterval(refresh, seconds * 1000);
  }

  // On a phone the tables stack each row's cells (wurk.css); each cell is labelled with
  // its column's header so a value still says what it is.
  function labelCells() {
    document.querySelectorAll("table.wurk-table").forEach(function (table) {
      var heads = Array.prototype.map.call(table.querySelectorAll("thead th"), function (th) {
        return th.textContent.trim();
      });
      table.querySelectorAll("tbody tr").forEach(function (tr) {
        Array.prototype.forEach.call(tr.children, function (td, i) {
          if (td.colSpan === 1 && heads[i] !== undefined) { td.setAttribute("data-label", heads[i]); }
        });
      });
    });
  }

  function forms() {
    document.addEventListener("click", function (event) {
      var button = event.target.closest("[data-confirm]");
      if (button && !window.confirm(button.getAttribute("data-confirm"))) { event.preventDefault(); }
    });
    document.querySelectorAll("[data-select-all]").forEach(function (box) {
      box.addEventListener("change", function () {
        box.form.querySelectorAll('input[type=checkbox][name="key"]').forEach(function (c) { c.checked = box.checked; });
      });
    });
  }

  /* Progress bars of tracked jobs (the Busy page, a job's status page): each reads its
     job's status JSON every PROGRESS_SECONDS while the job is not finished, and moves
     its bar and message. A status page reloads once its job finishes, to show the end
     (result or error) as the server words it. The bars are looked up at every tick, so a
     page swapped in by the live poll keeps updating. */
  var PROGRESS_SECONDS = 2;
  function progressBars() {
    if (!document.getElementById("wurk-root")) { return; }
    function update(box, data) {
      var bar = box.querySelector("progress");
      if (data.progress !== null && data.progress !== undefined) {
        bar.value = data.progress;
        box.querySelector("[data-progress-percent]").textContent = data.progress + " %";
      }
      box.querySelector("[data-progress-message]").textContent = data.message || "";
      if (data.finished) {
        box.setAttribute("data-finished", "true");
        if (box.hasAttribute("data-reload-when-finished")) { window.location.reload(); }
      }
      box.setAttribute("data-polls", String(Number(box.getAttribute("data-polls") || 0) + 1));
    }
    function tick() {
      if (document.hidden) { return; }
      document.querySelectorAll('[data-status-url][data-finished="false"]').forEach(function (box) {
        fetch(box.getAttribute("data-status-url"), {credentials: "same-origin", headers: {"Accept": "application/json"}})
          .then(function (r) { return r.ok ? r.json() : null; })
          .then(function (data) { if (data) { update(box, data); } })
          .catch(function () { /* the next tick tries again */ });
      });
    }
    setInterval(tick, PROGRESS_SECONDS * 1000);
  }

  var resizeTimer = null;
  window.addEventListener("resize", function () {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(drawStatic, 200);
  });
  document.addEventListener("DOMContentLoaded", function () {
    forms();
    labelCells();
    drawStatic();
    live();
    pollPage();
    progressBars();
  });
}());
