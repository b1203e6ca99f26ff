// A refused form shown again (frontend/form_refusals.py): what was typed goes back into the form it was sent from,
// and the refusal's sentence moves from above the page to beside the field it is about (or to the top of the
// form, where it names no field of it). Files cannot be put back by a page; the browser keeps no such value.
(function () {
  "use strict";

  function pathOf(form) {
    return new URL(form.getAttribute("action") || window.location.href, window.location.href).pathname;
  }

  function hiddenValuesMatch(form, values) {
    var hidden = form.querySelectorAll("input[type=hidden][name]");
    for (var index = 0; index < hidden.length; index += 1) {
      var sent = values[hidden[index].name];
      if (sent && sent.indexOf(hidden[index].value) === -1) { return false; }
    }
    return true;
  }

  function refusedForm(refusal) {
    var forms = document.querySelectorAll("main form");
    var candidates = [];
    for (var index = 0; index < forms.length; index += 1) {
      var method = (forms[index].getAttribute("method") || "get").toLowerCase();
      if (method === refusal.method && pathOf(forms[index]) === refusal.action) { candidates.push(forms[index]); }
    }
    for (var sent = 0; sent < candidates.length; sent += 1) {  // the form whose button was the one pressed
      var buttons = candidates[sent].querySelectorAll("button[name][value]");
      for (var button = 0; button < buttons.length; button += 1) {
        var pressed = refusal.values[buttons[button].name];
        if (pressed && pressed.indexOf(buttons[button].value) !== -1) { return candidates[sent]; }
      }
    }
    for (var position = 0; position < candidates.length; position += 1) {
      if (hiddenValuesMatch(candidates[position], refusal.values)) { return candidates[position]; }
    }
    return candidates[0] || null;
  }

  function putBack(form, values) {
    var controls = form.elements;
    for (var index = 0; index < controls.length; index += 1) {
      var control = controls[index];
      var sent = values[control.name];
      if (!control.name || !sent) { continue; }
      var type = (control.type || "").toLowerCase();
      if (type === "hidden" || type === "file" || type === "password" || type === "submit" || type === "button") {
        continue;
      }
      if (type === "checkbox" || type === "radio") {
        control.checked = sent.indexOf(control.value) !== -1;
      } else if (control.tagName === "SELECT") {
        for (var option = 0; option < control.options.length; option += 1) {
          control.options[option].selected = sent.indexOf(control.options[option].value) !== -1;
        }
      } else {
        control.value = sent[0];
      }
    }
    // a box the form left unticked was not sent: untick what the page ticked by default
    for (var box = 0; box < controls.length; box += 1) {
      if (controls[box].type === "checkbox" && controls[box].name && !values[controls[box].name]) {
        controls[box].checked = false;
      }
    }
  }

  function showBeside(form, refusal, message) {
    var field = refusal.field ? form.elements.namedItem(refusal.field) : null;
    if (field && field.length !== undefined && !field.tagName) { field = field[0]; }
    if (field && field.type !== "hidden") {
      message.className = "field-error form-refusal";
      field.setAttribute("aria-invalid", "true");
      var described = field.getAttribute("aria-describedby");
      field.setAttribute("aria-describedby", described ? described + " " + message.id : message.id);
      var holder = field.closest(".field") || field.parentNode;
      holder.appendChild(message);
      field.focus();
    } else {
      form.insertBefore(message, form.firstChild);
    }
  }

  function start() {
    var data = document.getElementById("form-refusal");
    var message = document.getElementById("form-error");
    if (!data || !message) { return; }
    var refusal = JSON.parse(data.textContent);
    var form = refusedForm(refusal);
    if (!form) { return; }
    var details = form.closest("details");
    if (details) { details.open = true; }
    putBack(form, refusal.values);
    showBeside(form, refusal, message);
    form.setAttribute("data-refused", "true");
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
