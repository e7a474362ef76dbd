"""What travels between roles: the frame layout, with every frame kind's fields (a receiver
derives the header it expects and compares it byte for byte, ``docs/frames.md``), and the abort
cause a refused round sends to every peer it can reach.

Pure code over bytes; the runtime moves them.
"""

from typing import TYPE_CHECKING

from alpha.faces import lazy

if TYPE_CHECKING:
    from alpha.wire.abort import (
        ABORT_EXTENT,
        ABORT_SLOT,
        MAX_NAME,
        AbortCause,
        decode_cause,
        encode_cause,
    )
    from alpha.wire.frame import (
        DIGEST_SIZE,
        FIELDS,
        FORMAT_VERSION,
        HEADER_SIZE,
        MAGIC,
        MAX_EXTENT,
        MAX_ROLE,
        MAX_SLOT,
        MAX_VERSION,
        TRAILER_SIZE,
        Field,
        FrameKind,
        FrameSpec,
        Outgoing,
        ReceiveSlot,
        Reception,
        SendSlot,
        Unsealed,
        abort_spec,
        field_at,
        payload_digest,
        seal,
    )

__all__ = [
    "ABORT_EXTENT",
    "ABORT_SLOT",
    "DIGEST_SIZE",
    "FIELDS",
    "FORMAT_VERSION",
    "HEADER_SIZE",
    "MAGIC",
    "MAX_EXTENT",
    "MAX_NAME",
    "MAX_ROLE",
    "MAX_SLOT",
    "MAX_VERSION",
    "TRAILER_SIZE",
    "AbortCause",
    "Field",
    "FrameKind",
    "FrameSpec",
    "Outgoing",
    "ReceiveSlot",
    "Reception",
    "SendSlot",
    "Unsealed",
    "abort_spec",
    "decode_cause",
    "encode_cause",
    "field_at",
    "payload_digest",
    "seal",
]

__getattr__, __dir__ = lazy(
    __name__,
    {
        "alpha.wire.abort": (
            "ABORT_EXTENT",
            "ABORT_SLOT",
            "MAX_NAME",
            "AbortCause",
            "decode_cause",
            "encode_cause",
        ),
        "alpha.wire.frame": (
            "DIGEST_SIZE",
            "FIELDS",
            "FORMAT_VERSION",
            "HEADER_SIZE",
            "MAGIC",
            "MAX_EXTENT",
            "MAX_ROLE",
            "MAX_SLOT",
            "MAX_VERSION",
            "TRAILER_SIZE",
            "Field",
            "FrameKind",
            "FrameSpec",
            "Outgoing",
            "ReceiveSlot",
            "Reception",
            "SendSlot",
            "Unsealed",
            "abort_spec",
            "field_at",
            "payload_digest",
            "seal",
        ),
    },
)
