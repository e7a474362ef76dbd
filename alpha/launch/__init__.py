"""Starting a run: the launcher starts every role and only relays port announcements
(``launcher``), a pure ledger keeps each role's outcome and names the first to fail (``outcome``),
one reader of ``/proc/PID/stat`` tells a stopped or dying process (``proc``), warm starts keep an
interpreter ready to fork the next role (``warm``, ``warm_server``), a deployment places roles on
hosts (``deploy``), and the remote transport reaches them over OpenSSH (``remote``).
"""

from typing import TYPE_CHECKING

from alpha.faces import lazy

if TYPE_CHECKING:
    from alpha.launch.deploy import (
        MAX_DEPLOY_BYTES,
        TRANSPORTS,
        Deployment,
        Node,
        Placement,
        Replaced,
        load_deployment,
        parse_deployment,
        replace_gone,
    )
    from alpha.launch.emulation import (
        BUILD_SCRIPT,
        GUEST_PYTHON,
        HOME_ENV,
        QEMU,
        aarch64_interpreter,
        default_home,
        emulated,
        interpreters_for,
    )
    from alpha.launch.launcher import (
        ANNOUNCE_WAIT,
        CAUSE_TAIL_BYTES,
        LAUNCH_SLACK,
        START_SHARE,
        LaunchSpec,
        announce_bound,
        enough_descriptors,
        launch,
        launch_specs,
        read_cause,
    )
    from alpha.launch.outcome import (
        EXIT_NOTICE,
        LaunchResult,
        OutcomeLedger,
        RoleOutcome,
        first_to_fail,
        signal_name,
        with_log,
    )
    from alpha.launch.proc import (
        PF_EXITING,
        STAT_BYTES,
        STOPPED_HOW,
        ProcStat,
        parse_stat,
        process_state,
        read_stat,
    )
    from alpha.launch.recovery import (
        FAILURE_CLASSES,
        RETRIED,
        Classified,
        classify,
        classify_error,
    )
    from alpha.launch.remote import (
        SSH_OPTIONS,
        Tunnels,
        deploy_specs,
        stage_artifacts,
    )
    from alpha.launch.warm import (
        StarterUnfit,
        WarmProcess,
        WarmStarter,
    )

__all__ = [
    "ANNOUNCE_WAIT",
    "BUILD_SCRIPT",
    "CAUSE_TAIL_BYTES",
    "EXIT_NOTICE",
    "FAILURE_CLASSES",
    "GUEST_PYTHON",
    "HOME_ENV",
    "LAUNCH_SLACK",
    "MAX_DEPLOY_BYTES",
    "PF_EXITING",
    "QEMU",
    "RETRIED",
    "SSH_OPTIONS",
    "START_SHARE",
    "STAT_BYTES",
    "STOPPED_HOW",
    "TRANSPORTS",
    "Classified",
    "Deployment",
    "LaunchResult",
    "LaunchSpec",
    "Node",
    "OutcomeLedger",
    "Placement",
    "ProcStat",
    "Replaced",
    "RoleOutcome",
    "StarterUnfit",
    "Tunnels",
    "WarmProcess",
    "WarmStarter",
    "aarch64_interpreter",
    "announce_bound",
    "classify",
    "classify_error",
    "default_home",
    "deploy_specs",
    "emulated",
    "enough_descriptors",
    "first_to_fail",
    "interpreters_for",
    "launch",
    "launch_specs",
    "load_deployment",
    "parse_deployment",
    "parse_stat",
    "process_state",
    "read_cause",
    "read_stat",
    "replace_gone",
    "signal_name",
    "stage_artifacts",
    "with_log",
]

__getattr__, __dir__ = lazy(
    __name__,
    {
        "alpha.launch.deploy": (
            "MAX_DEPLOY_BYTES",
            "TRANSPORTS",
            "Deployment",
            "Node",
            "Placement",
            "Replaced",
            "load_deployment",
            "parse_deployment",
            "replace_gone",
        ),
        "alpha.launch.emulation": (
            "BUILD_SCRIPT",
            "GUEST_PYTHON",
            "HOME_ENV",
            "QEMU",
            "aarch64_interpreter",
            "default_home",
            "emulated",
            "interpreters_for",
        ),
        "alpha.launch.launcher": (
            "ANNOUNCE_WAIT",
            "CAUSE_TAIL_BYTES",
            "LAUNCH_SLACK",
            "START_SHARE",
            "LaunchSpec",
            "announce_bound",
            "enough_descriptors",
            "launch",
            "launch_specs",
            "read_cause",
        ),
        "alpha.launch.outcome": (
            "EXIT_NOTICE",
            "LaunchResult",
            "RoleOutcome",
            "first_to_fail",
            "OutcomeLedger",
            "signal_name",
            "with_log",
        ),
        "alpha.launch.proc": (
            "PF_EXITING",
            "STAT_BYTES",
            "STOPPED_HOW",
            "ProcStat",
            "parse_stat",
            "process_state",
            "read_stat",
        ),
        "alpha.launch.recovery": (
            "FAILURE_CLASSES",
            "RETRIED",
            "Classified",
            "classify",
            "classify_error",
        ),
        "alpha.launch.remote": (
            "SSH_OPTIONS",
            "Tunnels",
            "deploy_specs",
            "stage_artifacts",
        ),
        "alpha.launch.warm": (
            "StarterUnfit",
            "WarmProcess",
            "WarmStarter",
        ),
    },
)
