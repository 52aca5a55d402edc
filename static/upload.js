// Upload progress for the home page's upload form (htmx sends it; see _upload_form.html).
// htmx fires htmx:xhr:progress for the request body going up and for the answer coming back;
// the first event's total is the body's size, so events with another total are the answer's.
(function () {
  "use strict";

  function size(bytes) {
    // Decimal units, as every page writes sizes (webapp.errors.human_bytes).
    if (bytes < 1000) return bytes.toLocaleString("en") + " bytes";
    var units = [["GB", 1e9], ["MB", 1e6], ["kB", 1e3]];
    for (var i = 0; i < units.length; i++) {
      if (bytes >= units[i][1]) return (bytes / units[i][1]).toFixed(1) + " " + units[i][0];
    }
    return bytes + " bytes";
  }

  function uploadForm(event) {
    var target = event.target;
    return target && target.closest ? target.closest("form.upload-form") : null;
  }

  function say(form, text) {
    var sent = form.querySelector(".upload-sent");
    if (sent) sent.textContent = text;
  }

  document.addEventListener("htmx:beforeRequest", function (event) {
    var form = uploadForm(event);
    if (!form) return;
    var input = form.querySelector("input[type=file]");
    var limit = Number(form.dataset.maxBytes || 0);
    var file = input && input.files && input.files[0];
    if (file && limit && file.size > limit) {
      // Refused before a single byte is sent: the server would answer 413 after the upload.
      event.preventDefault();
      say(form, file.name + " is " + size(file.size) + "; the limit is " + size(limit) + ".");
      return;
    }
    form.dataset.uploadTotal = "";
    var bar = form.querySelector(".upload-progress");
    if (bar) { bar.hidden = false; bar.removeAttribute("value"); }
    say(form, "starting…");
  });

  document.addEventListener("htmx:xhr:progress", function (event) {
    var form = uploadForm(event);
    var detail = event.detail;
    if (!form || !detail.lengthComputable || !detail.total) return;
    if (!form.dataset.uploadTotal) form.dataset.uploadTotal = String(detail.total);
    if (form.dataset.uploadTotal !== String(detail.total)) return; // the answer, not the upload
    var bar = form.querySelector(".upload-progress");
    if (bar) { bar.max = detail.total; bar.value = detail.loaded; }
    if (detail.loaded >= detail.total) {
      say(form, size(detail.total) + " sent; checking and storing the text…");
    } else {
      var percent = Math.floor((100 * detail.loaded) / detail.total);
      say(form, size(detail.loaded) + " of " + size(detail.total) + " sent (" + percent + "%)");
    }
  });

  // A refusal (400, 413, 422, 429) comes back as this form with its message: swap it in. An
  // answer that is a whole page (a limit the server enforces before the view) gives its text.
  document.addEventListener("htmx:beforeSwap", function (event) {
    var form = uploadForm(event);
    var status = event.detail.xhr.status;
    if (!form || status < 400) return;
    var body = event.detail.xhr.responseText || "";
    if (body.indexOf("upload-form") !== -1 && body.indexOf("<html") === -1) {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
      return;
    }
    var page = new DOMParser().parseFromString(body, "text/html");
    var message = page.querySelector(".error, main p");
    var bar = form.querySelector(".upload-progress");
    if (bar) bar.hidden = true;
    say(form, message ? message.textContent.trim() : "The upload failed (HTTP " + status + ").");
  });

  document.addEventListener("htmx:sendError", function (event) {
    var form = uploadForm(event);
    if (form) say(form, "The connection failed before the upload finished; nothing was stored.");
  });
})();
