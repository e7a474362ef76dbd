"""Generations within one launch, below the processes (docs/checkpoints.md): the steps the
protocol declares and each role's projection of them, what the identity binds, what an
artifact may carry, the progress record that says a generation was published, and the
publication that checks each owner's manifest against the digest its owner sent."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from alpha.app.run import _generation_rounds
from alpha.checkpoint.store import Part as StorePart
from alpha.checkpoint.store import open_generation, publish, staged_folder, write_shards
from alpha.compiler import check
from alpha.compiler.plan import Plan, Segment, parse_plan
from alpha.compiler.projection import project
from alpha.compiler.work import run_identity
from alpha.compiler.work_learn import learner_protocol
from alpha.errors import ArtifactInvalid, CheckpointCorrupt, ProgressRecordInvalid
from alpha.learner.payload import segment_from_payload
from alpha.learner.saving import SegmentIO
from alpha.records.progress import (
    MAX_ROUND,
    CheckpointRecord,
    RoundRecord,
    decode,
    encode,
)
from alpha.schedule.local import Loop, Op, Recv, Send
from tests.support import plans, raises_exactly

N = 7  # a tree of fan-out 2 with depth 2: subtrees of several roles travel up


def plan(rounds: int = 7, every: int | None = 3, *, save: bool = True) -> Plan:
    text = plans.plan_text(
        "within",
        roles=N,
        rounds=rounds,
        topology={"shape": "tree", "fanout": 2},
        work={"kind": "learn"},
        learner={"kind": "mlp", "hidden": 8, "batch": 8, "rate": 0.01, "seed": 5},
    )
    segment = Segment(
        save="/nowhere/ckpt" if save else None,
        nonce="abcdef01" if save else None,
        every=every,
    )
    return dataclasses.replace(parse_plan(text), segment=segment)


def flat(body: tuple[object, ...]) -> list[object]:
    out: list[object] = []
    for ins in body:
        out.append(ins)
        if isinstance(ins, Loop):
            out += flat(ins.body)
    return out


def test_the_protocol_declares_each_generation_within_the_run_and_checks() -> None:
    protocol = learner_protocol(plan(rounds=7, every=3))
    assert check(protocol) == []
    zero = project(protocol, 0)
    # Rounds 1-3 and 4-6 each end with a generation; round 7's is the commit point's.
    (groups,) = [ins for ins in zero.body if isinstance(ins, Loop) and ins.count == 2]
    assert isinstance(groups.body[0], Loop) and groups.body[0].count == 3
    assert [ins for ins in zero.body if isinstance(ins, Loop)][-1].count == 1
    steps = flat(zero.body)
    assert Op("save", "k") in steps and Op("publish", "k") in steps
    assert steps.index(Op("save", "k")) < steps.index(Op("publish", "k"))


@pytest.mark.parametrize("role", range(1, N))
def test_each_role_writes_then_sends_its_subtree_of_digests_to_its_parent(role: int) -> None:
    protocol = learner_protocol(plan())
    tree = protocol.tree
    steps = flat(project(protocol, role).body)
    assert Op("publish", "k") not in steps  # role 0 alone publishes
    region = project(protocol, role).region(f"k@{role}")
    below = tree.subtree(role)
    assert (region.dtype, region.of, region.offset, region.count) == (
        "uint8",
        "k",
        32 * below.start,
        32 * len(below),
    )
    save = steps.index(Op("save", "k"))
    (send,) = [s for s in steps if isinstance(s, Send) and s.region == f"k@{role}"]
    assert send.peer == tree.parent(role) and steps.index(send) > save
    # Every child's subtree arrives before the role sends its own up.
    for child in tree.children(role):
        (recv,) = [s for s in steps if isinstance(s, Recv) and s.region == f"k@{child}"]
        assert save < steps.index(recv) < steps.index(send)


def test_a_run_without_generations_within_it_has_one_loop_and_no_steps() -> None:
    for every in (None, 7, 9):
        steps = flat(project(learner_protocol(plan(rounds=7, every=every)), 0).body)
        assert [ins.count for ins in steps if isinstance(ins, Loop)] == [7]
        assert Op("save", "k") not in steps
    steps = flat(project(learner_protocol(plan(every=1, save=False)), 0).body)
    assert Op("save", "k") not in steps  # nothing is published without a folder


def test_the_identity_binds_how_often_a_launch_publishes() -> None:
    identities = {run_identity(plan(every=every)).encode() for every in (None, 1, 2, 3)}
    assert len(identities) == 4  # a role of another schedule refuses the others' hello


@pytest.mark.parametrize(
    ("first", "rounds", "every", "expected"),
    [
        (0, 7, 3, [3, 6, 7]),
        (0, 6, 3, [3, 6]),
        (2, 7, 2, [4, 6, 7]),
        (0, 3, None, [3]),
        (0, 3, 1, [1, 2, 3]),
    ],
)
def test_the_run_and_the_artifact_agree_on_the_generation_rounds(
    first: int, rounds: int, every: int | None, expected: list[int]
) -> None:
    assert _generation_rounds(first, rounds, every) == expected
    io = SegmentIO(first=first, end=rounds, save="/x", nonce="abcdef01", every=every)
    assert io.generation_rounds() == expected
    segment = Segment(first=first, save="/x", nonce="abcdef01", every=every)
    launched = dataclasses.replace(plan(rounds, every), segment=segment)
    steps = flat(project(learner_protocol(launched), 0).body)
    assert steps.count(Op("publish", "k")) == (1 if len(expected) > 1 else 0)


def _payload(**fields: object) -> dict[str, object]:
    segment = SegmentIO(save="/x", nonce="abcdef01", every=2).to_dict()
    return {"segment": {**segment, **fields}}


def test_an_artifact_names_every_with_a_save_or_not_at_all() -> None:
    io = segment_from_payload(_payload())
    assert io is not None and io.every == 2
    for wrong in ({"every": 0}, {"every": "2"}, {"every": True}, {"save": None, "nonce": None}):
        raises_exactly(ArtifactInvalid, segment_from_payload, _payload(**wrong))
    raw = _payload()
    del raw["segment"]["every"]  # type: ignore[attr-defined]
    raises_exactly(ArtifactInvalid, segment_from_payload, raw)


# --- the progress record of a published generation ------------------------------------------

NAMES = st.text(
    alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E, exclude_characters='"\\'),
    min_size=1,
    max_size=100,
)


@given(st.integers(1, MAX_ROUND), NAMES)
def test_a_checkpoint_record_reads_back_as_written(round: int, name: str) -> None:
    record = CheckpointRecord(round, name)
    line = encode(record)
    assert decode(line) == record and decode(line.rstrip(b"\n")) == record
    assert line.count(b"\n") == 1


@given(st.integers(1, MAX_ROUND), NAMES)
def test_a_checkpoint_record_in_another_spelling_is_refused(round: int, name: str) -> None:
    line = encode(CheckpointRecord(round, name))
    for other in (
        line.replace(b'", "round"', b'","round"'),
        line.replace(b'"kind": "checkpoint", ', b"").replace(b"}", b', "kind": "checkpoint"}'),
    ):
        raises_exactly(ProgressRecordInvalid, decode, other)


@pytest.mark.parametrize(
    "record",
    [
        CheckpointRecord(0, "gen"),
        CheckpointRecord(MAX_ROUND + 1, "gen"),
        CheckpointRecord(1, ""),
        CheckpointRecord(1, "a b"),
        CheckpointRecord(1, 'a"b'),
        CheckpointRecord(1, "é"),
        CheckpointRecord(1, "x" * 101),
    ],
)
def test_a_checkpoint_record_out_of_range_is_refused(record: CheckpointRecord) -> None:
    raises_exactly(ProgressRecordInvalid, encode, record)


def test_a_checkpoint_record_with_a_field_more_is_refused() -> None:
    raises_exactly(
        ProgressRecordInvalid,
        decode,
        b'{"kind": "checkpoint", "round": 1, "generation": "g", "loss": 0.5}',
    )
    # A round's record still reads as one.
    line = encode(RoundRecord(3, 0.5, 0.25, 0.125))
    assert decode(line) == RoundRecord(3, 0.5, 0.25, 0.125)


# --- publication checks each owner's manifest against what its owner sent -------------------

ARRAYS = {"w": ((10,), "float32")}


def _staged(folder: Path, owners: int = 2) -> list[str]:
    values = np.arange(10, dtype="float32")
    digests = []
    for owner, (start, stop) in enumerate([(0, 5), (5, 10)][:owners]):
        part = StorePart("w", values[start:stop], (10,), start)
        digests.append(write_shards(staged_folder(folder, 4, "abcdef01"), owner, [part]))
    return digests


def test_publication_names_the_generation_when_every_manifest_is_the_one_its_owner_sent(
    tmp_path: Path,
) -> None:
    digests = _staged(tmp_path)
    name, _ = publish(tmp_path, 4, "abcdef01", owners=2, arrays=ARRAYS, about={}, expect=digests)
    assert open_generation(tmp_path / name).round == 4


def test_publication_refuses_a_manifest_its_owner_did_not_send(tmp_path: Path) -> None:
    digests = _staged(tmp_path)
    sent = [digests[0], "0" * 64]  # owner 1's entry is not its manifest's digest
    raises_exactly(
        CheckpointCorrupt,
        publish,
        tmp_path,
        4,
        "abcdef01",
        owners=2,
        arrays=ARRAYS,
        about={},
        expect=sent,
    )
    assert staged_folder(tmp_path, 4, "abcdef01").is_dir()  # nothing was published
    assert not [p for p in tmp_path.iterdir() if not p.name.endswith(".staged")]
