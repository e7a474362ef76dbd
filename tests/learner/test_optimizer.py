"""The learner's optimizers: SGD, momentum and Adam in contract arithmetic.

A step is elementwise, in the model's dtype, in the declared order; a step taken range by range
is the whole step bit for bit; the state restores only as it was saved; a plan's optimizer
binds the run identity and travels in the artifact; a distributed run equals the replicated
learner bit for bit; and the replicated learner resumed from a saved point reaches the
uninterrupted run's bits.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from alpha.compiler.plan import Plan
from alpha.compiler.replicate import Start, replicate
from alpha.compiler.work_learn import LEARNER_PROGRAM, learner_digest_of, learner_setup, model_of
from alpha.core.digests import learner_digest
from alpha.errors import ArtifactInvalid
from alpha.learner.data import load_digits
from alpha.learner.model import initial_parameters
from alpha.learner.optimizer import (
    OPTIMIZERS,
    SGD,
    LearnerStateInvalid,
    Optimizer,
    OptimizerState,
    constant_refusal,
)
from alpha.learner.payload import learner_from_payload, learner_payload
from alpha.learner.state import LearnerState
from harness.compiled import CompiledRun
from tests.support import plan_of, raises_exactly

DIGITS = load_digits()
DTYPES = ("float32", "float64")
UINT = {"float32": np.uint32, "float64": np.uint64}


def bits(array: np.ndarray) -> list[int]:
    """An array's elements as their IEEE bit patterns (so -0.0 and 0.0 differ)."""
    return array.view(UINT[array.dtype.name]).tolist()  # type: ignore[no-any-return]


# --- strategies -----------------------------------------------------------------------------


@st.composite
def optimizers(draw: st.DrawFn, dtype: str) -> Optimizer:
    """Any optimizer whose constants are in range in ``dtype``."""
    kind = draw(st.sampled_from(OPTIMIZERS))
    width: Literal[32, 64] = 32 if dtype == "float32" else 64
    below_one = st.floats(0, 1, exclude_max=True, width=width)
    if kind == "momentum":
        return Optimizer(kind, momentum=draw(below_one))
    if kind == "adam":
        return Optimizer(
            kind,
            beta1=draw(below_one),
            beta2=draw(below_one),
            epsilon=draw(st.floats(2.0**-60, 1.0, width=width)),
        )
    return SGD


@st.composite
def cases(draw: st.DrawFn) -> tuple[str, Optimizer, int, list[int], int, int]:
    """A dtype, an optimizer, a size, cut points splitting ``[0, size)`` into ranges, steps,
    and a seed for the values."""
    dtype = draw(st.sampled_from(DTYPES))
    optimizer = draw(optimizers(dtype))
    size = draw(st.integers(1, 70))
    cuts = sorted(draw(st.sets(st.integers(1, size - 1), max_size=6))) if size > 1 else []
    return dtype, optimizer, size, [0, *cuts, size], draw(st.integers(1, 4)), draw(st.integers())


def values(rng: np.random.Generator, size: int, dtype: str) -> np.ndarray:
    """Values across many magnitudes, both signs, zeros among them."""
    scale = 10.0 ** rng.uniform(-4, 3, size)
    out = (rng.standard_normal(size) * scale).astype(dtype)
    out[rng.random(size) < 0.1] = 0
    return out


# --- a range step is the whole step ---------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(cases(), st.randoms(use_true_random=False))
def test_a_step_taken_range_by_range_is_the_whole_step_bit_for_bit(
    case: tuple[str, Optimizer, int, list[int], int, int], order: Any
) -> None:
    dtype, optimizer, size, edges, steps, seed = case
    rng = np.random.default_rng(seed % 2**32)
    whole = OptimizerState.initial(optimizer, size, dtype)
    ranged = OptimizerState.initial(optimizer, size, dtype)
    w_whole = values(rng, size, dtype)
    w_ranged = w_whole.copy()
    ranges = list(itertools.pairwise(edges))
    for _ in range(steps):
        total = values(rng, size + 2, dtype)  # a contribution: the gradient, then statistics
        batch = int(rng.integers(1, 300))
        rate = float(rng.uniform(1e-4, 1.0))
        whole.step(w_whole, total, rate=rate, batch=batch)
        order.shuffle(ranges)  # ranges are independent: any order
        for start, stop in ranges:
            ranged.step_range(
                w_ranged[start:stop], total[start:stop], start, stop, rate=rate, batch=batch
            )
        ranged.advance()
        assert w_whole.dtype == w_ranged.dtype == np.dtype(dtype)
        assert bits(w_ranged) == bits(w_whole)
        assert ranged.arrays.keys() == whole.arrays.keys()
        for name, array in whole.arrays.items():
            assert array.dtype == ranged.arrays[name].dtype == np.dtype(dtype), name
            assert bits(ranged.arrays[name]) == bits(array), name


# --- the declared order ---------------------------------------------------------------------


def reference_step(
    optimizer: Optimizer, state: dict[str, list[Any]], w: list[Any], g: list[Any], dtype: str
) -> None:
    """One step element by element with numpy scalars of ``dtype``, the formulas of
    docs/learner.md written out one operation per line."""
    t = np.dtype(dtype).type
    samples, rate = t(24), t(0.05)
    if optimizer.kind == "adam":
        state["p1"][0] = state["p1"][0] * t(optimizer.beta1)
        state["p2"][0] = state["p2"][0] * t(optimizer.beta2)
    for i in range(len(w)):
        d = g[i] / samples
        if optimizer.kind == "sgd":
            w[i] = w[i] - rate * d
        elif optimizer.kind == "momentum":
            state["v"][i] = t(optimizer.momentum) * state["v"][i] + d
            w[i] = w[i] - rate * state["v"][i]
        else:
            beta1, beta2, one = t(optimizer.beta1), t(optimizer.beta2), t(1)
            state["m"][i] = beta1 * state["m"][i] + (one - beta1) * d
            state["v"][i] = beta2 * state["v"][i] + (one - beta2) * (d * d)
            mhat = state["m"][i] / (one - state["p1"][0])
            vhat = state["v"][i] / (one - state["p2"][0])
            w[i] = w[i] - (rate * mhat) / (np.sqrt(vhat) + t(optimizer.epsilon))
        assert type(w[i]) is t


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "optimizer",
    [SGD, Optimizer.of("momentum"), Optimizer.of("adam"), Optimizer.of("adam", beta1=0.0)],
    ids=["sgd", "momentum", "adam", "adam-beta1-0"],
)
def test_a_step_is_the_documented_formula_in_the_model_dtype(
    optimizer: Optimizer, dtype: str
) -> None:
    rng = np.random.default_rng(11)
    size = 40
    state = OptimizerState.initial(optimizer, size, dtype)
    w = values(rng, size, dtype)
    reference = {name: list(array) for name, array in state.arrays.items()}
    w_reference = list(w)
    for _ in range(4):
        g = values(rng, size, dtype)
        state.step(w, g, rate=0.05, batch=24)
        reference_step(optimizer, reference, w_reference, list(g), dtype)
        assert bits(w) == bits(np.array(w_reference, dtype=dtype))
        for name, array in state.arrays.items():
            assert bits(array) == bits(np.array(reference[name], dtype=dtype)), name


@pytest.mark.parametrize("dtype", DTYPES)
def test_sgd_is_the_learner_s_original_step(dtype: str) -> None:
    rng = np.random.default_rng(5)
    w, total = values(rng, 30, dtype), values(rng, 32, dtype)
    t = np.dtype(dtype).type
    expected = w - t(0.15) * (total[:30] / t(256))
    OptimizerState.initial(SGD, 30, dtype).step(w, total, rate=0.15, batch=256)
    assert bits(w) == bits(expected)


def test_adam_s_first_step_moves_each_parameter_by_about_the_rate() -> None:
    # After one step mhat = d and vhat = d*d, so the step is rate * d / (|d| + eps).
    w = np.zeros(4)
    OptimizerState.initial(Optimizer.of("adam"), 4, "float64").step(
        w, np.array([3.0, -0.5, 1e-3, 0.0]), rate=0.01, batch=1
    )
    assert w == pytest.approx([-0.01, 0.01, -0.01, 0.0], rel=1e-4)


# --- the state: initial, saved, restored ----------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_initial_state_of_each_optimizer(dtype: str) -> None:
    assert OptimizerState.initial(SGD, 9, dtype).arrays == {}
    momentum = OptimizerState.initial(Optimizer.of("momentum"), 9, dtype).arrays
    assert list(momentum) == ["v"] and bits(momentum["v"]) == [0] * 9
    adam = OptimizerState.initial(Optimizer.of("adam"), 9, dtype).arrays
    assert list(adam) == ["m", "v", "p1", "p2"]
    assert [adam[name].shape for name in adam] == [(9,), (9,), (1,), (1,)]
    assert adam["p1"].tolist() == adam["p2"].tolist() == [1.0]
    assert {adam[name].dtype for name in adam} == {np.dtype(dtype)}


def stepped(optimizer: Optimizer, dtype: str, size: int = 6) -> OptimizerState:
    state = OptimizerState.initial(optimizer, size, dtype)
    rng = np.random.default_rng(2)
    state.step(values(rng, size, dtype), values(rng, size, dtype), rate=0.1, batch=3)
    return state


@pytest.mark.parametrize("kind", OPTIMIZERS)
def test_a_saved_state_restores_to_the_same_steps(kind: str) -> None:
    optimizer = Optimizer.of(kind)
    state = stepped(optimizer, "float32")
    saved = state.saved()
    restored = OptimizerState.restore(optimizer, 6, "float32", saved)
    for name in saved:
        saved[name][...] = 7  # restore copied: the saved arrays are not the live state
    w1, w2 = np.ones(6, np.float32), np.ones(6, np.float32)
    g = np.linspace(-1, 1, 6, dtype=np.float32)
    state.step(w1, g, rate=0.1, batch=3)
    restored.step(w2, g, rate=0.1, batch=3)
    assert bits(w1) == bits(w2)
    assert {n: bits(a) for n, a in state.arrays.items()} == {
        n: bits(a) for n, a in restored.arrays.items()
    }


ADAM = Optimizer.of("adam")
GOOD = {
    "m": np.zeros(6, np.float32),
    "v": np.zeros(6, np.float32),
    "p1": np.ones(1, np.float32),
    "p2": np.ones(1, np.float32),
}


@pytest.mark.parametrize(
    ("arrays", "says"),
    [
        ({k: v for k, v in GOOD.items() if k != "p2"}, "missing ['p2']"),
        ({**GOOD, "w": np.zeros(6, np.float32)}, "extra ['w']"),
        ({**GOOD, "m": np.zeros(5, np.float32)}, "'m' must have shape (6,)"),
        ({**GOOD, "p1": np.ones((1, 1), np.float32)}, "'p1' must have shape (1,)"),
        ({**GOOD, "v": np.zeros(6, np.float64)}, "dtype float32, got shape (6,) and dtype float64"),
        ({**GOOD, "v": np.zeros(6, ">f4")}, "dtype >f4"),
        ({**GOOD, "m": [0.0] * 6}, "'m' must be a numpy array, got list"),
    ],
    ids=["missing", "extra", "short", "p1-2d", "float64", "big-endian", "a-list"],
)
def test_a_state_that_is_not_the_optimizer_s_is_refused(arrays: dict[str, Any], says: str) -> None:
    error = raises_exactly(LearnerStateInvalid, OptimizerState.restore, ADAM, 6, "float32", arrays)
    assert says in str(error)


def test_restoring_needs_the_optimizer_s_own_names() -> None:
    assert OptimizerState.restore(SGD, 6, "float64", {}).arrays == {}
    raises_exactly(LearnerStateInvalid, OptimizerState.restore, SGD, 6, "float64", {"v": GOOD["v"]})
    momentum = Optimizer.of("momentum")
    raises_exactly(LearnerStateInvalid, OptimizerState.restore, momentum, 6, "float32", GOOD)


@pytest.mark.parametrize(
    ("size", "dtype"), [(0, "float32"), (True, "float32"), (3, "float16"), (3, np.dtype("int64"))]
)
def test_a_state_needs_a_size_and_a_float_dtype(size: Any, dtype: Any) -> None:
    raises_exactly(LearnerStateInvalid, OptimizerState.initial, ADAM, size, dtype)


def test_a_constant_out_of_range_in_the_model_dtype_is_refused_for_the_state() -> None:
    close = Optimizer.of("adam", beta2=1 - 1e-9)  # below 1 as a double, 1.0 as a float32
    assert OptimizerState.initial(close, 3, "float64").arrays["p2"].tolist() == [1.0]
    error = raises_exactly(LearnerStateInvalid, OptimizerState.initial, close, 3, "float32")
    assert "beta2 must stay below 1 in float32" in str(error)


@pytest.mark.parametrize(
    ("call", "says"),
    [
        (
            lambda s, w, g: s.step_range(w[2:5], g[2:5], 2, 6, rate=0.1, batch=1),
            "of 4 elements, got (3,)",
        ),
        (lambda s, w, g: s.step_range(w[:3], g[:2], 0, 3, rate=0.1, batch=1), "gradient"),
        (lambda s, w, g: s.step_range(w, g, 0, 7, rate=0.1, batch=1), "within [0, 6]"),
        (lambda s, w, g: s.step_range(w[3:], g[3:], 3, 2, rate=0.1, batch=1), "within [0, 6]"),
        (lambda s, w, g: s.step(w.astype(np.float64), g, rate=0.1, batch=1), "float64"),
        (lambda s, w, g: s.step(w, g[:5], rate=0.1, batch=1), "must hold 6"),
    ],
    ids=["length", "gradient-length", "past-the-end", "reversed", "dtype", "short-total"],
)
def test_a_step_that_does_not_fit_changes_nothing(call: Any, says: str) -> None:
    state = stepped(ADAM, "float32")
    before = state.saved()
    w = np.ones(6, np.float32)
    g = np.ones(6, np.float32)
    error = raises_exactly(LearnerStateInvalid, call, state, w, g)
    assert says in str(error)
    assert bits(w) == [bits(np.ones(1, np.float32))[0]] * 6
    assert {n: bits(a) for n, a in state.arrays.items()} == {n: bits(a) for n, a in before.items()}


# --- the description ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda: Optimizer("rmsprop"), "unknown optimizer 'rmsprop'"),
        (lambda: Optimizer("sgd", momentum=0.9), "momentum is not a constant of the 'sgd'"),
        (lambda: Optimizer("momentum"), "needs momentum"),
        (lambda: Optimizer("adam", beta1=0.9, beta2=0.9), "needs epsilon"),
        (lambda: Optimizer("momentum", momentum=1.0), "in [0, 1)"),
        (lambda: Optimizer("adam", beta1=0.9, beta2=0.9, epsilon=0.0), "above 0"),
        (lambda: Optimizer("adam", beta1=float("nan"), beta2=0.9, epsilon=1.0), "in [0, 1)"),
        (lambda: Optimizer.of("adam", rho=0.9), "unknown optimizer constant(s) ['rho']"),
        (lambda: Optimizer.of("sgd", beta1=0.9), "beta1 is not a constant of the 'sgd'"),
    ],
)
def test_an_optimizer_that_cannot_be_is_refused(make: Any, says: str) -> None:
    assert says in str(raises_exactly(LearnerStateInvalid, make))


def test_the_defaults_and_constants() -> None:
    assert Optimizer() == SGD and SGD.constants == {}
    assert Optimizer.of("momentum").constants == {"momentum": 0.9}
    assert Optimizer.of("adam", beta2=0.99).constants == {
        "beta1": 0.9,
        "beta2": 0.99,
        "epsilon": 1e-8,
    }
    # Held as floats, whatever number was given: the identity encodes 0 and 0.0 differently.
    assert type(Optimizer("momentum", momentum=0).momentum) is float  # type: ignore[arg-type]
    assert constant_refusal("epsilon", 1e-50, "float64") is None
    assert constant_refusal("epsilon", 1e-50, "float32") is not None


# --- the plan, the identity and the artifact ------------------------------------------------


def learn_plan(
    *,
    n: int = 3,
    shape: str = "tree",
    fanout: int | None = 2,
    dtype: str = "float32",
    rounds: int = 4,
    optimizer: str = "sgd",
    constants: str = "",
) -> Plan:
    rate = 0.01 if optimizer == "adam" else 0.1
    return plan_of(
        f"opt-{optimizer}-{shape}-{n}-{dtype}",
        roles=n,
        rounds=rounds,
        topology={"shape": shape, "fanout": fanout},
        contract={"dtype": dtype},
        budgets={"accept": 60.0, "deadline": 120.0},
        work={"kind": "learn"},
        learner={
            "kind": "mlp",
            "hidden": 12,
            "rate": rate,
            "seed": 5,
            "batch": 8,
            "optimizer": optimizer,
        },
        extra=f"{constants}\n",
    )


def test_the_identity_binds_the_optimizer_and_its_constants() -> None:
    sgd = learn_plan()
    digests = {
        learner_digest_of(plan, DIGITS)
        for plan in (
            sgd,
            learn_plan(optimizer="momentum"),
            learn_plan(optimizer="momentum", constants="momentum = 0.8"),
            learn_plan(optimizer="adam"),
            learn_plan(optimizer="adam", constants="beta1 = 0.8"),
            learn_plan(optimizer="adam", constants="beta2 = 0.99"),
            learn_plan(optimizer="adam", constants="epsilon = 1e-7"),
        )
    }
    assert len(digests) == 7
    # The same optimizer written with its defaults or without them is the same run.
    assert learner_digest_of(learn_plan(optimizer="adam"), DIGITS) == learner_digest_of(
        learn_plan(optimizer="adam", constants="beta1 = 0.9\nbeta2 = 0.999\nepsilon = 1e-8"), DIGITS
    )
    # SGD keeps the identity it had before there were optimizers: no optimizer key at all.
    learner = sgd.learner
    assert learner is not None
    before = learner_digest(
        program=LEARNER_PROGRAM,
        config={
            "kind": learner.kind,
            "hidden": learner.hidden,
            "batch": learner.batch,
            "rounds": sgd.rounds,
            "holdout": learner.holdout,
            "seed": learner.seed,
            "dataset": learner.dataset,
            "participants": sgd.participants,
        },
        initial_state=[initial_parameters(model_of(sgd), learner.seed)],
        rate=learner.rate,
        samples=[DIGITS.x, DIGITS.labels],
    )
    assert learner_digest_of(sgd, DIGITS) == before


@pytest.mark.parametrize(
    "plan",
    [
        learn_plan(),
        learn_plan(optimizer="momentum", constants="momentum = 0.5"),
        learn_plan(optimizer="adam", dtype="float64", constants="beta2 = 0.99\nepsilon = 1e-300"),
    ],
    ids=OPTIMIZERS,
)
def test_the_artifact_carries_the_optimizer(plan: Plan) -> None:
    import json

    state = LearnerState.for_role(learner_setup(plan), DIGITS, 1)
    data = json.loads(json.dumps(learner_payload(state)))  # as the artifact stores it
    back = learner_from_payload(data)
    assert plan.learner is not None
    assert back.optimizer == state.optimizer == plan.learner.optimizer
    assert back.optimizer_state.arrays.keys() == state.optimizer_state.arrays.keys()


@pytest.mark.parametrize(
    ("optimizer", "says"),
    [
        (None, "missing field 'optimizer'"),
        ("adam", "must be a table with a kind"),
        ({"kind": "rmsprop"}, "'rmsprop' with constants [] is not one"),
        ({"kind": "adam", "beta1": 0.9, "beta2": 0.9}, "with constants ['beta1', 'beta2']"),
        ({"kind": "sgd", "momentum": 0.9}, "'sgd' with constants ['momentum']"),
        ({"kind": "momentum", "momentum": True}, "must be numbers"),
        ({"kind": "momentum", "momentum": "0.9"}, "must be numbers"),
        ({"kind": "momentum", "momentum": 1.5}, "in [0, 1)"),
        ({"kind": "adam", "beta1": 0.9, "beta2": 1 - 1e-9, "epsilon": 1e-8}, "below 1 in float32"),
    ],
    ids=[
        "missing",
        "not-a-table",
        "unknown",
        "constant-missing",
        "constant-extra",
        "a-bool",
        "a-string",
        "out-of-range",
        "one-in-float32",
    ],
)
def test_an_artifact_with_a_bad_optimizer_is_refused(optimizer: Any, says: str) -> None:
    data = learner_payload(LearnerState.for_role(learner_setup(learn_plan()), DIGITS, 1))
    if optimizer is None:
        del data["optimizer"]
    else:
        data["optimizer"] = optimizer
    assert says in str(raises_exactly(ArtifactInvalid, learner_from_payload, data))


# --- resuming the replicated learner --------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("optimizer", OPTIMIZERS)
def test_the_replicated_learner_resumed_after_k_rounds_reaches_the_same_bits(
    optimizer: str, dtype: str
) -> None:
    plan = learn_plan(n=3, dtype=dtype, rounds=6, optimizer=optimizer)
    whole = replicate(plan, DIGITS)
    assert whole.rounds == 6
    for k in (0, 2, 6):
        first = replicate(plan, DIGITS, stop=k)
        assert first.history == whole.history[:k]
        resumed = replicate(plan, DIGITS, start=first.start())
        assert resumed.digest == whole.digest
        assert {n: bits(a) for n, a in resumed.optimizer.items()} == {
            n: bits(a) for n, a in whole.optimizer.items()
        }
        assert resumed.history == whole.history[k:], "rounds continue from the start's"


def test_a_replica_exposes_its_optimizer_state() -> None:
    replica = replicate(learn_plan(optimizer="adam", rounds=3), DIGITS)
    assert list(replica.optimizer) == ["m", "v", "p1", "p2"]
    beta1 = np.float32(0.9)
    assert replica.optimizer["p1"].tolist() == [beta1 * beta1 * beta1]
    assert replicate(learn_plan(rounds=2), DIGITS).optimizer == {}


def test_a_start_that_does_not_fit_the_plan_is_refused() -> None:
    plan = learn_plan(optimizer="momentum", rounds=4)
    start = replicate(plan, DIGITS, stop=2).start()
    size = model_of(plan).size
    for bad in (
        Start(5, start.parameters, start.optimizer),
        Start(-1, start.parameters, start.optimizer),
        Start(2, start.parameters.astype(np.float64), start.optimizer),
        Start(2, start.parameters[:-1], start.optimizer),
        Start(2, start.parameters, {}),
        Start(2, start.parameters, {"v": np.zeros(size, np.float64)}),
    ):
        raises_exactly(LearnerStateInvalid, replicate, plan, DIGITS, start=bad)
    raises_exactly(LearnerStateInvalid, replicate, plan, DIGITS, stop=5)
    with pytest.raises(LearnerStateInvalid):
        replicate(plan, DIGITS, start=start, stop=1)  # stops before it starts


def test_a_role_that_starts_at_round_k_takes_round_k_s_batch() -> None:
    plan = learn_plan(n=3)
    model = model_of(plan)
    w = initial_parameters(model, 5)
    later = LearnerState.for_role(learner_setup(plan), DIGITS, 2)
    later.first_round = 3
    plain = LearnerState.for_role(learner_setup(plan), DIGITS, 2)
    g_later = np.zeros(model.contribution_size, np.float32)
    g_plain = np.zeros(model.contribution_size, np.float32)
    later.contribute(w, g_later, 1)
    plain.contribute(w, g_plain, 4)
    assert bits(g_later) == bits(g_plain)


# --- distributed equals replicated ----------------------------------------------------------


async def _distributed(plan: Plan, directory: Path) -> set[str]:
    run = CompiledRun(plan, directory)
    result = await run.launch()
    assert result.ok, result.first_to_fail
    return {report["digests"]["w"] for report in run.found_reports().values()}


TOPOLOGIES = [
    {"n": 2, "shape": "pair", "fanout": None},
    {"n": 5, "shape": "star", "fanout": None},
    {"n": 7, "shape": "tree", "fanout": 2},
]


@pytest.mark.slow
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("optimizer", ["momentum", "adam"])
@pytest.mark.parametrize("topology", TOPOLOGIES, ids=["pair", "star-5", "tree-7-2"])
async def test_distributed_equals_replicated_bit_for_bit(
    topology: dict[str, Any], optimizer: str, dtype: str, tmp_path: Path
) -> None:
    plan = learn_plan(dtype=dtype, rounds=4, optimizer=optimizer, **topology)
    replica = replicate(plan, DIGITS)
    assert await _distributed(plan, tmp_path) == {replica.digest}
    sgd = replicate(learn_plan(dtype=dtype, rounds=4, **topology), DIGITS)
    assert sgd.digest != replica.digest, "the optimizer changed the step"
