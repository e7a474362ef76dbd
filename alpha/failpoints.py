"""Failpoints: named places where a participant can be made to stop, so that a test can kill
it at exactly that place (``docs/checkpoints.md``).

``ALPHA_FAILPOINTS`` lists ``POINT@ROLE`` entries separated by commas, e.g.
``checkpoint.written@0``. When role ROLE reaches POINT it stops itself with SIGSTOP; whoever
set the variable then kills it (SIGKILL) or lets it go on (SIGCONT). Unset or empty, every
failpoint is a dictionary lookup and nothing else. An entry naming no known point is refused
when the participant starts, so a misspelt failpoint never passes as a test of nothing.
"""

from __future__ import annotations

import os
import signal
from typing import Final

__all__ = ["FAILPOINTS_ENV", "POINTS", "reach", "requested"]

FAILPOINTS_ENV: Final = "ALPHA_FAILPOINTS"

POINTS: Final = {
    "checkpoint.writing": "an owner has written its first shard file, not the others",
    "checkpoint.written": "an owner has written its shards and its owner manifest",
    "checkpoint.publishing": "role 0 is about to publish the generation (all shards written)",
    "checkpoint.published": "role 0 published the generation and committed, before the "
    "pointer moves",
    "checkpoint.removing": "role 0 renamed an old generation out of sight, before deleting it",
    # Reached by the warm starter (alpha/launch/warm_server.py), not by a participant; ROLE is the
    # role it is asked to start, and 0 for the two points it reaches once per launch.
    "warm.ready": "the warm starter has imported trio and numpy, before it says it is ready",
    "warm.forking": "the warm starter was asked to start role ROLE, before it forks",
    "warm.forked": "the warm starter forked role ROLE, before it tells the launcher",
    "warm.closing": "the warm starter read the end of the launcher's socket, before it exits",
    "participant.announcing": "a participant's listeners are up, before it announces its ports",
    # Reached by `alpha run` itself (alpha/app/run.py), not by a participant; ROLE is 0.
    "run.compiling": "alpha run is about to compile the run",
    "run.replicating": "alpha run committed, before the replicated learner",
}
"""Every failpoint, with where it is."""


def requested(text: str | None = None) -> frozenset[tuple[str, int]]:
    """The ``(point, role)`` pairs ``ALPHA_FAILPOINTS`` (or ``text``) asks for.

    Raises:
        ValueError: an entry is malformed or names no known point.
    """
    text = os.environ.get(FAILPOINTS_ENV, "") if text is None else text
    found = set()
    for entry in filter(None, (part.strip() for part in text.split(","))):
        point, at, role = entry.partition("@")
        if not at or not role.isdigit() or point not in POINTS:
            raise ValueError(
                f"{FAILPOINTS_ENV}: {entry!r} is not POINT@ROLE with a POINT among "
                f"{', '.join(POINTS)}"
            )
        found.add((point, int(role)))
    return frozenset(found)


def reach(point: str, role: int) -> None:
    """Stop this process here if ``point@role`` is requested."""
    assert point in POINTS, point
    if os.environ.get(FAILPOINTS_ENV) and (point, role) in requested():
        os.kill(os.getpid(), signal.SIGSTOP)
