// The launcher's confirmation before launching despite a pre-flight estimate that expects the model to fail the
// publish gate (issue 43): Launch stays disabled until the box is ticked and a reason is written. The server refuses
// such a launch without them anyway (market.jobs.services.EstimateGateRefusal). A form changed from what was
// estimated (kind, level, parameters, submissions; the seed is not part of it) is another request, which the
// estimate does not speak against: the confirmation then steps aside, and comes back if the form is changed back.
(function () {
  "use strict";
  const confirmation = document.getElementById("launch-despite-estimate");
  const form = document.getElementById("job-form");
  const launch = document.getElementById("launch-button");
  if (!confirmation || !form || !launch) return;
  const box = document.getElementById("field-launch_despite_estimate");
  const reason = document.getElementById("field-launch_reason");
  const waiting = document.getElementById("launch-despite-needed");

  function request() {
    const data = new FormData(form);
    let parameters = String(data.get("parameters") || "{}");
    try {
      parameters = JSON.stringify(JSON.parse(parameters));  // as JSON reads it, whatever its spacing
    } catch (error) {
      // unreadable JSON is compared as typed; the server says what is wrong with it
    }
    return JSON.stringify([data.get("kind"), data.get("privacy_level"), parameters, data.getAll("submissions")]);
  }
  const estimated = request();

  function update() {
    const applies = request() === estimated;
    const ready = !applies || (box.checked && reason.value.trim() !== "");
    confirmation.hidden = !applies;
    launch.disabled = !ready;
    waiting.hidden = ready;
  }
  form.addEventListener("input", update);
  form.addEventListener("change", update);
  window.addEventListener("pageshow", update);  // Back restores the fields as they were left
  update();
})();
