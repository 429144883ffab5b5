# Charter's two commands are `make run` and `make test`; both set everything up first.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test lint typecheck bench setup clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test,postgres]"
	@touch $(STAMP)

setup: $(STAMP)

## run: create the example project under .charter-demo/ and build it
run: $(STAMP)
	@rm -rf .charter-demo
	$(BIN)/charter init .charter-demo
	cd .charter-demo && ../$(BIN)/charter build && ../$(BIN)/charter inspect --latest

## test: lint, type-check and run the whole suite (pytest exit 5, nothing collected, fails)
test: $(STAMP)
	$(BIN)/ruff check src tests $(wildcard bench)
	$(BIN)/ruff format --check src tests $(wildcard bench)
	$(BIN)/mypy
	@$(BIN)/pytest -q -p no:cacheprovider; rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing"; exit 1; fi; exit $$rc

lint: $(STAMP)
	$(BIN)/ruff check src tests $(wildcard bench)
	$(BIN)/ruff format --check src tests $(wildcard bench)
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python bench/contracts.py

clean:
	rm -rf $(VENV) .charter-demo build dist
