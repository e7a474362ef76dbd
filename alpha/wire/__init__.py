"""What travels between roles: the frame layout with one table of every frame kind's slot and
extent (``frame``: a receiver derives the header it expects and compares it byte for byte,
``docs/frames.md``), the send side (``send``) and the receive side with its refusals
(``receive``), the abort cause a refused round sends to every peer it can reach (``abort``), and
the lines between the launcher and a participant (``console``: announced ports, the failure
clock, the failure line).

Pure code over bytes; the runtime moves them.
"""

from typing import TYPE_CHECKING

from alpha.faces import lazy

if TYPE_CHECKING:
    from alpha.wire.abort import (
        MAX_NAME,
        AbortCause,
        decode_cause,
        encode_cause,
    )
    from alpha.wire.console import (
        FAILURE_CLOCK,
        MAX_PORT,
        PORT_BYTES,
        cause_of,
        clock_line,
        clock_of,
        decode_ports,
        encode_port,
        encode_ports,
        failed_line,
        failure_of,
        role_line,
    )
    from alpha.wire.frame import (
        ABORT_EXTENT,
        ABORT_SLOT,
        COMPLETION_SLOT,
        FIELDS,
        FORMAT_VERSION,
        HEADER_SIZE,
        HELLO_SLOT,
        KINDS,
        MAGIC,
        MAX_EXTENT,
        MAX_ROLE,
        MAX_SLOT,
        MAX_VERSION,
        TRAILER_SIZE,
        WORD_BYTES,
        Field,
        FrameKind,
        FrameSpec,
        KindRule,
        abort_spec,
        control_spec,
        field_at,
        payload_digest,
        seal,
    )
    from alpha.wire.receive import (
        ReceiveSlot,
        Reception,
    )
    from alpha.wire.send import (
        Outgoing,
        SendSlot,
        Unsealed,
    )

__all__ = [
    "ABORT_EXTENT",
    "ABORT_SLOT",
    "COMPLETION_SLOT",
    "FAILURE_CLOCK",
    "FIELDS",
    "FORMAT_VERSION",
    "HEADER_SIZE",
    "HELLO_SLOT",
    "KINDS",
    "MAGIC",
    "MAX_EXTENT",
    "MAX_NAME",
    "MAX_PORT",
    "MAX_ROLE",
    "MAX_SLOT",
    "MAX_VERSION",
    "PORT_BYTES",
    "TRAILER_SIZE",
    "WORD_BYTES",
    "AbortCause",
    "Field",
    "FrameKind",
    "FrameSpec",
    "KindRule",
    "Outgoing",
    "ReceiveSlot",
    "Reception",
    "SendSlot",
    "Unsealed",
    "abort_spec",
    "cause_of",
    "clock_line",
    "clock_of",
    "control_spec",
    "decode_cause",
    "decode_ports",
    "encode_cause",
    "encode_port",
    "encode_ports",
    "failed_line",
    "failure_of",
    "field_at",
    "payload_digest",
    "role_line",
    "seal",
]

__getattr__, __dir__ = lazy(
    __name__,
    {
        "alpha.wire.abort": (
            "MAX_NAME",
            "AbortCause",
            "decode_cause",
            "encode_cause",
        ),
        "alpha.wire.console": (
            "FAILURE_CLOCK",
            "MAX_PORT",
            "PORT_BYTES",
            "cause_of",
            "clock_line",
            "clock_of",
            "decode_ports",
            "encode_port",
            "encode_ports",
            "failed_line",
            "failure_of",
            "role_line",
        ),
        "alpha.wire.frame": (
            "ABORT_EXTENT",
            "ABORT_SLOT",
            "COMPLETION_SLOT",
            "FIELDS",
            "FORMAT_VERSION",
            "HEADER_SIZE",
            "HELLO_SLOT",
            "KINDS",
            "MAGIC",
            "MAX_EXTENT",
            "MAX_ROLE",
            "MAX_SLOT",
            "MAX_VERSION",
            "TRAILER_SIZE",
            "WORD_BYTES",
            "Field",
            "FrameKind",
            "FrameSpec",
            "KindRule",
            "abort_spec",
            "control_spec",
            "field_at",
            "payload_digest",
            "seal",
        ),
        "alpha.wire.receive": (
            "ReceiveSlot",
            "Reception",
        ),
        "alpha.wire.send": (
            "Outgoing",
            "SendSlot",
            "Unsealed",
        ),
    },
)
