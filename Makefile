# Everything runs inside .venv, created on first use (idempotent: re-run only when pyproject.toml changes).
PYTHON ?= python3
VENV ?= .venv
BIN = $(VENV)/bin

.PHONY: setup test demo lint bench

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev,interop,align,pdf]'
	touch $@

test: setup  ## lint + the whole test suite
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/python -m pytest

demo: setup  ## the main job: train, evaluate, translate, draw (Multi30k if reachable, else offline)
	$(BIN)/tnmt quickstart

lint: setup
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

bench: setup  ## speed and quality benchmarks (long: see benchmarks/BENCHMARKS.md)
	$(BIN)/python -m benchmarks.speed.train_speed
	$(BIN)/python -m benchmarks.speed.decode
