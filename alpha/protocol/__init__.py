"""The global protocol: forms written once for every role, checked, and projected per role."""

from alpha.protocol.checks import check, require_valid
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
