// The job launcher's typed form: one labelled input per parameter, generated from the parameters box (which
// holds the engine's validated defaults for the chosen kind and level, see market.jobs.parameters), with
// numbers as number inputs, true/false as checkboxes, lists as comma-separated numbers and nested settings
// (the learner, privacy) as their own groups. Every edit is written back into the box, which stays the one
// thing the form sends; "Advanced JSON" shows the box itself. The server validates either way.
(function () {
  "use strict";
  const box = document.getElementById("field-parameters");
  const container = document.getElementById("typed-parameters");
  const helpTexts = JSON.parse(document.getElementById("job-parameter-help").textContent);
  // The engine's short lists, per kind and setting path ("vote", "final_model.family"): offered as selects.
  const choicesByKind = JSON.parse(document.getElementById("job-parameter-choices").textContent);
  const kindField = document.getElementById("field-kind");
  if (!box || !container) return;
  let values = {};

  function helpFor(name) {
    for (const [names, text] of Object.entries(helpTexts)) {
      if (names.split(" / ").some((entry) => entry.split(" (")[0] === name)) return text;
    }
    return "";
  }

  function write() {
    box.value = JSON.stringify(values, null, 2);
  }

  function setAt(path, value) {
    let target = values;
    path.slice(0, -1).forEach((key) => { target = target[key]; });
    target[path[path.length - 1]] = value;
    write();
  }

  function choicesFor(path) {
    const kindChoices = (kindField && choicesByKind[kindField.value]) || {};
    return kindChoices[path.join(".")] || null;
  }

  function selectFor(path, value, choices) {
    const select = document.createElement("select");
    const options = choices.includes(value) ? choices : [value, ...choices];
    options.forEach((choice) => {
      const option = document.createElement("option");
      option.value = choice === null ? "" : String(choice);
      option.textContent = choice === null ? "none" : String(choice).replaceAll("_", " ");
      option.selected = choice === value;
      select.appendChild(option);
    });
    select.addEventListener("change", () => setAt(path, select.value === "" ? null : select.value));
    return select;
  }

  function inputFor(path, value) {
    const id = "param-" + path.join("-");
    const choices = typeof value === "string" || value === null ? choicesFor(path) : null;
    if (choices) return Object.assign(selectFor(path, value, choices), { id: id });
    const input = document.createElement("input");
    input.id = id;
    if (typeof value === "boolean") {
      input.type = "checkbox";
      input.checked = value;
      input.addEventListener("change", () => setAt(path, input.checked));
    } else if (typeof value === "number") {
      input.type = "number";
      input.step = "any";
      // shown to four significant digits (σ 8.52110077606 reads 8.521); the box keeps the exact value until edited
      input.value = Number.isInteger(value) ? String(value) : String(Number(value.toPrecision(4)));
      if (input.value !== String(value)) input.title = "exactly " + String(value);
      input.addEventListener("change", () => setAt(path, input.value === "" ? null : Number(input.value)));
    } else if (Array.isArray(value)) {
      input.type = "text";
      input.value = value.join(", ");
      input.addEventListener("change", () => setAt(path, input.value.split(",").map((item) => item.trim())
        .filter((item) => item !== "").map((item) => (isNaN(Number(item)) ? item : Number(item)))));
    } else {
      input.type = "text";
      input.value = value === null ? "" : String(value);
      if (value === null) input.placeholder = "none";
      // A text default stays text; an unset one (null) becomes a number when a number is typed.
      input.addEventListener("change", () => setAt(path, input.value === "" ? null
        : (value === null && !isNaN(Number(input.value)) ? Number(input.value) : input.value)));
    }
    return input;
  }

  function fieldFor(path, value) {
    const name = path[path.length - 1];
    if (value !== null && typeof value === "object" && !Array.isArray(value)) {
      const group = document.createElement("fieldset");
      group.className = "field param-group";
      const legend = document.createElement("legend");
      legend.textContent = path.join(".");
      group.appendChild(legend);
      const grid = document.createElement("div");
      grid.className = "field-grid";
      Object.entries(value).forEach(([key, item]) => grid.appendChild(fieldFor(path.concat(key), item)));
      group.appendChild(grid);
      return group;
    }
    const field = document.createElement("div");
    field.className = typeof value === "boolean" ? "field checkbox-field" : "field";
    const label = document.createElement("label");
    label.htmlFor = "param-" + path.join("-");
    label.textContent = name;
    const input = inputFor(path, value);
    if (typeof value === "boolean") {
      label.className = "checkbox";
      label.prepend(input);
      field.appendChild(label);
    } else {
      field.appendChild(label);
      field.appendChild(input);
    }
    const text = helpFor(name);
    if (text) {
      const help = document.createElement("p");
      help.className = "field-help";
      help.id = "param-help-" + path.join("-");
      help.textContent = text;
      input.setAttribute("aria-describedby", help.id);
      field.appendChild(help);
    }
    return field;
  }

  function render() {
    try {
      values = JSON.parse(box.value || "{}");
    } catch (error) {
      container.replaceChildren(Object.assign(document.createElement("p"), {
        className: "field-error", textContent: "The advanced JSON is not valid JSON; fix it there (" + error.message + ")."}));
      return;
    }
    const grid = document.createElement("div");
    grid.className = "field-grid";
    const groups = [];
    Object.entries(values).forEach(([key, value]) => {
      const field = fieldFor([key], value);
      if (field.tagName === "FIELDSET") groups.push(field); else grid.appendChild(field);
    });
    container.replaceChildren(grid, ...groups);
  }

  box.addEventListener("change", render);
  box.addEventListener("parameters-refilled", render);
  render();
})();
