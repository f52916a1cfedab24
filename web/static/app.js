// seckill dashboard: the little the server cannot do. Every page works
// without it (times then read in UTC, numbers refresh on reload).
(function () {
  "use strict";

  // Every time shown names its zone, so that no page mixes zones silently
  // (audit details, for one, are written in UTC).
  var dateTime = new Intl.DateTimeFormat(undefined, {
    year: "numeric", month: "short", day: "numeric",
    hour: "2-digit", minute: "2-digit", timeZoneName: "short",
  });
  var clock = new Intl.DateTimeFormat(undefined, {
    hour: "2-digit", minute: "2-digit", second: "2-digit", timeZoneName: "short",
  });

  // Times arrive in UTC (<time datetime=... title="... UTC">); show them in
  // the viewer's zone, named, and keep UTC on hover.
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

  // Forms marked data-check-form are checked before they are sent, with the
  // bounds and messages the server wrote on their fields (data-check-*); the
  // server checks again. Every error shows at once, beside its field and in
  // the summary above the form, and nothing is sent while one remains.
  function checkField(form, input) {
    var v = input.value.trim(), d = input.dataset;
    if (d.checkRequired && v === "") return d.checkRequired;
    if (!d.checkMsg) return "";
    if (!/^-?\d+$/.test(v)) return "\u201c" + d.label + "\u201d must be a whole number";
    var n = parseInt(v, 10);
    if (n < parseInt(d.checkMin, 10) || (d.checkMax && n > parseInt(d.checkMax, 10))) return d.checkMsg;
    var other = d.checkAtLeast && form.elements[d.checkAtLeast];
    if (other && /^-?\d+$/.test(other.value.trim()) && n < parseInt(other.value, 10)) return d.checkMsg;
    return "";
  }

  function showSummary(bad) {
    var box = document.querySelector("[data-form-summary]");
    if (!box) return;
    box.classList.toggle("hidden", bad.length === 0);
    var labels = bad.map(function (b) { return b.input.dataset.label; });
    box.querySelector("[data-summary-text]").textContent = bad.length === 1 ?
      "Check " + labels[0] + "." : "Check " + bad.length + " fields: " + labels.join(", ") + ".";
    var old = box.querySelector("ul");
    if (old) old.remove();
    if (bad.length < 2) return;
    var ul = document.createElement("ul");
    bad.forEach(function (b) {
      var li = document.createElement("li"), a = document.createElement("a");
      a.href = "#" + b.input.id;
      a.textContent = b.msg;
      li.appendChild(a);
      ul.appendChild(li);
    });
    box.appendChild(ul);
  }

  function wireChecks(root) {
    root.querySelectorAll("form[data-check-form]").forEach(function (form) {
      form.addEventListener("submit", function (ev) {
        var bad = [];
        form.querySelectorAll("input[data-label]").forEach(function (input) {
          var msg = checkField(form, input);
          var err = form.querySelector('[data-error-for="' + input.name + '"]');
          if (err) {
            err.textContent = msg;
            err.classList.toggle("hidden", !msg);
          }
          var field = input.closest(".field");
          if (field) field.classList.toggle("invalid", !!msg);
          if (msg) bad.push({ input: input, msg: msg });
        });
        if (bad.length === 0) return;
        ev.preventDefault();
        ev.stopImmediatePropagation();
        showSummary(bad);
        bad[0].input.focus();
      });
    });
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
    wireChecks(document);
    wireTimeInputs(document);
    wireConfirms(document);
    document.querySelectorAll("[data-live-src]").forEach(poll);
  });
})();
