# The two commands a new user types are `make run` and `make test`; each sets
# up what it needs (Debian packages, .venv, the project) on a fresh machine.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# The test tools besides (the project's test extra): what make test needs and make run does not.
TEST_STAMP := $(VENV)/.installed-test
# Where the AArch64 participant's interpreter is built; harness/emulation.py reads the same.
AARCH64 := $(or $(ALPHA_AARCH64_HOME),.cache/aarch64)


.PHONY: all venv system system-run run test lint typecheck bytecode aarch64 unit bench clean

all: test

# The Debian packages: `make run` installs only what the main job needs, `make test` the rest.
system-run:
	@scripts/system-deps.sh run

system:
	@scripts/system-deps.sh test

$(STAMP): pyproject.toml | system-run
	$(PYTHON) -m venv $(VENV)
	# setuptools too: tests/system/test_install.py builds the wheel with this one (pyproject.toml says
	# which it needs), not in an isolated environment.
	$(BIN)/python -m pip install -q --upgrade pip 'setuptools>=77'
	$(BIN)/python -m pip install -q -e .
	touch $(STAMP)

$(TEST_STAMP): $(STAMP)
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $(TEST_STAMP)

venv: $(TEST_STAMP)

# The main job on the shipped default plan: 8 participant processes train the digits learner
# and must equal the replicated learner bit for bit.
run: bytecode
	$(BIN)/alpha run

lint: $(TEST_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	# Folders are ranks: imports run down the rank table (the rules: scripts/check_layers.py).
	$(BIN)/python scripts/check_layers.py

typecheck: $(TEST_STAMP)
	# The whole package is strict-clean, the pure layers included; keep it so.
	$(BIN)/mypy --strict alpha
	$(BIN)/mypy harness gates

# Participants started from role descriptions (`python -m alpha.artifact.participant`) import the
# package from here: its bytecode, written once, saves each one compiling it (~0.3 s), even
# where PYTHONDONTWRITEBYTECODE keeps Python from writing it on import.
bytecode: $(STAMP)
	$(BIN)/python -m compileall -q alpha

# An AArch64 CPython with trio and numpy (pinned to the venv's) for qemu-aarch64, from Debian
# arm64 packages and PyPI wheels (docs/emulation.md): ~10-30 s once, then a check of its stamp.
aarch64: $(STAMP)
	scripts/aarch64-sysroot.sh $(AARCH64)

unit: $(TEST_STAMP) bytecode aarch64
	$(BIN)/pytest

test: system lint typecheck unit

# torch (the bench extra) is optional: gloo's all_reduce, the reference of bench/combine.py. An
# install that fails leaves the other figures to run, with gloo's column skipped.
bench: $(STAMP)
	@$(BIN)/python -c 'import torch' 2>/dev/null \
		|| $(BIN)/python -m pip install -q -e '.[bench]' \
		|| echo "bench: torch did not install, so gloo is skipped in the combine benchmark"
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .cache .pytest_cache .mypy_cache .ruff_cache .hypothesis *.egg-info
