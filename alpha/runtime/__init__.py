"""One participant process, trio at the edges: endpoints establish a role's edges
(``endpoint``), one object per edge makes every spec and slot of its frames (``edge``), frame
channels move frames through the sans-IO codec (``channel``), the interpreter runs the local
schedule (``interpreter``), a session runs one participant's work under its budgets
(``session``), the completion commits or aborts the run (``completion``), and the first cause of a
failure is found once (``cause``). It never imports the compiler: what it runs is data the
compiler wrote.
"""

from typing import TYPE_CHECKING

from alpha.faces import lazy

if TYPE_CHECKING:
    from alpha.runtime.cause import (
        as_one_error,
        failures,
        first_alpha_error,
        first_cause,
    )
    from alpha.runtime.channel import (
        ABORT_SEND_WAIT,
        HASH_PIECE,
        HASH_PIECE_MAX,
        LEAN_RUN,
        OVERLAP_MIN,
        READ_AHEAD_MAX,
        SMALL_FRAME,
        TAKEN_POLL_MAX,
        FrameChannel,
        SharedDigest,
    )
    from alpha.runtime.completion import (
        ReportFiles,
        complete,
        expect_completion,
    )
    from alpha.runtime.edge import (
        SCHEDULED,
        EdgeEnd,
        edge_end,
        hello_spec,
    )
    from alpha.runtime.endpoint import (
        PORT_BYTES,
        Establishment,
        establish,
    )
    from alpha.runtime.interpreter import (
        GROUP_MIN,
        Interpreter,
        decode_word,
        encode_word,
        transient_array,
    )
    from alpha.runtime.parent import (
        FAILURE_CLOCK,
        LAUNCHER_PID_ENV,
        LAUNCHER_POLL,
        launcher_pid,
        watch_for_launcher_loss,
    )
    from alpha.runtime.session import (
        EdgeReport,
        RoleReport,
        run_role,
    )
    from alpha.runtime.shared import (
        FOLDER_ENV,
        REGION_FOLDER,
        REGION_MAGIC,
        SHARED_ENV,
        SHARED_MIN,
        Area,
        Region,
        RegionLayout,
        Sharing,
        launch_token,
        region_folder,
        run_tag,
        schedule_extents,
        sweep_regions,
    )
    from alpha.runtime.tracing import (
        CHUNK_RECORDS,
        NO_DIGEST,
        TRACE_STORE_ENV,
        Frame,
        PythonWriter,
        Tracer,
        Writer,
        WriterType,
        self_check,
        store_status,
        writer_type,
    )
    from alpha.runtime.whereabouts import (
        COMPLETING,
        ESTABLISHING,
        RUNNING,
        Whereabouts,
    )

__all__ = [
    "ABORT_SEND_WAIT",
    "CHUNK_RECORDS",
    "COMPLETING",
    "ESTABLISHING",
    "FAILURE_CLOCK",
    "FOLDER_ENV",
    "GROUP_MIN",
    "HASH_PIECE",
    "HASH_PIECE_MAX",
    "LAUNCHER_PID_ENV",
    "LAUNCHER_POLL",
    "LEAN_RUN",
    "NO_DIGEST",
    "OVERLAP_MIN",
    "PORT_BYTES",
    "READ_AHEAD_MAX",
    "REGION_FOLDER",
    "REGION_MAGIC",
    "RUNNING",
    "SCHEDULED",
    "SHARED_ENV",
    "SHARED_MIN",
    "SMALL_FRAME",
    "TAKEN_POLL_MAX",
    "TRACE_STORE_ENV",
    "Area",
    "EdgeEnd",
    "EdgeReport",
    "Establishment",
    "Frame",
    "FrameChannel",
    "Interpreter",
    "PythonWriter",
    "Region",
    "RegionLayout",
    "ReportFiles",
    "RoleReport",
    "SharedDigest",
    "Sharing",
    "Tracer",
    "Whereabouts",
    "Writer",
    "WriterType",
    "as_one_error",
    "complete",
    "decode_word",
    "edge_end",
    "encode_word",
    "establish",
    "expect_completion",
    "failures",
    "first_alpha_error",
    "first_cause",
    "hello_spec",
    "launch_token",
    "launcher_pid",
    "region_folder",
    "run_role",
    "run_tag",
    "schedule_extents",
    "self_check",
    "store_status",
    "sweep_regions",
    "transient_array",
    "watch_for_launcher_loss",
    "writer_type",
]

__getattr__, __dir__ = lazy(
    __name__,
    {
        "alpha.runtime.cause": (
            "as_one_error",
            "failures",
            "first_alpha_error",
            "first_cause",
        ),
        "alpha.runtime.channel": (
            "ABORT_SEND_WAIT",
            "HASH_PIECE",
            "HASH_PIECE_MAX",
            "LEAN_RUN",
            "OVERLAP_MIN",
            "READ_AHEAD_MAX",
            "SMALL_FRAME",
            "TAKEN_POLL_MAX",
            "FrameChannel",
            "SharedDigest",
        ),
        "alpha.runtime.completion": (
            "ReportFiles",
            "complete",
            "expect_completion",
        ),
        "alpha.runtime.edge": (
            "SCHEDULED",
            "EdgeEnd",
            "edge_end",
            "hello_spec",
        ),
        "alpha.runtime.endpoint": (
            "PORT_BYTES",
            "Establishment",
            "establish",
        ),
        "alpha.runtime.interpreter": (
            "GROUP_MIN",
            "Interpreter",
            "decode_word",
            "encode_word",
            "transient_array",
        ),
        "alpha.runtime.parent": (
            "FAILURE_CLOCK",
            "LAUNCHER_PID_ENV",
            "LAUNCHER_POLL",
            "launcher_pid",
            "watch_for_launcher_loss",
        ),
        "alpha.runtime.session": (
            "EdgeReport",
            "RoleReport",
            "run_role",
        ),
        "alpha.runtime.shared": (
            "FOLDER_ENV",
            "REGION_FOLDER",
            "REGION_MAGIC",
            "SHARED_ENV",
            "SHARED_MIN",
            "Area",
            "Region",
            "RegionLayout",
            "Sharing",
            "launch_token",
            "region_folder",
            "run_tag",
            "schedule_extents",
            "sweep_regions",
        ),
        "alpha.runtime.tracing": (
            "CHUNK_RECORDS",
            "NO_DIGEST",
            "TRACE_STORE_ENV",
            "Frame",
            "PythonWriter",
            "Tracer",
            "Writer",
            "WriterType",
            "self_check",
            "store_status",
            "writer_type",
        ),
        "alpha.runtime.whereabouts": (
            "COMPLETING",
            "ESTABLISHING",
            "RUNNING",
            "Whereabouts",
        ),
    },
)
