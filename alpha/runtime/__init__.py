"""One participant process, trio at the edges: endpoints establish a role's edges, frame channels
move frames through the sans-IO codec, the interpreter runs the local schedule, and a session
runs one participant's work under its budgets. It never imports the compiler: what it runs is
data the compiler wrote.
"""

from typing import TYPE_CHECKING

from alpha.faces import lazy

if TYPE_CHECKING:
    from alpha.runtime.channel import (
        ABORT_SEND_WAIT,
        HASH_PIECE,
        HASH_PIECE_MAX,
        OVERLAP_MIN,
        READ_AHEAD_MAX,
        FrameChannel,
        SharedDigest,
        first_failure,
    )
    from alpha.runtime.endpoint import (
        HELLO_SLOT,
        PORT_BYTES,
        Establishment,
        establish,
        hello_spec,
    )
    from alpha.runtime.interpreter import (
        GROUP_MIN,
        WORD_BYTES,
        Interpreter,
        decode_word,
        encode_word,
        transient_array,
    )
    from alpha.runtime.ops import (
        LOCAL_OPS,
        SELECTORS,
        Context,
    )
    from alpha.runtime.parent import (
        FAILURE_CLOCK,
        LAUNCHER_PID_ENV,
        LAUNCHER_POLL,
        launcher_pid,
        watch_launcher,
    )
    from alpha.runtime.session import (
        COMPLETION_SLOT,
        EdgeReport,
        RoleReport,
        first_alpha_error,
        run_role,
    )
    from alpha.runtime.whereabouts import (
        COMPLETING,
        ESTABLISHING,
        RUNNING,
        Whereabouts,
    )

__all__ = [
    "ABORT_SEND_WAIT",
    "COMPLETING",
    "COMPLETION_SLOT",
    "ESTABLISHING",
    "FAILURE_CLOCK",
    "GROUP_MIN",
    "HASH_PIECE",
    "HASH_PIECE_MAX",
    "HELLO_SLOT",
    "LAUNCHER_PID_ENV",
    "LAUNCHER_POLL",
    "LOCAL_OPS",
    "OVERLAP_MIN",
    "PORT_BYTES",
    "READ_AHEAD_MAX",
    "RUNNING",
    "SELECTORS",
    "WORD_BYTES",
    "Context",
    "EdgeReport",
    "Establishment",
    "FrameChannel",
    "Interpreter",
    "RoleReport",
    "SharedDigest",
    "Whereabouts",
    "decode_word",
    "encode_word",
    "establish",
    "first_alpha_error",
    "first_failure",
    "hello_spec",
    "launcher_pid",
    "run_role",
    "transient_array",
    "watch_launcher",
]

__getattr__, __dir__ = lazy(
    __name__,
    {
        "alpha.runtime.channel": (
            "ABORT_SEND_WAIT",
            "HASH_PIECE",
            "HASH_PIECE_MAX",
            "OVERLAP_MIN",
            "READ_AHEAD_MAX",
            "FrameChannel",
            "SharedDigest",
            "first_failure",
        ),
        "alpha.runtime.endpoint": (
            "HELLO_SLOT",
            "PORT_BYTES",
            "Establishment",
            "establish",
            "hello_spec",
        ),
        "alpha.runtime.interpreter": (
            "GROUP_MIN",
            "WORD_BYTES",
            "Interpreter",
            "decode_word",
            "encode_word",
            "transient_array",
        ),
        "alpha.runtime.ops": (
            "LOCAL_OPS",
            "SELECTORS",
            "Context",
        ),
        "alpha.runtime.parent": (
            "FAILURE_CLOCK",
            "LAUNCHER_PID_ENV",
            "LAUNCHER_POLL",
            "launcher_pid",
            "watch_launcher",
        ),
        "alpha.runtime.session": (
            "COMPLETION_SLOT",
            "EdgeReport",
            "RoleReport",
            "first_alpha_error",
            "run_role",
        ),
        "alpha.runtime.whereabouts": (
            "COMPLETING",
            "ESTABLISHING",
            "RUNNING",
            "Whereabouts",
        ),
    },
)
