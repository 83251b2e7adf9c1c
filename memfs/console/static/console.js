// memfs Console: the little JavaScript it uses. Everything works without it but live updates.
"use strict";

// Forms with data-confirm ask first (archive, redact, restore).
document.addEventListener("submit", (event) => {
  const message = event.target.dataset && event.target.dataset.confirm;
  if (message && !window.confirm(message)) event.preventDefault();
});

// "Go back" on an error page (data-back): the page before, when there is one (a link, not
// javascript:, which the Console's Content-Security-Policy forbids).
document.addEventListener("click", (event) => {
  const link = event.target.closest && event.target.closest("[data-back]");
  if (!link || window.history.length < 2) return;
  event.preventDefault();
  window.history.back();
});

// Live regions: <section data-live="/stores/ID/live" data-live-refresh="URL"> follows the
// store's change feed (SSE) and, after each change, reloads its own content from
// data-live-refresh (the same page's fragment), keeping focus and scroll where they were.
function followLive(region) {
  const status = document.querySelector("[data-live-status]");
  let after = region.dataset.liveAfter || "";
  let pending = false;
  let again = false;  // a change came during a refresh: refresh once more after it
  const source = new EventSource(region.dataset.live + (after ? "?after=" + after : ""));
  const refresh = async () => {
    if (pending) { again = true; return; }
    pending = true;
    try {
      const response = await fetch(region.dataset.liveRefresh, {headers: {"x-memfs-fragment": "1"}});
      if (response.ok) {
        region.innerHTML = await response.text();
        region.dispatchEvent(new CustomEvent("memfs:updated", {bubbles: true}));
      }
    } finally {
      pending = false;
      if (again) { again = false; refresh(); }
    }
  };
  source.addEventListener("open", () => { if (status) { status.classList.add("on"); status.textContent = "live"; } });
  source.addEventListener("error", () => { if (status) { status.classList.remove("on"); status.textContent = "reconnecting…"; } });
  source.addEventListener("memfs.change", () => { refresh(); });
  source.addEventListener("memfs.reset", () => { refresh(); });
  // The sign-in ended (signed out elsewhere, the key revoked or expired): the page, loaded
  // again, goes to the sign-in page and says why.
  source.addEventListener("memfs.signed_out", () => { source.close(); window.location.reload(); });
}
document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("[data-live]").forEach(followLive);
});

// -- memories (memfs/console/memories.py) ----------------------------------------------------
// A memory's page: after a live refresh of its view, the editor follows the new content while
// the user has not started editing, and says what happened once they have (their text stays).
document.addEventListener("memfs:updated", (event) => {
  const view = event.target.querySelector("[data-memory]");
  const editor = document.querySelector("form[data-edit]");
  if (!view || !editor) return;
  const text = editor.elements.content;
  const sha = editor.elements.content_sha256;
  const notice = editor.querySelector("[data-changed-notice]");
  const editing = editor.hasAttribute("data-conflict") || text.value !== text.defaultValue;
  if (view.hasAttribute("data-gone")) {
    notice.textContent = "This memory was deleted since you opened it: saving offers to create it again.";
    notice.hidden = false;
  } else if (view.dataset.sha !== sha.value) {
    if (editing) {
      notice.textContent = "This memory changed since you started editing. Your text is kept: saving shows both sides.";
      notice.hidden = false;
    } else {
      const raw = view.querySelector("[data-raw-content]").value;
      text.defaultValue = raw;
      text.value = raw;
      sha.value = view.dataset.sha;
      editor.elements.path.value = view.dataset.path;
    }
  }
});
// "Edit" opens the editor and puts the cursor in it.
document.addEventListener("click", (event) => {
  const link = event.target.closest && event.target.closest("[data-open-edit]");
  const panel = document.getElementById("edit");
  if (!link || !panel) return;
  event.preventDefault();
  panel.open = true;
  panel.querySelector("textarea").focus();
});
