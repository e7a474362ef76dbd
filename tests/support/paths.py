"""Where the checkout's parts lie, found once, so that no test counts ``parents[N]`` from a
folder that may move."""

from __future__ import annotations

from pathlib import Path

# tests/support/paths.py: three folders up is the checkout.
ROOT = Path(__file__).resolve().parents[2]
# The plans the wheel ships (package data, read by `alpha run` and `alpha compile`).
PLANS = ROOT / "alpha" / "data" / "plans"
# The tests' and the gates' own inputs: plans, hostile files (fixtures/README.md).
FIXTURES = ROOT / "fixtures"
