// hoist.js: progressive enhancement for hoist's dashboard. Every page reads
// fine without it; with it, logs follow live over server-sent events and
// marked regions refresh themselves. Served by hoist itself; no CDN.
(function () {
  "use strict";

  function followLogs(pre) {
    var url = pre.getAttribute("data-live-logs");
    if (!url || !window.EventSource) return;
    var es = new EventSource(url);
    var status = document.querySelector("[data-testid=live-status]");
    function atBottom() {
      return window.innerHeight + window.scrollY >= document.body.scrollHeight - 40;
    }
    es.addEventListener("line", function (ev) {
      var stick = atBottom();
      var span = document.createElement("span");
      span.className = "ln";
      span.setAttribute("data-seq", ev.lastEventId);
      span.textContent = ev.data + "\n";
      pre.appendChild(span);
      if (stick) window.scrollTo(0, document.body.scrollHeight);
    });
    es.addEventListener("status", function (ev) {
      pre.setAttribute("data-job-status", ev.data);
      if (status) status.textContent = "following · " + ev.data;
    });
    es.addEventListener("end", function (ev) {
      pre.setAttribute("data-job-status", ev.data);
      pre.setAttribute("data-ended", "true");
      if (status) status.textContent = "ended · " + ev.data;
      es.close();
    });
    es.onerror = function () {
      if (status && es.readyState === EventSource.CONNECTING) status.textContent = "reconnecting…";
    };
  }

  // Regions marked data-refresh="<seconds>" and an id are re-fetched from
  // the same URL and swapped in place, unless a form inside has focus.
  function autoRefresh(el) {
    var secs = parseInt(el.getAttribute("data-refresh"), 10);
    if (!el.id || !(secs > 0) || !window.fetch || !window.DOMParser) return;
    setInterval(function () {
      if (document.hidden) return;
      if (el.contains(document.activeElement) && document.activeElement !== document.body) return;
      fetch(window.location.href, { credentials: "same-origin", headers: { Accept: "text/html" } })
        .then(function (r) { return r.ok ? r.text() : null; })
        .then(function (html) {
          if (!html) return;
          var doc = new DOMParser().parseFromString(html, "text/html");
          var fresh = doc.getElementById(el.id);
          if (fresh) {
            el.innerHTML = fresh.innerHTML;
          }
        })
        .catch(function () {});
    }, secs * 1000);
  }

  function init() {
    var pres = document.querySelectorAll("[data-live-logs]");
    for (var i = 0; i < pres.length; i++) followLogs(pres[i]);
    var regions = document.querySelectorAll("[data-refresh]");
    for (var j = 0; j < regions.length; j++) autoRefresh(regions[j]);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
