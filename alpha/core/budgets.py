"""Budgets: every wait a participant makes is bounded, and each bound has a name.

A budget that runs out raises :class:`alpha.errors.BudgetExhausted` naming the role, the peer,
the step and the budget. Defaults are documented in ``docs/budgets.md``; plans may set each.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Final, final

from alpha.checked import int_in
from alpha.errors import RoleDescriptionInvalid

__all__ = ["DEFAULT_BUDGETS", "Budgets"]


@final
@dataclass(frozen=True, slots=True)
class Budgets:
    """The named bounds of one participant's waits, in seconds (attempts for connect).

    Attributes:
        connect_attempts: connection attempts to a lower peer before giving up.
        connect_interval: pause between two attempts; attempts x interval bounds every attempt
            and all of them together.
        accept: the wait for a peer to come up on an edge: each higher peer to connect (each
            accept, not all together), and each lower peer's port on stdin (the launcher
            relays it once that peer announced; every role starts at once, so the peer may
            still be starting).
        receive: the wait for one whole frame, from the moment the role waits for it to its
            trailer; also a send the peer does not take, and the end of an edge.
        start: the wait for the first byte of the first frame on an edge after the hellos: the
            peer may still be waiting for other roles to come up (on a host with fewer cores
            than roles their start-ups share the cores), so this wait grows with the run and
            has its own bound.
        deadline: an optional bound on the whole session, from start to the last frame. None
            (the default) leaves it off: every wait is bounded by the budgets above, so a
            failed or silent peer is found without it, and a long training run is not cut
            short for being long.

    Raises:
        RoleDescriptionInvalid: a budget is not a positive finite number (attempts: an int of
            at least 1; deadline: also None).
    """

    connect_attempts: int = 100
    connect_interval: float = 0.1
    accept: float = 30.0
    receive: float = 30.0
    start: float = 120.0
    deadline: float | None = None

    def __post_init__(self) -> None:
        attempts = self.connect_attempts
        if not int_in(attempts, 1):
            raise RoleDescriptionInvalid(
                f"budgets.connect_attempts must be an int >= 1, got {attempts!r}"
            )
        for name in ("connect_interval", "accept", "receive", "start", "deadline"):
            value = getattr(self, name)
            if name == "deadline" and value is None:
                continue
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or value <= 0
            ):
                raise RoleDescriptionInvalid(
                    f"budgets.{name} must be a positive number of seconds, got {value!r}"
                )

    @property
    def connect(self) -> float:
        """The whole connect wait: attempts times interval."""
        return self.connect_attempts * self.connect_interval

    def to_dict(self) -> dict[str, float | None]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: object) -> Budgets:
        """
        Raises:
            RoleDescriptionInvalid: ``data`` is not a table of known budget names.
        """
        if not isinstance(data, dict):
            raise RoleDescriptionInvalid(f"budgets must be a table, got {data!r}")
        unknown = sorted(set(data) - set(cls.__dataclass_fields__))
        if unknown:
            raise RoleDescriptionInvalid(
                f"budgets.{unknown[0]} is not a budget; known: "
                f"{', '.join(cls.__dataclass_fields__)}"
            )
        return cls(**data)


DEFAULT_BUDGETS: Final = Budgets()
