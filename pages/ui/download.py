"""A download button whose file is in the page already: a click saves it from the browser, with no second request.

Streamlit's st.download_button fetches its file from the server after the click. The file a callable makes on click
is held by no session, so the server deletes it at the second clean-up of any session's run; in a class, where
every student's page runs each second, that came before the browser's request, and the teacher's download failed
("canceled"). This button holds its text (a class summary is a few kB) and is redrawn with the latest one by the
teacher's polling fragment, so a click saves what the store held at most one tick ago.
"""

from __future__ import annotations

import streamlit as st

_CSS = """
.attention-lab-download { display: inline-flex; align-items: center; gap: .4rem; min-height: 2.5rem;
  padding: .25rem .75rem; font: inherit; color: var(--st-text-color, inherit);
  background: var(--st-background-color, transparent); cursor: pointer;
  border: 1px solid var(--st-border-color, rgba(49, 51, 63, .2)); border-radius: var(--st-base-radius, .5rem); }
.attention-lab-download:hover, .attention-lab-download:focus-visible {
  color: var(--st-primary-color, #ff4b4b); border-color: var(--st-primary-color, #ff4b4b); }
"""

# Runs in the page's window on every redraw: one button, whose click saves the latest text as a file.
_JS = """
export default function ({ data, parentElement }) {
  let button = parentElement.querySelector("button");
  if (!button) {
    button = document.createElement("button");
    button.type = "button";
    button.className = "attention-lab-download";
    button.addEventListener("click", () => {
      const file = JSON.parse(button.dataset.file);
      const url = URL.createObjectURL(new Blob([file.text], { type: file.mime }));
      const link = document.createElement("a");
      link.href = url;
      link.download = file.name;
      document.body.appendChild(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(url), 60000);
    });
    // Material's "download" icon, as on Streamlit's download buttons
    button.innerHTML = '<svg viewBox="0 0 24 24" width="18" height="18" aria-hidden="true" fill="currentColor">' +
      '<path d="M5 20h14v-2H5v2zm14-9h-4V3H9v8H5l7 7 7-7z"/></svg><span></span>';
    parentElement.appendChild(button);
  }
  button.querySelector("span").textContent = data.label;
  button.dataset.file = JSON.stringify(data);
}
"""

_component = st.components.v2.component("attention_lab.download", css=_CSS, js=_JS)


def download_text(label: str, text: str, file_name: str, mime: str, key: str) -> None:
    """A button that saves `text` as `file_name` (`label` is ours, never a user's text: it is set as plain text)."""
    _component(key=key, data={"label": label, "text": text, "name": file_name, "mime": mime})
