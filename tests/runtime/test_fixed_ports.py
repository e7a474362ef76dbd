"""Edges whose port was fixed at compile time (roles started by ``srun``, docs/slurm.md):
nothing is announced or read from stdin, the listener binds its port, the connector retries
until the listener is up within the accept budget, and everything after the connection (the
hellos) is the same as on a relayed edge (``alpha.runtime.endpoint``)."""

from __future__ import annotations

import errno
import socket
from contextlib import AsyncExitStack

import pytest
import trio

from alpha.core.budgets import Budgets
from alpha.errors import BudgetExhausted, PortTaken, WrongFrame
from alpha.runtime.endpoint import Establishment, establish
from alpha.schedule.role import Edge, RoleDescription
from tests.support import IDENTITY

BUDGETS = Budgets(receive=2.0, accept=2.0, connect_attempts=3, connect_interval=0.05)
LISTENER = "127.0.0.2"  # a node's loopback address, as the test cluster gives them


class NoStdin(trio.abc.ReceiveStream):
    """A launcher's stdin that no fixed-port role may read: reading it fails the test."""

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        raise AssertionError("a role with fixed ports read its stdin")

    async def aclose(self) -> None:
        pass


def free_port(host: str = LISTENER) -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
        return port


def pair(port: int, budgets: Budgets = BUDGETS) -> tuple[RoleDescription, RoleDescription]:
    """Roles 0 and 1 of a pair whose edge listens on ``LISTENER:port``."""
    return tuple(  # type: ignore[return-value]
        RoleDescription(
            role=role,
            participants=2,
            identity=IDENTITY,
            edges=(Edge(1 - role, LISTENER, port=port),),
            budgets=budgets,
        )
        for role in (0, 1)
    )


async def establish_one(
    description: RoleDescription, announced: list[bytes], stack: AsyncExitStack
) -> Establishment:
    async def announce(data: bytes) -> None:
        announced.append(data)

    state = Establishment(description)
    try:
        await establish(description, stack, announce=announce, ports_in=NoStdin(), state=state)
    except BaseException:
        for channel in state.channels.values():  # a refused hello's, which no stack holds
            await channel.aclose()
        raise
    return state


async def test_a_fixed_port_edge_is_neither_announced_nor_relayed() -> None:
    port = free_port()
    low, high = pair(port)
    announced: list[bytes] = []
    async with AsyncExitStack() as stack:
        states: dict[int, Establishment] = {}

        async def run(description: RoleDescription, delay: float) -> None:
            await trio.sleep(delay)
            states[description.role] = await establish_one(description, announced, stack)

        async with trio.open_nursery() as nursery:
            # The connector first: it finds no listener and tries again until one is up.
            nursery.start_soon(run, high, 0.0)
            nursery.start_soon(run, low, 0.3)
        assert announced == [b"", b""]
        assert states[0].step == states[1].step == "established"
        listened = states[0].channels[1]
        assert listened.local_port == port
        assert states[1].channels[0].remote_port == port


async def test_a_port_another_socket_holds_is_port_taken() -> None:
    low, _ = pair(free_port())
    assert low.edges[0].port is not None
    with socket.socket() as squatter:
        squatter.bind((LISTENER, low.edges[0].port))
        squatter.listen(1)
        async with AsyncExitStack() as stack:
            with pytest.raises(PortTaken) as caught:
                await establish_one(low, [], stack)
    error = caught.value
    assert type(error) is PortTaken
    assert (error.role, error.peer, error.address, error.port) == (
        0,
        1,
        LISTENER,
        low.edges[0].port,
    )


async def test_a_port_an_earlier_connection_left_in_time_wait_is_taken_over() -> None:
    port = free_port()
    # A connection whose listening end closed first leaves that end's port in TIME_WAIT: an
    # earlier run's, whose listener set SO_REUSEADDR as every fixed-port listener does.
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((LISTENER, port))
        listener.listen(1)
        client = socket.create_connection((LISTENER, port))
        accepted, _ = listener.accept()
        accepted.close()  # the listening end closes first: TIME_WAIT on LISTENER:port
        client.close()
    with socket.socket() as plain, pytest.raises(OSError) as refused:
        plain.bind((LISTENER, port))
    assert refused.value.errno == errno.EADDRINUSE  # the state a run's listener meets
    low, high = pair(port)
    async with AsyncExitStack() as stack, trio.open_nursery() as nursery:
        nursery.start_soon(establish_one, low, [], stack)
        nursery.start_soon(establish_one, high, [], stack)


async def test_a_listener_that_never_comes_spends_the_accept_budget() -> None:
    quick = Budgets(receive=1.0, accept=0.4, connect_attempts=3, connect_interval=0.05)
    _, high = pair(free_port(), quick)
    async with AsyncExitStack() as stack:
        started = trio.current_time()
        with pytest.raises(BudgetExhausted) as caught:
            await establish_one(high, [], stack)
    error = caught.value
    assert type(error) is BudgetExhausted
    assert (error.role, error.peer, error.budget, error.seconds) == (1, 0, "accept", 0.4)
    assert "to listen at 127.0.0.2" in error.step
    # Many more tries than connect_attempts: the wait is bounded by time, not by count.
    assert trio.current_time() - started >= 0.4


async def test_a_stranger_on_a_fixed_port_is_refused_on_its_hello() -> None:
    port = free_port()
    low, _ = pair(port)
    async with AsyncExitStack() as stack, trio.open_nursery() as nursery:
        failures: list[BaseException] = []

        async def listen() -> None:
            try:
                await establish_one(low, [], stack)
            except WrongFrame as error:
                failures.append(error)

        nursery.start_soon(listen)
        await trio.sleep(0.2)
        stranger = await trio.open_tcp_stream(LISTENER, port)
        await stranger.send_all(b"GET / HTTP/1.0\r\n\r\n" + bytes(200))
        await trio.sleep(0.5)
        await stranger.aclose()
    assert [type(each) for each in failures] == [WrongFrame]
