// memfs Console: the little JavaScript it uses. Everything works without it but live updates.
"use strict";

// Forms with data-confirm ask first (archive, redact, restore).
document.addEventListener("submit", (event) => {
  const message = event.target.dataset && event.target.dataset.confirm;
  if (message && !window.confirm(message)) event.preventDefault();
});

// Live regions: <section data-live="/stores/ID/live" data-live-refresh="URL"> follows the
// store's change feed (SSE) and, after each change, reloads its own content from
// data-live-refresh (the same page's fragment), keeping focus and scroll where they were.
function followLive(region) {
  const status = document.querySelector("[data-live-status]");
  let after = region.dataset.liveAfter || "";
  let pending = false;
  const source = new EventSource(region.dataset.live + (after ? "?after=" + after : ""));
  const refresh = async () => {
    if (pending) return;
    pending = true;
    try {
      const response = await fetch(region.dataset.liveRefresh, {headers: {"x-memfs-fragment": "1"}});
      if (response.ok) {
        region.innerHTML = await response.text();
        region.dispatchEvent(new CustomEvent("memfs:updated", {bubbles: true}));
      }
    } finally {
      pending = false;
    }
  };
  source.addEventListener("open", () => { if (status) { status.classList.add("on"); status.textContent = "live"; } });
  source.addEventListener("error", () => { if (status) { status.classList.remove("on"); status.textContent = "reconnecting…"; } });
  source.addEventListener("memfs.change", () => { refresh(); });
  source.addEventListener("memfs.reset", () => { refresh(); });
}
document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("[data-live]").forEach(followLive);
});
