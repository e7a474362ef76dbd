"""``alpha checkpoint list`` and ``restore`` (alpha.app.checkpoint_command): the listing by
round, text and JSON; the ``.npz`` of named, shaped tensors, whose layout round-trips to the flat
arrays for any model shape; and each refusal by its class."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from alpha.app.checkpoint_command import ROUND_KEY, flat_arrays, model_of, named_arrays
from alpha.app.cli import main
from alpha.checkpoint.store import (
    move_pointer,
    open_generation,
    owner_ranges,
    parts_of,
    publish,
    staged_folder,
    write_shards,
)
from alpha.errors import CheckpointCorrupt, UsageError
from alpha.exitcodes import EXIT_OK, EXIT_USAGE
from alpha.learner.model import Model
from tests.support import raises_exactly

OPTIMIZERS: dict[str, tuple[str, ...]] = {"sgd": (), "momentum": ("v",), "adam": ("m", "v")}


def state_of(model: Model, optimizer: str, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    arrays = {"w": rng.standard_normal(model.size).astype(model.dtype)}
    for name in OPTIMIZERS[optimizer]:
        arrays[name] = rng.standard_normal(model.size).astype(model.dtype)
    if optimizer == "adam":
        arrays["p1"] = np.array([0.9**3], dtype=model.dtype)
        arrays["p2"] = np.array([0.999**3], dtype=model.dtype)
    return arrays


def expected_tensors(model: Model, flat: np.ndarray) -> dict[str, np.ndarray]:
    """The model's tensors cut from the flat vector by hand, in the layout's order."""
    out, at = {}, 0
    for name, shape in model.layout:
        count = math.prod(shape)
        out[name] = flat[at : at + count].reshape(shape)
        at += count
    assert at == flat.size
    return out


models = st.builds(
    Model.shipped,
    hidden=st.one_of(st.none(), st.integers(1, 40)),
    dtype=st.sampled_from(["float32", "float64"]),
)


@settings(max_examples=60, deadline=None)
@given(model=models, optimizer=st.sampled_from(sorted(OPTIMIZERS)), round=st.integers(1, 2**32))
def test_the_npz_layout_is_the_flat_arrays_reshaped_and_round_trips(
    model: Model, optimizer: str, round: int
) -> None:
    arrays = state_of(model, optimizer)
    named = named_arrays(model, arrays, round)
    for name, tensor in expected_tensors(model, arrays["w"]).items():
        assert named[name].shape == tensor.shape and named[name].dtype == tensor.dtype
        assert np.array_equal(named[name], tensor)
    for array in OPTIMIZERS[optimizer]:
        for name, tensor in expected_tensors(model, arrays[array]).items():
            assert np.array_equal(named[f"{array}.{name}"], tensor)
    if optimizer == "adam":
        assert named["p1"].shape == () and named["p1"] == arrays["p1"][0]
    assert named[ROUND_KEY].shape == () and int(named[ROUND_KEY]) == round
    expected_keys = {name for name, _ in model.layout} | {ROUND_KEY}
    expected_keys |= {f"{a}.{n}" for a in OPTIMIZERS[optimizer] for n, _ in model.layout}
    expected_keys |= {"p1", "p2"} if optimizer == "adam" else set()
    assert set(named) == expected_keys
    # Copies, not views: writing the npz's arrays never touches the state.
    for value in named.values():
        assert not any(np.shares_memory(value, a) for a in arrays.values())
    back, found_round = flat_arrays(model, named)
    assert found_round == round
    assert {n: a.tobytes() for n, a in back.items()} == {n: a.tobytes() for n, a in arrays.items()}


def save(
    folder: Path, arrays: dict[str, np.ndarray], about: dict[str, object], round: int = 6
) -> Path:
    nonce = "0123abcd"
    staged = staged_folder(folder, round, nonce)
    for owner in range(3):
        ranges = {name: owner_ranges(a.size, 3)[owner] for name, a in arrays.items()}
        write_shards(staged, owner, parts_of(arrays, ranges))
    specs = {name: (tuple(a.shape), str(a.dtype)) for name, a in arrays.items()}
    name, digest = publish(folder, round, nonce, owners=3, arrays=specs, about=about)
    move_pointer(folder, name, digest)
    return folder / name


MLP = Model.shipped(5, "float32")
ABOUT = {"model": {"hidden": 5, "dtype": "float32"}, "run": "digits"}


def test_restore_writes_named_shaped_tensors_numpy_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    arrays = state_of(MLP, "adam", seed=3)
    save(tmp_path / "ckpt", arrays, ABOUT)
    out = tmp_path / "state.npz"
    assert main(["checkpoint", "restore", str(tmp_path / "ckpt"), str(out)]) == EXIT_OK
    err = capsys.readouterr().err
    assert f"round 6 written to {out}: W1 [64, 5], b1 [5], W2 [5, 10], b2 [10]" in err
    with np.load(out) as restored:
        assert int(restored["round"]) == 6
        assert restored["W1"].shape == (64, 5) and restored["W1"].dtype == np.float32
        for name, tensor in expected_tensors(MLP, arrays["w"]).items():
            assert np.array_equal(restored[name], tensor)
        for name, tensor in expected_tensors(MLP, arrays["m"]).items():
            assert np.array_equal(restored[f"m.{name}"], tensor)
        assert float(restored["p2"]) == float(arrays["p2"][0])
    # -o is the same file; both, different, are refused.
    again = tmp_path / "again.npz"
    assert main(["checkpoint", "restore", str(tmp_path / "ckpt"), "-o", str(again)]) == EXIT_OK
    assert again.read_bytes() == out.read_bytes()
    import argparse

    from alpha.app.checkpoint_command import checkpoint_command

    args = argparse.Namespace(action="restore", path=str(tmp_path / "ckpt"), out="a", output="b")
    raises_exactly(UsageError, checkpoint_command, args)
    args = argparse.Namespace(
        action="restore", path=str(tmp_path / "ckpt"), out=str(tmp_path), output=None
    )
    raises_exactly(UsageError, checkpoint_command, args)


def test_restore_of_a_damaged_generation_is_refused_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import argparse

    from alpha.app.checkpoint_command import checkpoint_command

    folder = save(tmp_path / "ckpt", state_of(MLP, "momentum"), ABOUT)
    shard = open_generation(folder).shards["v"][1]
    (folder / shard.file).write_bytes(b"\0" * shard.bytes)  # the same size, other bytes
    out = tmp_path / "state.npz"
    args = argparse.Namespace(action="restore", path=str(folder), out=str(out), output=None)
    error = raises_exactly(CheckpointCorrupt, checkpoint_command, args)
    assert error.shard == shard.label
    assert main(["checkpoint", "restore", str(folder), str(out)]) == EXIT_USAGE
    assert "is corrupt" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize(
    "model",
    [
        {"hidden": 6, "dtype": "float32"},  # another size than the parameters'
        {"hidden": 5, "dtype": "float64"},  # another dtype
        {"hidden": 0, "dtype": "float32"},
        {"hidden": "5", "dtype": "float32"},
        {"dtype": "float32", "hidden": True},
        "mlp",
    ],
)
def test_a_model_that_does_not_fit_the_parameters_is_refused(tmp_path: Path, model: object) -> None:
    arrays = state_of(MLP, "sgd")
    raises_exactly(CheckpointCorrupt, model_of, {"model": model}, arrays, "test")
    folder = save(tmp_path / "ckpt", arrays, {"model": model})
    out = tmp_path / "state.npz"
    assert main(["checkpoint", "restore", str(folder), str(out)]) == EXIT_USAGE
    assert not out.exists()


def test_list_shows_each_generation_by_round_text_and_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "ckpt"
    generation = save(folder, state_of(MLP, "sgd"), ABOUT)
    assert main(["checkpoint", "list", str(folder)]) == EXIT_OK
    header, row = capsys.readouterr().out.splitlines()
    assert header.split() == ["round", "generation", "run", "written", "size"]
    cells = row.split()
    assert cells[:3] == ["6", generation.name, "digits"] and cells[-1] == "LATEST"
    assert main(["checkpoint", "list", str(folder), "--json"]) == EXIT_OK
    facts = json.loads(capsys.readouterr().out)
    assert facts["latest"] == generation.name and facts["pointer_problem"] is None
    (entry,) = facts["generations"]
    size = sum(p.stat().st_size for p in generation.rglob("*") if p.is_file())
    assert entry["round"] == 6 and entry["run"] == "digits" and entry["bytes"] == size
    assert entry["latest"] is True and entry["problem"] is None
    assert entry["written"].endswith("Z")


def test_list_refuses_what_is_not_a_checkpoint_folder(tmp_path: Path) -> None:
    import argparse

    from alpha.app.checkpoint_command import checkpoint_command

    generation = save(tmp_path / "ckpt", state_of(MLP, "sgd"), ABOUT)
    for path in (generation, tmp_path / "missing", generation / "manifest.json"):
        args = argparse.Namespace(action="list", path=str(path), json=False)
        raises_exactly(UsageError, checkpoint_command, args)


def test_round_without_resume_is_refused_before_the_plan_is_read(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["run", "no-such-plan.toml", "--round", "10"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("alpha: error: run: argument --round: needs --resume FOLDER")
    assert "no-such-plan" not in err
