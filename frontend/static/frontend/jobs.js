// The job launcher: when the kind or privacy level changes, put that combination's defaults in the
// parameters box (unless the user edited it). Defaults come from the page through json_script.
// Re-serialising them is safe because no value's meaning depends on how a number is written: queried
// rows are "query_fraction" (1 = every row) or "query_count", never a bare number whose 1.0 would
// become 1 (one row) here.
(function () {
  "use strict";
  const defaults = JSON.parse(document.getElementById("job-defaults").textContent);
  const kind = document.getElementById("field-kind");
  const level = document.getElementById("field-privacy_level");
  const parameters = document.getElementById("field-parameters");
  let shown = parameters.value;

  function refill() {
    if (parameters.value !== shown) return;  // the user's own edits (typed or JSON) win
    const chosen = defaults[kind.value + "-" + level.value];
    parameters.value = chosen ? JSON.stringify(chosen, null, 2) : "{}";
    shown = parameters.value;
    parameters.dispatchEvent(new Event("parameters-refilled"));  // the typed form (job_form.js) follows
  }
  kind.addEventListener("change", refill);
  level.addEventListener("change", refill);
  // A kind or level chosen before this deferred script ran: follow it, unless the box holds the user's own
  // values (a form sent back with errors), which are no combination's defaults.
  const current = JSON.stringify(JSON.parse(parameters.value || "{}"));
  if (Object.values(defaults).some((chosen) => JSON.stringify(chosen) === current)) {
    refill();
  }
})();
