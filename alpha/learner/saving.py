"""A learner's state to and from checkpoints (``docs/checkpoints.md``): what a segment of a run
resumes from, and what it publishes.

A role's learner carries a :class:`SegmentIO` when its run is one segment of a checkpointed
run, or resumes: where it starts (a generation and the digest its identity binds) and where it
publishes (a checkpoint folder, the segment's nonce, how many generations to keep). The
participant loads the starting state before it connects (:func:`load_start`). At each
generation round within the launch (every ``every`` rounds) every owner writes its ranges of
the state and sends its owner manifest's digest up the tree (:meth:`Saver.save`, the
schedule's ``save``), and role 0 publishes, points and prunes (:meth:`Saver.publish_round`,
the schedule's ``publish``) while the rounds go on; after the last round every owner writes
its ranges (:meth:`Saver.write_owner`) and role 0 publishes that generation at the run's
commit point and moves the pointer after it.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from alpha.checkpoint.manifest import (
    HISTORY,
    RESUMES,
    encode_history,
    encode_rows,
    generation_name,
    owner_ranges,
)
from alpha.checkpoint.store import (
    Generation,
    HistoryWriter,
    Part,
    move_pointer,
    open_generation,
    prune,
    publish,
    staged_folder,
    write_shards,
)
from alpha.errors import CheckpointWriteFailed, LearnerStateInvalid, error_line
from alpha.failpoints import reach
from alpha.learner.model import CLASSES, FEATURES, Model
from alpha.learner.optimizer import OptimizerState
from alpha.learner.state import LearnerState, state_specs
from alpha.schedule.learner_regions import DIGEST_BYTES
from alpha.schedule.learner_regions import PARAMETERS as LEARNER_PARAMETERS

__all__ = [
    "FREE_WITH_CONTRIBUTORS",
    "PARAMETERS",
    "Saver",
    "SegmentIO",
    "carried_history",
    "identity_changes",
    "load_start",
    "model_record",
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
    every: int | None = None

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
            "every": self.every,
        }

    def generation_rounds(self) -> list[int]:
        """The rounds this launch publishes a generation of: every ``every`` rounds after
        ``first``, and ``end``; none without ``save``."""
        if self.save is None:
            return []
        if self.every is None:
            return [self.end]
        return [*range(self.first + self.every, self.end, self.every), self.end]


def state_arrays(
    state: LearnerState, w: npt.NDArray[np.floating]
) -> dict[str, npt.NDArray[np.floating]]:
    return {PARAMETERS: w, **state.optimizer_state.arrays}


def about(state: LearnerState) -> dict[str, object]:
    """What a generation records of the learner, for restoring to check it fits and for
    ``alpha checkpoint export`` to name its parameters: the shipped model's width and dtype;
    the features and classes when they are not the digits'; a learner module's name, digest
    and layout."""
    return {
        "model": model_record(state.model),
        "optimizer": {"kind": state.optimizer.kind, **state.optimizer.constants},
        "participants": state.participants,
    }


def model_record(model: Model) -> dict[str, object]:
    """``about.model`` for ``model`` (``docs/checkpoints.md``)."""
    record: dict[str, object] = {"hidden": model.hidden, "dtype": model.dtype}
    if (model.features, model.classes) != (FEATURES, CLASSES):
        record["features"], record["classes"] = model.features, model.classes
    if not model.program.builtin:
        record["program"] = {"name": model.program.name, "sha256": model.program.sha256}
        record["layout"] = [[name, list(shape)] for name, shape in model.layout]
    return record


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


def load_start(state: LearnerState, io: SegmentIO) -> Generation | None:
    """Load the state a resumed role starts from: the parameters (kept for ``init``) and the
    optimizer's state, every shard checked.

    Raises:
        CheckpointCorrupt: the generation, a manifest or a shard is damaged or missing, or its
            root manifest is not the one the run identity binds.
        LearnerStateInvalid: the generation is not this learner's state, or of another round.
    """
    state.first_round = io.first
    if io.resume is None:
        return None
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
    return generation


def carried_history(start: Generation | None, first: int) -> tuple[list[list[object]], list[int]]:
    """What a run resumed from ``start`` carries into its generations: the history of the
    rounds before ``first`` as ``about`` holds it (:func:`alpha.checkpoint.manifest.encode_history`)
    and the rounds runs were resumed at, this one's last. A run from the seed carries nothing;
    a generation that records no history (an older one) carries only the resume.

    Raises:
        CheckpointCorrupt: the history ``start`` records is malformed.
    """
    if start is None:
        return [], []
    recorded = start.history()
    if recorded is None:
        return [], [first]
    kept = encode_history(
        [row for row in recorded.rows if row[0] < first],
        [each for each in recorded.resumes if each < first],
    )
    rows: list[list[object]] = [list(row) for row in kept[HISTORY] if isinstance(row, list)]
    return rows, [*(each for each in kept[RESUMES] if isinstance(each, int)), first]


class Saver:
    """One role's part in publishing its launch's generations: at each generation round within
    the launch (the schedule's ``save`` and ``publish`` steps) and the last at the commit point
    (``alpha.runtime.completion``).

    ``carried`` is what the generation the launch resumed from carries: the history before it
    and the rounds runs were resumed at (:func:`carried_history`); role 0 writes them, with the
    rounds of this launch, into each generation's ``about``.
    """

    def __init__(
        self,
        state: LearnerState,
        io: SegmentIO,
        role: int,
        carried: tuple[list[list[object]], list[int]] = ([], []),
    ) -> None:
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
        rows, self.resumes = carried
        # Every round's row up to the last generation, written once each into the launch's
        # history file (role 0's): the carried ones, then this launch's as each generation
        # takes them in.
        self.history = HistoryWriter(rows)
        self.taken = 0  # the rows of state.history the history has taken
        # A pointer that could not move at a generation within the launch: nothing more is
        # published, the rounds go on and commit, and role 0 fails with it after the commit.
        self.unpointed: CheckpointWriteFailed | None = None

    def write_owner(self, w: npt.NDArray[np.floating], round: int | None = None) -> str:
        """Write this role's ranges of the state after ``round`` (default: the launch's last)
        into the staged generation; return its owner manifest's SHA-256. Owner ``r`` writes
        range ``r`` of every array; a partitioned state (``w`` the owned range, or the
        optimizer's) is that range already. Every file is fsynced before it returns."""
        round = self.end if round is None else round
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

        staged = staged_folder(self.folder, round, self.nonce)
        digest = write_shards(staged, self.role, parts, on_shard=written)
        reach("checkpoint.written", self.role)
        return digest

    def save(self, w: npt.NDArray[np.floating], k: npt.NDArray[Any], round: int) -> None:
        """A generation round within the launch: write this role's ranges (durably), and put
        its owner manifest's SHA-256 into its entry of ``k``, which then travels to role 0."""
        digest = self.write_owner(w, round)
        at = self.role * DIGEST_BYTES
        k[at : at + DIGEST_BYTES] = np.frombuffer(bytes.fromhex(digest), dtype=np.uint8)

    def _about(self, round: int) -> dict[str, object]:
        rows = self.state.history  # this launch's rows, their rounds rising
        end = self.taken
        while end < len(rows) and rows[end][0] < round:
            end += 1
        self.history.add(encode_rows(rows[self.taken : end]))
        self.taken = end
        return {
            **about(self.state),
            **self.record,
            HISTORY: self.history.put(staged_folder(self.folder, round, self.nonce)),
            RESUMES: list(self.resumes),
        }

    def _publish(self, round: int, expect: list[str] | None) -> None:
        reach("checkpoint.publishing", self.role)
        self.published, self.manifest_sha256 = publish(
            self.folder,
            round,
            self.nonce,
            owners=self.state.participants,
            arrays=state_specs(self.state),
            about=self._about(round),
            expect=expect,
        )
        self.history.moved(self.folder / self.published)

    def publish(self) -> None:
        """Role 0, at the commit point: publish the last generation (every owner's shards are
        in: each owner wrote them before it reported its completion). Nothing, once a pointer
        could not move."""
        if self.unpointed is None:
            try:
                self._publish(self.end, None)
            finally:
                self.history.close()  # the launch's last generation

    def publish_round(self, k: npt.NDArray[Any], round: int) -> None:
        """Role 0, at a generation round within the launch, every owner's entry of ``k`` in:
        publish the generation (each owner manifest checked against the digest its owner
        sent), point at it, prune, and record it for ``alpha run``; the rounds go on.

        Raises:
            CheckpointCorrupt: an owner manifest is missing or not the one its owner wrote.
            CheckpointWriteFailed: the generation cannot be published.
            GenerationExists: it was published already.
        """
        if self.unpointed is not None:
            return
        data = bytes(k)
        expect = [
            data[owner * DIGEST_BYTES : (owner + 1) * DIGEST_BYTES].hex()
            for owner in range(self.state.participants)
        ]
        self._publish(round, expect)
        try:
            self._point(self._log)
        except CheckpointWriteFailed as error:
            self._log(f"checkpoint: {error_line(error)}; nothing more is published")
            self.unpointed = error
            return
        self.state.record_checkpoint(round, self.published, self.role)

    def _log(self, text: str) -> None:
        print(f"role {self.role}: {text}", file=sys.stderr, flush=True)

    def point(self, log: Callable[[str], None]) -> None:
        """Role 0, after the commit: move the pointer, then remove this plan's old generations
        (never another plan's, never a staged one); a removal that fails is logged, not raised.

        Raises:
            CheckpointWriteFailed: the pointer cannot be written; the old one stays (or, once
                a pointer could not move within the launch, that refusal).
        """
        if self.unpointed is not None:
            raise self.unpointed
        self._point(log)
        self.state.record_checkpoint(self.end, self.published, self.role)

    def _point(self, log: Callable[[str], None]) -> None:
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
