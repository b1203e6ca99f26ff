// "Copy" buttons: data-copy names the element whose text (an input's value) goes to the clipboard; the button says
// it was copied.
document.addEventListener("click", (event) => {
  const button = event.target.closest("button[data-copy]");
  if (!button) return;
  const source = document.getElementById(button.dataset.copy);
  if (!source || !navigator.clipboard) return;
  const label = button.textContent;
  const text = source instanceof HTMLInputElement ? source.value : source.innerText;
  navigator.clipboard.writeText(text).then(
    () => { button.textContent = "Copied"; setTimeout(() => { button.textContent = label; }, 2000); },
    () => { button.textContent = "Select the text and copy it"; },
  );
});
