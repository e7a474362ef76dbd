"""Checks before projection: every refusal of one protocol, reported together.

Each refusal is a ``ProtocolFailure`` subclass whose message names the roles and the form (by
its path, e.g. ``body.repeat.0.arm1``). ``check`` returns them all; ``require_valid`` raises
``ProtocolRejected`` holding them all. Costs grow with the plan's size, not its role count,
except where noted (comparing the arms of a choice whose dissemination is an explicit list).
"""

from __future__ import annotations

from typing import Final

from alpha.compiler.forms import (
    Children,
    Choice,
    Combine,
    Everyone,
    Form,
    GroupRoles,
    Local,
    Protocol,
    Repeat,
    Roles,
    RoleSet,
    Seq,
    Transfer,
)
from alpha.compiler.projection import project_form, slots
from alpha.errors import (
    ChoiceAuthorityInvalid,
    ChoiceUninformed,
    DisseminationInvalid,
    NoRealization,
    ParticipantOutOfRange,
    ProtocolFailure,
    ProtocolRejected,
    RegionInvalid,
    RepeatBoundExceeded,
    SelectorNotAtAuthority,
    SelfTransfer,
)

__all__ = ["COMPARE_LIMIT", "check", "require_valid"]

COMPARE_LIMIT: Final = 100_000
"""The most roles whose two arms a check compares one by one, for a choice whose word goes to
an explicit list of receivers while an arm involves a structural set of roles. Past it the
check asks for the word to reach that whole set (disseminate along the tree)."""


def _is_edge(protocol: Protocol, a: int, b: int) -> bool:
    tree = protocol.tree
    return tree.parent(b) == a or tree.parent(a) == b


def _in_range(protocol: Protocol, role: int) -> bool:
    return (
        isinstance(role, int) and not isinstance(role, bool) and 0 <= role < protocol.participants
    )


class _Checker:
    def __init__(self, protocol: Protocol) -> None:
        self.protocol = protocol
        self.failures: list[ProtocolFailure] = []
        self.numbered = slots(protocol)

    def fail(self, failure: ProtocolFailure) -> None:
        self.failures.append(failure)

    def region(self, name: str, path: str) -> None:
        if name not in self.protocol.regions:
            known = ", ".join(sorted(self.protocol.regions)) or "none"
            self.fail(
                NoRealization(f"region {name!r} is not declared (declared: {known})", form=path)
            )

    def views(self) -> None:
        """Every region view lies inside a declared region of its dtype that is no view."""
        regions = self.protocol.regions
        for name, region in sorted(regions.items()):
            if region.of is None:
                continue
            parent = regions.get(region.of)
            if parent is None or parent.of is not None or parent.dtype != region.dtype:
                self.fail(
                    RegionInvalid(
                        f"region {name!r} is a view of {region.of!r}, which is not a declared "
                        f"{region.dtype} region that is no view itself",
                        form=f"regions.{name}",
                    )
                )
            elif not (region.count >= 1 and 0 <= region.offset <= parent.count - region.count):
                self.fail(
                    RegionInvalid(
                        f"region {name!r} views elements [{region.offset}, "
                        f"{region.offset + region.count}) of {region.of!r}, which has "
                        f"{parent.count}",
                        form=f"regions.{name}",
                    )
                )

    def roles(self, roles: RoleSet, path: str) -> bool:
        n = self.protocol.participants
        if isinstance(roles, Roles):
            bad = [r for r in roles.roles if not _in_range(self.protocol, r)]
            if bad:
                self.fail(ParticipantOutOfRange(f"roles {bad} are not in 0..{n - 1}", form=path))
                return False
        elif isinstance(roles, Children) and (
            roles.tree != self.protocol.tree or not 0 <= roles.node < n
        ):
            self.fail(
                ParticipantOutOfRange(
                    f"{roles.describe()} in {roles.tree!r}: the node must be a role of the run's "
                    f"own tree {self.protocol.tree!r}",
                    form=path,
                )
            )
            return False
        elif isinstance(roles, GroupRoles) and roles.group.last >= n:
            self.fail(
                ParticipantOutOfRange(
                    f"{roles.describe()} reaches role {roles.group.last}, past 0..{n - 1}",
                    form=path,
                )
            )
            return False
        return True

    def operation(self, name: str, kind: str, roles: RoleSet, path: str) -> None:
        protocol = self.protocol
        operation = protocol.operations.get(name)
        if operation is None or operation.kind != kind:
            cls = NoRealization if kind == "local" else SelectorNotAtAuthority
            self.fail(cls(f"no {kind} operation {name!r} is provided", form=path))
            return
        missing = protocol.targets.present(roles, protocol.participants) - operation.targets
        for target in sorted(missing):
            cls = NoRealization if kind == "local" else SelectorNotAtAuthority
            self.fail(
                cls(
                    f"operation {name!r} has no realization for target {target}, where "
                    f"{_roles_on(protocol, roles, target)} run it",
                    form=path,
                )
            )

    def form(self, form: Form, path: str, iterations: int) -> None:
        protocol = self.protocol
        n = protocol.participants
        if isinstance(form, Transfer):
            ends = [r for r in (form.src, form.dst) if not _in_range(protocol, r)]
            if ends:
                self.fail(
                    ParticipantOutOfRange(
                        f"transfer {form.src}->{form.dst}: roles {ends} are not in 0..{n - 1}",
                        form=path,
                    )
                )
            elif form.src == form.dst:
                self.fail(
                    SelfTransfer(f"role {form.src} sends {form.region!r} to itself", form=path)
                )
            elif not _is_edge(protocol, form.src, form.dst):
                self.fail(
                    NoRealization(
                        f"transfer {form.src}->{form.dst} runs over a pair that is not an edge "
                        "of the run's tree",
                        form=path,
                    )
                )
            self.region(form.region, path)
        elif isinstance(form, Local):
            self.region(form.region, path)
            if self.roles(form.roles, path):
                self.operation(form.op, "local", form.roles, path)
        elif isinstance(form, Seq):
            for index, inner in enumerate(form.forms):
                self.form(inner, f"{path}.{index}", iterations)
        elif isinstance(form, Repeat):
            total = iterations * form.count
            if form.count < 0 or form.count > form.bound:
                self.fail(
                    RepeatBoundExceeded(
                        f"repeat count {form.count} is past its declared bound {form.bound}",
                        form=path,
                    )
                )
            elif total > protocol.max_iterations:
                self.fail(
                    RepeatBoundExceeded(
                        f"nested repeats multiply to {total} iterations, past "
                        f"{protocol.max_iterations}",
                        form=path,
                    )
                )
            self.form(form.body, f"{path}.repeat", max(iterations, total))
        elif isinstance(form, Combine):
            self.region(form.region, path)
            if form.tree is not None and form.tree != protocol.tree:
                self.fail(
                    NoRealization(
                        f"a combine over {form.tree!r} runs over pairs that are not edges of the "
                        f"run's {protocol.tree!r}; the contract's tree fixes the order",
                        form=path,
                    )
                )
        else:
            self.choice(form, path, iterations)

    def choice(self, form: Choice, path: str, iterations: int) -> None:
        protocol = self.protocol
        n = protocol.participants
        authority = form.authority
        if not _in_range(protocol, authority):
            self.fail(
                ChoiceAuthorityInvalid(
                    f"authority {authority} is not a role of the run (0..{n - 1})", form=path
                )
            )
        else:
            self.operation(form.selector, "selector", Roles((authority,)), path)
            self.dissemination(form, path)
        self.form(form.arm0, f"{path}.arm0", iterations)
        self.form(form.arm1, f"{path}.arm1", iterations)
        if _in_range(protocol, authority):
            self.uninformed(form, path)

    def dissemination(self, form: Choice, path: str) -> None:
        protocol = self.protocol
        if form.dissemination.along_tree:
            if form.authority != 0:
                self.fail(
                    DisseminationInvalid(
                        f"a word sent down the tree starts at its root, role 0, but the "
                        f"authority is role {form.authority}",
                        form=path,
                    )
                )
            return
        reached = {form.authority}
        for a, b in form.dissemination.edges:
            if not (_in_range(protocol, a) and _in_range(protocol, b)):
                self.fail(
                    DisseminationInvalid(f"route {a}->{b} names a role outside the run", form=path)
                )
            elif b in reached:
                self.fail(
                    DisseminationInvalid(
                        f"route {a}->{b} introduces role {b} a second time", form=path
                    )
                )
            elif a not in reached:
                self.fail(
                    DisseminationInvalid(
                        f"route {a}->{b}: role {a} has not received the word by then, so role "
                        f"{b} is unreachable from authority {form.authority}",
                        form=path,
                    )
                )
            elif not _is_edge(protocol, a, b):
                self.fail(
                    DisseminationInvalid(
                        f"route {a}->{b} runs over a pair that is not an edge", form=path
                    )
                )
            reached.add(b)

    def uninformed(self, form: Choice, path: str) -> None:
        if form.dissemination.along_tree or form.arm0 == form.arm1:
            return  # everyone is told, or no one acts differently
        protocol = self.protocol
        told = {form.authority, *(b for _, b in form.dissemination.edges)}
        candidates = _involved(form.arm0) | _involved(form.arm1)
        structural = None in candidates
        roles: list[int]
        if structural:
            if protocol.participants > COMPARE_LIMIT:
                self.fail(
                    ChoiceUninformed(
                        f"the arms involve a structural set of roles and the word reaches only "
                        f"{len(told)} role(s) of {protocol.participants}; send it along the tree",
                        form=path,
                    )
                )
                return
            roles = [r for r in range(protocol.participants) if r not in told]
        else:
            roles = sorted(r for r in candidates if r is not None and r not in told)
        differing = []
        for role in roles:
            if not _in_range(protocol, role):
                continue
            arm0 = project_form(protocol, form.arm0, role, f"{path}.arm0", self.numbered)
            arm1 = project_form(protocol, form.arm1, role, f"{path}.arm1", self.numbered)
            if _shape(arm0) != _shape(arm1):
                differing.append(role)
        if differing:
            shown = ", ".join(str(r) for r in differing[:8])
            more = f" and {len(differing) - 8} more" if len(differing) > 8 else ""
            self.fail(
                ChoiceUninformed(
                    f"roles {shown}{more} act differently in the two arms but never learn the "
                    "word: add them to the dissemination",
                    form=path,
                )
            )


def _roles_on(protocol: Protocol, roles: RoleSet, target: str) -> str:
    """Which of ``roles`` run on ``target``, in words, without listing a structural set."""
    for listed, members in protocol.targets.listed:
        if listed == target:
            inside = [r for r in members if roles.contains(r)]
            shown = ", ".join(str(r) for r in inside[:8])
            return f"role(s) {shown}" + (f" and {len(inside) - 8} more" if len(inside) > 8 else "")
    return f"{roles.describe()} not listed under another target"


def _involved(form: Form) -> set[int | None]:
    """Roles a form names explicitly; None stands for a structural set (everyone, a group,
    a combine over the tree)."""
    found: set[int | None] = set()
    stack = [form]
    while stack:
        current = stack.pop()
        if isinstance(current, Transfer):
            found.update((current.src, current.dst))
        elif isinstance(current, Local):
            if isinstance(current.roles, Roles):
                found.update(current.roles.roles)
            elif isinstance(current.roles, Everyone | GroupRoles | Children):
                found.add(None)
        elif isinstance(current, Combine):
            found.add(None)
        elif isinstance(current, Seq):
            stack.extend(current.forms)
        elif isinstance(current, Repeat):
            stack.append(current.body)
        else:
            found.add(current.authority)
            stack.extend((current.arm0, current.arm1))
    return found


def _shape(instructions: tuple[object, ...]) -> object:
    """What a role does, without the slots (which differ between arms by design)."""
    out: list[object] = []
    for ins in instructions:
        fields = getattr(ins, "__dataclass_fields__", {})
        values = [
            _shape(getattr(ins, name)) if name in ("body", "arm0", "arm1") else getattr(ins, name)
            for name in fields
            if name != "slot"
        ]
        out.append((type(ins).__name__, *values))
    return tuple(out)


def check(protocol: Protocol) -> list[ProtocolFailure]:
    """Every refusal of ``protocol``, in the order of its forms."""
    checker = _Checker(protocol)
    checker.views()
    checker.form(protocol.body, "body", 1)
    return checker.failures


def require_valid(protocol: Protocol) -> None:
    """
    Raises:
        ProtocolRejected: the protocol has one or more refusals; all are in ``failures``.
    """
    failures = check(protocol)
    if failures:
        raise ProtocolRejected(tuple(failures))
