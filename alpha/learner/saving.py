"""A learner's state to and from checkpoints (``docs/checkpoints.md``): what a segment of a run
resumes from, and what it publishes.

A role's learner carries a :class:`SegmentIO` when its run is one segment of a checkpointed
run, or resumes: where it starts (a generation and the digest its identity binds) and where it
publishes (a checkpoint folder, the segment's nonce, how many generations to keep). The
participant loads the starting state before it connects (:func:`load_start`); after its last
round every owner writes its ranges of the state (:meth:`Saver.write_owner`); role 0 publishes
the generation at the commit point and moves the pointer after it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt

from alpha.checkpoint.manifest import extended_history, generation_name, owner_ranges
from alpha.checkpoint.store import (
    Generation,
    Part,
    move_pointer,
    open_generation,
    prune,
    publish,
    staged_folder,
    write_shards,
)
from alpha.errors import LearnerStateInvalid
from alpha.failpoints import reach
from alpha.learner.optimizer import OptimizerState
from alpha.learner.state import LearnerState, state_specs
from alpha.schedule.learner_regions import PARAMETERS as LEARNER_PARAMETERS

__all__ = [
    "FREE_WITH_CONTRIBUTORS",
    "PARAMETERS",
    "Saver",
    "SegmentIO",
    "identity_changes",
    "load_start",
    "segment_record",
    "state_arrays",
]

PARAMETERS: Final = LEARNER_PARAMETERS
"""The parameters' array name in a checkpoint, their region's name; the optimizer's arrays keep
their own names."""


@dataclass(frozen=True)
class SegmentIO:
    """Where a role's learner starts from and publishes to (absolute paths)."""

    first: int = 0
    end: int = 1
    resume: str | None = None
    resume_sha256: str | None = None
    save: str | None = None
    nonce: str | None = None
    keep: int = 2
    record: str = ""

    def to_dict(self) -> dict[str, object]:
        return {
            "first": self.first,
            "end": self.end,
            "resume": self.resume,
            "resume_sha256": self.resume_sha256,
            "save": self.save,
            "nonce": self.nonce,
            "keep": self.keep,
            "record": self.record,
        }


def state_arrays(
    state: LearnerState, w: npt.NDArray[np.floating]
) -> dict[str, npt.NDArray[np.floating]]:
    return {PARAMETERS: w, **state.optimizer_state.arrays}


def about(state: LearnerState) -> dict[str, object]:
    """What a generation records of the learner, for restoring to check it fits."""
    return {
        "model": {"hidden": state.model.hidden, "dtype": state.model.dtype},
        "optimizer": {"kind": state.optimizer.kind, **state.optimizer.constants},
        "participants": state.participants,
    }


FREE_WITH_CONTRIBUTORS = frozenset(("membership", "topology"))
"""Fields a resume may change unlisted when both plans have the same logical
``contributors``: every round then sums the same contributions in the same order on any number
of roles, so the run goes on bit for bit (``docs/learner.md``)."""


def identity_changes(
    recorded: Mapping[str, object], now: Mapping[str, object], may_change: Collection[str]
) -> tuple[dict[str, tuple[object, object]], dict[str, tuple[object, object]]]:
    """The fields of ``now`` that differ from ``recorded`` (``(recorded, now)`` each), cut in
    two: those refused, and those allowed (``may_change``, and with equal ``contributors``
    :data:`FREE_WITH_CONTRIBUTORS`). A field ``recorded`` lacks differs too."""
    allowed = set(may_change)
    contributors = now.get("contributors")
    if contributors is not None and recorded.get("contributors") == contributors:
        allowed |= FREE_WITH_CONTRIBUTORS
    refused: dict[str, tuple[object, object]] = {}
    changed: dict[str, tuple[object, object]] = {}
    for name, value in now.items():
        was = recorded.get(name, "(not recorded)")
        if was != value:
            (changed if name in allowed else refused)[name] = (was, value)
    return refused, changed


def segment_record(
    identity: Mapping[str, object],
    changed: Mapping[str, tuple[object, object]] | None = None,
) -> str:
    """What a segment's generation records of its plan (:attr:`SegmentIO.record`): the
    identity, its digest, the run's name, and what a resume changed on purpose."""
    canonical = json.dumps(identity, sort_keys=True, separators=(",", ":"), allow_nan=False)
    record = {
        "run": identity.get("run"),
        "plan": dict(identity),
        "plan_sha256": hashlib.sha256(canonical.encode()).hexdigest(),
        "changed": [
            {"field": name, "was": was, "now": value}
            for name, (was, value) in sorted((changed or {}).items())
        ],
    }
    return json.dumps(record, sort_keys=True, allow_nan=False)


def check_fits(generation: Generation, state: LearnerState) -> None:
    """
    Raises:
        LearnerStateInvalid: the generation's arrays or learner are not this learner's.
    """
    wanted = state_specs(state)
    if generation.arrays != wanted:
        raise LearnerStateInvalid(
            f"checkpoint {generation.path.name} holds arrays {generation.arrays}, but this "
            f"learner's state is {wanted} (another model, dtype or optimizer)"
        )
    recorded = generation.about.get("optimizer")
    mine = about(state)["optimizer"]
    if recorded != mine:
        raise LearnerStateInvalid(
            f"checkpoint {generation.path.name} was written by optimizer {recorded}, this "
            f"learner runs {mine}"
        )


def load_start(state: LearnerState, io: SegmentIO) -> None:
    """Load the state a resumed role starts from: the parameters (kept for ``init``) and the
    optimizer's state, every shard checked.

    Raises:
        CheckpointCorrupt: the generation, a manifest or a shard is damaged or missing, or its
            root manifest is not the one the run identity binds.
        LearnerStateInvalid: the generation is not this learner's state, or of another round.
    """
    state.first_round = io.first
    if io.resume is None:
        return
    generation = open_generation(Path(io.resume), expect_sha256=io.resume_sha256)
    check_fits(generation, state)
    if generation.round != io.first:
        raise LearnerStateInvalid(
            f"checkpoint {generation.path.name} is of round {generation.round}, the run "
            f"resumes at round {io.first}"
        )
    state.start_parameters = generation.read(PARAMETERS)
    arrays = {}
    for name, ((length,), _) in state_specs(state).items():
        if name == PARAMETERS:
            continue
        if state.own is not None and length == state.model.size:
            arrays[name] = generation.read(name, *state.own)  # only the owned range
        else:
            arrays[name] = generation.read(name)
    state.optimizer_state = OptimizerState.restore(
        state.optimizer, state.state_size, state.model.dtype, arrays
    )


class Saver:
    """One role's part in publishing its segment's generation."""

    def __init__(self, state: LearnerState, io: SegmentIO, role: int) -> None:
        assert io.save is not None and io.nonce is not None
        self.state = state
        self.role = role
        self.end = end = io.end
        self.folder = Path(io.save)
        self.nonce = io.nonce
        self.keep = io.keep
        self.generation = generation_name(end, io.nonce)  # its base name; sealed once published
        self.published = ""
        self.manifest_sha256 = ""
        self.record: dict[str, object] = json.loads(io.record) if io.record else {}

    def write_owner(self, w: npt.NDArray[np.floating]) -> str:
        """Write this role's ranges of the state into the staged generation; return its owner
        manifest's SHA-256. Owner ``r`` writes range ``r`` of every array; a partitioned
        optimizer state is the owned range already, which is that range."""
        parts = []
        local = state_arrays(self.state, w)
        offset = 0 if self.state.own is None else self.state.own[0]
        for name, ((length,), _) in state_specs(self.state).items():
            start, stop = owner_ranges(length, self.state.participants)[self.role]
            values = local[name]
            at = start - offset if values.size != length else start
            parts.append(Part(name, values[at : at + stop - start], (length,), start))

        def written(index: int) -> None:
            if index == 0:
                reach("checkpoint.writing", self.role)

        staged = staged_folder(self.folder, self.end, self.nonce)
        digest = write_shards(staged, self.role, parts, on_shard=written)
        reach("checkpoint.written", self.role)
        return digest

    def publish(self) -> None:
        """Role 0, at the commit point: publish the generation (every owner's shards are in)."""
        reach("checkpoint.publishing", self.role)
        # The history the run passed, with this role's own rounds up to the generation's.
        history = extended_history(self.record, self.state.history, self.end)
        self.published, self.manifest_sha256 = publish(
            self.folder,
            self.end,
            self.nonce,
            owners=self.state.participants,
            arrays=state_specs(self.state),
            about={**about(self.state), **self.record, **history},
        )

    def point(self, log: Callable[[str], None]) -> None:
        """Role 0, after the commit: move the pointer, then remove this plan's old generations
        (never another plan's, never a staged one); a removal that fails is logged, not raised.

        Raises:
            CheckpointWriteFailed: the pointer cannot be written; the old one stays.
        """
        reach("checkpoint.published", self.role)
        move_pointer(self.folder, self.published, self.manifest_sha256)
        plan = self.record.get("plan_sha256")
        failures = prune(
            self.folder,
            self.keep,
            plan if isinstance(plan, str) else None,
            on_hidden=lambda: reach("checkpoint.removing", self.role),
        )
        for failure in failures:
            log(f"checkpoint: {failure}")
