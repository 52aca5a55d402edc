// The merge scrubber and "why this split?". Everything here only enhances forms that
// work without JavaScript: the slider is a form field, and the replay has its own form button.
// Loaded with <script src defer>: no inline code, so it runs under the site's CSP.
(function () {
  "use strict";

  // htmx drops 4xx answers by default; pages marked data-swap-errors show their message instead.
  document.addEventListener("htmx:beforeSwap", function (event) {
    var status = event.detail.xhr.status;
    if ([400, 404, 413, 422].indexOf(status) >= 0 && event.detail.target.closest("[data-swap-errors]")) {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
    }
  });

  function describe(box, range) {
    var value = Number(range.value);
    var max = Number(range.max);
    var byFraction = box.querySelector("input[name=by][value=fraction]");
    var fraction = byFraction && byFraction.checked;
    var out = box.querySelector("[data-scrub-value]");
    var text;
    if (value >= max) {
      text = "all merges";
    } else if (fraction) {
      text = (value / 10).toFixed(1) + "% of each one's merges";
    } else {
      text = "first " + value.toLocaleString("en") + " merge" + (value === 1 ? "" : "s");
    }
    if (out) out.textContent = text;
    range.setAttribute("aria-valuetext", text);
  }

  function setUp(box) {
    var range = box.querySelector("input[type=range]");
    if (!range || box.dataset.ready) return;
    box.dataset.ready = "1";
    range.addEventListener("input", function () { describe(box, range); });
    box.querySelectorAll("input[name=by]").forEach(function (radio) {
      radio.addEventListener("change", function () {
        // Keep the slider where it was, as a share of its range, when its unit changes.
        var share = Number(range.value) / Number(range.max || 1);
        var max = Number(radio.value === "fraction" ? box.dataset.maxFraction : box.dataset.maxCount);
        range.max = String(max);
        range.value = String(Math.round(share * max));
        describe(box, range);
      });
    });
  }

  // "Why this split?": click a token of the playground (or focus it and press Enter).
  function tokenIndex(chip) {
    var list = chip.closest(".tokens");
    return Array.prototype.indexOf.call(list.querySelectorAll(":scope > .tok"), chip);
  }

  function explain(chip) {
    var output = chip.closest("[data-why-url]");
    var form = document.getElementById(output.dataset.whyForm);
    if (!form || typeof htmx === "undefined") return;
    // The chip, not the form, is the source: a request from the form joins its
    // hx-sync="this:replace" queue, where a playground request could abort the replay.
    var values = htmx.values(form, "post");
    values.at = String(tokenIndex(chip));
    htmx.ajax("POST", output.dataset.whyUrl, {
      source: chip,
      target: "#why",
      swap: "innerHTML",
      values: values,
    }).then(function () {
      var panel = document.getElementById("why");
      if (panel) panel.scrollIntoView({ block: "nearest" });
    });
  }

  document.addEventListener("click", function (event) {
    var chip = event.target.closest("[data-why-url] .tokens > .tok");
    if (chip) explain(chip);
  });
  document.addEventListener("keydown", function (event) {
    if (event.key !== "Enter") return;
    var chip = event.target.closest("[data-why-url] .tokens > .tok");
    if (chip) {
      event.preventDefault();
      explain(chip);
    }
  });

  function init() { document.querySelectorAll("[data-scrubber]").forEach(setUp); }
  document.addEventListener("DOMContentLoaded", init);
  document.addEventListener("htmx:afterSettle", init);
})();
