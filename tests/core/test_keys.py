"""The key schedule: HKDF-SHA256 against RFC 5869's vectors, the edge key's info byte for byte,
one key per edge and direction, the keys of a role's own edges only, and every refusal."""

from __future__ import annotations

import random
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from alpha.core.identity import DIGEST_SIZE, IDENTITY_SIZE
from alpha.core.keys import (
    EDGE_KEY_DOMAIN,
    EDGE_KEY_INFO_SIZE,
    EDGE_KEY_SIZE,
    HKDF_MAX_LENGTH,
    RUN_SECRET_SALT,
    RUN_SECRET_SIZE,
    draw_run_secret,
    edge_key,
    edge_key_info,
    hkdf,
    hkdf_expand,
    hkdf_extract,
    keys_for_role,
)
from alpha.core.membership import MAX_ROLE
from alpha.core.topology import ParticipantTree
from alpha.errors import KeyScheduleInvalid
from tests.support.errors import raises_exactly
from tests.support.imports import floors, reachable

# --- RFC 5869, Appendix A.1-A.3 (HKDF with SHA-256) ----------------------------------------------
# (IKM, salt, info, L, PRK, OKM), hex. Checked a second way with the `cryptography` package's
# HKDF, outside this suite (it is no dependency of alpha).
RFC5869 = {
    "A.1": (
        "0b" * 22,
        "000102030405060708090a0b0c",
        "f0f1f2f3f4f5f6f7f8f9",
        42,
        "077709362c2e32df0ddc3f0dc47bba6390b6c73bb50f9c3122ec844ad7c2b3e5",
        "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865",
    ),
    "A.2": (
        bytes(range(0x00, 0x50)).hex(),
        bytes(range(0x60, 0xB0)).hex(),
        bytes(range(0xB0, 0x100)).hex(),
        82,
        "06a6b88c5853361a06104c9ceb35b45cef760014904671014a193f40c15fc244",
        "b11e398dc80327a1c8e7f78c596a49344f012eda2d4efad8a050cc4c19afa97c"
        "59045a99cac7827271cb41c65e590e09da3275600c2f09b8367793a9aca3db71"
        "cc30c58179ec3e87c14c01d5c1f3434f1d87",
    ),
    "A.3": (
        "0b" * 22,
        "",
        "",
        42,
        "19ef24a32c717b167f33a91d6f648bdf96596776afdb6377ac434c1c293ccb04",
        "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8",
    ),
}


@pytest.mark.parametrize("case", sorted(RFC5869))
def test_hkdf_gives_rfc5869s_answers(case: str) -> None:
    ikm, salt, info, length, prk, okm = RFC5869[case]
    assert hkdf_extract(bytes.fromhex(salt), bytes.fromhex(ikm)).hex() == prk
    assert hkdf_expand(bytes.fromhex(prk), bytes.fromhex(info), length).hex() == okm
    assert hkdf(bytes.fromhex(ikm), bytes.fromhex(salt), bytes.fromhex(info), length).hex() == okm


def test_an_empty_salt_is_hashlen_zero_octets() -> None:
    ikm = bytes.fromhex(RFC5869["A.3"][0])
    assert hkdf_extract(b"", ikm) == hkdf_extract(bytes(DIGEST_SIZE), ikm)


@pytest.mark.parametrize("length", [0, 1, DIGEST_SIZE - 1, DIGEST_SIZE, DIGEST_SIZE + 1])
def test_expand_is_a_prefix_of_the_longest_output(length: int) -> None:
    prk = bytes.fromhex(RFC5869["A.1"][4])
    longest = hkdf_expand(prk, b"info", HKDF_MAX_LENGTH)
    assert len(longest) == HKDF_MAX_LENGTH == 255 * DIGEST_SIZE
    assert hkdf_expand(prk, b"info", length) == longest[:length]


@pytest.mark.parametrize("length", [HKDF_MAX_LENGTH + 1, 2**64, -1, True, 32.0, None])
def test_expand_refuses_a_length_outside_its_bound(length: object) -> None:
    prk = bytes.fromhex(RFC5869["A.1"][4])
    error = raises_exactly(KeyScheduleInvalid, hkdf_expand, prk, b"", length)
    assert str(HKDF_MAX_LENGTH) in str(error)


def test_expand_refuses_a_pseudorandom_key_shorter_than_the_hash() -> None:
    raises_exactly(KeyScheduleInvalid, hkdf_expand, bytes(DIGEST_SIZE - 1), b"", 32)
    assert len(hkdf_expand(bytes(DIGEST_SIZE), b"", 32)) == 32


@pytest.mark.parametrize("bad", [bytearray(32), memoryview(bytes(32)), "0" * 32, None, 0])
def test_hkdf_takes_bytes_only(bad: object) -> None:
    raises_exactly(KeyScheduleInvalid, hkdf_extract, bad, b"")
    raises_exactly(KeyScheduleInvalid, hkdf_extract, b"", bad)
    raises_exactly(KeyScheduleInvalid, hkdf_expand, bad, b"", 32)
    raises_exactly(KeyScheduleInvalid, hkdf_expand, bytes(32), bad, 32)


# --- the run secret ---------------------------------------------------------------------------


def test_a_run_secret_is_32_fresh_bytes_from_the_os() -> None:
    assert RUN_SECRET_SIZE == 32
    draws = set()
    for _ in range(8):
        # Seeding Python's generator the same way each time changes nothing: the secret is the
        # operating system's, never a seed's.
        random.seed(0)
        secret = draw_run_secret()
        assert type(secret) is bytes
        assert len(secret) == RUN_SECRET_SIZE
        draws.add(secret)
    assert len(draws) == 8


# --- the edge key: layout and known answers ------------------------------------------------------

SECRET = bytes(range(RUN_SECRET_SIZE))
WIRE_IDENTITY = bytes(range(0x40, 0x40 + IDENTITY_SIZE))

# edge_key(SECRET, WIRE_IDENTITY, sender, receiver), computed a second way with the `cryptography`
# package's HKDF (docs/security.md gives the same figures), so any machine can check its bytes.
KNOWN = {
    (0, 1): "ff80b938a8d5f1eda77aebaea23d7d7823fa9bfd588d647291aec480665f9281",
    (1, 0): "3ade822d3680a75eedc71029d1e6021d650e9b043af1c2aad73b37101290dc02",
}


def test_the_edge_key_has_its_known_answers() -> None:
    for (sender, receiver), key in KNOWN.items():
        assert edge_key(SECRET, WIRE_IDENTITY, sender, receiver).hex() == key


def test_the_info_is_domain_identity_sender_receiver_byte_for_byte() -> None:
    info = edge_key_info(WIRE_IDENTITY, 0x01020304, 0xA0B0C0D0)
    assert info == (
        b"alpha/edge-key/v1" + WIRE_IDENTITY + bytes.fromhex("01020304") + bytes.fromhex("a0b0c0d0")
    )
    assert len(info) == EDGE_KEY_INFO_SIZE == 17 + 96 + 4 + 4
    assert EDGE_KEY_DOMAIN == b"alpha/edge-key/v1"
    assert RUN_SECRET_SALT == b"alpha/run-secret/v1"
    # the largest role fills the 32-bit field, which is the width roles travel with in frames
    assert edge_key_info(WIRE_IDENTITY, MAX_ROLE, 0)[-8:] == struct.pack(">II", MAX_ROLE, 0)


def test_the_edge_key_is_hkdf_of_the_secret_under_the_salt_and_the_info() -> None:
    for sender, receiver in [(0, 1), (1, 0), (7, 3), (MAX_ROLE, 0)]:
        info = edge_key_info(WIRE_IDENTITY, sender, receiver)
        key = edge_key(SECRET, WIRE_IDENTITY, sender, receiver)
        assert key == hkdf(SECRET, RUN_SECRET_SALT, info, EDGE_KEY_SIZE)
        assert len(key) == EDGE_KEY_SIZE == 32


def test_fixed_width_roles_keep_1_23_apart_from_12_3() -> None:
    assert edge_key_info(WIRE_IDENTITY, 1, 23) != edge_key_info(WIRE_IDENTITY, 12, 3)
    assert edge_key(SECRET, WIRE_IDENTITY, 1, 23) != edge_key(SECRET, WIRE_IDENTITY, 12, 3)


# --- refusals -----------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [0, 1, RUN_SECRET_SIZE - 1, RUN_SECRET_SIZE + 1, 64])
def test_a_secret_of_another_size_is_refused(size: int) -> None:
    error = raises_exactly(KeyScheduleInvalid, edge_key, bytes(size), WIRE_IDENTITY, 0, 1)
    assert f"got {size}" in str(error)
    raises_exactly(KeyScheduleInvalid, keys_for_role, bytes(size), WIRE_IDENTITY, 0, (), (1,))


@pytest.mark.parametrize("bad", [bytearray(RUN_SECRET_SIZE), "k" * RUN_SECRET_SIZE, None])
def test_a_secret_that_is_not_bytes_is_refused(bad: object) -> None:
    raises_exactly(KeyScheduleInvalid, edge_key, bad, WIRE_IDENTITY, 0, 1)
    raises_exactly(KeyScheduleInvalid, keys_for_role, bad, WIRE_IDENTITY, 0, (), (1,))


@pytest.mark.parametrize("size", [0, DIGEST_SIZE, IDENTITY_SIZE - 1, IDENTITY_SIZE + 1])
def test_an_identity_that_is_not_96_bytes_is_refused(size: int) -> None:
    raises_exactly(KeyScheduleInvalid, edge_key, SECRET, bytes(size), 0, 1)
    raises_exactly(KeyScheduleInvalid, edge_key_info, bytes(size), 0, 1)
    raises_exactly(KeyScheduleInvalid, keys_for_role, SECRET, bytes(size), 0, (), (1,))


@pytest.mark.parametrize("bad", [-1, -(2**64), MAX_ROLE + 1, 2**64, True, False, 1.0, "1", None])
def test_a_role_outside_the_32_bit_range_is_refused(bad: object) -> None:
    raises_exactly(KeyScheduleInvalid, edge_key, SECRET, WIRE_IDENTITY, bad, 0 if bad != 0 else 1)
    raises_exactly(KeyScheduleInvalid, edge_key, SECRET, WIRE_IDENTITY, 0 if bad != 0 else 1, bad)
    raises_exactly(KeyScheduleInvalid, keys_for_role, SECRET, WIRE_IDENTITY, bad, (), ())
    raises_exactly(KeyScheduleInvalid, keys_for_role, SECRET, WIRE_IDENTITY, 5, (bad,), ())
    raises_exactly(KeyScheduleInvalid, keys_for_role, SECRET, WIRE_IDENTITY, 5, (), (bad,))


def test_the_role_range_ends_at_max_role() -> None:
    assert len(edge_key(SECRET, WIRE_IDENTITY, MAX_ROLE, MAX_ROLE - 1)) == EDGE_KEY_SIZE
    keys = keys_for_role(SECRET, WIRE_IDENTITY, MAX_ROLE, (0,), ())
    assert set(keys) == {(MAX_ROLE, 0), (0, MAX_ROLE)}


@pytest.mark.parametrize("role", [0, 5, MAX_ROLE])
def test_no_role_has_an_edge_to_itself(role: int) -> None:
    raises_exactly(KeyScheduleInvalid, edge_key, SECRET, WIRE_IDENTITY, role, role)


@pytest.mark.parametrize(
    ("lower", "higher"),
    [((5,), ()), ((6,), ()), ((), (5,)), ((), (4,)), ((), (6, 6)), ((3, 3), ())],
    ids=["lower-self", "lower-above", "higher-self", "higher-below", "higher-twice", "lower-twice"],
)
def test_a_peer_on_the_wrong_side_or_named_twice_is_refused(
    lower: tuple[int, ...], higher: tuple[int, ...]
) -> None:
    raises_exactly(KeyScheduleInvalid, keys_for_role, SECRET, WIRE_IDENTITY, 5, lower, higher)


def test_a_role_without_edges_has_no_key() -> None:
    assert keys_for_role(SECRET, WIRE_IDENTITY, 0, (), ()) == {}


def test_the_refusal_is_input_invalid_exit_2() -> None:
    error = raises_exactly(KeyScheduleInvalid, edge_key, bytes(3), WIRE_IDENTITY, 0, 1)
    assert isinstance(error, ValueError)
    assert error.exit_code == 2


# --- properties ---------------------------------------------------------------------------------

secrets_ = st.binary(min_size=RUN_SECRET_SIZE, max_size=RUN_SECRET_SIZE)
identities = st.binary(min_size=IDENTITY_SIZE, max_size=IDENTITY_SIZE)
roles = st.integers(0, MAX_ROLE)
edges = st.tuples(roles, roles).filter(lambda edge: edge[0] != edge[1])


@given(secrets_, identities, edges)
def test_the_key_is_deterministic_from_secret_identity_edge_and_direction(
    secret: bytes, identity: bytes, edge: tuple[int, int]
) -> None:
    sender, receiver = edge
    key = edge_key(secret, identity, sender, receiver)
    assert key == edge_key(bytes(secret), bytes(identity), sender, receiver)
    # both ends of the edge derive the same key for the same direction
    low, high = sorted(edge)
    assert keys_for_role(secret, identity, low, (), (high,))[sender, receiver] == key
    assert keys_for_role(secret, identity, high, (low,), ())[sender, receiver] == key


@given(st.lists(secrets_, min_size=2, max_size=2, unique=True), identities, edges)
def test_two_compiles_draw_two_secrets_and_get_other_keys(
    two: list[bytes], identity: bytes, edge: tuple[int, int]
) -> None:
    assert edge_key(two[0], identity, *edge) != edge_key(two[1], identity, *edge)


@given(secrets_, st.lists(identities, min_size=2, max_size=2, unique=True), edges)
def test_two_identities_get_other_keys(
    secret: bytes, two: list[bytes], edge: tuple[int, int]
) -> None:
    assert edge_key(secret, two[0], *edge) != edge_key(secret, two[1], *edge)


@given(secrets_, identities, st.lists(edges, min_size=2, max_size=2, unique=True))
def test_two_edges_or_directions_get_other_keys(
    secret: bytes, identity: bytes, two: list[tuple[int, int]]
) -> None:
    assert edge_key(secret, identity, *two[0]) != edge_key(secret, identity, *two[1])


@given(secrets_, identities, edges)
def test_the_two_directions_of_an_edge_get_other_keys(
    secret: bytes, identity: bytes, edge: tuple[int, int]
) -> None:
    sender, receiver = edge
    assert edge_key(secret, identity, sender, receiver) != edge_key(
        secret, identity, receiver, sender
    )


@given(secrets_, identities, st.integers(1, 64), st.integers(1, 8))
def test_a_tree_of_up_to_64_roles_gives_each_role_its_own_edges_and_no_shared_key(
    secret: bytes, identity: bytes, n: int, fanout: int
) -> None:
    tree = ParticipantTree(n, fanout)
    every: dict[tuple[int, int], bytes] = {}
    for role in range(n):
        parent = tree.parent(role)
        lower = () if parent is None else (parent,)
        keys = keys_for_role(secret, identity, role, lower, tree.children(role))
        # only the role's own edges, both directions
        own = {(role, peer) for peer in tree.edges(role)} | {(p, role) for p in tree.edges(role)}
        assert set(keys) == own
        for edge, key in keys.items():
            assert every.setdefault(edge, key) == key  # both ends agree
            assert key == edge_key(secret, identity, *edge)
    assert len(every) == 2 * (n - 1)
    assert len(set(every.values())) == len(every)  # no two edge directions share a key


# --- where it stands ----------------------------------------------------------------------------


def test_the_schedule_stands_on_the_identity_value_not_the_digests() -> None:
    # the frame codec keys its trailer with it: it must stay as cheap to import as the codec
    below = reachable("alpha.core.keys")
    assert below == {"alpha.core.identity", "alpha.core.membership", "alpha.checked"} | {
        "alpha.core.sealing",  # KEY_SIZE: the frame key and the edge key are one size
        "alpha.errors",
        "alpha.exitcodes",
    }
    assert floors("alpha.core.keys") == 4  # keys -> membership -> errors -> exitcodes
