# One task runner: `make run` serves the app, `make test` runs the whole suite.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install run test lint bench browser

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev,postgres]'
	touch $(STAMP)

install: $(STAMP)

# Creates or upgrades the SQLite database under instance/, then serves on http://127.0.0.1:5000
run: install
	$(BIN)/flask --app webapp db-upgrade
	$(BIN)/flask --app webapp run --host 127.0.0.1 --port 5000

# Headless Chromium for the end-to-end tests (Debian's package; as root only).
browser:
	@sh scripts/install-browser.sh

test: install browser
	$(BIN)/python -m pytest -q

lint: install
	$(BIN)/ruff check bpe webapp tests benchmarks migrations
	$(BIN)/ruff format --check bpe webapp tests benchmarks migrations

bench: install
	$(BIN)/python benchmarks/train_vs_peers.py
