"""The one copy of each test helper; tests import them as ``from tests.support import ...``.

``tests`` is found through pytest's ``pythonpath = ["."]`` (pyproject.toml), so these imports
hold wherever a test file sits under ``tests/``. ``conftest.py`` holds fixtures and hooks only
and is never imported as a module.
"""

from .channels import BUDGETS, connected
from .cli import ALPHA, run_alpha
from .deploy import deployment_file, left_running, ssh_options
from .errors import raises_exactly
from .identity import IDENTITY, SECRET
from .mounts import mount_tmpfs
from .paths import FIXTURES, PLANS, ROOT
from .plans import plan_of, plan_text, toml_value
from .runs import Fault, run_with_faults

__all__ = [
    "ALPHA",
    "BUDGETS",
    "FIXTURES",
    "IDENTITY",
    "PLANS",
    "ROOT",
    "SECRET",
    "Fault",
    "connected",
    "deployment_file",
    "left_running",
    "mount_tmpfs",
    "plan_of",
    "plan_text",
    "raises_exactly",
    "run_alpha",
    "run_with_faults",
    "ssh_options",
    "toml_value",
]
