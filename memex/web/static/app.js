// memex serve: keyboard navigation, search as you type, the sources table refreshing itself. No framework, this origin only.
(function () {
  "use strict";
  var current = -1;
  function items() { return Array.prototype.slice.call(document.querySelectorAll("[data-nav]")); }
  function select(i) {
    var all = items();
    if (!all.length) return;
    current = Math.max(0, Math.min(all.length - 1, i));
    all.forEach(function (el, n) { el.classList.toggle("current", n === current); });
    all[current].scrollIntoView({ block: "nearest" });
  }
  function typing(el) { return el && (el.tagName === "INPUT" || el.tagName === "SELECT" || el.tagName === "TEXTAREA"); }
  document.addEventListener("keydown", function (ev) {
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    if (ev.key === "Escape") {
      if (typing(document.activeElement)) { document.activeElement.blur(); ev.preventDefault(); return; }
      if (history.length > 1) { history.back(); ev.preventDefault(); }
      return;
    }
    if (typing(document.activeElement)) return;
    if (ev.key === "/") {
      var box = document.getElementById("q") || document.getElementById("quick-q");
      if (box) { box.focus(); box.select(); ev.preventDefault(); }
    } else if (ev.key === "j") { select(current + 1); ev.preventDefault(); }
    else if (ev.key === "k") { select(current - 1); ev.preventDefault(); }
    else if (ev.key === "Enter" && current >= 0) {
      var el = items()[current];
      var link = el && (el.tagName === "A" ? el : el.querySelector("a[href]"));
      if (link) { link.click(); ev.preventDefault(); }
    }
  });

  // Search as you type: the results part of the page replaced, debounced; the address kept bookmarkable.
  var form = document.querySelector("form[data-live]");
  if (form) {
    var input = form.querySelector("input[name=q]"), order = form.querySelector("select[name=order]"), timer = null, asked = 0;
    var run = function () {
      var q = input.value, mine = ++asked;
      var params = new URLSearchParams({ q: q, order: order ? order.value : "newest" });
      fetch(form.getAttribute("data-live") + "?" + params.toString(), { credentials: "same-origin" })
        .then(function (r) { return r.text().then(function (t) { return { ok: r.ok, text: t }; }); })
        .then(function (res) {
          if (mine !== asked) return;  // a later keystroke's answer wins
          var doc = new DOMParser().parseFromString(res.text, "text/html");
          var fresh = doc.getElementById("results"), old = document.getElementById("results");
          if (old && fresh) { old.replaceWith(document.importNode(fresh, true)); current = -1; }
          else if (old) { var err = doc.querySelector(".error"); old.textContent = err ? err.textContent : "This search cannot be read."; }
          history.replaceState(null, "", "/search?" + params.toString());
        })
        .catch(function () {});
    };
    input.addEventListener("input", function () { clearTimeout(timer); timer = setTimeout(run, 200); });
  }

  // The sources table, fetched again every few seconds.
  var live = document.querySelector("[data-refresh]");
  if (live) {
    setInterval(function () {
      fetch(live.getAttribute("data-refresh"), { credentials: "same-origin" })
        .then(function (r) { return r.ok ? r.text() : null; })
        .then(function (t) {
          if (!t) return;
          var fresh = new DOMParser().parseFromString(t, "text/html").getElementById("health");
          var old = document.getElementById("health");
          if (fresh && old) old.replaceWith(document.importNode(fresh, true));
        })
        .catch(function () {});
    }, 1000 * Number(live.getAttribute("data-every") || 10));
  }
})();
