"""``[contract] integrity`` and ``payload_digest`` (issue 25, docs/plans.md): both parse, with
``"hmac-sha256"`` and ``"sha256"`` the defaults; a bad value is ``PlanInvalid`` naming the field
with a did-you-mean as every plan field's; and the run identity differs for each choice (its
contract part: the learner and membership parts stay), so roles that seal frames differently
never take each other's frames."""

from __future__ import annotations

import itertools

import pytest

from alpha.app.compile import compiled_identity
from alpha.compiler.plan import Plan
from alpha.core.sealing import INTEGRITIES, PAYLOAD_DIGESTS
from alpha.errors import PlanInvalid
from tests.support import plan_of, raises_exactly


def _plan(**contract: object) -> Plan:
    return plan_of(
        "sealing",
        roles=3,
        rounds=2,
        topology={"shape": "tree", "fanout": 2},
        contract={"dtype": "float64", **contract},
        work={"kind": "sum-check", "size": 4},
    )


def test_the_defaults_are_keyed_with_sha256() -> None:
    plan = _plan()
    assert (plan.integrity, plan.payload_digest) == ("hmac-sha256", "sha256")


@pytest.mark.parametrize(
    ("integrity", "digest"), list(itertools.product(INTEGRITIES, PAYLOAD_DIGESTS))
)
def test_each_choice_parses(integrity: str, digest: str) -> None:
    plan = _plan(integrity=integrity, payload_digest=digest)
    assert (plan.integrity, plan.payload_digest) == (integrity, digest)


@pytest.mark.parametrize(
    ("key", "value", "near"),
    [
        ("integrity", "hmac-sha265", "hmac-sha256"),
        ("integrity", "sha-256", "sha256"),
        ("integrity", "HMAC-SHA256", None),
        ("integrity", "none", None),
        ("integrity", 256, None),
        ("payload_digest", "blake2", "blake3"),
        ("payload_digest", "sha265", "sha256"),
        ("payload_digest", "md5", None),
        ("payload_digest", True, None),
    ],
)
def test_a_bad_value_is_refused_naming_the_field(key: str, value: object, near: str) -> None:
    error = raises_exactly(PlanInvalid, _plan, **{key: value})
    assert error.field == f"contract.{key}"
    message = str(error)
    assert message.startswith(f"contract.{key}: must be one of ")
    for allowed in INTEGRITIES if key == "integrity" else PAYLOAD_DIGESTS:
        assert repr(allowed) in message
    if near is None:
        assert "did you mean" not in message
    else:
        assert message.endswith(f"did you mean {near!r}?")


def test_a_misspelt_key_of_the_table_is_told_the_closest_one() -> None:
    error = raises_exactly(PlanInvalid, _plan, integrty="sha256")
    assert error.field == "contract.integrty" and "did you mean 'integrity'?" in str(error)


def test_the_identity_differs_for_each_choice_in_its_contract_part_only() -> None:
    identities = {
        (integrity, digest): compiled_identity(_plan(integrity=integrity, payload_digest=digest))
        for integrity, digest in itertools.product(INTEGRITIES, PAYLOAD_DIGESTS)
    }
    assert len({identity.contract for identity in identities.values()}) == 4
    assert len({identity.learner for identity in identities.values()}) == 1
    assert len({identity.membership for identity in identities.values()}) == 1
    # the defaults are the keyed, SHA-256 choice, named or not
    assert compiled_identity(_plan()) == identities["hmac-sha256", "sha256"]
