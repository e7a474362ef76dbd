# The two commands a new user types are `make run` and `make test`; each sets
# up what it needs (Debian packages, .venv, the project) on a fresh machine.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

# The pure layers: no I/O, checked with mypy --strict.
PURE := alpha/errors.py alpha/membership.py alpha/topology.py alpha/identity.py alpha/frame.py

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

run: $(STAMP)
	$(BIN)/alpha describe group '(group (repeat 625 320 (repeat 8 40 (repeat 2 20 (stride 0 1 20)))))'
	$(BIN)/alpha describe tree 200000 64 --role 123456

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy --strict $(PURE)
	$(BIN)/mypy alpha harness gates

unit: $(STAMP)
	$(BIN)/pytest

test: system lint typecheck unit

bench: $(STAMP)
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis *.egg-info
