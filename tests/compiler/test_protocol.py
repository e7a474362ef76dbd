"""The global protocol: every check's refusal, projection, and compactness."""

from __future__ import annotations

import json
import tracemalloc
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from alpha.compiler import (
    Choice,
    Combine,
    Dissemination,
    Everyone,
    Form,
    GroupRoles,
    Local,
    Protocol,
    Region,
    Repeat,
    Roles,
    Seq,
    Targets,
    Transfer,
    check,
    decode,
    encode,
    project,
    require_valid,
)
from alpha.compiler.work_sum_check import SUM_CHECK_OPERATIONS
from alpha.core.membership_text import parse_group
from alpha.core.topology import ParticipantTree
from alpha.errors import (
    ChoiceAuthorityInvalid,
    ChoiceUninformed,
    DisseminationInvalid,
    NoRealization,
    ParticipantOutOfRange,
    ProtocolFailure,
    ProtocolRejected,
    RepeatBoundExceeded,
    SelectorNotAtAuthority,
    SelfTransfer,
)
from alpha.schedule.local import Choose, Fold, Instruction, Loop, Op, Recv, Send

X = {"x": Region("x", "float32", 4)}


def protocol(body: Form, n: int = 7, fanout: int = 2, **extra: object) -> Protocol:
    fields: dict[str, object] = {"regions": X, "operations": SUM_CHECK_OPERATIONS, **extra}
    return Protocol(
        participants=n,
        tree=ParticipantTree(n, fanout),
        body=body,
        **fields,  # type: ignore[arg-type]
    )


def failures(body: Form, **extra: object) -> list[type[ProtocolFailure]]:
    return [type(f) for f in check(protocol(body, **extra))]


# --- each refusal ---------------------------------------------------------------------------


def test_a_valid_protocol_has_no_refusal() -> None:
    body = Repeat(
        3, 3, Seq((Local(Everyone(), "fill", "x"), Combine("x", "all", ParticipantTree(7, 2))))
    )
    assert check(protocol(body)) == []
    require_valid(protocol(body))


@pytest.mark.parametrize(
    ("body", "cls"),
    [
        (Transfer(0, 9, "x"), ParticipantOutOfRange),
        (Transfer(-1, 1, "x"), ParticipantOutOfRange),
        (Local(Roles((3, 8)), "fill", "x"), ParticipantOutOfRange),
        (
            Local(GroupRoles(parse_group("(group (stride 0 1 9))")), "fill", "x"),
            ParticipantOutOfRange,
        ),
        (Transfer(1, 1, "x"), SelfTransfer),
        (Repeat(5, 4, Local(Everyone(), "fill", "x")), RepeatBoundExceeded),
        (Local(Everyone(), "no_such_op", "x"), NoRealization),
        (Local(Everyone(), "parity", "x"), NoRealization),  # a selector is not a local op
        (Local(Everyone(), "fill", "y"), NoRealization),  # unknown region
        (Transfer(1, 4, "x"), NoRealization),  # 1 and 4 are not an edge of tree(7, 2)
        (Transfer(0, 1, "y"), NoRealization),
        (Combine("x", "all", ParticipantTree(7, 3)), NoRealization),  # not the contract's tree
    ],
)
def test_each_refusal(body: Form, cls: type[ProtocolFailure]) -> None:
    assert failures(body) == [cls]


def test_nested_repeats_multiply_and_overflow_is_refused() -> None:
    inner = Repeat(2**40, 2**40, Local(Everyone(), "fill", "x"))
    assert failures(Repeat(2**30, 2**30, inner)) == [RepeatBoundExceeded]
    assert failures(Repeat(2**20, 2**20, inner)) == []
    body = Repeat(4, 4, Repeat(4, 4, Local(Everyone(), "fill", "x")))
    assert failures(body, max_iterations=15) == [RepeatBoundExceeded]
    assert failures(body, max_iterations=16) == []


def test_an_operation_without_a_realization_for_a_target() -> None:
    from alpha.compiler import Operation

    ops = dict(SUM_CHECK_OPERATIONS)
    ops["gpu_only"] = Operation("gpu_only", "local", frozenset({"gpu"}))
    body = Local(Roles((2,)), "gpu_only", "x")
    refused = check(protocol(body, operations=ops))
    assert [type(f) for f in refused] == [NoRealization]
    assert "x86_64" in str(refused[0]) and "gpu_only" in str(refused[0])
    # Only the targets of the roles involved count.
    targets = Targets("x86_64", (("aarch64", (5,)),))
    ops["arm_only"] = Operation("arm_only", "local", frozenset({"aarch64"}))
    assert (
        check(protocol(Local(Roles((5,)), "arm_only", "x"), operations=ops, targets=targets)) == []
    )
    refused = check(
        protocol(Local(Roles((4, 5)), "arm_only", "x"), operations=ops, targets=targets)
    )
    assert [type(f) for f in refused] == [NoRealization]


def _choice(**changes: object) -> Choice:
    fields: dict[str, object] = {
        "authority": 0,
        "selector": "parity",
        "dissemination": Dissemination.tree(),
        "arm0": Local(Everyone(), "fill", "x"),
        "arm1": Local(Everyone(), "fill_neg", "x"),
    }
    fields.update(changes)
    return Choice(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("choice", "cls"),
    [
        (_choice(authority=7), ChoiceAuthorityInvalid),
        (_choice(authority=-1), ChoiceAuthorityInvalid),
        (_choice(selector="fill"), SelectorNotAtAuthority),  # a local op, not a selector
        (_choice(selector="coin"), SelectorNotAtAuthority),
        # Roles of tree(7, 2): 0 -> 1 (2, 3), 0 -> 4 (5, 6).
        (
            _choice(
                dissemination=Dissemination(
                    ((0, 1), (0, 4), (1, 2), (1, 3), (4, 5), (0, 4), (4, 6))
                ),
            ),
            DisseminationInvalid,  # 4 introduced twice
        ),
        (
            _choice(
                dissemination=Dissemination(((0, 1), (1, 2), (1, 3), (4, 5), (0, 4), (4, 6))),
            ),
            DisseminationInvalid,  # 4 relays before it has the word: 5 unreachable then
        ),
        (
            _choice(
                dissemination=Dissemination(((0, 1), (1, 2), (2, 3), (0, 4), (4, 5), (4, 6))),
            ),
            DisseminationInvalid,  # 2-3 is not an edge
        ),
        (_choice(authority=1), DisseminationInvalid),  # down the tree starts at the root
        (
            _choice(dissemination=Dissemination(((0, 1), (1, 2), (1, 3), (0, 4), (4, 5)))),
            ChoiceUninformed,  # 6 acts differently but is never told
        ),
    ],
)
def test_each_choice_refusal(choice: Choice, cls: type[ProtocolFailure]) -> None:
    assert failures(choice) == [cls]


def test_an_uninformed_role_that_acts_alike_is_fine() -> None:
    # Only role 2 differs between the arms, and it is told; 6 is not told and does the same.
    choice = _choice(
        dissemination=Dissemination(((0, 1), (1, 2))),
        arm0=Seq((Local(Everyone(), "fill", "x"), Local(Roles((2,)), "check_sum", "x"))),
        arm1=Seq((Local(Everyone(), "fill", "x"), Local(Roles((2,)), "check_neg_sum", "x"))),
    )
    assert failures(choice) == []
    refused = check(
        protocol(
            _choice(
                dissemination=Dissemination(((0, 1),)),
                arm0=Local(Roles((3, 6)), "fill", "x"),
                arm1=Local(Roles((3, 6)), "fill_neg", "x"),
            )
        )
    )
    assert [type(f) for f in refused] == [ChoiceUninformed]
    assert "3, 6" in str(refused[0])


def test_every_refusal_of_a_protocol_is_reported_together() -> None:
    body = Seq(
        (
            Transfer(0, 9, "x"),
            Transfer(2, 2, "x"),
            Repeat(9, 3, Local(Everyone(), "nope", "x")),
            _choice(authority=99),
        )
    )
    with pytest.raises(ProtocolRejected) as caught:
        require_valid(protocol(body))
    kinds = [type(f) for f in caught.value.failures]
    assert kinds == [
        ParticipantOutOfRange,
        SelfTransfer,
        RepeatBoundExceeded,
        NoRealization,
        ChoiceAuthorityInvalid,
    ]
    assert [f.form for f in caught.value.failures][:3] == ["body.0", "body.1", "body.2"]
    assert "5 problem(s)" in str(caught.value)


# --- projection -----------------------------------------------------------------------------


def test_a_combine_projects_to_receives_fold_send_and_delivery() -> None:
    proto = protocol(Combine("x"), n=7, fanout=2)
    slot = 1
    assert project(proto, 1).body == (
        Recv(2, "x#2", slot),
        Recv(3, "x#3", slot),
        Fold("x", ("x", "x#2", "x#3")),
        Send(0, "x", slot),
        Recv(0, "x", slot),
        Send(2, "x", slot),
        Send(3, "x", slot),
    )
    assert project(proto, 0).body == (
        Recv(1, "x#1", slot),
        Recv(4, "x#4", slot),
        Fold("x", ("x", "x#1", "x#4")),
        Send(1, "x", slot),
        Send(4, "x", slot),
    )
    assert project(proto, 6).body == (Send(4, "x", slot), Recv(4, "x", slot))
    one = protocol(Combine("x", "one"), n=7, fanout=2)
    assert project(one, 6).body == (Send(4, "x", slot),)


def test_every_child_of_a_node_is_a_structural_role_set() -> None:
    from alpha.compiler import Children

    tree = ParticipantTree(7, 2)
    body = Local(Children(tree, 1), "fill", "x")
    proto = protocol(body)
    assert check(proto) == []
    working = [role for role in range(7) if project(proto, role).body]
    assert working == [2, 3]
    big = ParticipantTree(2_000_000_000, 64)
    assert Children(big, 0).contains(big.children(0)[-1])
    assert not Children(big, 0).contains(big.children(0)[-1] + 1)
    refused = check(protocol(Local(Children(ParticipantTree(7, 3), 1), "fill", "x")))
    assert [type(f) for f in refused] == [ParticipantOutOfRange]


def test_each_role_receives_only_its_own_work() -> None:
    body = Seq((Transfer(0, 1, "x"), Local(Roles((3,)), "fill", "x"), Transfer(4, 5, "x")))
    proto = protocol(body)
    assert project(proto, 0).body == (Send(1, "x", 1),)
    assert project(proto, 1).body == (Recv(0, "x", 1),)
    assert project(proto, 3).body == (Op("fill", "x"),)
    assert project(proto, 5).body == (Recv(4, "x", 2),)
    assert project(proto, 2).body == ()


def test_the_arms_of_a_choice_use_different_slots() -> None:
    choice = _choice(arm0=Combine("x"), arm1=Combine("x"))
    schedule = project(protocol(choice), 4)
    (choose,) = schedule.body
    assert isinstance(choose, Choose)
    assert (choose.slot, choose.selector, choose.source, choose.forward) == (1, None, 0, (5, 6))
    slots0 = {ins.slot for ins in choose.arm0 if isinstance(ins, Send | Recv)}
    slots1 = {ins.slot for ins in choose.arm1 if isinstance(ins, Send | Recv)}
    assert slots0 == {2} and slots1 == {3}
    authority = project(protocol(choice), 0).body[0]
    assert isinstance(authority, Choose) and authority.selector == "parity"


def test_loops_stay_loops_and_schedules_do_not_grow_with_rounds() -> None:
    def size(rounds: int) -> int:
        body = Repeat(rounds, rounds, Seq((Local(Everyone(), "fill", "x"), Combine("x"))))
        return len(json.dumps(encode(project(protocol(body), 1))))

    assert size(200_000) - size(4) == len("200000") - len("4")
    body = Repeat(200_000, 200_000, Combine("x"))
    (loop,) = project(protocol(body), 3).body
    assert isinstance(loop, Loop) and loop.count == 200_000


def test_projecting_one_role_never_builds_the_tree() -> None:
    n = 2_000_000_000
    regular = Protocol(
        participants=n,
        tree=ParticipantTree(n, 64),
        regions=X,
        operations=SUM_CHECK_OPERATIONS,
        body=Repeat(200_000, 200_000, Seq((Local(Everyone(), "fill", "x"), Combine("x")))),
    )
    tracemalloc.start()
    try:
        assert check(regular) == []
        schedule = project(regular, 1_234_567_890)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, f"projecting one role allocated {peak} bytes"
    (loop,) = schedule.body
    assert isinstance(loop, Loop)


def test_schedules_round_trip_through_json() -> None:
    body = Repeat(
        3, 3, Seq((_choice(arm0=Combine("x"), arm1=Combine("x", "one")), Transfer(0, 1, "x")))
    )
    proto = protocol(body)
    for role in range(7):
        schedule = project(proto, role)
        assert decode(json.loads(json.dumps(encode(schedule)))) == schedule


# --- projections compose: every send meets its receive --------------------------------------


def _flatten(body: tuple[Instruction, ...], rounds: list[int], arm: dict[int, int]) -> list[object]:
    out: list[object] = []
    for ins in body:
        if isinstance(ins, Loop):
            for index in range(ins.count):
                rounds.append(index)
                out.extend(_flatten(ins.body, rounds, arm))
                rounds.pop()
        elif isinstance(ins, Choose):
            word = arm[rounds[0] if rounds else 0]
            if ins.source is not None:
                out.append(("recv", ins.source, ins.slot))
            out.extend(("send", peer, ins.slot) for peer in ins.forward)
            out.extend(_flatten(ins.arm1 if word else ins.arm0, rounds, arm))
        elif isinstance(ins, Send):
            out.append(("send", ins.peer, ins.slot))
        elif isinstance(ins, Recv):
            out.append(("recv", ins.peer, ins.slot))
    return out


@settings(max_examples=60, deadline=None)
@given(
    st.integers(2, 40),
    st.integers(1, 6),
    st.integers(1, 4),
    st.sampled_from(["none", "tree"]),
    st.sampled_from(["all", "one"]),
)
def test_every_send_meets_one_receive_in_order(
    n: int, fanout: int, rounds: int, choice: str, delivery: str
) -> None:
    round_form: Form = Seq((Local(Everyone(), "fill", "x"), Combine("x", delivery)))  # type: ignore[arg-type]
    if choice == "tree":
        round_form = _choice(
            arm0=round_form, arm1=Seq((Local(Everyone(), "fill_neg", "x"), Combine("x", delivery)))
        )  # type: ignore[arg-type]
    proto = protocol(Repeat(rounds, rounds, round_form), n=n, fanout=fanout)
    assert check(proto) == []
    arm = {r: r % 2 for r in range(rounds)}
    flows: Counter[tuple[int, int, int]] = Counter()
    sequences: dict[tuple[int, int], list[int]] = {}
    for role in range(n):
        for kind, peer, slot in _flatten(project(proto, role).body, [], arm):  # type: ignore[misc]
            if kind == "send":
                flows[(role, peer, slot)] += 1
                sequences.setdefault((role, peer), []).append(slot)
            else:
                flows[(peer, role, slot)] -= 1
                sequences.setdefault((peer, role, -1), []).append(slot)  # type: ignore[arg-type]
    assert all(count == 0 for count in flows.values()), "a send without its receive"
    for key, sent in sequences.items():
        if len(key) == 2:
            assert sequences[(*key, -1)] == sent, "both ends see one edge's frames in one order"  # type: ignore[index]
