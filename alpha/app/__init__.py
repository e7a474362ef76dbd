"""The command line: the parser and its dispatch (``cli``), and one module per command:
``describe``, ``run`` (and ``replicate``), ``compile``, ``launch_command``, ``exchange``,
``checkpoint_command`` and ``observe``; the live display of a run (``display``) and the plots of a
finished one (``plot``).
"""

from typing import TYPE_CHECKING

from alpha.faces import lazy

if TYPE_CHECKING:
    from alpha.app.checkpoint_command import (
        ROUND_KEY,
        flat_arrays,
        model_of,
        named_arrays,
    )
    from alpha.app.cli import (
        COMMANDS,
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
        compile_command,
        compile_plan,
        compiled_identity,
        parse_roles,
        require_buildable,
        require_runnable,
    )
    from alpha.app.describe import (
        describe_deploy,
        describe_group,
        describe_tree,
    )
    from alpha.app.display import (
        LINE_SECONDS,
        PHASE_REDRAW_SECONDS,
        POLL_SECONDS,
        PhaseStatus,
        RoundProgress,
        follow,
        summary_table,
    )
    from alpha.app.exchange import (
        exchange_command,
    )
    from alpha.app.interrupted import (
        INTERRUPTS,
        Interrupted,
        RunTrack,
        found_in,
        interrupt_line,
        interrupted_by,
        run_line,
        signal_name,
        signal_of,
        signals_as_interrupts,
    )
    from alpha.app.observe import (
        observe_gate,
    )
    from alpha.app.plans import (
        PLANS_DIR,
        plans_command,
        resolve_plan,
        shipped_plans,
    )
    from alpha.app.plot import (
        HISTORY_HEADER,
        LOSS_NAME,
        RunPlots,
        diverged_round,
        history_csv,
        resume_label,
        unrecorded_note,
        write_run_plots,
    )
    from alpha.app.run import (
        DEFAULT_PLAN,
        RunSummary,
        run_plan,
    )
    from alpha.app.trace_chart import (
        MAX_CHART_FRAMES,
        default_window,
        draw_sequence,
    )
    from alpha.app.trace_command import (
        TRACE_JSON,
        TRACE_PNG,
        chrome_trace,
        load_traces,
        observe_diff,
        observe_trace,
        round_window,
    )

__all__ = [
    "ALL_ROLES_LIMIT",
    "COMMANDS",
    "DEFAULT_PLAN",
    "EXIT_FAILURE",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "HISTORY_HEADER",
    "INTERRUPTS",
    "LINE_SECONDS",
    "LOSS_NAME",
    "MAX_CHART_FRAMES",
    "PHASE_REDRAW_SECONDS",
    "PLANS_DIR",
    "POLL_SECONDS",
    "ROUND_KEY",
    "TRACE_JSON",
    "TRACE_PNG",
    "CompileResult",
    "Interrupted",
    "PhaseStatus",
    "RoundProgress",
    "RunPlots",
    "RunSummary",
    "RunTrack",
    "build_parser",
    "chrome_trace",
    "compile_command",
    "compile_plan",
    "compiled_identity",
    "default_window",
    "describe_deploy",
    "describe_group",
    "describe_tree",
    "diverged_round",
    "draw_sequence",
    "exchange_command",
    "flat_arrays",
    "follow",
    "found_in",
    "history_csv",
    "interrupt_line",
    "interrupted_by",
    "load_traces",
    "main",
    "model_of",
    "named_arrays",
    "observe_diff",
    "observe_gate",
    "observe_trace",
    "parse_roles",
    "plans_command",
    "require_buildable",
    "require_runnable",
    "resolve_plan",
    "resume_label",
    "round_window",
    "run_line",
    "run_plan",
    "shipped_plans",
    "signal_name",
    "signal_of",
    "signals_as_interrupts",
    "summary_table",
    "unrecorded_note",
    "write_run_plots",
]

__getattr__, __dir__ = lazy(
    __name__,
    {
        "alpha.app.checkpoint_command": (
            "ROUND_KEY",
            "flat_arrays",
            "model_of",
            "named_arrays",
        ),
        "alpha.app.cli": (
            "COMMANDS",
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
            "compile_command",
            "compile_plan",
            "compiled_identity",
            "parse_roles",
            "require_buildable",
            "require_runnable",
        ),
        "alpha.app.describe": (
            "describe_deploy",
            "describe_group",
            "describe_tree",
        ),
        "alpha.app.display": (
            "LINE_SECONDS",
            "PHASE_REDRAW_SECONDS",
            "POLL_SECONDS",
            "PhaseStatus",
            "RoundProgress",
            "follow",
            "summary_table",
        ),
        "alpha.app.exchange": ("exchange_command",),
        "alpha.app.interrupted": (
            "INTERRUPTS",
            "Interrupted",
            "RunTrack",
            "found_in",
            "interrupt_line",
            "interrupted_by",
            "run_line",
            "signal_name",
            "signal_of",
            "signals_as_interrupts",
        ),
        "alpha.app.observe": ("observe_gate",),
        "alpha.app.plans": (
            "PLANS_DIR",
            "plans_command",
            "resolve_plan",
            "shipped_plans",
        ),
        "alpha.app.plot": (
            "HISTORY_HEADER",
            "LOSS_NAME",
            "RunPlots",
            "diverged_round",
            "history_csv",
            "resume_label",
            "unrecorded_note",
            "write_run_plots",
        ),
        "alpha.app.run": (
            "DEFAULT_PLAN",
            "RunSummary",
            "run_plan",
        ),
        "alpha.app.trace_chart": (
            "MAX_CHART_FRAMES",
            "default_window",
            "draw_sequence",
        ),
        "alpha.app.trace_command": (
            "TRACE_JSON",
            "TRACE_PNG",
            "chrome_trace",
            "load_traces",
            "observe_diff",
            "observe_trace",
            "round_window",
        ),
    },
)
