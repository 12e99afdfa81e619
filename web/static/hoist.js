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
    var first = true;
    es.addEventListener("status", function (ev) {
      pre.setAttribute("data-job-status", ev.data);
      if (status) status.textContent = "following · " + ev.data;
      if (!first) refreshAll();
      first = false;
    });
    es.addEventListener("end", function (ev) {
      pre.setAttribute("data-job-status", ev.data);
      pre.setAttribute("data-ended", "true");
      if (status) status.textContent = "ended · " + ev.data;
      es.close();
      refreshAll();
    });
    es.onerror = function () {
      if (status && es.readyState === EventSource.CONNECTING) status.textContent = "reconnecting…";
    };
  }

  var regions = [];
  var inflight = false;

  // refreshAll re-fetches this page once and swaps in every region marked
  // data-refresh (by id), unless a control inside it has focus.
  function refreshAll() {
    if (!regions.length || inflight || !window.fetch || !window.DOMParser) return;
    inflight = true;
    fetch(window.location.href, { credentials: "same-origin", headers: { Accept: "text/html" } })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        inflight = false;
        if (!html) return;
        var doc = new DOMParser().parseFromString(html, "text/html");
        for (var i = 0; i < regions.length; i++) {
          var el = regions[i];
          if (el.contains(document.activeElement) && document.activeElement !== document.body) continue;
          var fresh = doc.getElementById(el.id);
          if (fresh && fresh.innerHTML !== el.innerHTML) el.innerHTML = fresh.innerHTML;
        }
      })
      .catch(function () { inflight = false; });
  }

  // Regions marked data-refresh="<seconds>" refresh at the shortest of
  // their intervals while the page is visible.
  function autoRefresh(els) {
    var secs = 0;
    for (var i = 0; i < els.length; i++) {
      var n = parseInt(els[i].getAttribute("data-refresh"), 10);
      if (!els[i].id || !(n > 0)) continue;
      regions.push(els[i]);
      if (!secs || n < secs) secs = n;
    }
    if (secs) setInterval(function () { if (!document.hidden) refreshAll(); }, secs * 1000);
  }

  function init() {
    var pres = document.querySelectorAll("[data-live-logs]");
    for (var i = 0; i < pres.length; i++) followLogs(pres[i]);
    autoRefresh(document.querySelectorAll("[data-refresh]"));
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
