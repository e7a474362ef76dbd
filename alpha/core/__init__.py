"""The values every role agrees on before a byte is sent: membership (values, and their text
grammar), the topology that derives each edge, the run identity and its digests, the numerical
contract with its one fold order, and budgets.

Pure code over values: no sockets, trio, os or pycuda. Everything above builds on it.
"""

from typing import TYPE_CHECKING

from alpha.faces import lazy

if TYPE_CHECKING:
    from alpha.core.budgets import (
        DEFAULT_BUDGETS,
        Budgets,
    )
    from alpha.core.combine import (
        Contract,
        fold_add,
        fold_into,
        fold_order,
        ordered_sum,
    )
    from alpha.core.digests import (
        CODE_BOUND_LEARNER_DOMAIN,
        CODE_DOMAIN,
        CONTRACT_DOMAIN,
        DELIVERIES,
        DTYPES,
        LEARNER_DOMAIN,
        OPERATIONS,
        TOPOLOGIES,
        bind_code,
        canonical_fanout,
        code_digest,
        contract_digest,
        learner_digest,
        membership_digest,
    )
    from alpha.core.identity import (
        DIGEST_SIZE,
        IDENTITY_PART_SIZE,
        IDENTITY_PARTS,
        IDENTITY_SIZE,
        RunIdentity,
    )
    from alpha.core.membership import (
        DEFAULT_INDEX_BUDGET,
        DIGEST_DOMAIN,
        MAX_EPOCH,
        MAX_IDENTITY_BYTES,
        MAX_ROLE,
        MAX_ROLES,
        ROLE_WIDTH,
        Join,
        ParticipantGroup,
        Repeat,
        Selection,
        Stride,
        group,
        join,
        repeat,
        stride,
    )
    from alpha.core.membership_text import (
        MAX_NUMBER_DIGITS,
        parse_group,
    )
    from alpha.core.targets import (
        HOSTS,
        TARGETS,
    )
    from alpha.core.topology import (
        ParticipantTree,
        certify_cover,
        pair,
        star,
    )

__all__ = [
    "CODE_BOUND_LEARNER_DOMAIN",
    "CODE_DOMAIN",
    "CONTRACT_DOMAIN",
    "DEFAULT_BUDGETS",
    "DEFAULT_INDEX_BUDGET",
    "DELIVERIES",
    "DIGEST_DOMAIN",
    "DIGEST_SIZE",
    "DTYPES",
    "HOSTS",
    "IDENTITY_PARTS",
    "IDENTITY_PART_SIZE",
    "IDENTITY_SIZE",
    "LEARNER_DOMAIN",
    "MAX_EPOCH",
    "MAX_IDENTITY_BYTES",
    "MAX_NUMBER_DIGITS",
    "MAX_ROLE",
    "MAX_ROLES",
    "OPERATIONS",
    "ROLE_WIDTH",
    "TARGETS",
    "TOPOLOGIES",
    "Budgets",
    "Contract",
    "Join",
    "ParticipantGroup",
    "ParticipantTree",
    "Repeat",
    "RunIdentity",
    "Selection",
    "Stride",
    "bind_code",
    "canonical_fanout",
    "certify_cover",
    "code_digest",
    "contract_digest",
    "fold_add",
    "fold_into",
    "fold_order",
    "group",
    "join",
    "learner_digest",
    "membership_digest",
    "ordered_sum",
    "pair",
    "parse_group",
    "repeat",
    "star",
    "stride",
]

__getattr__, __dir__ = lazy(
    __name__,
    {
        "alpha.core.budgets": (
            "DEFAULT_BUDGETS",
            "Budgets",
        ),
        "alpha.core.combine": (
            "Contract",
            "fold_add",
            "fold_into",
            "fold_order",
            "ordered_sum",
        ),
        "alpha.core.digests": (
            "CODE_BOUND_LEARNER_DOMAIN",
            "CODE_DOMAIN",
            "CONTRACT_DOMAIN",
            "DELIVERIES",
            "DTYPES",
            "LEARNER_DOMAIN",
            "OPERATIONS",
            "TOPOLOGIES",
            "bind_code",
            "canonical_fanout",
            "code_digest",
            "contract_digest",
            "learner_digest",
            "membership_digest",
        ),
        "alpha.core.identity": (
            "DIGEST_SIZE",
            "IDENTITY_PARTS",
            "IDENTITY_PART_SIZE",
            "IDENTITY_SIZE",
            "RunIdentity",
        ),
        "alpha.core.membership": (
            "DEFAULT_INDEX_BUDGET",
            "DIGEST_DOMAIN",
            "MAX_EPOCH",
            "MAX_IDENTITY_BYTES",
            "MAX_ROLE",
            "MAX_ROLES",
            "ROLE_WIDTH",
            "Join",
            "ParticipantGroup",
            "Repeat",
            "Selection",
            "Stride",
            "group",
            "join",
            "repeat",
            "stride",
        ),
        "alpha.core.membership_text": (
            "MAX_NUMBER_DIGITS",
            "parse_group",
        ),
        "alpha.core.targets": (
            "HOSTS",
            "TARGETS",
        ),
        "alpha.core.topology": (
            "ParticipantTree",
            "certify_cover",
            "pair",
            "star",
        ),
    },
)
