// fauxpay dashboard: live update. Every 2 s, asks /__fauxpay/ui/live for a change marker
// (four counters, no walk of the ledger); when it changed and the page allows it
// (<main data-live="on">), fetches this page again and swaps its <main>. Paused while
// the tab is hidden.
(function () {
  var main = document.querySelector("main");
  var status = document.getElementById("live");
  if (!main || main.dataset.live !== "on" || !window.fetch) { if (status) status.textContent = ""; return; }
  var marker = main.dataset.marker;
  function tick() {
    if (document.hidden) return;
    fetch("/__fauxpay/ui/live", { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (m) {
        if (m === null || m === marker) return null;
        marker = m;
        return fetch(location.href, { credentials: "same-origin" }).then(function (r) { return r.text(); });
      })
      .then(function (html) {
        if (!html) return;
        var next = new DOMParser().parseFromString(html, "text/html").querySelector("main");
        if (next) { main.innerHTML = next.innerHTML; }
        if (status) status.textContent = "live · updated " + new Date().toLocaleTimeString();
      })
      .catch(function () { if (status) status.textContent = "live · provider unreachable"; });
  }
  setInterval(tick, 2000);
})();
