"""The one copy of each test helper; tests import them as ``from tests.support import ...``.

``tests`` is found through pytest's ``pythonpath = ["."]`` (pyproject.toml), so these imports
hold wherever a test file sits under ``tests/``. ``conftest.py`` holds fixtures and hooks only
and is never imported as a module.
"""

from .channels import BUDGETS, connected
from .cli import ALPHA, run_alpha
from .errors import raises_exactly
from .identity import IDENTITY, SECRET
from .mounts import mount_tmpfs
from .paths import FIXTURES, PLANS, ROOT
from .plans import plan_of, plan_text, toml_value

__all__ = [
    "ALPHA",
    "BUDGETS",
    "FIXTURES",
    "IDENTITY",
    "PLANS",
    "ROOT",
    "SECRET",
    "connected",
    "mount_tmpfs",
    "plan_of",
    "plan_text",
    "raises_exactly",
    "run_alpha",
    "toml_value",
]
