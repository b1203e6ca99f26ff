// The forms of a page that change something carry the page's one-time key (frontend/sent_once.py). The key is also
// kept in the page's entry of the browser's history, so that a page the browser fetches anew on Back or Reload,
// instead of showing its copy, sends the same key again: the form sent again acts no second time.
(function () {
  "use strict";

  function start() {
    var fields = document.querySelectorAll("input[data-page-form-key]");
    if (!fields.length || !window.history || !window.history.replaceState) { return; }
    var state = window.history.state && typeof window.history.state === "object" ? window.history.state : {};
    if (state.onefoldFormKey) {
      for (var index = 0; index < fields.length; index += 1) { fields[index].value = state.onefoldFormKey; }
      return;
    }
    var kept = {};
    for (var name in state) {
      if (Object.prototype.hasOwnProperty.call(state, name)) { kept[name] = state[name]; }
    }
    kept.onefoldFormKey = fields[0].value;
    window.history.replaceState(kept, "");
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
