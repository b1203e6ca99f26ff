// The upload page: files come from the file input or the drop zone, the form goes to the REST API
// (POST /api/submissions/) with XMLHttpRequest because fetch() cannot report upload progress, API
// errors are shown next to their fields, and after a 202 htmx loads the status partial, which
// polls itself until the submission is valid or rejected.
(function () {
  "use strict";

  const form = document.getElementById("upload-form");
  if (!form) {
    return;
  }
  const fileInput = document.getElementById("field-files");
  const dropZone = document.getElementById("drop-zone");
  const fileList = document.getElementById("file-list");
  const clearFilesButton = document.getElementById("clear-files");
  const privacyLevel = document.getElementById("field-privacy_level");
  const partyPrivacy = document.getElementById("party-privacy");
  const progressBlock = document.getElementById("progress-block");
  const progressBar = document.getElementById("upload-progress");
  const progressText = document.getElementById("upload-progress-text");
  const uploadButton = document.getElementById("upload-button");
  const formError = document.getElementById("form-error");
  const result = document.getElementById("submission-result");
  const resultHeading = document.getElementById("submission-result-heading");
  const resultFiles = document.getElementById("submission-files");

  function formatBytes(size) {
    if (size < 1024) {
      return `${size} bytes`;
    }
    if (size < 1024 * 1024) {
      return `${(size / 1024).toFixed(1)} KiB`;
    }
    return `${(size / 1024 / 1024).toFixed(1)} MiB`;
  }

  function showChosenFiles() {
    const items = Array.from(fileInput.files, (file) => {
      const item = document.createElement("li");
      item.textContent = `${file.name} (${formatBytes(file.size)})`;
      return item;
    });
    fileList.replaceChildren(...items);
    clearFilesButton.hidden = items.length === 0;
  }

  // Dropped files join the input's own list, so the form sends one list however the files came in.
  function addFiles(files) {
    const combined = new DataTransfer();
    for (const file of fileInput.files) {
      combined.items.add(file);
    }
    for (const file of files) {
      combined.items.add(file);
    }
    fileInput.files = combined.files;
    showChosenFiles();
  }

  fileInput.addEventListener("change", showChosenFiles);
  showChosenFiles();  // files chosen before this deferred script ran (or kept by the browser's back button)
  clearFilesButton.addEventListener("click", () => {
    fileInput.value = "";
    showChosenFiles();
    fileInput.focus();
  });
  for (const eventName of ["dragenter", "dragover"]) {
    dropZone.addEventListener(eventName, (event) => {
      event.preventDefault();
      dropZone.classList.add("drop-zone-active");
    });
  }
  dropZone.addEventListener("dragleave", () => dropZone.classList.remove("drop-zone-active"));
  dropZone.addEventListener("drop", (event) => {
    event.preventDefault();
    dropZone.classList.remove("drop-zone-active");
    addFiles(event.dataTransfer.files);
  });

  function showPartyPrivacyFields() {
    const isL2 = privacyLevel.value === "L2";
    partyPrivacy.hidden = !isL2;
    partyPrivacy.disabled = !isL2;
  }
  privacyLevel.addEventListener("change", showPartyPrivacyFields);
  showPartyPrivacyFields();

  // metadata.json, as `onefold train` writes it, fills in the declared fields; its files still have to be chosen
  // (a browser may not read other files from the disk by itself).
  const metadataInput = document.getElementById("field-metadata");
  const metadataStatus = document.getElementById("metadata-status");
  const DECLARED_FIELDS = ["model_family", "n_local_examples", "local_validation_score", "label_distribution",
                           "privacy_level", "privacy_parameters", "declared_epsilon", "feature_view"];

  function fieldText(value) {
    return value !== null && typeof value === "object" ? JSON.stringify(value) : String(value);
  }

  // Fills the form and says what to do next; throws, with a sentence, on a file written for another federation.
  function applyMetadata(metadata) {
    const federation = form.elements.federation.value;
    if (metadata.federation && metadata.federation !== federation) {
      throw new Error(`This metadata.json was written for the federation '${metadata.federation}', not '${federation}'.`);
    }
    for (const name of DECLARED_FIELDS) {
      const field = document.getElementById(`field-${name}`);
      if (field && metadata[name] !== undefined && metadata[name] !== null) {
        field.value = fieldText(metadata[name]);
      }
    }
    // the silo's own model (issue 31) and the FedKT design: hidden, sent only when metadata.json names them
    const own = metadata.own_model && typeof metadata.own_model === "object" ? metadata.own_model : {};
    const declared = {
      own_model_file: own.file, own_model_validation_score: own.validation_score,
      partitions: metadata.partitions, teachers: metadata.teachers,
    };
    for (const [name, value] of Object.entries(declared)) {
      const field = document.getElementById(`field-${name}`);
      const given = value !== undefined && value !== null;
      field.value = given ? String(value) : "";
      field.disabled = !given;
    }
    showPartyPrivacyFields();
    const files = Array.isArray(metadata.files) ? metadata.files.join(", ") : "";
    const ownModel = own.file ? ` (${own.file} is your own model, uploaded beside the students)` : "";
    return `Filled in from metadata.json${files ? `; now choose its model files: ${files}${ownModel}` : ""}.`;
  }

  function readMetadata() {
    const file = metadataInput.files[0];
    metadataStatus.className = "";
    if (!file) {
      metadataStatus.textContent = "";
      return;
    }
    file.text().then((text) => {
      const metadata = parseJson(text);
      if (!metadata || typeof metadata !== "object" || !metadata.model_family) {
        throw new Error(`${file.name} is not the metadata.json that \`onefold train\` writes (no model_family).`);
      }
      metadataStatus.textContent = applyMetadata(metadata);
      metadataStatus.className = "help";
    }).catch((error) => {
      metadataStatus.className = "field-error";
      metadataStatus.textContent = error.message;
    });
  }
  metadataInput.addEventListener("change", readMetadata);
  readMetadata();  // a file chosen before this deferred script ran

  function setProgress(fraction) {
    const percent = Math.round(fraction * 100);
    progressBar.value = percent;
    progressBar.textContent = `${percent} %`;
    progressText.textContent = `${percent} %`;
  }

  // The API may answer {"detail": "..."}, {"field": ["..."]} or, for one of several files,
  // {"files": {"0": ["..."]}}; every answer becomes plain sentences.
  function sentences(value) {
    if (Array.isArray(value)) {
      return value.flatMap(sentences);
    }
    if (value && typeof value === "object") {
      return Object.values(value).flatMap(sentences);
    }
    return [String(value)];
  }

  function clearErrors() {
    formError.hidden = true;
    formError.replaceChildren();
    for (const element of form.querySelectorAll(".field-error")) {
      element.hidden = true;
      element.textContent = "";
    }
    for (const element of form.querySelectorAll("[aria-invalid]")) {
      element.removeAttribute("aria-invalid");
    }
  }

  function showFormError(messages) {
    formError.replaceChildren(...messages.map((message) => {
      const paragraph = document.createElement("p");
      paragraph.textContent = message;
      return paragraph;
    }));
    formError.hidden = false;
    formError.focus();
  }

  function showApiErrors(answer) {
    const general = [];
    let fieldsWithErrors = 0;
    for (const [field, value] of Object.entries(answer)) {
      const fieldError = document.getElementById(`error-${field}`);
      if (field === "detail" || field === "non_field_errors" || !fieldError) {
        general.push(...sentences(value));
        continue;
      }
      fieldError.textContent = sentences(value).join(" ");
      fieldError.hidden = false;
      document.getElementById(`field-${field}`).setAttribute("aria-invalid", "true");
      fieldsWithErrors += 1;
    }
    if (fieldsWithErrors > 0) {
      general.push("Please correct the fields marked below.");
    }
    showFormError(general);
  }

  function showSubmission(submission) {
    resultHeading.textContent = `Submission #${submission.id} uploaded`;
    resultFiles.replaceChildren(...submission.model_files.map((modelFile) => {
      const item = document.createElement("li");
      item.textContent = `${modelFile.original_name} (${modelFile.format}, ${formatBytes(modelFile.size_bytes)})`;
      return item;
    }));
    result.hidden = false;
    resultHeading.focus();  // the form the person was in has been reset; they continue at the result
    const statusUrl = `${form.dataset.statusUrl.replace("/0/", `/${submission.id}/`)}?explain=1`;
    htmx.ajax("GET", statusUrl, {target: "#submission-status", swap: "innerHTML"});
    fileInput.value = "";
    showChosenFiles();
  }

  function parseJson(text) {
    try {
      return JSON.parse(text);
    } catch (error) {
      return null;
    }
  }

  function handleAnswer(request) {
    const answer = parseJson(request.responseText);
    if ((request.status === 202 || request.status === 200) && answer) {  // 200: a replay of a lost answer
      showSubmission(answer);
    } else if (answer && typeof answer === "object") {
      progressBlock.hidden = true;
      showApiErrors(answer);
    } else {
      progressBlock.hidden = true;
      showFormError([`The market could not take this upload (HTTP ${request.status}). Please try again later.`]);
    }
  }

  // Empty fields are left out, so that the API applies its defaults or says what is missing, instead of
  // parsing "" (or, with no file chosen, the empty nameless file the browser would send).
  function isEmpty(value) {
    return value === "" || (value instanceof File && value.name === "" && value.size === 0);
  }

  function formBody() {
    const body = new FormData(form);
    for (const [name, value] of Array.from(body.entries())) {
      if (isEmpty(value)) {
        body.delete(name);
      }
    }
    return body;
  }

  // The market stops an oversized body as it streams in, and a browser may then report only a broken
  // connection; checking the size first gives the person the market's own sentence instead.
  function tooLargeMessage() {
    const limit = Number(form.dataset.maxUploadBytes);
    const total = Array.from(fileInput.files).reduce((sum, file) => sum + file.size, 0);
    if (total <= limit) {
      return null;
    }
    return `The upload is larger than the ${limit / 1024 / 1024} MB limit; send a smaller file.`;
  }

  // The upload's Idempotency-Key: kept while an upload did not reach the market (sending it again then stores it
  // at most once), a new one after any answer, so that the next upload is a new one.
  function newKey() {
    const bytes = crypto.getRandomValues(new Uint8Array(16));
    return "page-" + Array.from(bytes, (byte) => byte.toString(16).padStart(2, "0")).join("");
  }
  let idempotencyKey = newKey();

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    clearErrors();
    const sizeProblem = tooLargeMessage();
    if (sizeProblem) {
      document.getElementById("error-files").textContent = sizeProblem;
      document.getElementById("error-files").hidden = false;
      fileInput.setAttribute("aria-invalid", "true");
      showFormError(["Please correct the fields marked below."]);
      return;
    }
    const request = new XMLHttpRequest();
    request.open("POST", form.action);
    request.setRequestHeader("Accept", "application/json");
    request.setRequestHeader("X-CSRFToken", form.elements.csrfmiddlewaretoken.value);
    request.setRequestHeader("Idempotency-Key", idempotencyKey);
    // Upload listeners must be attached before send(), or the browser may not report progress.
    request.upload.addEventListener("progress", (progress) => {
      if (progress.lengthComputable) {
        setProgress(progress.loaded / progress.total);
      }
    });
    request.upload.addEventListener("load", () => setProgress(1));
    request.addEventListener("load", () => {
      idempotencyKey = newKey();
      handleAnswer(request);
    });
    request.addEventListener("error", () => {
      progressBlock.hidden = true;
      showFormError(["The upload did not reach the market. Check your connection and try again."]);
    });
    request.addEventListener("loadend", () => {
      uploadButton.disabled = false;
      uploadButton.textContent = "Upload";
    });
    uploadButton.disabled = true;
    uploadButton.textContent = "Uploading…";
    progressBlock.hidden = false;
    setProgress(0);
    request.send(formBody());
  });
}());
