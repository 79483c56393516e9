# Two entry points for a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

$(BIN)/vae: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(BIN)/vae

# The browser tests drive Debian's Chromium (Playwright cannot download a browser here).
CHROMIUM := /usr/bin/chromium
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

$(CHROMIUM):
	$(SUDO) apt-get update -q
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium

# The video tests make encodes the package cannot (B-frames, edit lists, HEVC, VP9, AV1) with
# Debian's ffmpeg, and compare with its ffprobe.
FFMPEG := /usr/bin/ffmpeg

$(FFMPEG):
	$(SUDO) apt-get update -q
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q ffmpeg

.PHONY: setup demo test bench
setup: $(BIN)/vae

demo: setup
	$(BIN)/vae demo

test: setup $(CHROMIUM) $(FFMPEG)
	$(BIN)/python -m pytest

bench: setup $(FFMPEG)
	$(BIN)/pip install -q -e '.[bench]'
	$(BIN)/python benchmarks/run_all.py
