# Telha — one-command setup, run and test. Everything installs into .venv in this checkout.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
CONFIG ?= config.toml

.PHONY: setup run test lint typecheck check bench clean proto

$(BIN)/telha: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(BIN)/telha

# web_worker drives Debian's chromium (never a browser download at run time); CI runs as root.
CHROMIUM ?= /usr/bin/chromium

setup: $(BIN)/telha $(CHROMIUM)

$(CHROMIUM):
	command -v chromium >/dev/null || (apt-get update && apt-get install -y chromium)

# Set everything up and run `telha serve` on the embedded SQLite default.
run: setup
	$(BIN)/telha serve --config $(CONFIG)

lint: setup
	$(BIN)/ruff check telha workers tests bench
	$(BIN)/ruff format --check telha workers tests bench

typecheck: setup
	$(BIN)/mypy

# Set everything up and run lint, type-check and the whole test suite.
test: setup lint typecheck
	$(BIN)/pytest -q

bench: setup
	$(BIN)/python bench/json_ingest.py
	$(BIN)/python bench/queue.py
	$(BIN)/python bench/tabular.py
	$(BIN)/python bench/docling.py
	$(BIN)/python bench/email_code.py
	$(BIN)/python bench/web.py

clean:
	rm -rf $(VENV) data .pytest_cache .mypy_cache .ruff_cache

# Regenerate telha_proto/ from proto/ (betterproto2-compiler, pinned in pyproject's dev extra).
proto: setup
	rm -rf telha_proto
	mkdir -p telha_proto
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/python -m grpc_tools.protoc -I proto \
		--python_betterproto2_out=telha_proto \
		--python_betterproto2_opt=client_generation=async,server_generation=async \
		proto/telha/worker/v1/worker.proto
