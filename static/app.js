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

  // A token stream is one Tab stop (webapp/rendering/chips.py): the arrow keys, Home and End
  // move between its chips, so the keyboard reaches what follows the tokens in one Tab.
  var MOVES = { ArrowRight: 1, ArrowDown: 1, ArrowLeft: -1, ArrowUp: -1 };
  document.addEventListener("keydown", function (event) {
    var list = event.target.closest && event.target.closest(".tokens[role=list]");
    if (!list || event.altKey || event.ctrlKey || event.metaKey) return;
    var chips = list.querySelectorAll(":scope > .tok");
    if (!chips.length) return;
    var at = Array.prototype.indexOf.call(chips, event.target);
    var next;
    if (event.key === "Home") next = 0;
    else if (event.key === "End") next = chips.length - 1;
    else if (event.key in MOVES) next = at < 0 ? 0 : at + MOVES[event.key];
    else return;
    event.preventDefault();
    chips[Math.max(0, Math.min(chips.length - 1, next))].focus();
  });

  // A scroll box (templates/_scroll_box.html) whose content is wider than it says so under it,
  // at any width: mark the ones that overflow now, and again after a resize or a swap.
  function markOverflows() {
    var boxes = document.querySelectorAll(".table-scroll");
    for (var i = 0; i < boxes.length; i++) {
      boxes[i].classList.toggle("overflows", boxes[i].scrollWidth > boxes[i].clientWidth + 1);
    }
  }
  document.addEventListener("DOMContentLoaded", markOverflows);
  document.addEventListener("htmx:afterSettle", markOverflows);
  window.addEventListener("resize", markOverflows);
  window.addEventListener("load", markOverflows);

  // The compare page's "add a tokeniser" form and "remove" links take the text typed since the
  // page loaded along (without JavaScript they carry the text the page was rendered with).
  function typedText() {
    var box = document.getElementById("compare-text");
    return box ? box.value : null;
  }
  document.addEventListener("submit", function (event) {
    var form = event.target;
    var text = typedText();
    if (!form.classList || !form.classList.contains("compare-add") || text === null) return;
    var field = form.querySelector("input[name=text]");
    if (field) field.value = text;
  });
  document.addEventListener("click", function (event) {
    var link = event.target.closest && event.target.closest("a.remove-side");
    var text = typedText();
    if (!link || text === null) return;
    var url = new URL(link.href, document.baseURI);
    if (text) url.searchParams.set("text", text); else url.searchParams.delete("text");
    link.href = url.toString();
  });
})();
