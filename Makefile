# Charter's two commands are `make run` and `make test`; both set everything up first.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test lint typecheck bench setup clean browser node package

# The first run installs the dependencies into $(VENV): pip shows what it downloads and
# installs as it goes (a few minutes on a fresh machine), never a silent wait.
$(STAMP): pyproject.toml
	@echo "setting up $(VENV): installing Charter and its dependencies (first time: a few minutes)"
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade --progress-bar on pip
	$(BIN)/python -m pip install --progress-bar on -e ".[test,postgres]"
	@touch $(STAMP)
	@echo "$(VENV) is ready"

setup: $(STAMP)

## browser: Debian's Chromium for the console's browser tests (installed when missing)
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing Debian's Chromium for the browser tests"; \
	  DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

## node: Node and npm for the TypeScript client's tests (Debian's packages, when missing)
node:
	@command -v npm >/dev/null 2>&1 || { \
	  echo "installing Debian's Node.js and npm for the TypeScript client's tests"; \
	  DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null; }

## run: the governed flow on the example project (created under .charter-demo/)
run: $(STAMP)
	@rm -rf .charter-demo
	$(BIN)/charter demo .charter-demo

## test: lint, type-check and run the whole suite (pytest exit 5, nothing collected, fails)
test: $(STAMP) browser node
	$(BIN)/ruff check src tests $(wildcard bench)
	$(BIN)/ruff format --check src tests $(wildcard bench)
	$(BIN)/mypy
	@$(BIN)/pytest -q -p no:cacheprovider --durations=15; rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing"; exit 1; fi; exit $$rc

## package: build the wheel and sdist and run the demo and MCP server from a clean install
package: $(STAMP)
	bash .ci/package-check $(BIN)/python

lint: $(STAMP)
	$(BIN)/ruff check src tests $(wildcard bench)
	$(BIN)/ruff format --check src tests $(wildcard bench)
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python bench/contracts.py
	$(BIN)/python bench/ledger.py
	@test ! -f bench/kernel.py || $(BIN)/python bench/kernel.py
	@test ! -f bench/artifacts.py || $(BIN)/python bench/artifacts.py

clean:
	rm -rf $(VENV) .charter-demo build dist
