// The inspector's only script: token bars take their width from data-width (the page's
// Content-Security-Policy allows no inline style), and pointing at a message highlights the
// same message (same seq) in the other column.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  for (const bar of document.querySelectorAll(".bar[data-width]")) {
    bar.style.width = `${Math.max(Number(bar.dataset.width) || 0, 1)}%`;
  }
  const columns = document.querySelector(".columns");
  if (!columns) return;
  const mark = (seq, on) => {
    for (const el of columns.querySelectorAll(`.msg[data-seq="${CSS.escape(seq)}"]`)) {
      el.classList.toggle("highlight", on);
    }
  };
  columns.addEventListener("mouseover", (event) => {
    const msg = event.target.closest(".msg");
    if (msg) mark(msg.dataset.seq, true);
  });
  columns.addEventListener("mouseout", (event) => {
    const msg = event.target.closest(".msg");
    if (msg) mark(msg.dataset.seq, false);
  });
});
