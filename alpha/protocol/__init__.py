"""The global protocol: forms written once for every role, checked, and projected per role."""

from typing import TYPE_CHECKING

from alpha.protocol.forms import (
    Children,
    Choice,
    Combine,
    Dissemination,
    Everyone,
    Form,
    GroupRoles,
    Local,
    Operation,
    Protocol,
    Region,
    Repeat,
    Roles,
    RoleSet,
    Seq,
    Targets,
    Transfer,
)
from alpha.protocol.local import LocalSchedule, decode, encode
from alpha.protocol.projection import project, slots

if TYPE_CHECKING:
    from alpha.protocol.checks import check, require_valid

__all__ = [
    "Children",
    "Choice",
    "Combine",
    "Dissemination",
    "Everyone",
    "Form",
    "GroupRoles",
    "Local",
    "LocalSchedule",
    "Operation",
    "Protocol",
    "Region",
    "Repeat",
    "RoleSet",
    "Roles",
    "Seq",
    "Targets",
    "Transfer",
    "check",
    "decode",
    "encode",
    "project",
    "require_valid",
    "slots",
]

_CHECKS = frozenset({"check", "require_valid"})


def __getattr__(name: str) -> object:
    # The checker is loaded on first use: a participant imports this package for its local
    # schedule (alpha.protocol.local) and checks nothing, so its start does not pay for it.
    if name in _CHECKS:
        from alpha.protocol import checks

        value = getattr(checks, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
