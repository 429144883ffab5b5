// Charter console: counts approval deadlines down. No inline scripts (CSP script-src 'self').
(function () {
  "use strict";
  function pad(n) { return n < 10 ? "0" + n : String(n); }
  function format(seconds) {
    if (seconds <= 0) { return "expired"; }
    var h = Math.floor(seconds / 3600), m = Math.floor((seconds % 3600) / 60), s = seconds % 60;
    if (h) { return h + "h " + pad(m) + "m"; }
    if (m) { return m + "m " + pad(s) + "s"; }
    return s + "s";
  }
  function tick() {
    var now = Date.now();
    document.querySelectorAll("time[data-expires]").forEach(function (el) {
      var left = Math.max(0, Math.floor((Date.parse(el.dataset.expires) - now) / 1000));
      el.textContent = format(left);
      el.classList.toggle("expired", left <= 0);
      el.classList.toggle("soon", left > 0 && left < 60);
    });
  }
  document.addEventListener("DOMContentLoaded", function () {
    tick();
    window.setInterval(tick, 1000);
  });
})();
