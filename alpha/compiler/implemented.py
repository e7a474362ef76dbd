"""Whether every operation a protocol declares has an implementation (``alpha compile``).

The registry of implementations is ``alpha.schedule.operations`` (``LOCAL_OPS``, ``SELECTORS``),
below the compiler; this check walks the compiler's forms and asks that registry, so the
schedule imports nothing of the compiler and a participant, which only runs operations, never
loads the forms.
"""

from __future__ import annotations

from alpha.compiler.forms import Choice, Local, Protocol, walk
from alpha.errors import OperationUnimplemented, ProtocolFailure
from alpha.schedule.operations import LOCAL_OPS, SELECTORS

__all__ = ["unimplemented"]


def unimplemented(protocol: Protocol) -> list[ProtocolFailure]:
    """A refusal for each of ``protocol``'s local operations and selectors that is declared
    (with its kind) but has no implementation here, in the order of its forms.

    A name the protocol does not declare is left to the protocol checks (``NoRealization``,
    ``SelectorNotAtAuthority``), so one cause is reported once.
    """
    failures: list[ProtocolFailure] = []
    for path, form in walk(protocol.body):
        if isinstance(form, Local):
            name, kind, implemented = form.op, "local", form.op in LOCAL_OPS
        elif isinstance(form, Choice):
            name, kind, implemented = form.selector, "selector", form.selector in SELECTORS
        else:
            continue
        declared = protocol.operations.get(name)
        if declared is not None and declared.kind == kind and not implemented:
            failures.append(
                OperationUnimplemented(
                    f"{kind} operation {name!r} is declared but this Alpha has no "
                    "implementation of it (schedule.operations), so no participant could run it",
                    form=path,
                )
            )
    return failures
