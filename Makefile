# Two entry points for a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

$(BIN)/vae: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(BIN)/vae

.PHONY: setup demo test bench
setup: $(BIN)/vae

demo: setup
	$(BIN)/vae demo

test: setup
	$(BIN)/python -m pytest

bench: setup
	$(BIN)/pip install -q -e '.[bench]'
	$(BIN)/python benchmarks/run_all.py
