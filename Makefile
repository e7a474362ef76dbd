# The two commands a new user types are `make run` and `make test`; each sets
# up what it needs (Debian packages, .venv, the project) on a fresh machine.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed


.PHONY: all venv system run test lint typecheck unit bench clean

all: test

system:
	@scripts/system-deps.sh

$(STAMP): pyproject.toml | system
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

# Until the learner lands: a real run of 13 participant processes on a tree of fan-out 3,
# every edge established in the one order and a checked 64 KiB payload each way on each.
run: $(STAMP)
	$(BIN)/alpha exchange 13 3 --payload 65536

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	# The whole package is strict-clean, the pure layers included; keep it so.
	$(BIN)/mypy --strict alpha
	$(BIN)/mypy harness gates

unit: $(STAMP)
	$(BIN)/pytest

test: system lint typecheck unit

bench: $(STAMP)
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis *.egg-info
