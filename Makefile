# Telha — one-command setup, run and test. Everything installs into .venv in this checkout.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
CONFIG ?= config.toml

.PHONY: setup run test test-crash lint typecheck check bench bench-postgres chaos clean proto fuzz schema

$(BIN)/telha: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(BIN)/telha

# web_worker drives Debian's chromium (never a browser download at run time); CI runs as root.
CHROMIUM ?= /usr/bin/chromium
# docling_worker's OCR drives Debian's tesseract with its English and orientation data.
TESSERACT ?= /usr/share/tesseract-ocr/5/tessdata/osd.traineddata

# The imap connector's tests run Debian's Dovecot on 127.0.0.1 (tests/support/dovecot.py); the
# package's own service is never started here (its test instance has a config of its own).
DOVECOT ?= /usr/sbin/dovecot

setup: $(BIN)/telha $(CHROMIUM) $(TESSERACT) $(DOVECOT) browser-user

$(CHROMIUM):
	command -v chromium >/dev/null || (apt-get update && apt-get install -y chromium)

# Chromium runs sandboxed as this unprivileged user when Telha runs as root (web_worker/sandbox.py).
BROWSER_USER ?= telha-browser
.PHONY: browser-user
browser-user:
	@[ "$$(id -u)" != 0 ] || getent passwd $(BROWSER_USER) >/dev/null || \
		useradd --system --user-group --no-create-home --shell /usr/sbin/nologin $(BROWSER_USER)

$(TESSERACT):
	command -v tesseract >/dev/null && test -f $(TESSERACT) || (apt-get update && \
	  apt-get install -y tesseract-ocr tesseract-ocr-eng tesseract-ocr-osd)

$(DOVECOT):
	command -v dovecot >/dev/null || (apt-get update && apt-get install -y dovecot-imapd)

# Set everything up and run `telha serve` on the embedded SQLite default.
run: setup
	$(BIN)/telha serve --config $(CONFIG)

# Style, formatting, the import contracts of pyproject's [tool.importlinter] and the 600-line
# module cap (scripts/check_max_lines.py, no ignore list: a warning; --strict fails).
lint: setup
	$(BIN)/ruff check telha workers tests bench scripts
	$(BIN)/ruff format --check telha workers tests bench scripts
	$(BIN)/lint-imports --no-logo
	$(BIN)/python scripts/check_max_lines.py --max 600 telha workers

# Each engine's schema snapshot (telha/storage/{sqlite,postgres}/schema.txt), from databases
# migrated fresh: after a new migration or an edit of functions.sql (docs/architecture.md).
schema: setup
	$(BIN)/python scripts/schema_snapshot.py

typecheck: setup
	$(BIN)/mypy

# Set everything up and run lint, type-check and the whole test suite: the unit and
# integration tiers, then the crash tier as its own step. The tiers run in TEST_PROCS
# processes (pytest-xdist; one per core, at most 4, by default), each taking whole test
# files, so a module's servers start once (docs/testing.md, "Parallel runs"); TEST_PROCS=0
# runs them in this one process.
TEST_PROCS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); echo $$(( n < 4 ? n : 4 )))
test: setup lint typecheck
	$(BIN)/pytest -q -n $(TEST_PROCS) --dist loadfile
	$(MAKE) --no-print-directory test-crash

# The crash tier alone (tests/crash, marker `crash`): SIGKILLed servers and workers under a
# mixed load; a few minutes on 2 cores. TELHA_CRASH_SEED picks another seed.
test-crash: setup
	$(BIN)/pytest -q -m crash tests/crash

bench: setup
	$(BIN)/python bench/json_ingest.py
	$(BIN)/python bench/queue.py
	$(BIN)/python bench/tabular.py
	$(BIN)/python bench/docling.py
	$(BIN)/python bench/email_code.py
	$(BIN)/python bench/web.py
	$(BIN)/python bench/versions.py
	$(BIN)/python bench/ocr.py

# The queue benchmark on PostgreSQL too (one replica and two), beside the SQLite rows, on the
# throwaway cluster of scripts/pg-test-server (fsync on, synchronous_commit off) in
# BENCH_PG_DIR (its port: TELHA_PG_PORT, else the first free one).
BENCH_PG_DIR ?= /tmp/telha-pg-bench
bench-postgres: setup
	TELHA_PG_DIR=$(BENCH_PG_DIR) TELHA_PG_OPTS="-c synchronous_commit=off" \
		scripts/pg-test-server start >/dev/null
	TELHA_TEST_PG_DSN=$$(TELHA_PG_DIR=$(BENCH_PG_DIR) scripts/pg-test-server dsn) \
		$(BIN)/python bench/queue.py --engine postgres

# Kill-and-recover figures (bench/chaos.py): worker and core SIGKILL recovery times, lost,
# duplicated, `telha check` violations.
chaos: setup
	$(BIN)/python bench/chaos.py

clean:
	rm -rf $(VENV) data .pytest_cache .mypy_cache .ruff_cache .import_linter_cache

# Regenerate telha_proto/ from proto/ (betterproto2-compiler, pinned in pyproject's dev extra).
proto: setup
	rm -rf telha_proto
	mkdir -p telha_proto
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/python -m grpc_tools.protoc -I proto \
		--python_betterproto2_out=telha_proto \
		--python_betterproto2_opt=client_generation=async,server_generation=async \
		proto/telha/worker/v1/worker.proto

# The per-format fuzzer at length (tests/fuzz; `make test` runs 50 mutants per format):
# FUZZ_MUTANTS seeded mutants per format through each worker's handler, a Markdown table of
# outcomes by kind; failing inputs are kept in tests/fuzz/found/ (replayed by `make test`).
FUZZ_MUTANTS ?= 2000
FUZZ_SEED ?= 20261202
fuzz: setup
	$(BIN)/python -m tests.fuzz --mutants $(FUZZ_MUTANTS) --seed $(FUZZ_SEED)
