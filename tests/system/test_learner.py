"""The ordered combine and the data-parallel learner: distributed equals replicated, bit for
bit, on real processes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from alpha.app.compile import compile_plan, parse_roles
from alpha.compiler.plan import Plan, load_plan, parse_plan
from alpha.compiler.replicate import replicate, require_learner
from alpha.core.combine import Contract, fold_order, ordered_sum
from alpha.core.topology import ParticipantTree, pair, star
from alpha.errors import PlanInvalid
from alpha.learner.data import load_digits
from alpha.learner.model import Model, contribute, initial_parameters
from harness.compiled import CompiledRun
from harness.processes import running
from tests.support import PLANS, plan_of, run_alpha

DIGITS = load_digits()


def learn_plan(
    *,
    n: int,
    shape: str = "tree",
    fanout: int | None = None,
    dtype: str = "float32",
    rounds: int = 5,
    hidden: int = 16,
) -> Plan:
    return plan_of(
        f"learn-{shape}-{n}-{fanout or 0}-{dtype}",
        roles=n,
        rounds=rounds,
        topology={"shape": shape, "fanout": fanout},
        contract={"dtype": dtype},
        budgets={"accept": 60.0, "deadline": 120.0},
        work={"kind": "learn"},
        learner={"kind": "mlp", "hidden": hidden, "rate": 0.15, "seed": 3, "batch": 8},
    )


# --- the ordered combine --------------------------------------------------------------------


def _recursive(tree: ParticipantTree, role: int, values: dict[int, np.ndarray]) -> np.ndarray:
    total = values[role].copy()
    for child in tree.children(role):
        total = total + _recursive(tree, child, values)
    return total


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 60), st.integers(1, 8), st.integers(0, 2**32 - 1))
def test_ordered_sum_folds_each_node_then_its_children_ascending(
    n: int, fanout: int, seed: int
) -> None:
    tree = ParticipantTree(n, fanout)
    rng = np.random.default_rng(seed)
    values = {r: rng.standard_normal(7).astype(np.float32) for r in range(n)}
    assert np.array_equal(ordered_sum(tree, values.__getitem__), _recursive(tree, 0, values))
    for role in range(n):
        assert fold_order(tree, role) == (role, *tree.children(role))


def test_the_order_is_part_of_the_result() -> None:
    # Three float32 values whose sum depends on the grouping: the contract fixes it.
    values = {
        0: np.float32([1e8]),
        1: np.float32([1.0]),
        2: np.float32([-1e8]),
        3: np.float32([1.0]),
    }
    chain = ordered_sum(ParticipantTree(4, 1), values.__getitem__)
    flat = ordered_sum(star(4), values.__getitem__)
    assert chain[0] != flat[0]
    assert (
        Contract("float32", ParticipantTree(4, 1)).digest() != Contract("float32", star(4)).digest()
    )


# --- the learner's arithmetic ---------------------------------------------------------------


def test_the_gradient_is_the_derivative_of_the_loss() -> None:
    model = Model.shipped(12, "float64")
    w = initial_parameters(model, 5)
    rng = np.random.default_rng(1)
    x = rng.random((6, 64))
    y = rng.integers(0, 10, 6).astype(np.uint8)
    g = contribute(model, w, x, y)
    for index in (0, 40, model.size // 2, model.size - 1):
        step = np.zeros_like(w)
        step[index] = 1e-6
        up = contribute(model, w + step, x, y)[model.size]
        down = contribute(model, w - step, x, y)[model.size]
        assert (up - down) / 2e-6 == pytest.approx(g[index], rel=1e-5, abs=1e-8)


def test_initial_parameters_do_not_depend_on_the_platform_generator_paths() -> None:
    first = initial_parameters(Model.shipped(32, "float32"), 7)
    assert np.array_equal(first, initial_parameters(Model.shipped(32, "float32"), 7))
    assert not np.array_equal(first, initial_parameters(Model.shipped(32, "float32"), 8))


def test_accuracy_is_clearly_above_chance() -> None:
    from alpha.app.run import DEFAULT_PLAN
    from alpha.compiler.plan import load_plan

    replica = replicate(load_plan(DEFAULT_PLAN), DIGITS)
    final_accuracy = replica.history[-1][3]
    assert final_accuracy > 0.6, f"held-out accuracy {final_accuracy:.3f}; chance is 0.1"
    # The main job's digest (docs/learner.md, `make run`): the default optimizer, plain SGD,
    # takes the learner's original step, bit for bit, on every platform.
    assert replica.digest == MAIN_JOB_DIGEST
    assert replica.optimizer == {}


MAIN_JOB_DIGEST = "3c30813ae4ca7e663b05202ddbcf301645df250c7079485f7e5d537d02876215"


# --- distributed equals replicated ----------------------------------------------------------


async def _distributed(plan: Plan, directory: Path) -> set[str]:
    run = CompiledRun(plan, directory)
    result = await run.launch()
    assert result.ok, result.first_to_fail
    return {report["digests"]["w"] for report in run.found_reports().values()}


CASES = [
    {"n": 2, "shape": "pair"},
    {"n": 5, "shape": "star"},
    {"n": 9, "fanout": 2},
    {"n": 13, "fanout": 3},
]


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", CASES, ids=["pair", "star-5", "tree-9-2", "tree-13-3"])
async def test_distributed_equals_replicated_bit_for_bit(
    case: dict[str, object], dtype: str, tmp_path: Path
) -> None:
    plan = learn_plan(dtype=dtype, **case)  # type: ignore[arg-type]
    digests = await _distributed(plan, tmp_path)
    assert digests == {replicate(plan, DIGITS).digest}, "every role holds the replicated result"


@pytest.mark.slow
async def test_the_fan_out_changes_the_result_only_through_the_order(tmp_path: Path) -> None:
    two = learn_plan(n=9, fanout=2, rounds=3)
    three = learn_plan(n=9, fanout=3, rounds=3)
    replica_two, replica_three = replicate(two, DIGITS), replicate(three, DIGITS)
    assert replica_two.digest != replica_three.digest
    # Same data, same arithmetic, only the fold order differs: the results are close.
    assert np.allclose(replica_two.parameters, replica_three.parameters, rtol=1e-4, atol=1e-5)
    assert await _distributed(two, tmp_path / "two") == {replica_two.digest}
    assert await _distributed(three, tmp_path / "three") == {replica_three.digest}


def test_pair_and_star_are_trees() -> None:
    assert learn_plan(n=2, shape="pair").tree == pair()
    assert learn_plan(n=5, shape="star").tree == star(5)


GPU_PLAN = """
[run]
name = "gpu-bound"
rounds = 2
[membership]
group = "(group (stride 0 1 3))"
[topology]
fanout = 2
[work]
kind = "learn"
[learner]
kind = "KIND"
rate = 0.1
[gpu]
roles = { "1" = "GPU-5d6c1a2b-0000-1111-2222-333344445555" }
"""


def test_a_gpu_operation_without_a_kernel_is_a_compile_error(tmp_path: Path) -> None:
    from alpha.errors import NoRealization, ProtocolRejected

    # The linear model has no GPU kernel: binding it a GPU names the operation.
    plan = parse_plan(GPU_PLAN.replace("KIND", "linear"))
    with pytest.raises(ProtocolRejected) as caught:
        compile_plan(plan, tmp_path, range(3))
    failures = caught.value.failures
    assert [type(f) for f in failures] == [NoRealization]
    assert "'contribute'" in str(failures[0]) and "cuda" in str(failures[0])
    assert "role(s) 1" in str(failures[0])
    assert not list(tmp_path.glob("*.pyz")), "nothing is built for a plan that cannot run"


async def test_a_gpu_role_without_a_gpu_fails_and_never_falls_back(tmp_path: Path) -> None:
    from alpha.learner.gpu import gpu_status

    available, why = gpu_status()
    if available:
        pytest.skip("this machine has a GPU; scripts/gpu_check.py covers the GPU run")
    plan = parse_plan(GPU_PLAN.replace("KIND", "mlp"))
    result = await CompiledRun(plan, tmp_path).launch()
    assert result.first_to_fail is not None
    assert result.first_to_fail.role == 1
    assert "GpuUnavailable" in result.first_to_fail.cause
    assert not list((tmp_path / "reports").glob("*.json")), "no role commits anything"
    del why


@pytest.mark.slow
def test_the_main_job_command(tmp_path: Path) -> None:
    done = run_alpha("run", "--dir", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr
    assert "equal bit for bit   yes" in done.stdout
    final = next(line for line in done.stdout.splitlines() if line.startswith("final parameters"))
    replicated = next(line for line in done.stdout.splitlines() if line.startswith("replicated"))
    assert final.split()[-1] == replicated.split()[-1]
    assert "round 30/30" in done.stderr, "progress is shown round by round"
    png = tmp_path / "run" / "loss.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_the_main_job_reports_a_failed_role_and_exits_1(tmp_path: Path) -> None:
    from alpha.learner.gpu import gpu_status

    if gpu_status()[0]:
        pytest.skip("this machine has a GPU: the GPU-bound role would not fail")
    plan = tmp_path / "gpu.toml"
    plan.write_text(GPU_PLAN.replace("KIND", "mlp"))
    done = run_alpha("run", str(plan), "--dir", str(tmp_path / "run"))
    assert done.returncode == 1
    assert "run: failed: role 1" in done.stderr and "GpuUnavailable" in done.stderr


@pytest.mark.parametrize("command", ["run", "replicate"])
@pytest.mark.parametrize(
    ("text", "field", "start"),
    [
        # compiles, but trains nothing: alpha compile and alpha launch run it
        ((PLANS / "pair.toml").read_text(), "work.kind", "pair is a sum check"),
        # refused by alpha compile too
        (
            (PLANS / "digits.toml").read_text().replace('delivery = "all"', 'delivery = "one"'),
            "contract.delivery",
            "the learner steps every role's own parameters",
        ),
    ],
    ids=["sum-check", "delivery-one"],
)
def test_the_learner_commands_refuse_a_plan_that_is_not_a_learner(
    command: str, text: str, field: str, start: str, tmp_path: Path
) -> None:

    plan = tmp_path / "plan.toml"
    plan.write_text(text)
    with pytest.raises(PlanInvalid) as refused:
        require_learner(load_plan(plan))
    assert refused.value.field == field
    if field == "contract.delivery":
        with pytest.raises(PlanInvalid):
            compile_plan(load_plan(plan), tmp_path / "compiled", parse_roles("all", 8))
    args = [command, str(plan)]
    if command == "run":
        args += ["--dir", str(tmp_path / "run")]
    done = run_alpha(*args)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"alpha: error: {field}: {start}")
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1
    assert not (tmp_path / "run").exists(), "refused before anything was compiled"


def test_the_replicated_learner_reports_every_round_as_it_goes() -> None:
    seen: list[tuple[int, float, float]] = []
    replica = replicate(
        learn_plan(n=3, fanout=2, rounds=4, hidden=8),
        load_digits(),
        on_round=lambda done, loss, accuracy: seen.append((done, loss, accuracy)),
    )
    assert seen == [(r + 1, loss, accuracy) for r, loss, _, accuracy in replica.history]


@pytest.mark.slow
async def test_a_participant_killed_mid_training_aborts_every_role_and_commits_nothing(
    tmp_path: Path,
) -> None:
    import os
    import signal

    import trio

    plan = learn_plan(n=7, fanout=2, rounds=1_000_000, hidden=8)  # still training when killed
    run = CompiledRun(plan, tmp_path)
    victim = 5  # a leaf: its loss must reach every role through its parent, role 4
    progress = tmp_path / "logs" / "role-000000.log"

    async def kill_in_round_3() -> None:
        while "round 3 loss" not in (progress.read_text() if progress.exists() else ""):
            await trio.sleep(0.05)
        artifact = run.specs[victim].argv[-1]
        found = running(artifact, whole=True)
        assert found, f"no process runs {artifact}"
        os.kill(found[0], signal.SIGKILL)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(kill_in_round_3)
        # Without fail-fast the launcher stops no one: each role must abort on its own.
        result = await run.launch(fail_fast=False)
    assert result.outcomes[victim].returncode == -signal.SIGKILL
    # The launcher names the killed role first, from its exit status.
    assert result.first_to_fail is not None and result.first_to_fail.role == victim
    assert "killed by SIGKILL" in result.first_to_fail.cause
    causes = {}
    for role, outcome in result.outcomes.items():
        if role != victim:
            assert outcome.returncode == 1 and not outcome.killed, outcome
            # "role N: failed: Class: ...", from the role's own log
            assert outcome.cause.startswith(f"role {role}: failed: "), outcome.cause
            causes[role] = outcome.cause.split(": ")[2]
    # The victim's parent is the first to see it go, on their own edge; it aborts the run, and
    # every other role stops on its ABORT, naming role 4 and what it saw.
    assert causes.pop(4) in ("PeerLost", "Truncated")
    assert "edge 5->4" in result.outcomes[4].cause or "to role 5" in result.outcomes[4].cause
    assert set(causes.values()) == {"RoundAborted"}, causes
    for role in causes:
        assert "aborted by role 4" in result.outcomes[role].cause
    assert not list((tmp_path / "reports").glob("*.json")), "no role commits anything"
