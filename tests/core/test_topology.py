"""The participant tree: numbering, chunking, costs, certify, and refusals."""

from __future__ import annotations

import dataclasses
import itertools
import pickle
import random
import tracemalloc
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import alpha.core.topology as topology
from alpha.core.topology import MAX_ROLES, ParticipantTree, certify_cover, pair, star
from alpha.errors import (
    CoverageBroken,
    FanoutInvalid,
    RoleOutOfRange,
    TopologyError,
    TreeSizeInvalid,
)

# --- an independent brute-force builder ---------------------------------------------------


@dataclasses.dataclass
class Brute:
    """A whole tree, materialised: the reference the arithmetic is checked against."""

    parent: dict[int, int | None]
    children: dict[int, list[int]]
    size: dict[int, int]
    level: dict[int, int]


def brute_build(n: int, fanout: int) -> Brute:
    """Build the tree node by node.

    Independent of the module's arithmetic on purpose: chunk sizes come from dealing the d
    descendants round-robin into k bins (bin i gets ``len(range(i, d, k))``, which puts the
    larger bins first), and roles are numbered by an explicit depth-first traversal rather than
    by offsets. An explicit stack stands in for recursion so a chain of 5,000 does not hit the
    recursion limit.
    """
    parent: dict[int, int | None] = {}
    children: dict[int, list[int]] = {}
    size: dict[int, int] = {}
    level: dict[int, int] = {}
    next_role = 0
    stack: list[tuple[int, int | None]] = [(n, None)]
    while stack:
        subtree_size, up = stack.pop()
        role = next_role
        next_role += 1
        parent[role] = up
        children[role] = []
        size[role] = subtree_size
        level[role] = 0 if up is None else level[up] + 1
        if up is not None:
            children[up].append(role)
        d = subtree_size - 1
        k = min(fanout, d)
        bins = [len(range(i, d, k)) for i in range(k)]
        # Pushed last-first, so the first child is popped (and its subtree numbered) first.
        stack.extend((b, role) for b in reversed(bins))
    assert next_role == n
    return Brute(parent, children, size, level)


# --- worked examples -------------------------------------------------------------------


def test_thirteen_roles_fanout_three() -> None:
    tree = ParticipantTree(13, 3)
    assert tree.depth == 2
    assert [tree.children(r) for r in range(13)] == [
        (1, 5, 9),
        (2, 3, 4),
        (),
        (),
        (),
        (6, 7, 8),
        (),
        (),
        (),
        (10, 11, 12),
        (),
        (),
        (),
    ]
    assert [tree.parent(r) for r in range(13)] == [None, 0, 1, 1, 1, 0, 5, 5, 5, 0, 9, 9, 9]
    assert tree.subtree(5) == range(5, 9)
    assert tree.edges(5) == (0, 6, 7, 8)
    assert tree.path(7) == (0, 5, 7)
    assert tree.level(7) == 2
    assert tree.level_sizes() == (1, 3, 9)
    assert tree.is_leaf(12)
    assert not tree.is_leaf(9)


def test_twelve_roles_fanout_three_puts_the_larger_chunks_first() -> None:
    tree = ParticipantTree(12, 3)
    assert tree.child_ranges(0) == (range(1, 5), range(5, 9), range(9, 12))
    assert tree.children(9) == (10, 11)
    assert tree.level_sizes() == (1, 3, 8)


def test_single_role_tree() -> None:
    tree = ParticipantTree(1, 5)
    assert tree.depth == 0
    assert tree.parent(0) is None
    assert tree.children(0) == ()
    assert tree.edges(0) == ()
    assert tree.subtree(0) == range(0, 1)
    assert tree.path(0) == (0,)
    assert tree.level(0) == 0
    assert tree.level_sizes() == (1,)
    assert tree.is_leaf(0)
    assert tree.certify(0) is True


def test_chain_fanout_one() -> None:
    tree = ParticipantTree(6, 1)
    assert tree.depth == 5
    assert [tree.parent(r) for r in range(6)] == [None, 0, 1, 2, 3, 4]
    assert tree.children(2) == (3,)
    assert tree.edges(2) == (1, 3)
    assert tree.edges(5) == (4,)
    assert tree.subtree(2) == range(2, 6)
    assert tree.path(3) == (0, 1, 2, 3)
    assert tree.level(4) == 4
    assert tree.level_sizes() == (1,) * 6
    assert all(tree.certify(r) for r in range(6))


def test_a_billion_role_chain_answers_without_walking() -> None:
    tree = ParticipantTree(2_000_000_000, 1)
    assert tree.depth == 1_999_999_999
    assert tree.parent(1_999_999_999) == 1_999_999_998
    assert tree.children(7) == (8,)
    assert tree.level(123_456_789) == 123_456_789
    assert tree.subtree(1_999_999_998) == range(1_999_999_998, 2_000_000_000)


# --- star, pair, value semantics ---------------------------------------------------------


def test_star_is_a_one_level_participant_tree() -> None:
    tree = star(6)
    assert tree == ParticipantTree(6, 5)
    assert tree.depth == 1
    assert tree.children(0) == (1, 2, 3, 4, 5)
    assert all(tree.parent(r) == 0 for r in range(1, 6))
    assert tree.level_sizes() == (1, 5)


def test_star_of_one_and_two() -> None:
    assert star(1) == ParticipantTree(1, 1)
    assert star(1).depth == 0
    assert star(2) == pair()


def test_pair_is_two_roles_fanout_one() -> None:
    tree = pair()
    assert tree == ParticipantTree(2, 1)
    assert tree.edges(0) == (1,)
    assert tree.edges(1) == (0,)
    assert tree.depth == 1


def test_star_refuses_an_empty_tree() -> None:
    with pytest.raises(TreeSizeInvalid, match="got n=0"):
        star(0)


def test_star_refuses_a_non_int() -> None:
    with pytest.raises(TreeSizeInvalid, match="got n='5'"):
        star("5")  # type: ignore[arg-type]


def test_equality_and_hash_follow_n_and_fanout() -> None:
    a = ParticipantTree(200, 7)
    b = ParticipantTree(200, 7)
    assert a == b
    assert hash(a) == hash(b)
    assert a != ParticipantTree(200, 8)
    assert a != ParticipantTree(201, 7)
    assert {a: "x"}[b] == "x"
    assert repr(a) == "ParticipantTree(n=200, fanout=7)"


def test_tree_is_frozen() -> None:
    tree = ParticipantTree(10, 2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        tree.n = 11  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        tree.depth = 0  # type: ignore[misc]


# --- refusals ---------------------------------------------------------------------------


@pytest.mark.parametrize("n", [0, -1, -(2**40), MAX_ROLES + 1, True, False, 1.0, "3", None])
def test_bad_size_is_refused(n: object) -> None:
    with pytest.raises(TreeSizeInvalid) as info:
        ParticipantTree(n, 2)  # type: ignore[arg-type]
    assert f"got n={n!r}" in str(info.value)
    assert f"1 <= n <= {MAX_ROLES}" in str(info.value)


def test_max_roles_is_the_32_bit_role_width() -> None:
    assert MAX_ROLES == 2**32
    tree = ParticipantTree(MAX_ROLES, 64)
    assert tree.parent(MAX_ROLES - 1) is not None
    assert sum(tree.level_sizes()) == MAX_ROLES


@pytest.mark.parametrize("fanout", [0, -1, True, False, 2.0, "2", None])
def test_bad_fanout_is_refused(fanout: object) -> None:
    with pytest.raises(FanoutInvalid) as info:
        ParticipantTree(10, fanout)  # type: ignore[arg-type]
    assert f"got fanout={fanout!r}" in str(info.value)
    assert "int >= 1" in str(info.value)


def test_size_is_checked_before_fanout() -> None:
    with pytest.raises(TreeSizeInvalid):
        ParticipantTree(0, 0)


def test_errors_belong_to_the_topology_family() -> None:
    for cls in (TreeSizeInvalid, FanoutInvalid, RoleOutOfRange, CoverageBroken):
        assert issubclass(cls, TopologyError)


ROLE_QUERIES: list[Callable[[ParticipantTree, int], object]] = [
    ParticipantTree.parent,
    ParticipantTree.children,
    ParticipantTree.child_ranges,
    ParticipantTree.subtree,
    ParticipantTree.edges,
    ParticipantTree.path,
    ParticipantTree.level,
    ParticipantTree.is_leaf,
    ParticipantTree.certify,
]


@pytest.mark.parametrize("query", ROLE_QUERIES, ids=lambda q: q.__name__)
@pytest.mark.parametrize("role", [-1, 10, 2**40, True, False, 1.0, "3", None])
def test_bad_role_is_refused(query: Callable[[ParticipantTree, int], object], role: object) -> None:
    tree = ParticipantTree(10, 3)
    with pytest.raises(RoleOutOfRange) as info:
        query(tree, role)  # type: ignore[arg-type]
    assert f"got {role!r}" in str(info.value)
    assert "0..9" in str(info.value)


@pytest.mark.parametrize("query", ROLE_QUERIES, ids=lambda q: q.__name__)
def test_bad_role_is_refused_on_a_chain(query: Callable[[ParticipantTree, int], object]) -> None:
    # The chain takes a shortcut past the walk; the role check must still come first.
    with pytest.raises(RoleOutOfRange):
        query(ParticipantTree(4, 1), 4)


# --- the laws at n = 200,000, F = 64 -----------------------------------------------------


BIG = ParticipantTree(200_000, 64)


def test_two_hundred_thousand_roles_fanout_64_shape() -> None:
    assert BIG.depth == 3
    kids = BIG.children(0)
    assert len(kids) == 64
    sizes = [len(BIG.subtree(k)) for k in kids]
    assert sizes[:63] == [3_125] * 63
    assert sizes[63] == 3_124
    assert sum(BIG.level_sizes()) == 200_000
    assert len(BIG.level_sizes()) == BIG.depth + 1
    assert BIG.level_sizes()[:2] == (1, 64)


def test_every_role_of_two_hundred_thousand_has_at_most_f_plus_one_edges() -> None:
    limit = BIG.fanout + 1
    worst = max(len(BIG.edges(r)) for r in range(BIG.n))
    assert worst <= limit
    # The bound is met: an inner node below the root has a parent and F children.
    assert worst == limit


def test_certify_holds_on_the_first_and_last_subtree_at_every_level() -> None:
    role = 0
    while True:
        kids = BIG.children(role)
        assert BIG.certify(role) is True
        if not kids:
            break
        assert BIG.certify(kids[-1]) is True
        role = kids[0]


# --- the work bound ----------------------------------------------------------------------


def sample_roles(n: int) -> list[int]:
    rng = random.Random(n)
    return [0, 1, 2, n // 2, n - 2, n - 1, *(rng.randrange(n) for _ in range(200))]


@pytest.mark.parametrize(
    ("n", "fanout"),
    [(200_000, 64), (2_000_000_000, 64), (2_000_000_000, 2), (MAX_ROLES, 3)],
)
def test_queries_walk_at_most_depth_plus_one_levels(
    n: int, fanout: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = ParticipantTree(n, fanout)
    steps = 0
    real_descend = topology._descend

    def counted(start: int, size: int, f: int, role: int) -> tuple[int, int]:
        nonlocal steps
        steps += 1
        return real_descend(start, size, f, role)

    monkeypatch.setattr(topology, "_descend", counted)
    for role in sample_roles(n):
        located = tree._locate(role)
        assert len(located) <= tree.depth + 1
        assert located[-1][0] == role
        for query in ROLE_QUERIES:
            steps = 0
            query(tree, role)
            # Each step descends one level; the root is visited without a step.
            assert steps + 1 <= tree.depth + 1, query.__name__
        assert len(tree.children(role)) <= fanout
        assert len(tree.edges(role)) <= fanout + 1


def test_a_two_billion_role_tree_builds_nothing() -> None:
    tree = ParticipantTree(2_000_000_000, 64)
    tracemalloc.start()
    try:
        for role in sample_roles(tree.n):
            tree.parent(role)
            tree.children(role)
            tree.edges(role)
            tree.subtree(role)
            tree.path(role)
        tree.level_sizes()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # A built tree would need gigabytes; the walk needs a few small tuples at a time.
    assert peak < 256 * 1024


def test_depth_follows_the_first_child_chain() -> None:
    for n, fanout in [(2_000_000_000, 64), (MAX_ROLES, 2), (10**9 + 7, 70)]:
        tree = ParticipantTree(n, fanout)
        role, depth = 0, 0
        while kids := tree.children(role):
            role, depth = kids[0], depth + 1
        assert tree.depth == depth
        assert tree.level(role) == depth
        assert len(tree.level_sizes()) == depth + 1
        assert sum(tree.level_sizes()) == n


# --- agreement with the brute-force builder ---------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(min_value=1, max_value=5_000),
    fanout=st.integers(min_value=1, max_value=70),
    seed=st.integers(min_value=0, max_value=2**32),
)
def test_tree_agrees_with_brute_force(n: int, fanout: int, seed: int) -> None:
    tree = ParticipantTree(n, fanout)
    ref = brute_build(n, fanout)

    assert tree.depth == max(ref.level.values())
    levels = [0] * (tree.depth + 1)
    for lvl in ref.level.values():
        levels[lvl] += 1
    assert tree.level_sizes() == tuple(levels)

    if n <= 1_500:
        roles = list(range(n))
    else:
        rng = random.Random(seed)
        roles = sorted({0, n - 1, *(rng.randrange(n) for _ in range(400))})
    for role in roles:
        kids = tree.children(role)
        assert tree.parent(role) == ref.parent[role]
        assert list(kids) == ref.children[role]
        assert all(tree.parent(k) == role for k in kids)
        # Preorder: the subtree is one contiguous range.
        sub = tree.subtree(role)
        assert sub == range(role, role + ref.size[role])
        # Chunks: cover the subtree after role, sizes within one, larger first, <= F of them.
        chunks = tree.child_ranges(role)
        assert len(chunks) == min(fanout, len(sub) - 1) <= fanout
        assert [c.start for c in chunks] == list(kids)
        assert [r for c in chunks for r in c] == list(range(role + 1, sub.stop))
        chunk_sizes = [len(c) for c in chunks]
        assert chunk_sizes == sorted(chunk_sizes, reverse=True)
        assert not chunk_sizes or chunk_sizes[0] - chunk_sizes[-1] <= 1
        assert all(len(tree.subtree(k)) == s for k, s in zip(kids, chunk_sizes, strict=True))
        # Edges are symmetric and bounded.
        peers = tree.edges(role)
        assert list(peers) == sorted(peers)
        assert len(peers) <= fanout + 1
        assert all(role in tree.edges(p) for p in peers)
        # Paths and levels.
        path = tree.path(role)
        assert path[-1] == role
        assert tree.level(role) == ref.level[role] == len(path) - 1
        assert all(tree.parent(b) == a for a, b in itertools.pairwise(path))
        assert tree.is_leaf(role) == (not ref.children[role])
        assert tree.certify(role) is True


# --- certify_cover on claimed covers -----------------------------------------------------


def test_certify_cover_accepts_the_chunk_rule() -> None:
    assert certify_cover(range(0, 13), [range(1, 5), range(5, 9), range(9, 13)], 3) is True
    assert certify_cover(range(0, 12), [range(1, 5), range(5, 9), range(9, 12)], 3) is True
    assert certify_cover(range(4, 5), [], 3) is True
    assert certify_cover(range(4, 7), [range(5, 6), range(6, 7)], 9) is True


@pytest.mark.parametrize(
    ("parent", "children", "fanout", "why"),
    [
        pytest.param(range(0, 13), [range(1, 5), range(6, 9), range(9, 13)], 3, "gap", id="gap"),
        pytest.param(
            range(0, 13), [range(1, 5), range(4, 9), range(9, 13)], 3, "overlap", id="overlap"
        ),
        pytest.param(
            range(0, 12),
            [range(1, 4), range(4, 8), range(8, 12)],
            3,
            "larger chunks must come first",
            id="smaller-first",
        ),
        pytest.param(
            range(0, 13),
            [range(5, 9), range(1, 5), range(9, 13)],
            3,
            "where it must start",
            id="chunks-swapped",
        ),
        pytest.param(
            range(0, 13),
            [range(1, 4), range(4, 7), range(7, 10), range(10, 13)],
            3,
            "at most F=3",
            id="too-many-chunks",
        ),
        pytest.param(range(0, 11), [range(1, 6), range(6, 11)], 4, "required", id="too-few-chunks"),
        pytest.param(
            range(0, 13),
            [range(1, 6), range(6, 10), range(10, 13)],
            3,
            "differ by at most one",
            id="uneven-sizes",
        ),
        pytest.param(
            range(0, 13), [range(1, 5), range(5, 9), range(9, 12)], 3, "short-end", id="short"
        ),
        pytest.param(
            range(0, 12), [range(1, 5), range(5, 9), range(9, 13)], 3, "overrun", id="overrun"
        ),
        pytest.param(
            range(0, 13), [range(1, 5), range(5, 5), range(5, 13)], 3, "non-empty", id="empty-chunk"
        ),
        pytest.param(
            range(0, 7), [range(1, 7, 2), range(2, 7, 2)], 2, "step-1", id="strided-chunk"
        ),
        pytest.param(range(3, 4), [range(4, 5)], 2, "required", id="leaf-with-a-child"),
        pytest.param(range(3, 3), [], 2, "non-empty", id="empty-subtree"),
        pytest.param(range(0, 9, 2), [range(1, 3)], 2, "step-1", id="strided-subtree"),
    ],
)
def test_certify_cover_refuses_a_broken_cover(
    parent: range, children: list[range], fanout: int, why: str
) -> None:
    with pytest.raises(CoverageBroken) as info:
        certify_cover(parent, children, fanout)
    if why == "short-end":
        assert "end at role 11" in str(info.value)
        assert "ends at role 12" in str(info.value)
    elif why == "overrun":
        assert "end at role 12" in str(info.value)
        assert "ends at role 11" in str(info.value)
    elif why == "gap":
        assert "a gap before role 5" in str(info.value)
    elif why == "overlap":
        assert "an overlap at role 5" in str(info.value)
    else:
        assert why in str(info.value)


def test_certify_cover_refuses_a_bad_fanout() -> None:
    with pytest.raises(FanoutInvalid):
        certify_cover(range(0, 3), [range(1, 3)], 0)


@settings(max_examples=200, deadline=None)
@given(
    sizes=st.lists(st.integers(min_value=1, max_value=6), max_size=9),
    fanout=st.integers(min_value=1, max_value=8),
    start=st.integers(min_value=0, max_value=1_000),
)
def test_certify_cover_accepts_exactly_the_canonical_split(
    sizes: list[int], fanout: int, start: int
) -> None:
    # Any contiguous cover: certify must accept it exactly when it is the tree's own split.
    children = []
    first = start + 1
    for s in sizes:
        children.append(range(first, first + s))
        first += s
    parent = range(start, first)
    d = first - start - 1
    k = min(fanout, d)
    canonical = [len(range(i, d, k)) for i in range(k)]
    if sizes == canonical:
        assert certify_cover(parent, children, fanout) is True
    else:
        with pytest.raises(CoverageBroken):
            certify_cover(parent, children, fanout)


def test_certify_is_a_real_check_on_the_tree(monkeypatch: pytest.MonkeyPatch) -> None:
    # If the chunk arithmetic ever broke, certify must say so rather than trust it.
    tree = ParticipantTree(13, 3)
    assert tree.certify(0) is True
    monkeypatch.setattr(
        topology, "_chunks", lambda start, size, fanout: (range(1, 5), range(6, 9), range(9, 13))
    )
    with pytest.raises(CoverageBroken):
        tree.certify(0)


def test_tree_survives_pickling() -> None:
    # Trees are handed to worker processes; the derived depth must come back with them.
    tree = ParticipantTree(200_000, 64)
    back = pickle.loads(pickle.dumps(tree))
    assert back == tree
    assert back.depth == 3
