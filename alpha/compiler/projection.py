"""Projection: the one global protocol, cut down to what one role does.

Each role receives only its own sends, receives and local work. Loops stay loops. Slots are
numbered once for the whole protocol (``slots``), in preorder of the forms that move frames
(transfers, combines, choices), from 1 (slot 0 is every edge's hello); so both ends of an edge
agree on a transfer's slot, and the two arms of a choice use different slots: a frame from the
other arm is refused on the first frame that crosses.

Projecting one role of a tree-structured plan costs the size of the plan times depth x fan-out:
a ``Combine`` asks the tree for the role's parent and children, a structural role set answers
membership along one path, and nothing visits every role.
"""

from __future__ import annotations

from alpha.compiler.forms import (
    Choice,
    Combine,
    Form,
    Local,
    Protocol,
    Repeat,
    Seq,
    Transfer,
    walk,
)
from alpha.core.combine import fold_order
from alpha.schedule.local import (
    Choose,
    Fold,
    Instruction,
    LocalSchedule,
    Loop,
    Op,
    Recv,
    Send,
)

__all__ = ["informed", "project", "project_form", "scratch_name", "slots"]


def slots(protocol: Protocol) -> dict[str, int]:
    """The slot of every frame-moving form, by its path, numbered from 1 in preorder."""
    numbered: dict[str, int] = {}
    for path, form in walk(protocol.body):
        if isinstance(form, Transfer | Combine | Choice):
            numbered[path] = len(numbered) + 1
    return numbered


def scratch_name(region: str, child: int) -> str:
    """The buffer a combine receives ``child``'s partial sum of ``region`` into."""
    return f"{region}#{child}"


def informed(
    protocol: Protocol, choice: Choice, role: int
) -> tuple[bool, int | None, tuple[int, ...]]:
    """Whether ``role`` learns ``choice``'s word, from whom, and whom it relays it to."""
    if choice.dissemination.along_tree:
        tree = protocol.tree
        return True, tree.parent(role), tree.children(role)
    edges = choice.dissemination.edges
    forward = tuple(b for a, b in edges if a == role)
    if role == choice.authority:
        return True, None, forward
    sources = [a for a, b in edges if b == role]
    if not sources:
        return False, None, ()
    return True, sources[0], forward


def project_form(
    protocol: Protocol, form: Form, role: int, path: str, numbered: dict[str, int]
) -> tuple[Instruction, ...]:
    """The instructions ``form`` (at ``path``) leaves ``role``."""
    if isinstance(form, Transfer):
        if role == form.src:
            return (Send(form.dst, form.region, numbered[path]),)
        if role == form.dst:
            return (Recv(form.src, form.region, numbered[path]),)
        return ()
    if isinstance(form, Local):
        return (Op(form.op, form.region),) if form.roles.contains(role) else ()
    if isinstance(form, Seq):
        out: list[Instruction] = []
        for index, inner in enumerate(form.forms):
            out.extend(project_form(protocol, inner, role, f"{path}.{index}", numbered))
        return tuple(out)
    if isinstance(form, Repeat):
        body = project_form(protocol, form.body, role, f"{path}.repeat", numbered)
        return (Loop(form.count, body),) if body and form.count else ()
    if isinstance(form, Combine):
        return _project_combine(protocol, form, role, numbered[path])
    arm0 = project_form(protocol, form.arm0, role, f"{path}.arm0", numbered)
    arm1 = project_form(protocol, form.arm1, role, f"{path}.arm1", numbered)
    knows, source, forward = informed(protocol, form, role)
    if not knows:
        # The checks guarantee an uninformed role acts alike in both arms.
        return arm0
    selector = form.selector if role == form.authority else None
    return (Choose(numbered[path], selector, source, forward, arm0, arm1),)


def _project_combine(
    protocol: Protocol, form: Combine, role: int, slot: int
) -> tuple[Instruction, ...]:
    tree = protocol.tree
    parent = tree.parent(role)
    children = tree.children(role)
    region = form.region
    out: list[Instruction] = [Recv(c, scratch_name(region, c), slot) for c in children]
    if children:
        # The contract's order, from its one definition: the role stands for its own
        # contribution (the region), each child for its subtree's total (its scratch buffer).
        order = fold_order(tree, role)
        sources = tuple(region if r == role else scratch_name(region, r) for r in order)
        out.append(Fold(region, sources))
    if parent is not None:
        out.append(Send(parent, region, slot))
    if form.delivery == "all":
        if parent is not None:
            out.append(Recv(parent, region, slot))
        out.extend(Send(c, region, slot) for c in children)
    return tuple(out)


def project(protocol: Protocol, role: int) -> LocalSchedule:
    """``role``'s local schedule. Check the protocol first (``checks.require_valid``)."""
    numbered = slots(protocol)
    body = project_form(protocol, protocol.body, role, "body", numbered)
    scratch: dict[str, str] = {}
    for path, form in walk(protocol.body):
        del path
        if isinstance(form, Combine):
            for child in protocol.tree.children(role):
                scratch[scratch_name(form.region, child)] = form.region
    return LocalSchedule(
        role=role,
        regions=tuple(protocol.regions[name] for name in sorted(protocol.regions)),
        scratch=tuple(sorted(scratch.items())),
        body=body,
    )
