"""The runtime: trio at the edges. Endpoints establish a role's edges, frame channels move frames
through the sans-IO codec, and a session runs one participant's work under its budgets."""

from alpha.runtime.channel import FrameChannel
from alpha.runtime.endpoint import HELLO_SLOT, PORT_BYTES, Establishment, establish, hello_spec
from alpha.runtime.session import EdgeReport, RoleReport, first_alpha_error, run_role

__all__ = [
    "HELLO_SLOT",
    "PORT_BYTES",
    "EdgeReport",
    "Establishment",
    "FrameChannel",
    "RoleReport",
    "establish",
    "first_alpha_error",
    "hello_spec",
    "run_role",
]
