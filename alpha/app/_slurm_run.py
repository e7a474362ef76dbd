"""``alpha run --slurm``: the Slurm allocation a run's attempts run in, and where each
attempt's roles go (``docs/slurm.md``).

:class:`Slurmed` holds the allocation across the run's attempts: the caller's (inside
``salloc`` or an ``sbatch`` script), or one it asked for with the ``--slurm-option`` words and
cancels when the run is over. Before each attempt :meth:`Slurmed.place` reads the job's
nodes from Slurm again and places the roles on them, its ports one block further into the
plan's range (:func:`alpha.launch.slurm.place`); the plan of that attempt carries the
placement, so its compile gives every edge its listener's node address and its fixed port,
and :func:`alpha.launch.slurm.srun_launch` starts it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from alpha.core.placement import DEFAULT_PORTS, PortRange
from alpha.launch.slurm import SLURM_DIR, Allocation, Placed, place, slurm_allocation

__all__ = ["Slurmed"]


@dataclass
class Slurmed:
    """The allocation of one ``alpha run --slurm`` (``words``: the ``--slurm-option`` words
    it was made with, none for the caller's), the plan's port range, and the placement of the
    attempt that runs now."""

    allocation: Allocation
    ports: PortRange = DEFAULT_PORTS
    words: tuple[str, ...] = ()
    placed: Placed | None = field(default=None, init=False)

    @classmethod
    def allocate(
        cls, words: tuple[str, ...], name: str, ports: PortRange | None, folder: Path
    ) -> Slurmed:
        """The caller's allocation, or a new one asked for with ``words``, whose salloc's
        messages go to the run ``folder``'s ``slurm/salloc.log``.

        Raises:
            SlurmUnavailable: no allocation and no words, words inside one, or Slurm's
                commands fail.
        """
        said = folder / SLURM_DIR / "salloc.log"
        if words:
            said.parent.mkdir(parents=True, exist_ok=True)
        return cls(slurm_allocation(words, name, said=said), ports or DEFAULT_PORTS, words)

    @property
    def options(self) -> tuple[str, ...]:
        """The options that run on Slurm again, as typed (for a go-on command)."""
        return ("--slurm", *(f"--slurm-option={word}" for word in self.words))

    def place(self, roles: int, attempt: int) -> Placed:
        """Where attempt ``attempt`` runs its ``roles`` roles, kept as :attr:`placed`.

        Raises:
            JobCancelled, JobTimeLimit, NodeUnreachable: Slurm ended the job.
            SlurmUnavailable: Slurm's commands fail.
        """
        self.placed = place(self.allocation, roles, attempt, self.ports)
        return self.placed

    def nodes(self, roles: int) -> list[str]:
        """The node of each role of the attempt that runs now, in role order."""
        assert self.placed is not None, "place() first"
        return [self.placed.node_of(role).name for role in range(roles)]

    def release(self) -> None:
        """The run is over: cancel the allocation when the run made it."""
        self.allocation.release()
