"""What a compiled role carries: its local schedule (instructions and their codec), the regions
it sends and receives, its role description (peers, edges, addresses, budgets) and the registry
of local operations a schedule may name.

Pure: the compiler writes these values, the runtime reads and runs them, and neither imports the
other.
"""

from typing import TYPE_CHECKING

from alpha.faces import lazy

if TYPE_CHECKING:
    from alpha.schedule.learner_regions import (
        CHECKPOINT,
        CONTRIBUTIONS,
        GRADIENT,
        PARAMETERS,
        STORE,
    )
    from alpha.schedule.local import (
        SCHEDULE_FORMAT,
        Choose,
        Fold,
        Instruction,
        LocalSchedule,
        Loop,
        Op,
        Recv,
        Send,
        decode,
        encode,
    )
    from alpha.schedule.operations import (
        LEARNER_OPS,
        LOCAL_OPS,
        SELECTORS,
        SUM_CHECK_OPS,
        Context,
        Learner,
        LocalOp,
        Selector,
    )
    from alpha.schedule.regions import (
        ITEM_SIZES,
        Region,
    )
    from alpha.schedule.role import (
        FORMAT,
        TRANSPORTS,
        Edge,
        RoleDescription,
    )

__all__ = [
    "CHECKPOINT",
    "CONTRIBUTIONS",
    "FORMAT",
    "GRADIENT",
    "ITEM_SIZES",
    "LEARNER_OPS",
    "LOCAL_OPS",
    "PARAMETERS",
    "SCHEDULE_FORMAT",
    "SELECTORS",
    "STORE",
    "SUM_CHECK_OPS",
    "TRANSPORTS",
    "Choose",
    "Context",
    "Edge",
    "Fold",
    "Instruction",
    "Learner",
    "LocalOp",
    "LocalSchedule",
    "Loop",
    "Op",
    "Recv",
    "Region",
    "RoleDescription",
    "Selector",
    "Send",
    "decode",
    "encode",
]

__getattr__, __dir__ = lazy(
    __name__,
    {
        "alpha.schedule.learner_regions": (
            "CHECKPOINT",
            "CONTRIBUTIONS",
            "GRADIENT",
            "PARAMETERS",
            "STORE",
        ),
        "alpha.schedule.local": (
            "SCHEDULE_FORMAT",
            "Choose",
            "Fold",
            "Instruction",
            "LocalSchedule",
            "Loop",
            "Op",
            "Recv",
            "Send",
            "decode",
            "encode",
        ),
        "alpha.schedule.operations": (
            "LEARNER_OPS",
            "LOCAL_OPS",
            "SELECTORS",
            "SUM_CHECK_OPS",
            "Context",
            "Learner",
            "LocalOp",
            "Selector",
        ),
        "alpha.schedule.regions": (
            "ITEM_SIZES",
            "Region",
        ),
        "alpha.schedule.role": (
            "FORMAT",
            "TRANSPORTS",
            "Edge",
            "RoleDescription",
        ),
    },
)
