"""Tests for alpha.plot: rendering loss curves and the hand-written PNG encoder.

Every PNG is decoded here independently of the encoder: chunks are parsed and their CRCs
checked, the IDAT data is inflated, and filter-0 scanlines are turned back into pixels.
"""

from __future__ import annotations

import math
import os
import struct
import zlib
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from alpha import plot
from alpha.plot import render_curves, write_loss_curve, write_png

SIGNATURE = b"\x89PNG\r\n\x1a\n"

LOSSES = [2.3 * math.exp(-i / 6) + 0.1 for i in range(20)]
ACCURACIES = [0.1 + 0.85 * (1 - math.exp(-i / 5)) for i in range(20)]


def decode_png(data: bytes) -> npt.NDArray[np.uint8]:
    """Decode an 8-bit RGB PNG whose scanlines all use filter 0."""
    assert data[:8] == SIGNATURE
    position = 8
    chunks: list[tuple[bytes, bytes]] = []
    while position < len(data):
        (length,) = struct.unpack(">I", data[position : position + 4])
        kind = data[position + 4 : position + 8]
        body = data[position + 8 : position + 8 + length]
        (crc,) = struct.unpack(">I", data[position + 8 + length : position + 12 + length])
        assert crc == zlib.crc32(kind + body) & 0xFFFFFFFF, f"bad CRC on {kind!r}"
        chunks.append((kind, body))
        position += 12 + length
    assert position == len(data)
    kinds = [kind for kind, _ in chunks]
    assert kinds[0] == b"IHDR"
    assert kinds[-1] == b"IEND"
    assert chunks[-1][1] == b""
    width, height, depth, colour, compression, filtering, interlace = struct.unpack(
        ">IIBBBBB", chunks[0][1]
    )
    assert (depth, colour, compression, filtering, interlace) == (8, 2, 0, 0, 0)
    raw = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
    assert len(raw) == height * (1 + 3 * width)
    rows = np.frombuffer(raw, dtype=np.uint8).reshape(height, 1 + 3 * width)
    assert (rows[:, 0] == 0).all(), "every scanline uses filter 0"
    return rows[:, 1:].reshape(height, width, 3).copy()


def read_png(path: Path) -> npt.NDArray[np.uint8]:
    return decode_png(path.read_bytes())


def count_color(image: npt.NDArray[np.uint8], color: tuple[int, int, int]) -> int:
    return int((image == np.array(color, dtype=np.uint8)).all(axis=2).sum())


def is_bluish(image: npt.NDArray[np.uint8]) -> npt.NDArray[np.bool_]:
    r, g, b = (image[..., k].astype(int) for k in range(3))
    return (b > r + 80) & (b > g + 30)


def is_orangish(image: npt.NDArray[np.uint8]) -> npt.NDArray[np.bool_]:
    r, g, b = (image[..., k].astype(int) for k in range(3))
    return (r > 200) & (g > 80) & (g < 180) & (b < 80)


# --- writing and decoding a curve ---------------------------------------------------------------


def test_write_loss_curve_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "curve.png"
    assert write_loss_curve(path, LOSSES, ACCURACIES, title="run 1") == path
    image = read_png(path)
    assert image.shape == (360, 640, 3)
    assert image.dtype == np.uint8
    # The image equals what render_curves draws.
    np.testing.assert_array_equal(image, render_curves(LOSSES, ACCURACIES, title="run 1"))
    # White background: corners and most pixels.
    for y, x in [(0, 0), (0, 639), (359, 0), (359, 639)]:
        assert tuple(image[y, x]) == (255, 255, 255)
    assert count_color(image, (255, 255, 255)) > 0.8 * 640 * 360
    # Both curves are there, in their colours.
    assert count_color(image, plot.LOSS_BLUE) > 500
    assert count_color(image, plot.ACCURACY_ORANGE) > 500
    assert is_bluish(image).sum() > 500
    assert is_orangish(image).sum() > 500
    # The light-grey frame.
    assert count_color(image, plot.FRAME) > 1000


def test_without_accuracies_there_is_no_orange(tmp_path: Path) -> None:
    path = write_loss_curve(tmp_path / "loss.png", LOSSES)
    image = read_png(path)
    assert image.shape == (360, 640, 3)
    assert is_bluish(image).sum() > 500
    assert is_orangish(image).sum() == 0


def test_the_loss_line_falls_from_left_to_right() -> None:
    image = render_curves(LOSSES)
    ys, xs = np.nonzero((image == np.array(plot.LOSS_BLUE, dtype=np.uint8)).all(axis=2))
    # Ignore the blue text above the frame: keep pixels in the plot's lower part.
    inside = ys > 40
    ys, xs = ys[inside], xs[inside]
    left_y = ys[xs < xs.min() + 10].mean()
    right_y = ys[xs > xs.max() - 10].mean()
    assert left_y < right_y - 100  # high loss at round 1 is drawn near the top


def test_image_changes_when_losses_change() -> None:
    first = render_curves(LOSSES)
    second = render_curves([*LOSSES[:-1], LOSSES[-1] * 5])
    third = render_curves(LOSSES, title="other")
    assert not np.array_equal(first, second)
    assert not np.array_equal(first, third)
    np.testing.assert_array_equal(first, render_curves(list(LOSSES)))


def test_custom_size() -> None:
    image = render_curves(LOSSES, ACCURACIES, width=200, height=100)
    assert image.shape == (100, 200, 3)
    assert is_bluish(image).sum() > 0
    assert is_orangish(image).sum() > 0


# --- edge cases ---------------------------------------------------------------------------------


def test_one_round_is_a_single_point(tmp_path: Path) -> None:
    image = read_png(write_loss_curve(tmp_path / "one.png", [0.7], [0.5]))
    assert image.shape == (360, 640, 3)
    assert is_bluish(image).sum() > 0
    assert is_orangish(image).sum() > 0


@pytest.mark.parametrize("losses", [[1.0, 1.0, 1.0], [0.0, 0.0], [-2.0, -2.0], [0.0]])
def test_all_equal_losses_are_drawn(losses: list[float]) -> None:
    with np.errstate(all="raise"):
        image = render_curves(losses)
    assert count_color(image, plot.LOSS_BLUE) > 0


def test_negative_losses_extend_the_axis() -> None:
    image = render_curves([1.0, -1.0, 0.5])
    assert count_color(image, plot.LOSS_BLUE) > 0


@pytest.mark.parametrize("losses", [[], ()])
def test_empty_losses_are_refused(losses: list[float]) -> None:
    with pytest.raises(ValueError, match="empty"):
        render_curves(losses)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_loss_is_refused_naming_the_round(bad: float) -> None:
    with pytest.raises(ValueError, match="round 3"):
        render_curves([1.0, 0.9, bad, 0.7])


def test_non_finite_accuracy_is_refused_naming_the_round() -> None:
    with pytest.raises(ValueError, match="accuracy of round 2"):
        render_curves([1.0, 0.9], [0.5, math.nan])


def test_bad_accuracies_are_refused() -> None:
    with pytest.raises(ValueError, match="round 1"):
        render_curves([1.0, 0.9], [1.5, 0.5])
    with pytest.raises(ValueError, match="must match"):
        render_curves([1.0, 0.9], [0.5])
    with pytest.raises(ValueError, match="empty"):
        render_curves([1.0], [])


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match="one-dimensional"):
        render_curves([[1.0, 2.0]])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="numbers"):
        render_curves(["a", "b"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="width"):
        render_curves([1.0], width=10)
    with pytest.raises(ValueError, match="height"):
        render_curves([1.0], height=10)


def test_write_loss_curve_refuses_without_writing(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="round 2"):
        write_loss_curve(tmp_path / "x.png", [1.0, math.nan])
    assert list(tmp_path.iterdir()) == []


# --- the PNG encoder ----------------------------------------------------------------------------


def test_write_png_round_trips_arbitrary_pixels(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    image = rng.integers(0, 256, size=(7, 5, 3), dtype=np.uint8)
    path = tmp_path / "random.png"
    write_png(path, image)
    np.testing.assert_array_equal(read_png(path), image)


def test_write_png_accepts_non_contiguous_arrays(tmp_path: Path) -> None:
    image = np.arange(4 * 6 * 3, dtype=np.uint8).reshape(4, 6, 3)[:, ::2]
    path = tmp_path / "strided.png"
    write_png(path, image)
    np.testing.assert_array_equal(read_png(path), image)


@pytest.mark.parametrize(
    "image",
    [
        np.zeros((4, 4), dtype=np.uint8),
        np.zeros((4, 4, 4), dtype=np.uint8),
        np.zeros((4, 4, 1), dtype=np.uint8),
        np.zeros((0, 4, 3), dtype=np.uint8),
        np.zeros((4, 0, 3), dtype=np.uint8),
        np.zeros((4, 4, 3), dtype=np.float32),
        np.zeros((4, 4, 3), dtype=np.uint16),
        [[[0, 0, 0]]],
    ],
)
def test_write_png_refuses_bad_images(tmp_path: Path, image: object) -> None:
    with pytest.raises(ValueError):
        write_png(tmp_path / "bad.png", image)  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


def test_write_png_is_atomic(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "curve.png"
    write_loss_curve(path, LOSSES)
    assert sorted(p.name for p in path.parent.iterdir()) == ["curve.png"]
    assert oct(path.stat().st_mode & 0o777) == oct(0o644)
    # Overwriting leaves only the new file.
    write_loss_curve(path, LOSSES, ACCURACIES)
    assert sorted(p.name for p in path.parent.iterdir()) == ["curve.png"]
    assert is_orangish(read_png(path)).sum() > 0


def test_failed_rename_keeps_the_old_file_and_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "curve.png"
    write_loss_curve(path, LOSSES)
    before = path.read_bytes()

    def broken_replace(src: object, dst: object) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk gone"):
        write_loss_curve(path, LOSSES, ACCURACIES)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["curve.png"]
