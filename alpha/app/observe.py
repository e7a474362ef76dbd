"""``alpha observe gate [NAME ...]``: run the gates (``docs/gates.md``), a control run that must
commit and then each gate's run with its one fault, and print one row per gate.

The gates are not part of the ``alpha`` package: they drive real runs with the test harness,
sshd and the AArch64 sysroot, which live beside the package in a source checkout (``gates/``,
``harness/``) and are not in a wheel. :func:`_checkout_gates` is the one place where ``alpha``
imports them, and the one exception to the rule that ``alpha`` never imports ``gates`` or
``harness`` (``scripts/check_layers.py`` lists it).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from types import ModuleType

from alpha.app._options import print_json
from alpha.errors import UsageError
from alpha.exitcodes import EXIT_FAILURE, EXIT_OK

__all__ = ["observe_gate"]

# A source checkout: the folder that holds the alpha package, and gates/ and harness/ beside it
# when alpha was imported from a checkout (or an editable install of one). A wheel carries alpha
# alone: the gates drive real runs with the test harness, sshd and the AArch64 sysroot.
_CHECKOUT = Path(__file__).resolve().parents[2]


def _checkout_gates() -> tuple[ModuleType, ModuleType]:
    """The checkout's ``gates.catalogue`` and ``gates.run``, the checkout put first on the path
    so that no other package named ``gates`` or ``harness`` is found instead.

    Why here, and only here: ``alpha observe gate`` is the command line's way into the gates,
    which import ``alpha`` through its faces and drive it from outside (``harness/``); ``alpha``
    itself never imports them, and a wheel does not carry them.

    Raises:
        UsageError: ``alpha`` was not imported from a source checkout (an installed wheel).
    """
    if not all((_CHECKOUT / name / "__init__.py").is_file() for name in ("gates", "harness")):
        raise UsageError(
            "observe gate: the gates run from a source checkout of alpha only, with its test "
            "harness, sshd and the AArch64 sysroot; in a checkout, run `make venv` and then "
            "`.venv/bin/alpha observe gate` (docs/install.md)"
        )
    if sys.path[:1] != [str(_CHECKOUT)]:
        sys.path.insert(0, str(_CHECKOUT))
    import gates.catalogue
    import gates.run

    return gates.catalogue, gates.run


def observe_gate(args: argparse.Namespace) -> int:
    """``alpha observe gate``: 0 when every chosen gate passed, 1 when one failed (each named
    with why); with ``--list``, the gates, one a line.

    Raises:
        UsageError: not a source checkout, or a ``NAME`` (a gate's name or an ``fnmatch``
            pattern such as ``frames.*``) matches no gate.
    """
    _, gates_run = _checkout_gates()
    try:
        chosen = gates_run.select(args.names, args.shard)
    except KeyError as error:
        raise UsageError(f"observe gate: {error.args[0]}") from None
    if args.list:  # the gates the names or patterns choose: all when none is given
        for gate in chosen:
            print(f"{gate.name:<32} {gate.scenario.name:<6} {gate.expected:<18} {gate.meaning}")
        return EXIT_OK
    verdicts = gates_run.run_gates(chosen, out=None if args.json else sys.stdout)
    failed = [v for v in verdicts if not v.passed]
    if args.json:  # like every --json: one object on stdout, progress on stderr
        print_json({"ok": not failed, "rows": gates_run.to_json(verdicts)})
    for verdict in failed:
        print(f"gate: {verdict.gate} failed: {verdict.why}", file=sys.stderr)
    return EXIT_FAILURE if failed else EXIT_OK
