"""The floors under the frame codec are cut (issue 23): the run identity's value imports the
errors only, the membership's values import nothing of their grammar, and the codec reaches
neither the digests nor the topology. Read from the sources (``tests.support.imports``)."""

from __future__ import annotations

import ast

import pytest

from tests.support.imports import ROOT, floors, imported, reachable

ERRORS = {"alpha.errors", "alpha.exitcodes"}


def test_the_identity_value_imports_the_errors_only() -> None:
    assert imported("alpha.core.identity", type_only=True) == {"alpha.errors"}
    assert reachable("alpha.core.identity") == ERRORS
    assert floors("alpha.core.identity") == 3  # identity -> errors -> exitcodes


def test_the_membership_values_import_nothing_of_their_grammar() -> None:
    assert "alpha.core.membership_text" not in reachable("alpha.core.membership")
    assert reachable("alpha.core.membership") == ERRORS
    assert "alpha.core.membership" in reachable("alpha.core.membership_text")


@pytest.mark.parametrize("module", ["alpha.wire.frame", "alpha.wire.send", "alpha.wire.receive"])
def test_the_frame_codec_needs_the_identity_value_not_the_digests(module: str) -> None:
    below = reachable(module)
    assert "alpha.core.identity" in below
    assert not below & {"alpha.core.digests", "alpha.core.topology", "alpha.core.membership_text"}
    # codec -> frame -> identity or membership -> errors -> exitcodes: five floors at most,
    # where the frame stood on six (frame, identity, digests, topology, membership, errors).
    assert floors(module) <= 5


def test_the_digests_stand_on_the_value_they_make() -> None:
    assert "alpha.core.identity" in imported("alpha.core.digests")
    assert "alpha.core.digests" not in reachable("alpha.core.identity")


@pytest.mark.parametrize(
    ("name", "home"),
    [
        ("DIGEST_SIZE", "alpha/core/identity.py"),
        ("DTYPES", "alpha/core/digests.py"),
        ("OPERATIONS", "alpha/core/digests.py"),
        ("HELLO_SLOT", "alpha/wire/frame.py"),
        ("COMPLETION_SLOT", "alpha/wire/frame.py"),
        ("ABORT_SLOT", "alpha/wire/frame.py"),
        ("ABORT_EXTENT", "alpha/wire/frame.py"),
        ("WORD_BYTES", "alpha/wire/frame.py"),
    ],
)
def test_each_constant_has_one_home(name: str, home: str) -> None:
    """Exactly one module of alpha/ assigns ``name`` at its top level; the others import it."""
    homes = []
    for path in sorted((ROOT / "alpha").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in tree.body:
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, ast.AnnAssign)
                else []
            )
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                homes.append(path.relative_to(ROOT).as_posix())
    assert homes == [home]
