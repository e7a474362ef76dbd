"""A payload's role description, parsed: the checks that need the role layer (and so numpy),
apart from :mod:`alpha.artifact.payload`, which an artifact's entry imports to check its
target before anything heavy."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from alpha.errors import ArtifactInvalid

if TYPE_CHECKING:
    from alpha.schedule.role import RoleDescription

__all__ = ["description_view", "payload_description"]


def payload_description(payload: Mapping[str, object], where: str) -> RoleDescription:
    """The payload's description, parsed.

    Raises:
        ArtifactInvalid: the description is not a valid role description, or describes another
            role than the payload's.
    """
    # Imported here: the role layer needs numpy, and the package face (which an artifact's
    # entry loads first, as its package) imports this module before the target is checked.
    from alpha.errors import RoleDescriptionInvalid
    from alpha.schedule.role import RoleDescription

    try:
        description = RoleDescription.from_dict(payload.get("description"))
    except RoleDescriptionInvalid as error:
        raise ArtifactInvalid(f"{where}: description: {error}") from None
    if description.role != payload.get("role"):
        raise ArtifactInvalid(
            f"{where}: description.role is {description.role}, but the payload is role "
            f"{payload.get('role')}"
        )
    return description


def description_view(
    payload: Mapping[str, object], where: str
) -> tuple[float | None, tuple[int, ...], tuple[int, ...]]:
    """The payload's description, parsed: its deadline (None: off), lower and higher peers.

    Raises:
        ArtifactInvalid: as :func:`payload_description`.
    """
    description = payload_description(payload, where)
    return (
        description.budgets.deadline,
        tuple(edge.peer for edge in description.lower),
        tuple(edge.peer for edge in description.higher),
    )
