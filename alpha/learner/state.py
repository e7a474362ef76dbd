"""One role's learner: its local state, the operations that step it, and the learner-side
value (:class:`LearnerSetup`) it is built from.

Every round: every role computes its contribution (the gradient summed over its batch, with
its summed loss and correct count) into ``g``; the tree combines ``g`` in contract order and
delivers the total to every role; every role takes the same optimizer step (SGD, momentum or
Adam: ``alpha.learner.optimizer``) on its own copy of the parameters ``w`` and of the
optimizer's state; role 0 records the round's loss and accuracy. Before the first round every
role initializes ``w`` from the plan's seed.

A participant with a learner loads this module (its entry builds the ``LearnerState`` from its
payload and hands it to the runtime, which steps it); a role without one (a sum check) loads no
learner module at all. It never sees a plan: the compiler reads the plan and hands this module a
:class:`LearnerSetup` (``alpha.compiler.work_learn.learner_setup``), the numbers a learner role
needs. The learner's global protocol and run identity, which only compiling needs, are in
``alpha.compiler.work_learn``.
"""

from __future__ import annotations

import contextlib
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, final

import numpy as np
import numpy.typing as npt

from alpha.checkpoint.manifest import owner_ranges
from alpha.core.combine import ordered_sum
from alpha.core.topology import ParticipantTree
from alpha.errors import ArtifactInvalid, LossNotFinite
from alpha.learner.data import DIGITS_MAX_PIXEL, Dataset, Split, batch_indices, features, split
from alpha.learner.gpu import GpuContributor
from alpha.learner.model import Model, contribute, evaluate, initial_parameters
from alpha.learner.optimizer import SGD, Optimizer, OptimizerState
from alpha.records.progress import CheckpointRecord, RecordWriter, RoundRecord
from alpha.schedule.learner_regions import PARAMETERS

if TYPE_CHECKING:  # a type only: saving imports this module
    from alpha.learner.saving import Saver

__all__ = [
    "LOGICAL_FANOUT",
    "LearnerSetup",
    "LearnerState",
    "logical_tree",
    "owned",
    "split_of",
    "state_specs",
]


@final
@dataclass(frozen=True, slots=True)
class LearnerSetup:
    """What every role of one learner run needs of its plan, and nothing of the plan itself:
    the compiler builds it from a plan's ``[learner]`` table (``alpha.compiler.work_learn.
    learner_setup``), so the run-time learner never reads a plan.

    Attributes:
        model: the model (its hidden width, or None for linear, and the contract's dtype).
        seed: the seed of initial parameters and of the data's split.
        rate: the learning rate.
        batch: samples each contributor contributes per round.
        holdout: the share of the data set held out for evaluation.
        participants: the number of roles.
        optimizer: the optimizer and its constants.
        partition: what is partitioned among the roles (``"none"``, ``"optimizer"``,
            ``"gradients"``, ``"parameters"``).
        contributors: the logical contributors, or None: one per role.
        gpus: ``(role, GPU UUID)`` per GPU-bound role, ascending by role.
    """

    model: Model
    seed: int
    rate: float
    batch: int
    holdout: float
    participants: int
    optimizer: Optimizer = SGD
    partition: str = "none"
    contributors: int | None = None
    gpus: tuple[tuple[int, str], ...] = ()


LOGICAL_FANOUT = 2
"""The fan-out of the tree whose order folds logical contributors' contributions."""


def logical_tree(contributors: int) -> ParticipantTree:
    """The order logical contributors' contributions are folded in: the preorder tree of
    ``contributors`` nodes and fan-out :data:`LOGICAL_FANOUT`, whatever roles host them."""
    return ParticipantTree(contributors, LOGICAL_FANOUT)


def owned(setup: LearnerSetup, role: int) -> tuple[int, int]:
    """The parameter range ``role`` owns when the learner's state is partitioned: the
    parameters cut into contiguous ranges in role order, as checkpoints cut them."""
    return owner_ranges(setup.model.size, setup.participants)[role]


def split_of(setup: LearnerSetup, digits: Dataset) -> Split:
    """The split of the data set into contributor shards and the held-out part."""
    shards = setup.contributors or setup.participants
    return split(digits, participants=shards, holdout=setup.holdout, seed=setup.seed)


@dataclass
class LearnerState:
    """What one role's learner operations need: the model, its data, the plan's numbers, and
    the optimizer with its state.

    ``optimizer_state`` is the optimizer's live state (built at its initial value when not
    given: zero moments, running products 1); a resumed role replaces it with
    ``OptimizerState.restore``. ``first_round`` is the round the role's first loop iteration
    is: the schedule's loop index ``i`` is round ``first_round + i``, which chooses each batch
    (``batch_indices``) and is what ``observe`` records, so a role resumed at round ``k``
    continues the uninterrupted run's batches.

    ``progress_path``, when set, is the file ``observe`` appends each round's record to
    (``docs/progress.md``): a participant's is ``progress/role-000000.jsonl`` beside its
    artifact, where the launcher reads it as it grows; the replicated learner has none.
    """

    model: Model
    seed: int
    rate: float
    batch: int
    participants: int
    x: npt.NDArray[np.generic]
    labels: npt.NDArray[np.unsignedinteger]
    holdout_x: npt.NDArray[np.generic] | None = None
    holdout_labels: npt.NDArray[np.unsignedinteger] | None = None
    history: list[tuple[int, float, float, float]] = field(default_factory=list)
    gpu: GpuContributor | None = None
    gpu_uuid: str | None = None
    optimizer: Optimizer = SGD
    optimizer_state: OptimizerState = field(init=False)
    first_round: int = 0
    start_parameters: npt.NDArray[np.floating] | None = None  # a resumed role's, for init
    partition: str = "none"
    own: tuple[int, int] | None = None  # with a partition: the parameter range this role owns
    contributors: int | None = None  # the plan's logical contributors, if it names them
    hosted: tuple[int, ...] = ()  # with contributors: those this role computes
    hosted_data: list[tuple[npt.NDArray[np.generic], npt.NDArray[np.unsignedinteger]]] = field(
        default_factory=list
    )
    divisor: int = DIGITS_MAX_PIXEL  # what x is divided by for the inputs (features())
    progress_path: str | None = None
    saver: Saver | None = field(default=None, repr=False, compare=False)
    _progress: RecordWriter | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.optimizer_state = OptimizerState.initial(
            self.optimizer, self.state_size, self.model.dtype
        )

    @property
    def samples(self) -> int:
        """Samples one round's combined gradient sums over: ``batch`` per contributor."""
        return self.batch * (self.contributors or self.participants)

    @property
    def state_size(self) -> int:
        """Parameters the optimizer's state covers here: all, or the owned range's."""
        if self.own is None:
            return self.model.size
        return self.own[1] - self.own[0]

    @classmethod
    def for_role(
        cls, setup: LearnerSetup, digits: Dataset, role: int, parts: Split | None = None
    ) -> LearnerState:
        """Role ``role``'s learner; ``parts`` is ``split_of(setup, digits)`` when the caller
        builds many roles (the split is the same for all of them)."""
        parts = parts or split_of(setup, digits)
        hosted: tuple[int, ...] = ()
        if setup.contributors is None:
            x, labels = parts.shard(role)
        else:
            hosted = tuple(range(*owner_ranges(setup.contributors, setup.participants)[role]))
            x, labels = parts.train_x[:0].copy(), parts.train_labels[:0].copy()
        state = cls(
            model=setup.model,
            seed=setup.seed,
            rate=setup.rate,
            batch=setup.batch,
            participants=setup.participants,
            x=x,
            labels=labels,
            divisor=digits.divisor,
            optimizer=setup.optimizer,
            partition=setup.partition,
            own=None if setup.partition == "none" else owned(setup, role),
            contributors=setup.contributors,
            hosted=hosted,
            hosted_data=[parts.shard(k) for k in hosted],
        )
        if role == 0:
            state.holdout_x = parts.holdout_x
            state.holdout_labels = parts.holdout_labels
        state.gpu_uuid = dict(setup.gpus).get(role)
        return state

    def release(self) -> None:
        """Let go of the GPU, if one is attached (see ``GpuContributor.close``), and close the
        progress file."""
        if self.gpu is not None:
            self.gpu.close()
            self.gpu = None
        if self._progress is not None:
            self._progress.close()
            self._progress = None

    def init(self, w: npt.NDArray[np.floating]) -> None:
        """The parameters before the first round: the seed's, or a resumed role's start."""
        if self.start_parameters is not None:
            w[...] = self.start_parameters
        else:
            w[...] = initial_parameters(self.model, self.seed)

    def contribute(
        self, w: npt.NDArray[np.floating], g: npt.NDArray[np.floating], round: int
    ) -> None:
        chosen = batch_indices(len(self.labels), self.batch, self.first_round + round)
        x = features(self.x[chosen], self.model.dtype, self.divisor)
        if self.gpu is not None:
            g[...] = self.gpu.contribute(w, x, self.labels[chosen])
        else:
            g[...] = contribute(self.model, w, x, self.labels[chosen])

    def update(self, w: npt.NDArray[np.floating], g: npt.NDArray[np.floating]) -> None:
        """One optimizer step of ``w`` (and of the optimizer's state) from the total ``g``:
        the whole vector, or with a partition only the owned range (the others' owners step
        theirs, and the run gathers them: ``docs/learner.md``)."""
        batch = self.samples
        if self.own is None:
            self.optimizer_state.step(w, g, rate=self.rate, batch=batch)
            return
        start, stop = self.own
        # With partitioned parameters ``w`` is the role's own store (``p``), its range first.
        part = w[: stop - start] if self.partition == "parameters" else w[start:stop]
        state = self.optimizer_state
        state.step_range(part, g[start:stop], 0, stop - start, rate=self.rate, batch=batch)
        state.advance()

    def contribute_logical(
        self, w: npt.NDArray[np.floating], c: npt.NDArray[np.floating], round: int
    ) -> None:
        """With logical contributors: each hosted contributor ``k``'s contribution into row
        ``k`` of ``c`` (the contributions of every contributor, one after another)."""
        width = self.model.contribution_size
        for k, (data, labels) in zip(self.hosted, self.hosted_data, strict=True):
            chosen = batch_indices(len(labels), self.batch, self.first_round + round)
            x = features(data[chosen], self.model.dtype, self.divisor)
            row = c[k * width : (k + 1) * width]
            if self.gpu is not None:
                row[...] = self.gpu.contribute(w, x, labels[chosen])
            else:
                row[...] = contribute(self.model, w, x, labels[chosen])

    def fold_logical(self, c: npt.NDArray[np.floating], g: npt.NDArray[np.floating]) -> None:
        """Role 0, with logical contributors: ``g`` := every contributor's row of ``c``
        folded in the logical tree's order (:func:`logical_tree`), whoever computed it."""
        assert self.contributors is not None
        width = self.model.contribution_size
        tree = logical_tree(self.contributors)
        g[...] = ordered_sum(tree, lambda k: c[k * width : (k + 1) * width])

    def keep_own(self, w: npt.NDArray[np.floating], p: npt.NDArray[np.floating]) -> None:
        """Partitioned parameters: keep the owned range of the whole ``w`` in the store ``p``."""
        assert self.own is not None
        start, stop = self.own
        p[: stop - start] = w[start:stop]

    def load_own(self, w: npt.NDArray[np.floating], p: npt.NDArray[np.floating]) -> None:
        """Partitioned parameters: put the store's range back into its place in ``w``."""
        assert self.own is not None
        start, stop = self.own
        w[start:stop] = p[: stop - start]

    def observe(
        self, w: npt.NDArray[np.floating], g: npt.NDArray[np.floating], round: int, role: int
    ) -> None:
        size = self.model.size
        samples = self.samples
        loss = float(g[size]) / samples
        train = float(g[size + 1]) / samples
        held = float("nan")
        if self.holdout_x is not None and self.holdout_labels is not None:
            x = features(self.holdout_x, self.model.dtype, self.divisor)
            held = evaluate(self.model, w, x, self.holdout_labels)
        round = self.first_round + round
        self.history.append((round, loss, train, held))
        print(
            f"role {role}: round {round + 1} loss {loss:.6f} train-accuracy {train:.4f} "
            f"holdout-accuracy {held:.4f}",
            file=sys.stderr,
            flush=True,
        )
        if self.progress_path is not None:
            self._record(RoundRecord(round + 1, loss, train, held), role)
        if not math.isfinite(loss):
            # Recorded first, so the launcher sees the round the run stopped at.
            raise LossNotFinite(role=role, round=round + 1, loss=loss)

    def save(self, w: npt.NDArray[np.floating], k: npt.NDArray[Any], round: int) -> None:
        """A generation round (the schedule's ``save``): write this role's ranges of the state
        after ``round`` (of this launch) and its owner manifest's digest into ``k``
        (``alpha.learner.saving.Saver.save``)."""
        self._saver().save(w, k, self.first_round + round + 1)

    def publish(self, k: npt.NDArray[Any], round: int) -> None:
        """Role 0, once every owner's digest is in ``k``: publish the generation
        (``alpha.learner.saving.Saver.publish_round``)."""
        self._saver().publish_round(k, self.first_round + round + 1)

    def _saver(self) -> Saver:
        if self.saver is None:
            raise ArtifactInvalid(
                "its schedule publishes checkpoint generations, but its artifact names no "
                "checkpoint folder; recompile it"
            )
        return self.saver

    def record_checkpoint(self, round: int, generation: str, role: int) -> None:
        """Role 0: record that the generation ``generation`` of ``round`` was published and
        pointed at, for ``alpha run`` to say so while the run goes on (``docs/progress.md``)."""
        if self.progress_path is not None:
            self._record(CheckpointRecord(round, generation), role)

    def _record(self, record: RoundRecord | CheckpointRecord, role: int) -> None:
        """Append ``record`` to the progress file, made at the first round. The file only
        shows the run's progress (the log line above says the same), so a file that cannot be
        written is said once in the log and given up, and the run goes on."""
        assert self.progress_path is not None
        try:
            if self._progress is None:
                self._progress = RecordWriter(Path(self.progress_path))
            self._progress.write(record)
        except OSError as error:
            print(
                f"role {role}: progress: cannot write {self.progress_path}: "
                f"{error.strerror or error}; the log keeps the rounds",
                file=sys.stderr,
                flush=True,
            )
            self.progress_path = None
            if self._progress is not None:
                with contextlib.suppress(OSError):  # what it has not flushed is lost anyway
                    self._progress.close()
                self._progress = None


def state_specs(state: LearnerState) -> dict[str, tuple[tuple[int, ...], str]]:
    """Every array of the learner's state: name -> (shape, dtype): what a checkpoint holds of it
    (``alpha.learner.saving``) and what the compiler sizes (``docs/checkpoints.md``)."""
    dtype = state.model.dtype
    specs: dict[str, tuple[tuple[int, ...], str]] = {PARAMETERS: ((state.model.size,), dtype)}
    for name, length in state.optimizer.state_layout(state.model.size):
        specs[name] = ((length,), dtype)
    return specs
