// A page whose forms change something carries one one-time key (frontend/sent_once.py). Written into the page's
// address, it comes back when the browser loads the page again through Back or Reload, so that the form sent
// again acts no second time even where the browser fetches the page anew instead of showing its copy.
(function () {
  "use strict";

  function start() {
    var field = document.querySelector("input[data-page-form-key]");
    if (!field || !window.history || !window.history.replaceState) { return; }
    var address = new URL(window.location.href);
    if (address.searchParams.get("form_key") === field.value) { return; }
    address.searchParams.set("form_key", field.value);
    window.history.replaceState(window.history.state, "", address.toString());
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
