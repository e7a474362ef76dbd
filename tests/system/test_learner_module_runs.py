"""A learner module of the user's, run by ``alpha`` as real processes: a 2-hidden-layer MLP
written with the contract operations, trained on a generated ``.npz``, equals the replicated
learner bit for bit; its text travels in the artifacts, so a compiled folder runs with the file
gone; a contract violation is one line at exit 2 before anything is written; a generation's
export names the module's arrays; an AArch64 role under QEMU computes the same bits.

(Named apart from tests/compiler/test_learner_module.py: a test file's name is unique across
``tests/``.)
"""

from __future__ import annotations

import hashlib
import json
import shlex
from pathlib import Path

import numpy as np
import pytest

from alpha.app.cli import EXIT_OK
from alpha.compiler.datasets import dataset_of
from alpha.compiler.plan import load_plan
from alpha.compiler.replicate import replicate
from alpha.exitcodes import EXIT_USAGE
from harness.emulation import EmulationUnavailable, aarch64_interpreter
from tests.support import plan_text, run_alpha

pytestmark = pytest.mark.slow

# Two hidden layers, relu then hard_tanh, in contract operations only.
MLP2 = '''\
"""A 2-hidden-layer MLP: relu, then hard_tanh, then the scores; squared error."""

from __future__ import annotations

from typing import Any

from alpha.learner import contract as c


def layout(features: int, classes: int, options: dict[str, Any]) -> list[tuple[str, Any]]:
    first, second = options["widths"]
    return [
        ("W1", (features, first)),
        ("b1", (first,)),
        ("W2", (first, second)),
        ("b2", (second,)),
        ("W3", (second, classes)),
        ("b3", (classes,)),
    ]


def initialize(p: dict[str, Any], random: c.Random) -> None:
    for name in ("W1", "W2", "W3"):
        c.fan_in_uniform(p[name], random)


def _forward(p: dict[str, Any], x: Any) -> tuple[Any, Any, Any, Any, Any]:
    z1 = c.affine(x, p["W1"], p["b1"])
    h1 = c.relu(z1)
    z2 = c.affine(h1, p["W2"], p["b2"])
    h2 = c.hard_tanh(z2)
    return c.affine(h2, p["W3"], p["b3"]), z1, h1, z2, h2


def contribute(p: dict[str, Any], g: dict[str, Any], x: Any, labels: Any) -> tuple[Any, int]:
    scores, z1, h1, z2, h2 = _forward(p, x)
    loss, d3 = c.squared_error(scores, labels)
    g["W3"][...] = c.outer_sum(h2, d3)
    g["b3"][...] = c.sum_rows(d3)
    d2 = c.hard_tanh_backward(c.matmul(d3, p["W3"].T), z2)
    g["W2"][...] = c.outer_sum(h1, d2)
    g["b2"][...] = c.sum_rows(d2)
    d1 = c.relu_backward(c.matmul(d2, p["W2"].T), z1)
    g["W1"][...] = c.outer_sum(x, d1)
    g["b1"][...] = c.sum_rows(d1)
    return loss, c.correct(scores, labels)


def evaluate(p: dict[str, Any], x: Any, labels: Any) -> int:
    return c.correct(_forward(p, x)[0], labels)
'''
WIDTHS = (6, 5)
FEATURES, CLASSES = 12, 4
LAYOUT = {
    "W1": (FEATURES, 6),
    "b1": (6,),
    "W2": (6, 5),
    "b2": (5,),
    "W3": (5, CLASSES),
    "b3": (CLASSES,),
}


def data_file(path: Path, dtype: str = "float32") -> str:
    """A generated data set of 300 samples, 12 features, 4 classes at ``path``; its SHA-256."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((300, FEATURES))
    y = (x[:, 0] > 0).astype(np.int64) + 2 * (x[:, 1] > 0)
    stored = (x * 1000).astype(np.int16) if dtype == "int16" else x.astype(dtype)
    with path.open("wb") as out:
        np.savez(out, x=stored, y=y)
    return hashlib.sha256(path.read_bytes()).hexdigest()


def learner_folder(
    folder: Path,
    *,
    module: str = MLP2,
    features: str = "float32",
    dtype: str = "float32",
    extra: str = "",
    rounds: int = 4,
) -> Path:
    """``folder`` holding mlp2.py, data.npz and plan.toml (4 roles, a tree of fan-out 2, the
    module on the file); the plan's path."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "mlp2.py").write_text(module)
    pin = data_file(folder / "data.npz", features)
    text = plan_text(
        "module-mlp2",
        roles=4,
        rounds=rounds,
        topology={"shape": "tree", "fanout": 2},
        contract={"dtype": dtype},
        budgets={"accept": 120.0, "start": 120.0, "receive": 60.0},
        work={"kind": "learn"},
        learner={
            "kind": "module",
            "module": "mlp2.py",
            "rate": 0.05,
            "seed": 3,
            "batch": 8,
            "dataset": "data.npz",
            "dataset_sha256": pin,
        },
        extra=f"[learner.options]\nwidths = {list(WIDTHS)}\n" + extra,
    )
    (folder / "plan.toml").write_text(text)
    return folder / "plan.toml"


def replicated(plan: Path) -> str:
    loaded = load_plan(plan)
    return replicate(loaded, dataset_of(loaded)).digest


def summary_line(stdout: str, label: str) -> str:
    (line,) = [line for line in stdout.splitlines() if line.startswith(label)]
    return line[len(label) :].strip()


def test_a_module_learner_on_a_data_set_file_equals_the_replicated_learner(tmp_path: Path) -> None:
    plan = learner_folder(tmp_path / "work")
    expected = replicated(plan)
    ran = run_alpha("run", str(plan), "-o", str(tmp_path / "run"))
    assert ran.returncode == EXIT_OK, ran.stderr
    assert summary_line(ran.stdout, "equal bit for bit") == "yes"
    assert summary_line(ran.stdout, "final parameters") == expected
    assert summary_line(ran.stdout, "replicated learner") == expected
    # Every role holds those bits.
    reports = sorted((tmp_path / "run" / "reports").glob("role-*.json"))
    assert len(reports) == 4
    assert {json.loads(r.read_text())["digests"]["w"] for r in reports} == {expected}


def test_a_compiled_module_learner_runs_with_its_files_gone(tmp_path: Path) -> None:
    plan = learner_folder(tmp_path / "work")
    expected = replicated(plan)
    compiled = run_alpha("compile", str(plan), "-o", str(tmp_path / "out"))
    assert compiled.returncode == EXIT_OK, compiled.stderr
    (tmp_path / "work" / "mlp2.py").unlink()
    (tmp_path / "work" / "data.npz").unlink()
    launched = run_alpha("launch", str(tmp_path / "out"), "--cold", cwd=tmp_path)
    assert launched.returncode == EXIT_OK, launched.stderr
    assert summary_line(launched.stdout, "final parameters") == expected
    assert summary_line(launched.stdout, "all roles agree").startswith("yes")


def test_a_contract_violation_is_one_line_at_exit_2_and_no_run_folder(tmp_path: Path) -> None:
    broken = MLP2.replace("    h2 = c.hard_tanh(z2)\n", "    h2 = np.tanh(z2)\n").replace(
        "from alpha.learner import contract as c\n",
        "import numpy as np\n\nfrom alpha.learner import contract as c\n",
    )
    line = broken.splitlines().index("    h2 = np.tanh(z2)") + 1
    plan = learner_folder(tmp_path / "work", module=broken)
    for argv in (("run", str(plan)), ("run", str(plan), "-o", str(tmp_path / "run"))):
        ran = run_alpha(*argv, cwd=tmp_path)
        assert ran.returncode == EXIT_USAGE, ran.stderr
        assert ran.stderr.splitlines() == [
            f"alpha: error: learner module {tmp_path / 'work' / 'mlp2.py'}: line {line}: "
            "np.tanh: a transcendental: a library approximation"
        ]
        assert ran.stdout == ""
        assert sorted(p.name for p in tmp_path.iterdir()) == ["work"]  # no runs/, no run/


def test_an_exported_generation_names_the_modules_arrays(tmp_path: Path) -> None:
    plan = learner_folder(tmp_path / "work", extra="[checkpoint]\nevery = 2\n")
    ran = run_alpha("run", str(plan), "-o", str(tmp_path / "run"))
    assert ran.returncode == EXIT_OK, ran.stderr
    final = summary_line(ran.stdout, "final parameters")
    (tmp_path / "work" / "mlp2.py").unlink()  # the generation records the layout itself
    out = tmp_path / "exported.npz"
    restored = run_alpha(
        "checkpoint", "restore", str(tmp_path / "run" / "checkpoints"), "-o", str(out)
    )
    assert restored.returncode == EXIT_OK, restored.stderr
    with np.load(out) as arrays:
        assert list(arrays.files) == [*LAYOUT, "round"]
        assert {name: arrays[name].shape for name in LAYOUT} == LAYOUT
        assert {str(arrays[name].dtype) for name in LAYOUT} == {"float32"}
        assert int(arrays["round"]) == 4
        flat = np.concatenate([arrays[name].ravel() for name in LAYOUT])
    assert hashlib.sha256(flat.tobytes()).hexdigest() == final


def test_an_aarch64_role_under_qemu_computes_the_same_bits(tmp_path: Path) -> None:
    try:
        interpreter = aarch64_interpreter()
    except EmulationUnavailable as why:
        pytest.skip(f"no AArch64 emulation here: {why}")
    plan = learner_folder(
        tmp_path / "work", features="int16", dtype="float64", extra="[targets]\naarch64 = [3]\n"
    )
    expected = replicated(plan)
    ran = run_alpha(
        "run",
        str(plan),
        "-o",
        str(tmp_path / "run"),
        "--interpreter",
        f"aarch64={shlex.join(interpreter)}",
    )
    assert ran.returncode == EXIT_OK, ran.stderr
    assert summary_line(ran.stdout, "equal bit for bit") == "yes"
    assert summary_line(ran.stdout, "final parameters") == expected
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert [entry["target"] for entry in run["roles"]] == ["x86_64", "x86_64", "x86_64", "aarch64"]
    report = json.loads((tmp_path / "run" / "reports" / "role-000003.json").read_text())
    assert (report["machine"], report["digests"]["w"]) == ("aarch64", expected)
