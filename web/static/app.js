// seckill dashboard: the little the server cannot do. Every page works
// without it (times then read in UTC, numbers refresh on reload).
(function () {
  "use strict";

  var dateTime = new Intl.DateTimeFormat(undefined, {
    year: "numeric", month: "short", day: "numeric",
    hour: "2-digit", minute: "2-digit",
  });
  var clock = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit", second: "2-digit" });

  // Times arrive in UTC (<time datetime=... title="... UTC">); show them in
  // the viewer's zone and keep UTC on hover.
  function localizeTimes(root) {
    root.querySelectorAll("time[data-local]").forEach(function (el) {
      var d = new Date(el.getAttribute("datetime"));
      if (isNaN(d)) return;
      el.textContent = (el.dataset.local === "clock" ? clock : dateTime).format(d);
    });
  }

  function pad(n) { return (n < 10 ? "0" : "") + n; }

  // toLocalInput formats a Date for <input type="datetime-local">.
  function toLocalInput(d) {
    return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) +
      "T" + pad(d.getHours()) + ":" + pad(d.getMinutes());
  }

  // Forms with datetime-local inputs: the inputs show the viewer's local
  // time; on submit each one's UTC instant goes in its hidden twin, which the
  // server prefers (without this script it reads the visible value as UTC).
  function wireTimeInputs(root) {
    root.querySelectorAll("input[data-utc-into]").forEach(function (input) {
      var utc = input.dataset.utcValue;
      if (utc) {
        var d = new Date(utc);
        if (!isNaN(d)) input.value = toLocalInput(d);
      }
      input.form.addEventListener("submit", function () {
        var hidden = input.form.elements[input.dataset.utcInto];
        var d = new Date(input.value);
        if (hidden) hidden.value = input.value && !isNaN(d) ? d.toISOString() : "";
      });
    });
    var zone = Intl.DateTimeFormat().resolvedOptions().timeZone || "local time";
    root.querySelectorAll("[data-tz]").forEach(function (el) { el.textContent = zone; });
  }

  function wireConfirms(root) {
    root.querySelectorAll("form[data-confirm]").forEach(function (form) {
      form.addEventListener("submit", function (ev) {
        if (!window.confirm(form.dataset.confirm)) ev.preventDefault();
      });
    });
  }

  // Live regions: [data-live-src] is replaced by the server-rendered fragment
  // at that URL every data-live-every milliseconds while the tab is visible.
  function poll(el) {
    var every = parseInt(el.dataset.liveEvery, 10) || 1000;
    var busy = false;
    function tick() {
      if (busy || document.hidden) return;
      busy = true;
      fetch(el.dataset.liveSrc, { credentials: "same-origin", headers: { "Accept": "text/html" } })
        .then(function (res) {
          // The session ended: a reload shows the login page.
          if (res.redirected || res.status === 401) { window.location.reload(); return null; }
          if (!res.ok) throw new Error("HTTP " + res.status);
          return res.text();
        })
        .then(function (html) {
          if (html === null) return;
          el.innerHTML = html;
          localizeTimes(el);
          el.removeAttribute("data-stale");
          document.body.dataset.lastLive = String(Date.now());
        })
        .catch(function () { el.setAttribute("data-stale", ""); })
        .then(function () { busy = false; });
    }
    setInterval(tick, every);
  }

  document.addEventListener("DOMContentLoaded", function () {
    localizeTimes(document);
    wireTimeInputs(document);
    wireConfirms(document);
    document.querySelectorAll("[data-live-src]").forEach(poll);
  });
})();
