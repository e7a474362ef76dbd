"""``alpha run`` as a process of its own with faults made while it runs: the one copy that the
restart tests, on this host and on a deployment's nodes, share."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .cli import ALPHA
from .paths import ROOT

#: A fault: once role 0 of the run recorded this round (from the run's start, whichever attempt
#: runs then), call this; it returns False when it could not act yet (its process is not up),
#: and is called again.
Fault = tuple[int, Callable[[], bool]]

_POLL = 0.01  # seconds between looks at the run's progress


def run_with_faults(
    argv: Sequence[str],
    run: Path,
    faults: Sequence[Fault],
    env: Mapping[str, str] | None = None,
) -> tuple[int, dict[str, Any], str]:
    """``alpha ARGV`` (a ``run ... -o RUN --json``), in the environment ``env`` (default:
    this process's), making each fault of ``faults`` in turn when its round is recorded in
    ``run``; the exit code, the JSON summary and stderr. The test fails when the run ends
    before every fault was made."""
    from harness.runs import recorded_round  # the harness's, loaded by the tests that run one

    with subprocess.Popen(
        [*ALPHA, *argv],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as process:
        pending = list(faults)
        while pending and process.poll() is None:
            at, act = pending[0]
            if recorded_round(run) >= at and act():
                pending.pop(0)
            time.sleep(_POLL)
        out, err = process.communicate(timeout=300)
    assert not pending, f"the run ended before faults at rounds {[at for at, _ in pending]}: {err}"
    return process.returncode, json.loads(out), err
