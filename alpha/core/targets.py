"""The machines a role's artifact can be built for, named once: the plan's ``[targets]`` table
(``alpha.compiler.plan``), an artifact's payload and ``run.json`` (``alpha.artifact``) and the
launcher's interpreters per target (``alpha.launch.launcher``) all read this one tuple."""

from __future__ import annotations

from typing import Final

__all__ = ["HOSTS", "TARGETS"]

TARGETS: Final = ("x86_64", "aarch64")
"""The machine targets (DESIGN, decision 7 and "AArch64 is real emulation"); the first is the
default a plan's roles are built for."""

HOSTS: Final = frozenset(TARGETS)
"""Where a local operation or selector is realized when every machine target runs it on its
CPU: the realization a kind of work declares (``alpha.compiler.work_sum_check``,
``alpha.compiler.work_learn``), beside a GPU's."""
