// The owner link carries its token after "#", which browsers never send to the server: copy it
// into the claim form, then drop it from the address bar and history.
(function () {
  "use strict";
  var token = window.location.hash.slice(1);
  var field = document.getElementById("owner-token");
  if (token && field) {
    field.value = decodeURIComponent(token);
    history.replaceState(null, "", window.location.pathname);
  }
})();
