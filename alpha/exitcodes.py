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

EXIT_SIGNAL_BASE: Final = 128
"""A command stopped by a signal exits this plus the signal's number, as a shell reports a
program a signal ended: 130 for SIGINT (Ctrl-C), 143 for SIGTERM, 129 for SIGHUP."""

EXIT_INTERRUPTED: Final = EXIT_SIGNAL_BASE + 2
"""Ctrl-C (SIGINT, 2) stopped the command: 128 + SIGINT, what shells expect of an interrupted
program."""


def signal_exit_code(number: int) -> int:
    """The exit code of a command that signal ``number`` stopped: 128 + ``number``."""
    return EXIT_SIGNAL_BASE + number
