"""The command line: the parser (``alpha``) and one module per command: compile, run (with its
progress lines) and the plots of a finished run.
"""

from typing import TYPE_CHECKING

from alpha.faces import lazy

if TYPE_CHECKING:
    from alpha.app.cli import (
        EXIT_FAILURE,
        EXIT_INTERRUPTED,
        EXIT_OK,
        EXIT_USAGE,
        build_parser,
        main,
    )
    from alpha.app.compile import (
        ALL_ROLES_LIMIT,
        CompileResult,
        compile_plan,
        compiled_identity,
        parse_roles,
        require_runnable,
    )
    from alpha.app.plot import (
        HISTORY_HEADER,
        LOSS_NAME,
        RunPlots,
        diverged_round,
        history_csv,
        write_run_plots,
    )
    from alpha.app.progress import (
        LINE_SECONDS,
        POLL_SECONDS,
        RoundProgress,
        follow,
        summary_table,
    )
    from alpha.app.run import (
        DEFAULT_PLAN,
        RunSummary,
        committed_reports,
        run_plan,
    )

__all__ = [
    "ALL_ROLES_LIMIT",
    "DEFAULT_PLAN",
    "EXIT_FAILURE",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "HISTORY_HEADER",
    "LINE_SECONDS",
    "LOSS_NAME",
    "POLL_SECONDS",
    "CompileResult",
    "RoundProgress",
    "RunPlots",
    "RunSummary",
    "build_parser",
    "committed_reports",
    "compile_plan",
    "compiled_identity",
    "diverged_round",
    "follow",
    "history_csv",
    "main",
    "parse_roles",
    "require_runnable",
    "run_plan",
    "summary_table",
    "write_run_plots",
]

__getattr__, __dir__ = lazy(
    __name__,
    {
        "alpha.app.cli": (
            "EXIT_FAILURE",
            "EXIT_INTERRUPTED",
            "EXIT_OK",
            "EXIT_USAGE",
            "build_parser",
            "main",
        ),
        "alpha.app.compile": (
            "ALL_ROLES_LIMIT",
            "CompileResult",
            "compile_plan",
            "compiled_identity",
            "parse_roles",
            "require_runnable",
        ),
        "alpha.app.plot": (
            "HISTORY_HEADER",
            "LOSS_NAME",
            "RunPlots",
            "diverged_round",
            "history_csv",
            "write_run_plots",
        ),
        "alpha.app.progress": (
            "LINE_SECONDS",
            "POLL_SECONDS",
            "RoundProgress",
            "follow",
            "summary_table",
        ),
        "alpha.app.run": (
            "DEFAULT_PLAN",
            "RunSummary",
            "committed_reports",
            "committed_reports",
            "run_plan",
        ),
    },
)
