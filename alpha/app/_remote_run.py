"""``alpha run --deploy``: where each attempt's roles run, and what an attempt on the nodes
does besides the launch (``docs/deploy.md``).

Before each attempt (the first included), :meth:`Deployed.place` asks every node the attempt
would use whether it answers (``ssh NODE true``, all at once) and puts the next free spare in
the place of one that does not, every role of that node moving to it; with no spare left, the
attempt runs without that node's roles where ``[recovery] lost_role = "drop"`` allows it, and
otherwise the run ends naming the node (:func:`alpha.launch.deploy.replace_gone`).

:class:`RemoteAttempt` is one attempt's launch on its nodes: the shared preparation of ``alpha
launch --deploy`` (:func:`alpha.launch.remote.prepare_nodes`: copies, what an earlier attempt
left on the nodes cleared, tunnels), role 0's progress records brought into the run folder as
they are written, and the reports and commit record brought back once the launch is over, so
that ``alpha run`` reads the attempt as it reads one on this host.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from alpha.launch.deploy import Deployment, Node, Placement, replace_gone
from alpha.launch.remote import ProgressMirror, Tunnels, gather_reports, prepare_nodes, probe_nodes
from alpha.records.folder import LOGS_DIR, REPORTS_DIR
from alpha.records.progress import progress_path

if TYPE_CHECKING:
    from alpha.launch.launcher import LaunchSpec

__all__ = ["MIRROR_LOG", "Deployed", "RemoteAttempt", "pod_ids"]

MIRROR_LOG = "ssh-progress.log"
"""The progress mirror's ssh stderr, in ``logs/`` (kept with the attempt's other logs)."""


def _roles(roles: Sequence[int]) -> str:
    return f"role{'s' if len(roles) > 1 else ''} {', '.join(str(role) for role in roles)}"


@dataclass
class Deployed:
    """The deployment of one ``alpha run --deploy`` across its attempts: the file as read,
    the ``--ssh-option`` words (``extra``), and where the roles run now (``placement``: the
    file's nodes at first, a spare in the place of each node found gone since)."""

    deployment: Deployment
    source: str
    extra: tuple[str, ...] = ()
    placement: Placement = field(init=False)

    def __post_init__(self) -> None:
        self.placement = Placement.of(self.deployment)

    @property
    def words(self) -> tuple[str, ...]:
        """The options that run on this deployment again, as typed (for a go-on command)."""
        return ("--deploy", self.source, *(f"--ssh-option={word}" for word in self.extra))

    def place(self, *, drop: bool, say: Callable[[str], None]) -> Placement:
        """Where the next attempt's roles run: every node in use asked at once whether it
        answers, and each that does not replaced by the next free spare (itself asked before
        it is used), or its roles dropped when ``drop``; each replacement is one line to
        ``say`` (``node node-1 does not answer (ssh: ...); spare spare-0 takes role 1``).

        Raises:
            NodeUnreachable: a node does not answer and no spare is left to take its roles
                (nor may they be dropped); the message names the node and says to add a spare.
        """
        placement = self.placement
        answers = probe_nodes(placement.in_use(), self.extra)
        while True:
            gone = [node for node in placement.in_use() if answers.get(node) is not None]
            if not gone:
                break
            node = gone[0]
            why = answers[node]
            assert why is not None
            replaced = replace_gone(placement, node, why, drop=drop, source=self.source)
            placement = replaced.placement
            if replaced.spare is not None:
                say(
                    f"node {node.pod_id} does not answer ({why}); spare {replaced.spare.pod_id} "
                    f"takes {_roles(replaced.roles)}"
                )
                answers.update(probe_nodes([replaced.spare], self.extra))
            else:
                say(
                    f"node {node.pod_id} does not answer ({why}) and no spare is left: the "
                    f"attempt runs on {len(placement.nodes)} role(s), without "
                    f"{_roles(replaced.roles)} (recovery.lost_role = 'drop')"
                )
        self.placement = placement
        return placement

    def attempt(
        self, directory: Path, interpreters: Mapping[str, Sequence[str]] | None
    ) -> RemoteAttempt:
        """The next attempt's launch on the nodes of :attr:`placement`."""
        return RemoteAttempt(
            self.deployment.placed(self.placement.nodes), directory, interpreters, self.extra
        )


def pod_ids(nodes: Sequence[Node]) -> list[str]:
    """The names of ``nodes``, as an attempt's record lists them."""
    return [node.pod_id for node in nodes]


@dataclass
class RemoteAttempt:
    """One attempt's launch on its nodes (``deployment``: node ``r`` runs role ``r``), for the
    run folder ``directory``: :meth:`prepare` before the launch, :meth:`start` as it starts,
    :meth:`finish` once every role has ended, :meth:`aclose` however it ended."""

    deployment: Deployment
    directory: Path
    interpreters: Mapping[str, Sequence[str]] | None
    extra: Sequence[str] = ()
    tunnels: Tunnels | None = None
    mirror: ProgressMirror | None = None

    def prepare(self, local: Sequence[LaunchSpec]) -> list[LaunchSpec]:
        """Copy the artifacts, clear what an earlier attempt left on the nodes, and return
        what to start for the roles ``local`` (this host's specs, checked).

        Raises:
            NodeUnreachable: a node cannot be reached or written; no role has started.
        """
        logs = self.directory / LOGS_DIR
        specs, self.tunnels = prepare_nodes(
            local, self.deployment, logs, self.interpreters, self.extra
        )
        self.mirror = ProgressMirror(
            self.deployment, progress_path(self.directory), logs / MIRROR_LOG, self.extra
        )
        return specs

    async def route(self, listener: int, connector: int, port: int) -> int:
        assert self.tunnels is not None, "prepare() first"
        return await self.tunnels.route(listener, connector, port)

    async def start(self) -> None:
        """Start bringing role 0's progress records into the run folder."""
        assert self.mirror is not None, "prepare() first"
        await self.mirror.start()

    async def finish(self, ended_well: bool) -> None:
        """The launch is over: every progress record brought in; when every role ended well,
        the reports and the commit record brought back into ``reports/``.

        Raises:
            NodeUnreachable: a node's reports cannot be read back.
        """
        if self.mirror is not None:
            await self.mirror.finish()
        if ended_well:
            folder = self.directory / REPORTS_DIR
            await trio.to_thread.run_sync(gather_reports, self.deployment, folder, self.extra)

    async def aclose(self) -> None:
        """End the progress mirror and every forward."""
        if self.mirror is not None:
            await self.mirror.stop()
        if self.tunnels is not None:
            await self.tunnels.aclose()
