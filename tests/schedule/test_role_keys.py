"""A role description's sealing (issue 25, docs/roles.md): ``integrity``, ``payload_digest`` and
each edge's ``keys`` (``send``: this role to the peer, ``receive``: the peer to this role, 64
lowercase hex digits each) round-trip through JSON; a keyed description without keys, an unkeyed
one with keys, a key of the wrong length or spelling, an unknown integrity or payload digest are
each ``RoleDescriptionInvalid`` naming the field; and no repr shows a key."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from alpha.core.sealing import INTEGRITIES, KEY_SIZE, KEYED_INTEGRITY, PAYLOAD_DIGESTS
from alpha.errors import RoleDescriptionInvalid
from alpha.runtime.edge import edge_end
from alpha.schedule.role import Edge, RoleDescription
from alpha.wire.frame import KEYED_FORMAT_VERSION, Sealing
from tests.support import IDENTITY, raises_exactly

keys = st.binary(min_size=KEY_SIZE, max_size=KEY_SIZE)
SEND = bytes(range(KEY_SIZE))
RECEIVE = bytes(range(KEY_SIZE, 2 * KEY_SIZE))


def keyed_role(digest: str = "sha256") -> RoleDescription:
    """Role 1 of three on a chain 0-1-2, keyed."""
    return RoleDescription(
        role=1,
        participants=3,
        identity=IDENTITY,
        edges=(Edge(0, "127.0.0.1", SEND, RECEIVE), Edge(2, "127.0.0.2", RECEIVE, SEND)),
        integrity=KEYED_INTEGRITY,
        payload_digest=digest,
    )


def _refused(data: dict[str, Any], field: str) -> RoleDescriptionInvalid:
    error = raises_exactly(RoleDescriptionInvalid, RoleDescription.from_dict, data)
    assert str(error).startswith(field), (field, str(error))
    return error


@given(st.lists(st.tuples(keys, keys), min_size=2, max_size=2), st.sampled_from(PAYLOAD_DIGESTS))
def test_keys_integrity_and_payload_digest_round_trip(
    pairs: list[tuple[bytes, bytes]], digest: str
) -> None:
    edges = tuple(Edge(peer, "127.0.0.1", *pair) for peer, pair in zip((0, 2), pairs, strict=True))
    description = RoleDescription(
        role=1,
        participants=3,
        identity=IDENTITY,
        edges=edges,
        integrity=KEYED_INTEGRITY,
        payload_digest=digest,
    )
    data = description.to_dict()
    assert data["integrity"] == "hmac-sha256" and data["payload_digest"] == digest
    assert [entry["keys"] for entry in data["edges"]] == [  # type: ignore[index]
        {"send": send.hex(), "receive": receive.hex()} for send, receive in pairs
    ]
    again = RoleDescription.from_json(description.to_json())
    assert again == description and again.keyed
    assert [(e.send_key, e.receive_key) for e in again.edges] == pairs


@pytest.mark.parametrize("digest", PAYLOAD_DIGESTS)
def test_an_unkeyed_description_round_trips_without_keys(digest: str) -> None:
    description = RoleDescription(
        role=0,
        participants=2,
        identity=IDENTITY,
        edges=(Edge(1),),
        integrity="sha256",
        payload_digest=digest,
    )
    data = description.to_dict()
    assert "keys" not in data["edges"][0]  # type: ignore[index]
    assert RoleDescription.from_json(description.to_json()) == description
    assert not description.keyed


def test_the_edge_end_seals_each_direction_with_its_key() -> None:
    # What the runtime makes of a keyed description: role 1 sends to 0 under send, hears under
    # receive; the peer's own description holds the same two keys the other way round.
    end = edge_end(keyed_role("blake3"), keyed_role().edges[0])
    assert (end.outgoing, end.incoming) == (Sealing(SEND, "blake3"), Sealing(RECEIVE, "blake3"))
    assert end.outgoing.layout == KEYED_FORMAT_VERSION


# --- every refusal names its field -------------------------------------------------------------


def test_a_keyed_description_without_keys_is_refused() -> None:
    data = keyed_role().to_dict()
    del data["edges"][1]["keys"]  # type: ignore[index]
    error = _refused(data, "edges[peer=2]")
    assert "must carry its keys" in str(error)
    raises_exactly(
        RoleDescriptionInvalid,
        RoleDescription,
        1,
        3,
        IDENTITY,
        (Edge(0, "127.0.0.1", SEND, RECEIVE), Edge(2)),
        integrity=KEYED_INTEGRITY,
    )


@pytest.mark.parametrize("integrity", [None, "sha256"], ids=["absent", "sha256"])
def test_an_unkeyed_description_with_keys_is_refused(integrity: str | None) -> None:
    data = keyed_role().to_dict()
    if integrity is None:
        del data["integrity"]  # a description without the field is unkeyed (sha256)
    else:
        data["integrity"] = integrity
    error = _refused(data, "edges[peer=0]")
    assert "carries no keys" in str(error)


GOOD = SEND.hex()


@pytest.mark.parametrize(
    "text",
    [
        GOOD[:-2],  # 31 bytes
        GOOD + "00",  # 33 bytes
        "",
        GOOD.upper(),
        GOOD[:-1] + "A",
        GOOD[:-1] + "g",
        "0x" + GOOD[2:],
        " " + GOOD[1:],
        GOOD[:-1] + "\n",
        " ".join(GOOD[i : i + 2] for i in range(0, 64, 2)),  # bytes.fromhex would take it
        GOOD + "\n",
        " " + GOOD,
        1234,
        None,
        [GOOD],
    ],
    ids=lambda text: repr(text)[:24],
)
@pytest.mark.parametrize("name", ["send", "receive"])
def test_a_key_that_is_not_64_lowercase_hex_digits_is_refused(name: str, text: object) -> None:
    data = keyed_role().to_dict()
    data["edges"][0]["keys"][name] = text  # type: ignore[index]
    error = _refused(data, f"edges[peer=0].keys.{name}")
    assert "32 bytes in lowercase hex" in str(error)


@pytest.mark.parametrize(
    "keys_value",
    [{"send": GOOD}, {"receive": GOOD}, {"send": GOOD, "receive": GOOD, "other": GOOD}, [GOOD]],
    ids=["no-receive", "no-send", "a-third", "a-list"],
)
def test_keys_that_are_not_a_table_of_send_and_receive_are_refused(keys_value: object) -> None:
    data = keyed_role().to_dict()
    data["edges"][0]["keys"] = keys_value  # type: ignore[index]
    _refused(data, "edges[peer=0].keys")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("integrity", "hmac-md5"),
        ("integrity", "HMAC-SHA256"),
        ("integrity", ""),
        ("integrity", 3),
        ("payload_digest", "md5"),
        ("payload_digest", "BLAKE3"),
        ("payload_digest", None),
    ],
)
def test_an_unknown_integrity_or_payload_digest_is_refused(field: str, value: object) -> None:
    data = keyed_role().to_dict()
    data[field] = value
    error = _refused(data, field)
    if isinstance(value, str):
        known = INTEGRITIES if field == "integrity" else PAYLOAD_DIGESTS
        assert all(name in str(error) for name in known)  # what it could have been


@given(keys, keys)
def test_no_repr_shows_a_key(send: bytes, receive: bytes) -> None:
    edge = Edge(0, "127.0.0.1", send, receive)
    description = RoleDescription(
        1, 2, IDENTITY, (edge,), integrity=KEYED_INTEGRITY, payload_digest="blake3"
    )
    shown = [repr(edge), str(edge), repr(description), repr(Sealing(send, "blake3"))]
    shown += [repr(edge_end(description, edge))]
    for text in shown:
        for key in (send, receive):
            assert key.hex() not in text and repr(key) not in text
            assert key.hex()[:16] not in text
