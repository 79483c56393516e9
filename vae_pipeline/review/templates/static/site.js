"use strict";
// The site's only script: timeline marks and judge frames seek the video; label links filter a series' rows.

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

document.addEventListener("click", seek);
window.addEventListener("hashchange", filterRows);
filterRows();
followPlayhead();
