"""compiler/learner_module.py and the learner identity (compiler/work_learn.py): a plan's
learner module found (a ``.py`` path relative to the plan's folder, or a dotted name on
sys.path), read, checked against the contract before a line of it runs, loaded; its name, text
and options, and a data set file's pin, in the learner identity; its text carried in a role's
payload; and the shipped learners' digests unchanged by the refactor into programs."""

from __future__ import annotations

import hashlib
import importlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from alpha.app.compile import compile_plan
from alpha.app.plans import resolve_plan
from alpha.compiler.datasets import dataset_of
from alpha.compiler.learner_module import (
    MAX_MODULE_BYTES,
    learner_program,
    module_file,
    program_of_source,
)
from alpha.compiler.plan import Plan, load_plan, overrides_of, parse_plan
from alpha.compiler.replicate import replicate
from alpha.compiler.work import run_identity
from alpha.compiler.work_learn import learner_digest_of, learner_setup, model_of, plan_identity
from alpha.errors import (
    ContractBroken,
    LearnerModuleInvalid,
    NoRealization,
    PlanInvalid,
    ProtocolRejected,
)
from alpha.learner.data import features, load_digits
from alpha.learner.model import contribute, initial_parameters
from alpha.learner.payload import learner_from_payload, learner_payload
from alpha.learner.state import LearnerState
from tests.support import ROOT, plan_text, raises_exactly

# The shipped MLP as a user's module: its file, the contract imported the other way.
MLP_TEXT = (
    (ROOT / "alpha" / "learner" / "programs" / "mlp.py")
    .read_text(encoding="utf-8")
    .replace("import alpha.learner.contract as c", "from alpha.learner import contract as c")
)
VIOLATION = "\nimport numpy as np\n\nSCALE = np.exp(1.0)\n"  # appended: np.exp on its last line


def module_plan_text(module: str, *, hidden: int = 6, **learner: Any) -> str:
    fields = {"kind": "module", "module": module, "rate": 0.1, "seed": 4, "batch": 5, **learner}
    return plan_text(
        "module-learner",
        roles=3,
        rounds=3,
        topology={"shape": "tree", "fanout": 2},
        work={"kind": "learn"},
        learner=fields,
        extra=f"[learner.options]\nhidden = {hidden}\n",
    )


def plan_file(folder: Path, module: str, **settings: Any) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "plan.toml"
    path.write_text(module_plan_text(module, **settings))
    return path


def with_module(folder: Path, text: str = MLP_TEXT, name: str = "mine.py", **settings: Any) -> Plan:
    """A plan file in ``folder`` naming the module file ``name`` beside it, which holds ``text``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)
    return load_plan(plan_file(folder, name, **settings))


def npz(path: Path, x: np.ndarray, y: np.ndarray) -> str:
    """Write the data set (x, y) to ``path``; its SHA-256."""
    with path.open("wb") as out:
        np.savez(out, x=x, y=y)
    return hashlib.sha256(path.read_bytes()).hexdigest()


def small_data(path: Path, seed: int = 0) -> str:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((40, 6)).astype(np.float32)
    return npz(path, x, (x[:, 0] > 0).astype(np.int64) + (x[:, 1] > 0))


# --- the module found -----------------------------------------------------------------------


def test_a_py_path_is_relative_to_the_plans_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "plans"
    (folder / "learners").mkdir(parents=True)
    (folder / "learners" / "mine.py").write_text(MLP_TEXT)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "learners").mkdir()
    (elsewhere / "learners" / "mine.py").write_text("not a learner at all")
    monkeypatch.chdir(elsewhere)
    plan = load_plan(plan_file(folder, "learners/mine.py"))
    assert module_file(plan) == folder / "learners" / "mine.py"
    program = learner_program(plan)
    assert (program.name, program.source) == ("mine.py", MLP_TEXT)
    assert program.sha256 == hashlib.sha256(MLP_TEXT.encode()).hexdigest()


def test_a_plan_given_as_text_finds_its_module_from_the_working_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "mine.py").write_text(MLP_TEXT)
    monkeypatch.chdir(tmp_path)
    plan = parse_plan(module_plan_text("mine.py"), source="<plan>")
    assert module_file(plan) == Path("mine.py")
    assert learner_program(plan).source == MLP_TEXT


def test_an_absolute_path_is_taken_as_it_is(tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "mine.py").write_text(MLP_TEXT)
    plan = load_plan(plan_file(tmp_path / "plans", str(tmp_path / "lib" / "mine.py")))
    assert module_file(plan) == tmp_path / "lib" / "mine.py"
    assert learner_program(plan).source == MLP_TEXT


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A package on sys.path, named for this test, holding ``learner.py`` (the MLP's text)."""
    name = f"alpha_test_learners_{hashlib.sha256(str(tmp_path).encode()).hexdigest()[:12]}"
    root = tmp_path / "site"
    (root / name).mkdir(parents=True)
    (root / name / "__init__.py").write_text("")
    (root / name / "learner.py").write_text(MLP_TEXT)
    (root / f"{name}_top.py").write_text(MLP_TEXT)
    monkeypatch.syspath_prepend(str(root))
    importlib.invalidate_caches()
    yield name
    for loaded in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        del sys.modules[loaded]  # find_spec of a dotted name imports its parent package


def test_a_dotted_name_is_found_on_sys_path_and_read_not_imported(
    package: str, tmp_path: Path
) -> None:
    plan = load_plan(plan_file(tmp_path / "plans", f"{package}.learner"))
    found = tmp_path / "site" / package / "learner.py"
    assert module_file(plan) == found
    program = learner_program(plan)
    assert (program.name, program.source) == ("learner.py", MLP_TEXT)
    assert f"{package}.learner" not in sys.modules  # its text was read, never imported
    top = load_plan(plan_file(tmp_path / "top", f"{package}_top"))
    assert module_file(top) == tmp_path / "site" / f"{package}_top.py"
    assert learner_program(top).name == f"{package}_top.py"


@pytest.mark.parametrize(
    ("module", "said"),
    [
        ("alpha_no_such_package_anywhere.learner", "no module"),
        ("json.no_such_learner", "no Python source file"),
        ("alpha_no_such_module_anywhere", "no Python source file"),
        ("sys", "no Python source file"),
    ],
    ids=["no-package", "no-module-in-package", "no-module", "built-in"],
)
def test_a_dotted_name_with_no_source_file_is_refused(
    module: str, said: str, tmp_path: Path
) -> None:
    plan = load_plan(plan_file(tmp_path, module))
    error = raises_exactly(PlanInvalid, module_file, plan)
    assert error.field == "learner.module"
    assert said in error.message
    assert raises_exactly(PlanInvalid, learner_program, plan).field == "learner.module"


def test_a_missing_file_is_a_plan_error_at_learner_module(tmp_path: Path) -> None:
    plan = load_plan(plan_file(tmp_path, "absent.py"))
    assert module_file(plan) == tmp_path / "absent.py"
    error = raises_exactly(PlanInvalid, learner_program, plan)
    assert error.field == "learner.module"
    assert "cannot read the learner module" in error.message
    for compile_step in (model_of, learner_setup, run_identity):
        assert raises_exactly(PlanInvalid, compile_step, plan).field == "learner.module"


def test_a_folder_or_an_oversized_file_is_refused_at_learner_module(tmp_path: Path) -> None:
    (tmp_path / "folder.py").mkdir()
    assert (
        raises_exactly(
            PlanInvalid,
            learner_program,
            load_plan(plan_file(tmp_path / "a", str(tmp_path / "folder.py"))),
        ).field
        == "learner.module"
    )
    padded = MLP_TEXT + "#" * (MAX_MODULE_BYTES - len(MLP_TEXT.encode()) - 1) + "\n"
    assert len(padded.encode()) == MAX_MODULE_BYTES
    assert learner_program(with_module(tmp_path / "at", padded)).source == padded
    error = raises_exactly(
        PlanInvalid, learner_program, with_module(tmp_path / "past", padded + "\n")
    )
    assert error.field == "learner.module"
    assert f"at most {MAX_MODULE_BYTES} bytes" in error.message


def test_a_module_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    (tmp_path / "mine.py").write_bytes(MLP_TEXT.encode() + b"\n# \xff\n")
    error = raises_exactly(
        LearnerModuleInvalid, learner_program, load_plan(plan_file(tmp_path, "mine.py"))
    )
    assert "is not UTF-8 text" in str(error)


def test_module_file_refuses_a_plan_without_a_module(tmp_path: Path) -> None:
    plan = load_plan(resolve_plan("digits"))
    assert raises_exactly(PlanInvalid, module_file, plan).field == "learner.module"
    assert learner_program(plan).builtin and learner_program(plan).name == "mlp"


# --- checked before it runs -----------------------------------------------------------------


def test_a_contract_violation_is_refused_naming_the_file_line_and_operation(
    tmp_path: Path,
) -> None:
    text = MLP_TEXT + VIOLATION
    plan = with_module(tmp_path, text)
    error = raises_exactly(ContractBroken, learner_program, plan)
    line = text.count("\n")
    assert (error.path, error.line, error.operation) == (str(tmp_path / "mine.py"), line, "np.exp")
    # Every step of compiling the plan meets the same refusal.
    for compile_step in (model_of, learner_setup, run_identity):
        assert raises_exactly(ContractBroken, compile_step, plan).line == line


def test_the_text_is_checked_before_a_line_of_it_runs(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    top = f"\nwith open({str(marker)!r}, 'w'):\n    pass\nraise SystemExit(3)\n"
    error = raises_exactly(
        ContractBroken, learner_program, with_module(tmp_path / "p", MLP_TEXT + top)
    )
    assert error.operation == "open()"
    assert not marker.exists()


def test_a_module_that_passes_but_does_not_load_is_refused(tmp_path: Path) -> None:
    text = MLP_TEXT.replace("def evaluate(", "def evaluated(")
    error = raises_exactly(LearnerModuleInvalid, learner_program, with_module(tmp_path, text))
    assert "it defines no function evaluate()" in str(error)


def test_a_text_is_checked_and_loaded_once() -> None:
    first = program_of_source("once.py", MLP_TEXT)
    assert program_of_source("once.py", MLP_TEXT) is first
    assert program_of_source("once.py", MLP_TEXT + "\n") is not first
    error = raises_exactly(
        ContractBroken, program_of_source, "bad.py", MLP_TEXT + VIOLATION, "x/bad.py"
    )
    assert (error.path, error.operation) == ("x/bad.py", "np.exp")
    # Refused again the second time: a refusal is not remembered as a program.
    raises_exactly(ContractBroken, program_of_source, "bad.py", MLP_TEXT + VIOLATION, "x/bad.py")


# --- the identity ---------------------------------------------------------------------------


def digests(plan: Plan) -> tuple[bytes, bytes]:
    """The learner digest and the run identity's learner part of ``plan``."""
    return learner_digest_of(plan, dataset_of(plan)), run_identity(plan).learner


def test_the_identity_binds_the_modules_text_to_the_byte(tmp_path: Path) -> None:
    base = digests(with_module(tmp_path / "a"))
    assert digests(with_module(tmp_path / "a2")) == base  # the same text elsewhere: the same
    for index, changed in enumerate([MLP_TEXT + "\n", MLP_TEXT.replace("MLP:", "MLp:", 1)]):
        assert len(changed.encode()) - len(MLP_TEXT.encode()) in (0, 1)
        other = digests(with_module(tmp_path / f"b{index}", changed))
        assert other[0] != base[0] and other[1] != base[1]


def test_the_identity_binds_the_modules_name_not_its_folder(tmp_path: Path) -> None:
    base = digests(with_module(tmp_path / "a"))
    assert digests(with_module(tmp_path / "deep" / "other" / "folder")) == base
    assert digests(with_module(tmp_path / "b", name="theirs.py"))[0] != base[0]


def test_the_identity_binds_the_options(tmp_path: Path) -> None:
    base = digests(with_module(tmp_path / "a", hidden=6))
    assert digests(with_module(tmp_path / "b", hidden=7))[0] != base[0]
    text = module_plan_text("mine.py", hidden=6).replace("hidden = 6\n", "hidden = 6\nunused = 1\n")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "mine.py").write_text(MLP_TEXT)
    (tmp_path / "d" / "plan.toml").write_text(text)
    assert digests(load_plan(tmp_path / "d" / "plan.toml"))[0] != base[0]


def test_the_identity_binds_the_data_sets_pin(tmp_path: Path) -> None:
    def plan_with(folder: Path, seed: int, name: str = "data.npz") -> Plan:
        folder.mkdir(parents=True)
        pin = small_data(folder / name, seed)
        return with_module(folder, dataset=name, dataset_sha256=pin)

    base = digests(plan_with(tmp_path / "a", 0))
    assert digests(plan_with(tmp_path / "same", 0)) == base  # the same file elsewhere
    # The same file reached by another path: its name and pin are the identity's, not the path.
    absolute = str(tmp_path / "a" / "data.npz")
    pin = hashlib.sha256(Path(absolute).read_bytes()).hexdigest()
    assert digests(with_module(tmp_path / "e", dataset=absolute, dataset_sha256=pin)) == base
    assert digests(plan_with(tmp_path / "b", 1))[0] != base[0]  # another file, its own pin
    assert digests(plan_with(tmp_path / "c", 0, "renamed.npz"))[0] != base[0]
    # The same arrays in other bytes (compressed): the same samples, another pin.
    folder = tmp_path / "compressed"
    folder.mkdir()
    with np.load(tmp_path / "a" / "data.npz") as arrays, (folder / "data.npz").open("wb") as out:
        np.savez_compressed(out, x=arrays["x"], y=arrays["y"])
    pin = hashlib.sha256((folder / "data.npz").read_bytes()).hexdigest()
    compressed = with_module(folder, dataset="data.npz", dataset_sha256=pin)
    assert (
        dataset_of(compressed).x.tobytes() == dataset_of(plan_with(tmp_path / "d", 0)).x.tobytes()
    )
    assert digests(compressed)[0] != base[0]
    # A shipped learner on it too.
    folder = tmp_path / "shipped"
    folder.mkdir()
    pins = [small_data(folder / f"{seed}.npz", seed) for seed in (0, 1)]
    shipped = [
        parse_plan(
            plan_text(
                "shipped",
                roles=3,
                rounds=3,
                topology={"shape": "tree", "fanout": 2},
                work={"kind": "learn"},
                learner={"rate": 0.1, "dataset": str(folder / f"{s}.npz"), "dataset_sha256": pin},
            )
        )
        for s, pin in enumerate(pins)
    ]
    assert digests(shipped[0])[0] != digests(shipped[1])[0]


def test_a_wrong_pin_is_refused_before_anything_is_computed(tmp_path: Path) -> None:
    pin = small_data(tmp_path / "data.npz")
    wrong = ("0" if pin[0] != "0" else "1") + pin[1:]
    plan = with_module(tmp_path, dataset="data.npz", dataset_sha256=wrong)
    for compile_step in (dataset_of, model_of, run_identity):
        error = raises_exactly(PlanInvalid, compile_step, plan)
        assert error.field == "learner.dataset_sha256"


def test_a_generation_records_the_module_and_its_options(tmp_path: Path) -> None:
    plan = with_module(tmp_path, hidden=5)
    data = dataset_of(plan)
    recorded = plan_identity(plan, data, LearnerState.for_role(learner_setup(plan), data, 0))
    learner = recorded["learner"]
    assert learner == {
        "kind": "module",
        "hidden": None,
        "dataset": "digits",
        "module": {"name": "mine.py", "sha256": hashlib.sha256(MLP_TEXT.encode()).hexdigest()},
        "options": {"hidden": 5},
    }


# --- the shipped learners keep their digests ------------------------------------------------

# Replicated digests and learner identities of the shipped plan and variants of it, computed
# before the learners became programs (/work/digests/before.json, from /work/digests/pin.py).
BEFORE = {
    "default": ((), "3c30813ae4ca7e663b05202ddbcf301645df250c7079485f7e5d537d02876215",
                "f3171061b2e9576292fc396259de747205164b356f6ae40bcb29bbf29fc09ec7"),
    "adam64": (("learner.optimizer='adam'", "contract.dtype='float64'"),
               "f70882a2be1342a6b8ec939f858ff8366b6e0b7aacb798f30ec5b1e7d27ae87a",
               "86877e777668fd6a0a15c139c49267256444bfa591a27cfad4ba2612901fa43c"),
    "momentum": (("learner.optimizer='momentum'", "learner.momentum=0.9"),
                 "1b2ee23f45ed4f40efdd7724b314d9d9dc9146c4352605b00dbc770450e8a83d",
                 "0cc817c1d115b541a2a31cac2cb25aa73b82bc027e7f74a135f114815e6c256f"),
    "contrib": (("learner.contributors=5",),
                "265050c53ea842932074bb5e31a059e951efe92554e38b63418324b823149d4f",
                "cfeb25a40a31b146c6a61b44e0d939eaf91446139ca91df22cd88e9b9e86edce"),
    "part": (("learner.partition='parameters'", "learner.optimizer='adam'"),
             "918401df73b36750e3689e7abfd0a134b6c302f4af4ee481c12785b5468bc4ff",
             "96229ca777774fb19ab59f743ae3a1a11405159ea66c0cffd71382079f4b4c5d"),
    "h7": (("learner.hidden=7", "learner.batch=3"),
           "c8266bbcbcabb6a14c9f785af2dd18d527142c9b6d44e84fc0cdf842fc2b589f",
           "b06d808d2da306cef87c3b6af5cd4be07a5b3b151777ff79ec30babccf7b7eca"),
}  # fmt: skip
LINEAR = (
    "ae1311faab0b473d959b0dab8aca60c0b82810406623c99a7e7cda1c63beee2b",
    "29c7deca962167ff67c8677a058a9654b0ef32a9723e221860c71f3d9760198a",
)


@pytest.mark.parametrize("case", BEFORE)
def test_the_shipped_mlp_keeps_its_digests(case: str) -> None:
    sets, replicated, identity = BEFORE[case]
    plan = load_plan(resolve_plan("digits"), overrides=overrides_of([("--set", s) for s in sets]))
    digits = load_digits()
    assert learner_digest_of(plan, digits).hex() == identity
    assert replicate(plan, digits).digest == replicated


def test_the_shipped_linear_model_keeps_its_digests() -> None:
    text = resolve_plan("digits").read_text()
    assert text.count('kind = "mlp"\nhidden = 64') == 1
    plan = parse_plan(text.replace('kind = "mlp"\nhidden = 64', 'kind = "linear"'))
    assert (
        replicate(plan, load_digits()).digest,
        learner_digest_of(plan, load_digits()).hex(),
    ) == LINEAR


def test_a_module_copy_of_the_mlp_trains_to_the_shipped_bits_under_its_own_identity(
    tmp_path: Path,
) -> None:
    module = with_module(tmp_path, hidden=6)
    shipped = parse_plan(
        module_plan_text("mine.py")
        .replace('kind = "module"\nmodule = "mine.py"\n', 'kind = "mlp"\nhidden = 6\n')
        .replace("[learner.options]\nhidden = 6\n", "")
    )
    assert shipped.learner is not None and shipped.learner.kind == "mlp"
    digits = load_digits()
    assert replicate(module, digits).digest == replicate(shipped, digits).digest
    assert learner_digest_of(module, digits) != learner_digest_of(shipped, digits)


# --- the text travels in a role's payload ---------------------------------------------------


def test_a_roles_payload_carries_the_modules_text_and_runs_it(tmp_path: Path) -> None:
    plan = with_module(tmp_path, hidden=4)
    data = dataset_of(plan)
    state = LearnerState.for_role(learner_setup(plan), data, 1)
    payload = json.loads(json.dumps(learner_payload(state)))
    assert payload["program"] == {"name": "mine.py", "source": MLP_TEXT}
    assert payload["options"] == [["hidden", 4]]
    (tmp_path / "mine.py").unlink()  # the participant never reads the file
    again = learner_from_payload(payload)
    assert again.model.program == state.model.program
    assert again.model.layout == state.model.layout and again.model.options == (("hidden", 4),)
    parameters = initial_parameters(again.model, 4)
    assert parameters.tobytes() == initial_parameters(state.model, 4).tobytes()
    x = features(again.x[:5], again.model.dtype, again.divisor)
    labels = again.labels[:5]
    mine = contribute(again.model, parameters, x, labels)
    assert mine.tobytes() == contribute(state.model, parameters, x, labels).tobytes()


def test_a_shipped_learners_payload_carries_no_program() -> None:
    plan = load_plan(resolve_plan("digits"))
    state = LearnerState.for_role(learner_setup(plan), load_digits(), 1)
    payload = learner_payload(state)
    assert "program" not in payload and "options" not in payload
    assert learner_from_payload(json.loads(json.dumps(payload))).model.program.builtin


# --- no GPU kernels but the shipped MLP's on the digits' shapes ------------------------------

GPU = '[gpu.roles]\n"1" = "GPU-5d6c1a2b-0000-1111-2222-333344445555"\n'


def _refused_for_a_gpu(plan: Plan, folder: Path) -> None:
    error = raises_exactly(ProtocolRejected, compile_plan, plan, folder, range(3))
    assert [type(failure) for failure in error.failures] == [NoRealization]
    assert "'contribute'" in str(error.failures[0]) and "cuda" in str(error.failures[0])
    assert not list(folder.glob("*.pyz"))


def test_a_module_learner_bound_to_a_gpu_is_a_compile_error_naming_contribute(
    tmp_path: Path,
) -> None:
    (tmp_path / "mine.py").write_text(MLP_TEXT)  # the shipped MLP's text: still no kernel
    plan = tmp_path / "plan.toml"
    plan.write_text(module_plan_text("mine.py") + GPU)
    _refused_for_a_gpu(load_plan(plan), tmp_path / "out")


def test_the_shipped_mlp_on_other_shapes_bound_to_a_gpu_is_a_compile_error(tmp_path: Path) -> None:
    pin = small_data(tmp_path / "data.npz")  # 6 features, 3 classes: not the kernels' 64 and 10
    learner = {"kind": "mlp", "hidden": 8, "rate": 0.1, "dataset": "data.npz"}
    text = plan_text(
        "gpu-other-shapes",
        roles=3,
        rounds=2,
        topology={"shape": "tree", "fanout": 2},
        work={"kind": "learn"},
        learner={**learner, "dataset_sha256": pin},
        extra=GPU,
    )
    (tmp_path / "plan.toml").write_text(text)
    _refused_for_a_gpu(load_plan(tmp_path / "plan.toml"), tmp_path / "out")
