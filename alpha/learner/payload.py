"""A role's learner data inside its artifact: the JSON-able form, both ways."""

from __future__ import annotations

from alpha.errors import ArtifactInvalid
from alpha.learner.data import decode_shard, encode_shard
from alpha.learner.gpu import GpuContributor
from alpha.learner.model import Model
from alpha.learner.program import LearnerState

__all__ = ["attach_gpu", "learner_from_payload", "learner_payload"]


def learner_payload(state: LearnerState) -> dict[str, object]:
    """What a role's artifact carries of its learner: model, numbers, its shard, and (role 0)
    the held-out part it evaluates."""
    data: dict[str, object] = {
        "hidden": state.model.hidden,
        "dtype": state.model.dtype,
        "seed": state.seed,
        "rate": state.rate,
        "batch": state.batch,
        "participants": state.participants,
        "shard": encode_shard(state.pixels, state.labels),
    }
    if state.holdout_pixels is not None and state.holdout_labels is not None:
        data["holdout"] = encode_shard(state.holdout_pixels, state.holdout_labels)
    if state.gpu_uuid is not None:
        data["gpu"] = state.gpu_uuid
    return data


def learner_from_payload(data: object) -> LearnerState:
    """
    Raises:
        ArtifactInvalid: a field is missing or wrong, or a shard does not check.
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
        if not all(isinstance(v, int) for v in (seed, batch, participants)):
            raise ArtifactInvalid("learner: seed, batch and participants must be ints")
        if not isinstance(rate, float | int):
            raise ArtifactInvalid(f"learner: rate must be a number, got {rate!r}")
        pixels, labels = decode_shard(data["shard"])
        state = LearnerState(
            model=Model(hidden, dtype),
            seed=seed,
            rate=float(rate),
            batch=batch,
            participants=participants,
            pixels=pixels,
            labels=labels,
        )
        if "holdout" in data:
            state.holdout_pixels, state.holdout_labels = decode_shard(data["holdout"])
        uuid = data.get("gpu")
        if uuid is not None:
            if not isinstance(uuid, str):
                raise ArtifactInvalid(f"learner: gpu must be a GPU UUID, got {uuid!r}")
            state.gpu_uuid = uuid
    except KeyError as error:
        raise ArtifactInvalid(f"learner: missing field {error}") from None
    return state


def attach_gpu(state: LearnerState) -> None:
    """Open the GPU a role is bound to, in the participant's process.

    Raises:
        GpuUnavailable: PyCUDA, the driver or the bound device is missing; no host fallback.
    """
    if state.gpu_uuid is not None and state.gpu is None:
        state.gpu = GpuContributor(state.model, uuid=state.gpu_uuid)
