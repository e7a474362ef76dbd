"""Starting a run: the launcher starts every role in role order and only relays port
announcements, warm starts keep a started interpreter ready for the next role, a deployment
places roles on hosts, and the remote transport reaches them over OpenSSH.
"""

from typing import TYPE_CHECKING

from alpha.faces import lazy

if TYPE_CHECKING:
    from alpha.launch.deploy import (
        MAX_DEPLOY_BYTES,
        TRANSPORTS,
        Deployment,
        Node,
        load_deployment,
        parse_deployment,
    )
    from alpha.launch.launcher import (
        ANNOUNCE_WAIT,
        CAUSE_TAIL_BYTES,
        EXIT_NOTICE,
        LAUNCH_SLACK,
        START_SHARE,
        LaunchResult,
        LaunchSpec,
        RoleOutcome,
        announce_bound,
        first_failure,
        launch,
        launch_specs,
        read_cause,
    )
    from alpha.launch.remote import (
        SSH_OPTIONS,
        Tunnels,
        deploy_specs,
        stage_artifacts,
    )
    from alpha.launch.warm import (
        STOPPED_HOW,
        StarterUnfit,
        WarmProcess,
        WarmStarter,
        process_state,
    )

__all__ = [
    "ANNOUNCE_WAIT",
    "CAUSE_TAIL_BYTES",
    "EXIT_NOTICE",
    "LAUNCH_SLACK",
    "MAX_DEPLOY_BYTES",
    "SSH_OPTIONS",
    "START_SHARE",
    "STOPPED_HOW",
    "TRANSPORTS",
    "Deployment",
    "LaunchResult",
    "LaunchSpec",
    "Node",
    "RoleOutcome",
    "StarterUnfit",
    "Tunnels",
    "WarmProcess",
    "WarmStarter",
    "announce_bound",
    "deploy_specs",
    "first_failure",
    "launch",
    "launch_specs",
    "load_deployment",
    "parse_deployment",
    "process_state",
    "read_cause",
    "stage_artifacts",
]

__getattr__, __dir__ = lazy(
    __name__,
    {
        "alpha.launch.deploy": (
            "MAX_DEPLOY_BYTES",
            "TRANSPORTS",
            "Deployment",
            "Node",
            "load_deployment",
            "parse_deployment",
        ),
        "alpha.launch.launcher": (
            "ANNOUNCE_WAIT",
            "CAUSE_TAIL_BYTES",
            "EXIT_NOTICE",
            "LAUNCH_SLACK",
            "START_SHARE",
            "LaunchResult",
            "LaunchSpec",
            "RoleOutcome",
            "announce_bound",
            "first_failure",
            "launch",
            "launch_specs",
            "read_cause",
        ),
        "alpha.launch.remote": (
            "SSH_OPTIONS",
            "Tunnels",
            "deploy_specs",
            "stage_artifacts",
        ),
        "alpha.launch.warm": (
            "STOPPED_HOW",
            "StarterUnfit",
            "WarmProcess",
            "WarmStarter",
            "process_state",
        ),
    },
)
