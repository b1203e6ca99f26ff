// The job launcher: when the kind or privacy level changes, put that combination's defaults in the
// parameters box (unless the user edited it). Defaults come from the page through json_script.
(function () {
  "use strict";
  const defaults = JSON.parse(document.getElementById("job-defaults").textContent);
  const kind = document.getElementById("field-kind");
  const level = document.getElementById("field-privacy_level");
  const parameters = document.getElementById("field-parameters");
  let shown = parameters.value;

  function refill() {
    if (parameters.value !== shown) return;  // the user's own edits win
    const chosen = defaults[kind.value + "-" + level.value];
    parameters.value = chosen ? JSON.stringify(chosen, null, 2) : "{}";
    shown = parameters.value;
  }
  kind.addEventListener("change", refill);
  level.addEventListener("change", refill);
})();
