# dpbook: `make` alone lists the targets (each target's `## ` comment is its line).
# Book and test targets create .venv if missing and install the pins (requirements.txt).
# Options: MODE=full|quick; FORCE=1 re-executes every chapter; SCHEDULER=tcp://host:8786
# runs the chapters' experiments on that Dask cluster; TEST_WORKERS=N runs the tests in N
# processes (default 2: pytest-xdist).

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

MODE ?= full
FORCE ?=
SCHEDULER ?=
CH ?=
ARGS ?=
TEST_WORKERS ?= 2
RUN_FLAGS = --mode $(MODE) $(if $(FORCE),--force) $(if $(SCHEDULER),--scheduler $(SCHEDULER))
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
JB := $(VENV)/bin/jupyter-book
# the tests in TEST_WORKERS processes (an idle one takes tests the others have not started)
PYTEST := $(PY) -m pytest -q -n $(TEST_WORKERS) --dist worksteal
# make test prints the 25 slowest tests and keeps every test's duration (JUnit XML) here
DURATIONS := artifacts/test-durations.xml
# Warnings and failed cells fail the build; --all so warnings of unchanged pages are re-reported.
JB_FLAGS := --path-output book -W --keep-going --all
LINT_PATHS := $(wildcard src tests notebooks book benchmarks)
TIMINGS := artifacts/timings.txt

# The environment is reinstalled only when requirements.txt or pyproject.toml change:
# the stamp's name carries a hash of both.
ENV_HASH := $(shell cat requirements.txt pyproject.toml | sha256sum | cut -c1-16)
STAMP := $(VENV)/.dpbook-env-$(ENV_HASH)

# $(call timed,label,command): run the command, print and log its wall-clock time
timed = @mkdir -p $(dir $(TIMINGS)); s=$$(date +%s); $(2); \
	echo "[time] $(1): $$(( $$(date +%s) - s )) s" | tee -a $(TIMINGS)

.PHONY: help book test quick setup browser chapters chapter new-chapter html lint pytest check-pages clean

help:  ## list the targets (this)
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-z-]+):.*## /  make \1\t/' | expand -t 20

book: setup  ## execute the chapters whose inputs changed (MODE=full|quick), build the HTML
	$(call timed,chapters (MODE=$(MODE)),$(PY) book/tools/run_chapters.py $(RUN_FLAGS))
	$(call timed,book build,$(JB) build . $(JB_FLAGS))
	@echo "The book is in book/_build/html/index.html"

test: setup  ## ruff, pytest, quick chapters, strict book build, browser check
	$(call timed,ruff,$(VENV)/bin/ruff check $(LINT_PATHS))
	$(call timed,pytest,$(PYTEST) --durations=25 --junitxml=$(DURATIONS))
	$(call timed,chapters (MODE=quick),$(PY) book/tools/run_chapters.py --mode quick $(if $(FORCE),--force))
	$(PY) book/ledger.py check build/claims.json
	$(call timed,book build,$(JB) build . $(JB_FLAGS))
	@$(MAKE) --no-print-directory browser
	$(call timed,browser check,$(PY) book/tools/check_pages.py)

setup: $(STAMP)  ## create .venv with the pinned environment (once; again when the pins change)
	$(if $(filter setup,$(MAKECMDGOALS)),@echo "Ready.  Put dpbook on PATH with:  source $(VENV)/bin/activate")

# Debian's chromium and its driver for the browser check, installed where make may (root
# with apt-get, as .ci/run does); elsewhere check_pages.py says what to install.
browser:  ## install chromium for the browser check (root with apt-get only)
	@command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1 || \
	{ if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing chromium and chromium-driver (apt-get) for the browser check"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	      chromium chromium-driver >/dev/null; \
	  fi; }

# uv (pinned in requirements.txt) installs the pins: a few seconds where pip took two minutes.
UV := $(VENV)/bin/uv
$(STAMP):
	$(call timed,setup,test -x $(PY) || $(PYTHON) -m venv $(VENV); \
	  $(PY) -m pip install -q --disable-pip-version-check "$$(grep -E '^uv==' requirements.txt)"; \
	  $(UV) pip install -q --python $(PY) --compile-bytecode -r requirements.txt; \
	  $(UV) pip install -q --python $(PY) --no-deps -e .)
	@rm -f $(VENV)/.dpbook-env-*
	@touch $@

# Single steps, for working on the book
chapters: setup  ## execute the chapters only (MODE, FORCE, SCHEDULER)
	$(PY) book/tools/run_chapters.py $(RUN_FLAGS)

chapter: setup  ## one chapter, then `make html`: make chapter CH=03 MODE=quick ARGS="-p seed 7"
	@test -n "$(CH)" || { echo 'make chapter: say which, e.g. make chapter CH=03 MODE=quick'; exit 2; }
	$(PY) book/tools/run_chapters.py $(RUN_FLAGS) --only $(CH) $(ARGS)

html: setup  ## build the HTML from the executed chapters (executes nothing)
	$(JB) build . $(JB_FLAGS)

new-chapter: setup  ## copy a chapter, keys renamed, into _toc.yml: make new-chapter NAME=my_cauchy FROM=07
	@test -n "$(NAME)" || { echo 'make new-chapter: say which, e.g. make new-chapter NAME=my_cauchy FROM=07'; exit 2; }
	$(PY) book/tools/new_chapter.py $(NAME) --from $(or $(FROM),07)

lint: setup  ## ruff
	$(VENV)/bin/ruff check $(LINT_PATHS)

pytest: setup  ## the unit tests (TEST_WORKERS processes)
	$(PYTEST)

# the quick loop: coverage of src/dpbook, and the modules where no quick test runs a
# public function
quick: setup  ## the quick test loop: pytest -m "not slow" with a coverage report
	$(call timed,quick tests,$(PYTEST) -m "not slow" --durations=10 --cov=dpbook \
	  --cov-report=term --cov-report=json:artifacts/quick-coverage.json)
	@$(PY) book/tools/uncovered_modules.py artifacts/quick-coverage.json

check-pages: setup  ## the headless-browser check of every built page
	$(PY) book/tools/check_pages.py

clean:  ## remove the built book, executed chapters, figures and screenshots
	rm -rf book/_build build/chapters build/figures artifacts/screenshots
