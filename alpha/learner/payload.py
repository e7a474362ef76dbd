"""A role's learner data inside its artifact: the JSON-able form, both ways."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from alpha.errors import ArtifactInvalid, LearnerModuleInvalid
from alpha.learner.data import decode_shard, encode_shard
from alpha.learner.gpu import GpuContributor
from alpha.learner.model import Model
from alpha.learner.optimizer import OPTIMIZER_CONSTANTS, LearnerStateInvalid, Optimizer
from alpha.learner.program import from_source
from alpha.learner.saving import SegmentIO
from alpha.learner.state import LearnerState

__all__ = ["attach_gpu", "learner_from_payload", "learner_payload", "segment_from_payload"]


def learner_payload(state: LearnerState, segment: SegmentIO | None = None) -> dict[str, object]:
    """What a role's artifact carries of its learner: model, numbers, optimizer (its kind and
    constants), its shard, and (role 0) the held-out part it evaluates."""
    data: dict[str, object] = {
        "hidden": state.model.hidden,
        "dtype": state.model.dtype,
        "features": state.model.features,
        "classes": state.model.classes,
        "divisor": state.divisor,
        "seed": state.seed,
        "rate": state.rate,
        "batch": state.batch,
        "participants": state.participants,
        "optimizer": {"kind": state.optimizer.kind, **state.optimizer.constants},
        "partition": state.partition,
        "own": None if state.own is None else list(state.own),
        "contributors": state.contributors,
        "hosted": [
            {"contributor": k, "shard": encode_shard(x, labels)}
            for k, (x, labels) in zip(state.hosted, state.hosted_data, strict=True)
        ],
        # With logical contributors the role's data are its hosted contributors' shards.
        "shard": None if state.contributors is not None else encode_shard(state.x, state.labels),
    }
    if state.holdout_x is not None and state.holdout_labels is not None:
        data["holdout"] = encode_shard(state.holdout_x, state.holdout_labels)
    program = state.model.program
    if not program.builtin:
        # A user's module travels as its text: the participant runs it from the artifact,
        # never from a disk of its own (docs/learners.md).
        data["program"] = {"name": program.name, "source": program.source}
        data["options"] = [[name, value] for name, value in state.model.options]
    if state.gpu_uuid is not None:
        data["gpu"] = state.gpu_uuid
    if segment is not None:
        data["segment"] = segment.to_dict()
    return data


def segment_from_payload(data: object) -> SegmentIO | None:
    """The segment a learner's payload names (``docs/checkpoints.md``), or None.

    Raises:
        ArtifactInvalid: a field is missing or of the wrong type.
    """
    if not isinstance(data, dict) or data.get("segment") is None:
        return None
    raw = data["segment"]
    if not isinstance(raw, dict) or set(raw) != set(SegmentIO().to_dict()):
        raise ArtifactInvalid(f"learner: segment must hold {sorted(SegmentIO().to_dict())}")
    first, end, keep = raw["first"], raw["end"], raw["keep"]
    texts = [raw[key] for key in ("resume", "resume_sha256", "save", "nonce")]
    numbers = (first, end, keep)
    if not all(type(v) is int for v in numbers) or not (0 <= first < end and keep >= 1):
        raise ArtifactInvalid(f"learner: segment first/end/keep are wrong: {numbers!r}")
    if not all(value is None or isinstance(value, str) for value in texts):
        raise ArtifactInvalid("learner: segment paths, digest and nonce are strings or null")
    if (raw["resume"] is None) != (raw["resume_sha256"] is None) or (raw["save"] is None) != (
        raw["nonce"] is None
    ):
        raise ArtifactInvalid("learner: a segment's resume and save come with their digest/nonce")
    if not isinstance(raw["record"], str):
        raise ArtifactInvalid("learner: a segment's record is a string")
    every = raw["every"]
    if every is not None and (type(every) is not int or every < 1 or raw["save"] is None):
        raise ArtifactInvalid(
            f"learner: a segment's every is null or rounds >= 1 with a save: {every!r}"
        )
    return SegmentIO(
        first,
        end,
        raw["resume"],
        raw["resume_sha256"],
        raw["save"],
        raw["nonce"],
        keep,
        raw["record"],
        every,
    )


def learner_from_payload(data: object) -> LearnerState:
    """
    Raises:
        ArtifactInvalid: a field is missing or wrong (the optimizer included: an unknown kind,
            a constant missing, extra, not a number or out of range in the model's dtype), or
            a shard does not check.
    """
    if not isinstance(data, dict):
        raise ArtifactInvalid("learner: must be a table")
    try:
        hidden = data["hidden"]
        dtype = data["dtype"]
        seed, rate, batch, participants = (
            data["seed"],
            data["rate"],
            data["batch"],
            data["participants"],
        )
        if not (hidden is None or isinstance(hidden, int)) or dtype not in ("float32", "float64"):
            raise ArtifactInvalid(f"learner: bad model {hidden!r}, {dtype!r}")
        width, classes, divisor = data["features"], data["classes"], data["divisor"]
        if not all(type(v) is int and v >= 1 for v in (width, classes, divisor)):
            raise ArtifactInvalid("learner: features, classes and divisor must be ints >= 1")
        if not all(isinstance(v, int) for v in (seed, batch, participants)):
            raise ArtifactInvalid("learner: seed, batch and participants must be ints")
        if not isinstance(rate, float | int):
            raise ArtifactInvalid(f"learner: rate must be a number, got {rate!r}")
        optimizer = _optimizer_from(data["optimizer"])
        contributors = data["contributors"]
        if contributors is not None and (type(contributors) is not int or contributors < 1):
            raise ArtifactInvalid(f"learner: contributors must be null or >= 1: {contributors!r}")
        raw_hosted = data["hosted"]
        if not isinstance(raw_hosted, list) or (raw_hosted and contributors is None):
            raise ArtifactInvalid("learner: hosted contributors come with a contributor count")
        hosted = []
        for item in raw_hosted:
            k = item.get("contributor") if isinstance(item, dict) else None
            if type(k) is not int or contributors is None or not 0 <= k < contributors:
                raise ArtifactInvalid(f"learner: a hosted contributor is wrong: {item!r}")
            hosted.append((k, decode_shard(item.get("shard"))))
        partition, own = data["partition"], data["own"]
        if partition not in ("none", "optimizer", "gradients", "parameters") or (
            (own is None) != (partition == "none")
        ):
            raise ArtifactInvalid(f"learner: partition {partition!r} with range {own!r}")
        if own is not None and not (
            isinstance(own, list)
            and len(own) == 2
            and all(type(v) is int for v in own)
            and 0 <= own[0] < own[1]
        ):
            raise ArtifactInvalid(f"learner: an owned range is [start, stop), got {own!r}")
        x: npt.NDArray[np.generic]
        labels: npt.NDArray[np.unsignedinteger]
        if data["shard"] is None:
            if contributors is None:
                raise ArtifactInvalid("learner: a role without logical contributors has a shard")
            x, labels = np.zeros((0, width), np.uint8), np.zeros(0, np.uint16)
        else:
            x, labels = decode_shard(data["shard"])
        try:
            state = LearnerState(
                model=_model_from(data, hidden, dtype, width, classes),
                seed=seed,
                rate=float(rate),
                batch=batch,
                participants=participants,
                x=x,
                divisor=divisor,
                labels=labels,
                optimizer=optimizer,
                partition=partition,
                own=None if own is None else (own[0], own[1]),
                contributors=contributors,
                hosted=tuple(k for k, _ in hosted),
                hosted_data=[data for _, data in hosted],
            )
        except LearnerStateInvalid as error:  # a constant out of range in the model's dtype
            raise ArtifactInvalid(f"learner: {error}") from None
        if "holdout" in data:
            state.holdout_x, state.holdout_labels = decode_shard(data["holdout"])
        uuid = data.get("gpu")
        if uuid is not None:
            if not isinstance(uuid, str):
                raise ArtifactInvalid(f"learner: gpu must be a GPU UUID, got {uuid!r}")
            state.gpu_uuid = uuid
    except KeyError as error:
        raise ArtifactInvalid(f"learner: missing field {error}") from None
    return state


def _model_from(
    data: dict[str, object], hidden: int | None, dtype: str, features: int, classes: int
) -> Model:
    """The model a payload names: a shipped one (``hidden``), or the module it carries.

    Raises:
        ArtifactInvalid: the program or its options are malformed, or the module does not load.
    """
    raw = data.get("program")
    if raw is None:
        return Model.shipped(hidden, dtype, features, classes)
    if not isinstance(raw, dict) or set(raw) != {"name", "source"}:
        raise ArtifactInvalid("learner: program must be {name, source}")
    name, source = raw["name"], raw["source"]
    options = data.get("options")
    if not isinstance(name, str) or not isinstance(source, str) or not isinstance(options, list):
        raise ArtifactInvalid(
            "learner: a program's name and source are strings, its options a list"
        )
    pairs = []
    for entry in options:
        if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)):
            raise ArtifactInvalid(f"learner: an option is [name, value], got {entry!r}")
        value = entry[1]
        pairs.append((entry[0], tuple(value) if isinstance(value, list) else value))
    try:
        return Model(from_source(name, source), dtype, features, classes, tuple(pairs))
    except LearnerModuleInvalid as error:
        raise ArtifactInvalid(f"learner: {error}") from None


def _optimizer_from(data: object) -> Optimizer:
    """
    Raises:
        ArtifactInvalid: not a table of ``kind`` and exactly that kind's constants, each a
            number in its range.
    """
    if not isinstance(data, dict) or not isinstance(data.get("kind"), str):
        raise ArtifactInvalid(f"learner: optimizer must be a table with a kind, got {data!r}")
    kind = data["kind"]
    names = sorted(set(data) - {"kind"})
    wanted = OPTIMIZER_CONSTANTS.get(kind)
    if wanted is None or names != sorted(wanted):
        raise ArtifactInvalid(
            f"learner: optimizer {kind!r} with constants {names} is not one this Alpha runs"
        )
    values = {name: data[name] for name in wanted}
    if not all(isinstance(v, float | int) and not isinstance(v, bool) for v in values.values()):
        raise ArtifactInvalid(f"learner: optimizer constants must be numbers, got {values!r}")
    try:
        return Optimizer(kind, **{name: float(value) for name, value in values.items()})
    except LearnerStateInvalid as error:
        raise ArtifactInvalid(f"learner: {error}") from None


def attach_gpu(state: LearnerState) -> None:
    """Open the GPU a role is bound to, in the participant's process.

    Raises:
        GpuUnavailable: PyCUDA, the driver or the bound device is missing; no host fallback.
    """
    if state.gpu_uuid is not None and state.gpu is None:
        state.gpu = GpuContributor(state.model, uuid=state.gpu_uuid)
