/* The batch page polls its own JSON status and updates the counts and the
   progress bar until the batch has finished. */
(function () {
  "use strict";
  function start() {
    var box = document.querySelector("[data-batch-status-url]");
    if (!box) { return; }
    var endpoint = box.getAttribute("data-batch-status-url");
    function set(name, value) {
      var node = document.querySelector('[data-batch="' + name + '"]');
      if (node) { node.textContent = value; }
    }
    function stamp(seconds) {
      return seconds ? new Date(seconds * 1000).toISOString().replace("T", " ").slice(0, 19) + " UTC" : "";
    }
    function poll() {
      fetch(endpoint, {credentials: "same-origin", headers: {"Accept": "application/json"}})
        .then(function (r) { return r.ok ? r.json() : null; })
        .then(function (data) {
          if (!data) { return; }
          var done = Math.max(Math.min(data.total - data.pending, data.total), 0);
          var percent = data.total ? Math.round(100 * done / data.total) : (data.complete_at ? 100 : 0);
          set("total", data.total);
          set("pending", data.pending);
          set("failures", data.failures);
          set("percent", percent);
          set("complete_at", stamp(data.complete_at));
          set("success_at", stamp(data.success_at));
          var bar = document.querySelector('[data-batch="progress"]');
          if (bar) { bar.value = percent; }
          var badge = document.querySelector('[data-batch="state"]');
          /* The words come from the page, in the reader's language. */
          if (data.success_at) {
            set("state", badge.getAttribute("data-text-success") || "success");
          } else if (data.complete_at) {
            set("state", badge.getAttribute("data-text-complete") || "complete");
          }
          var finished = data.success_at || (data.complete_at && data.dead_jids.length);
          if (!finished) { window.setTimeout(poll, 2000); }
        })
        .catch(function () { window.setTimeout(poll, 5000); });
    }
    window.setTimeout(poll, 1000);
  }
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", start); } else { start(); }
}());
