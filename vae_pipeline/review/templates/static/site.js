"use strict";
// The site's only script: timeline marks, judge frames and defects seek the video; label links filter a
// series' rows; table headers sort; the index page's search filters the entries every series'
// search/<series>.js adds; copy buttons copy.

function seek(event) {
  const mark = event.target.closest("[data-seek]");
  const video = document.getElementById("video");
  if (!mark || !video) return;
  video.currentTime = Number(mark.dataset.seek);
  video.scrollIntoView({ block: "nearest" });
}

function filterRows() {
  const match = /^#label=(.+)$/.exec(location.hash);
  const wanted = match ? decodeURIComponent(match[1]) : "all";
  for (const row of document.querySelectorAll("tr[data-label]")) {
    row.hidden = wanted !== "all" && row.dataset.label !== wanted;
  }
  for (const link of document.querySelectorAll("[data-filter]")) {
    link.classList.toggle("active", link.dataset.filter === wanted);
  }
}

function followPlayhead() {
  const video = document.getElementById("video");
  const head = document.getElementById("playhead");
  const timeline = document.querySelector(".timeline");
  if (!video || !head || !timeline) return;
  const duration = Number(timeline.dataset.duration);
  const move = () => { head.style.left = `${Math.min(100, (100 * video.currentTime) / duration)}%`; };
  video.addEventListener("timeupdate", move);
  video.addEventListener("seeked", move);
}

function cellValue(row, column, numeric) {
  const text = row.cells[column] ? row.cells[column].innerText.trim() : "";
  const number = parseFloat(text.replace(/,/g, ""));
  return numeric ? (Number.isNaN(number) ? -Infinity : number) : text.toLowerCase();
}

function sortBy(event) {
  const header = event.target.closest("table.sortable thead th");
  if (!header) return;
  const table = header.closest("table");
  const column = header.cellIndex;
  const body = table.tBodies[0];
  const rows = [...body.rows];
  const numeric = header.dataset.type === "number" || rows.every(r => !Number.isNaN(parseFloat(cellValue(r, column, false))));
  const ascending = header.dataset.sorted !== "ascending";
  for (const th of table.tHead.rows[0].cells) delete th.dataset.sorted;
  header.dataset.sorted = ascending ? "ascending" : "descending";
  rows.sort((a, b) => {
    const x = cellValue(a, column, numeric), y = cellValue(b, column, numeric);
    return (x < y ? -1 : x > y ? 1 : 0) * (ascending ? 1 : -1);
  });
  body.append(...rows);
}

function copyCommand(event) {
  const button = event.target.closest("[data-copy]");
  if (!button || !navigator.clipboard) return;
  navigator.clipboard.writeText(button.dataset.copy).then(() => { button.textContent = "copied"; }, () => {});
}

function searchPage() {
  const index = window.vaeSearch || [];
  if (!document.getElementById("search-results")) return;
  const body = document.querySelector("#search-results tbody");
  const query = document.getElementById("search-query");
  const label = document.getElementById("search-label");
  for (const e of index) {
    const row = body.insertRow();
    row.dataset.episode = e.id;
    e.words = [e.id, e.series, e.title, e.family, e.label, e.rule, ...e.gates, ...e.findings, e.reason].join(" ").toLowerCase();
    const link = document.createElement("a");
    link.href = e.href;
    link.textContent = e.id;
    row.insertCell().append(link);
    for (const value of [e.series, e.title, e.family, e.label, e.rule, e.gates.join(", "), e.findings.join(", "),
                         e.turns ?? "", e.tool_calls ?? "", e.duration_s ?? ""]) {
      row.insertCell().textContent = value;
    }
    e.row = row;
  }
  const apply = () => {
    const words = query.value.toLowerCase().split(/\s+/).filter(Boolean);
    let shown = 0;
    for (const e of index) {
      e.row.hidden = !words.every(w => e.words.includes(w)) || (label.value && e.label !== label.value);
      shown += e.row.hidden ? 0 : 1;
    }
    document.getElementById("search-count").textContent = `${shown} of ${index.length} episodes`;
  };
  query.addEventListener("input", apply);
  label.addEventListener("change", apply);
  const wanted = new URLSearchParams(location.search).get("q");
  if (wanted) query.value = wanted;
  apply();
}

document.addEventListener("click", seek);
document.addEventListener("click", sortBy);
document.addEventListener("click", copyCommand);
window.addEventListener("hashchange", filterRows);
filterRows();
followPlayhead();
searchPage();
