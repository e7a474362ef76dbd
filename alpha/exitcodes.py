"""Process exit codes of every Alpha program, documented in ``docs/exit-codes.md``."""

from typing import Final

EXIT_OK: Final = 0
"""The command did what was asked."""

EXIT_FAILURE: Final = 1
"""A run or check was carried out and failed (a refusal, an exhausted budget, a lost peer):
the code of every ``alpha.errors.RunFailed``."""

EXIT_USAGE: Final = 2
"""The command line, a plan, a role description or an input text is wrong; nothing ran: the
code of every ``alpha.errors.InputInvalid``."""

EXIT_INTERRUPTED: Final = 130
"""Ctrl-C (SIGINT) stopped the command: 128 + SIGINT, what shells expect of an interrupted
program."""
