// Site-wide htmx behaviour, kept out of the pages (the Content-Security-Policy allows no inline
// scripts and no hx-on attributes).
(function () {
  "use strict";
  // htmx drops 4xx answers by default; these carry a message meant for the swap target
  // (a bad search, an oversize text), so the tokeniser and compare pages swap them in.
  var SHOWN_STATUSES = [400, 403, 404, 413, 422, 429];
  document.addEventListener("htmx:beforeSwap", function (event) {
    var inPage = event.target.closest && event.target.closest("[data-swap-errors]");
    if (inPage && SHOWN_STATUSES.indexOf(event.detail.xhr.status) !== -1) {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
    }
  });
})();
