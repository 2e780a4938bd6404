# hnplan: `make report` and `make test` create the environment on first use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
SEED   := $(VENV)/.seeded
SCENARIO ?= default
JOBS   ?= 2

.PHONY: report test lint browser-test lab bench validate clean-reports help

help:
	@echo "make report    run the default scenario's reports into reports/ (SCENARIO=all for every scenario)"
	@echo "make test      run the linters (make lint), then the test suite"
	@echo "make lint      ruff check, the import contracts (lint-imports) and mypy; see docs/architecture.md"
	@echo "make browser-test  open every report in headless Chromium (apt-get install chromium); screenshots in reports/screenshots"
	@echo "make lab       open JupyterLab on notebooks/"
	@echo "make bench     run the benchmarks"

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,lab]'
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (hnplan)" >/dev/null
	touch $(STAMP)

# what a first `hnplan compare` (its trust notes: every published run's prediction) and a first `hnplan claims`
# (the planners' grid points) read, planned into the user's cache (~/.cache/hnplan) after every change to the code
# or the data, about 5 s of CPU; stored under the catalog's and the code's hashes, so never read stale
$(SEED): $(STAMP) $(shell find hnplan data -type f ! -path '*/__pycache__/*' 2>/dev/null)
	$(BIN)/python tools/seed_prediction_cache.py
	touch $(SEED)

report: $(SEED)
	$(BIN)/hnplan report --scenario $(SCENARIO) --jobs $(JOBS)

test: lint
	$(BIN)/python -m pytest -n $(JOBS) --dist loadfile

lint: $(STAMP)
	$(BIN)/ruff check hnplan tests tools benchmarks
	$(BIN)/ruff format --check hnplan tests tools benchmarks
	$(BIN)/lint-imports
	$(BIN)/mypy

browser-test: $(STAMP)
	HNPLAN_REQUIRE_BROWSER=1 HNPLAN_SCREENSHOTS=reports/screenshots $(BIN)/python -m pytest -q tests/test_browser.py

lab: $(SEED)
	$(BIN)/jupyter lab notebooks/

bench: $(SEED)
	$(BIN)/python benchmarks/bench_planner.py
	$(BIN)/python benchmarks/bench_startup.py

validate: $(STAMP)
	$(BIN)/hnplan catalog validate

clean-reports:
	find reports -mindepth 1 ! -name README.md -exec rm -rf {} +
