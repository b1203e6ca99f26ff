// The device–server leakage of a seeds file, shown before it is uploaded: |target| / (|target| + |redundant|).
document.addEventListener("DOMContentLoaded", () => {
  const input = document.getElementById("seeds-file");
  const output = document.getElementById("seeds-leakage");
  if (!input || !output) return;
  const show = async () => {
    const file = input.files[0];
    if (!file) return;
    try {
      const seeds = JSON.parse(await file.text());
      const targets = new Set(seeds.target_labels);
      const target = seeds.labels.filter((label) => targets.has(label)).length;
      const redundant = seeds.labels.length - target;
      output.textContent = target
        ? `Leakage ${(target / (target + redundant)).toFixed(2)}: ${target} target and ${redundant} redundant seeds.`
        : "None of these seeds has a target label.";
    } catch (error) {
      output.textContent = "This file is not a seeds JSON object; the market will say what is wrong.";
    }
  };
  input.addEventListener("change", show);
  show(); // a file chosen before this script ran
});
