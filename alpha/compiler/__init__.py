"""The global protocol: forms written once for every role, checked, and projected per role.

Each name is loaded from its module on first use: a participant imports this package only for
its local schedule (``alpha.schedule.local``), and its start pays for neither the forms, nor
their checks, nor projection, which are the compiler's.
"""

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from alpha.compiler.checks import check, require_valid
    from alpha.compiler.forms import (
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
        Repeat,
        Roles,
        RoleSet,
        Seq,
        Targets,
        Transfer,
    )
    from alpha.compiler.projection import project, slots
    from alpha.schedule.local import LocalSchedule, decode, encode
    from alpha.schedule.regions import Region

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

# The module each name lives in.
_HOMES = {
    **dict.fromkeys(
        (
            "Children",
            "Choice",
            "Combine",
            "Dissemination",
            "Everyone",
            "Form",
            "GroupRoles",
            "Local",
            "Operation",
            "Protocol",
            "Repeat",
            "RoleSet",
            "Roles",
            "Seq",
            "Targets",
            "Transfer",
        ),
        "alpha.compiler.forms",
    ),
    "Region": "alpha.schedule.regions",
    **dict.fromkeys(("LocalSchedule", "decode", "encode"), "alpha.schedule.local"),
    **dict.fromkeys(("project", "slots"), "alpha.compiler.projection"),
    **dict.fromkeys(("check", "require_valid"), "alpha.compiler.checks"),
}


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(home), name)
    globals()[name] = value
    return value
