"""Loss curves as PNG images, drawn and encoded by hand with numpy and the standard library.

:func:`render_curves` draws the loss per round (blue, left-hand scale) and optionally the
accuracy per round (orange, right-hand scale 0..100 %) into an RGB ``uint8`` array;
:func:`write_png` encodes such an array as a PNG file (8-bit truecolour, filter 0, one IDAT)
and puts it in place atomically; :func:`write_loss_curve` does both.

The loss axis runs from 0 to the largest loss; when some loss is negative it is extended down to
the smallest, and when every loss is 0 it runs from 0 to 1. The x-axis runs over rounds 1..N.
Labels are drawn with a built-in 3x5 pixel font (digits, ``. % - + : / ( ) , = _ ?``, and
the letters A-Z, with lower-case letters drawn as capitals); any other character is drawn as
``?``.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt

from alpha._checks import int_in
from alpha._files import write_bytes_atomically

__all__ = ["encode_png", "render_curves", "write_loss_curve", "write_png"]

Image = npt.NDArray[np.uint8]
Color = tuple[int, int, int]

WHITE: Final[Color] = (255, 255, 255)
FRAME: Final[Color] = (200, 200, 200)
GRID: Final[Color] = (232, 232, 232)
TEXT: Final[Color] = (64, 64, 64)
LOSS_BLUE: Final[Color] = (31, 119, 180)
ACCURACY_ORANGE: Final[Color] = (255, 127, 14)

MIN_WIDTH: Final = 120
MIN_HEIGHT: Final = 80
GRID_INTERVALS: Final = 4

# --- the 3x5 font -------------------------------------------------------------------------------

# Each glyph is five rows of three cells; '#' is ink, '.' is background.
_GLYPHS: Final[dict[str, str]] = {
    "0": "### #.# #.# #.# ###",
    "1": ".#. ##. .#. .#. ###",
    "2": "### ..# ### #.. ###",
    "3": "### ..# .## ..# ###",
    "4": "#.# #.# ### ..# ..#",
    "5": "### #.. ### ..# ###",
    "6": "### #.. ### #.# ###",
    "7": "### ..# ..# .#. .#.",
    "8": "### #.# ### #.# ###",
    "9": "### #.# ### ..# ###",
    ".": "... ... ... ... .#.",
    ",": "... ... ... .#. #..",
    "%": "#.# ..# .#. #.. #.#",
    "-": "... ... ### ... ...",
    "+": "... .#. ### .#. ...",
    ":": "... .#. ... .#. ...",
    "/": "..# ..# .#. #.. #..",
    "(": ".#. #.. #.. #.. .#.",
    ")": ".#. ..# ..# ..# .#.",
    "=": "... ### ... ### ...",
    "_": "... ... ... ... ###",
    "?": "### ..# .## ... .#.",
    " ": "... ... ... ... ...",
    "A": ".#. #.# ### #.# #.#",
    "B": "##. #.# ##. #.# ##.",
    "C": ".## #.. #.. #.. .##",
    "D": "##. #.# #.# #.# ##.",
    "E": "### #.. ##. #.. ###",
    "F": "### #.. ##. #.. #..",
    "G": ".## #.. #.# #.# .##",
    "H": "#.# #.# ### #.# #.#",
    "I": "### .#. .#. .#. ###",
    "J": "..# ..# ..# #.# .#.",
    "K": "#.# #.# ##. #.# #.#",
    "L": "#.. #.. #.. #.. ###",
    "M": "#.# ### ### #.# #.#",
    "N": "##. #.# #.# #.# #.#",
    "O": ".#. #.# #.# #.# .#.",
    "P": "##. #.# ##. #.. #..",
    "Q": ".#. #.# #.# ##. .##",
    "R": "##. #.# ##. #.# #.#",
    "S": ".## #.. .#. ..# ##.",
    "T": "### .#. .#. .#. .#.",
    "U": "#.# #.# #.# #.# ###",
    "V": "#.# #.# #.# #.# .#.",
    "W": "#.# #.# ### ### #.#",
    "X": "#.# #.# .#. #.# #.#",
    "Y": "#.# #.# .#. .#. .#.",
    "Z": "### ..# .#. #.. ###",
}
_GLYPH_W: Final = 3
_GLYPH_H: Final = 5


def _glyph_mask(glyph: str) -> npt.NDArray[np.bool_]:
    """The ``[5, 3]`` ink mask of one glyph string."""
    rows = glyph.split()
    return np.array([[cell == "#" for cell in row] for row in rows], dtype=np.bool_)


_MASKS: Final[dict[str, npt.NDArray[np.bool_]]] = {
    char: _glyph_mask(glyph) for char, glyph in _GLYPHS.items()
}


def _text_width(text: str, scale: int) -> int:
    """Width in pixels of ``text`` drawn at ``scale`` (one empty column between glyphs)."""
    if not text:
        return 0
    return (len(text) * (_GLYPH_W + 1) - 1) * scale


def _draw_text(image: Image, text: str, x: int, y: int, color: Color, scale: int) -> None:
    """Draw ``text`` with its top-left corner at ``(x, y)``, clipped to the image."""
    height, width = image.shape[:2]
    for index, char in enumerate(text.upper()):
        mask = _MASKS.get(char, _MASKS["?"])
        big = np.kron(mask, np.ones((scale, scale), dtype=np.bool_))
        left = x + index * (_GLYPH_W + 1) * scale
        top = y
        # Clip the glyph's box to the image.
        x0, y0 = max(left, 0), max(top, 0)
        x1, y1 = min(left + big.shape[1], width), min(top + big.shape[0], height)
        if x0 >= x1 or y0 >= y1:
            continue
        sub = big[y0 - top : y1 - top, x0 - left : x1 - left]
        image[y0:y1, x0:x1][sub] = color


# --- drawing ------------------------------------------------------------------------------------


def _checked(values: Sequence[float], name: str) -> npt.NDArray[np.float64]:
    """``values`` as a finite 1-D float array.

    Raises:
        ValueError: if ``values`` is empty, not one-dimensional, not numeric, or holds a NaN or
            an infinity (the message names the first such round, counting from 1).
    """
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{name} must be a sequence of numbers: {error}") from None
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {array.shape}")
    if array.size == 0:
        raise ValueError(f"{name} is empty: nothing to plot")
    bad = np.flatnonzero(~np.isfinite(array))
    if bad.size:
        first = int(bad[0])
        raise ValueError(
            f"{name} of round {first + 1} is {float(array[first])!r}, not a finite number"
        )
    return array


def _format_value(value: float) -> str:
    """A short label for a loss value (four significant digits)."""
    text = f"{value:.4g}"
    return "0" if text == "-0" else text


def _format_percent(fraction: float) -> str:
    """A fraction 0..1 as a percentage label."""
    return f"{fraction * 100:.1f}%"


def _fill_rect(image: Image, x0: int, y0: int, x1: int, y1: int, color: Color) -> None:
    """Fill the inclusive rectangle ``[x0..x1] x [y0..y1]``, clipped to the image."""
    height, width = image.shape[:2]
    x0, y0 = max(x0, 0), max(y0, 0)
    x1, y1 = min(x1, width - 1), min(y1, height - 1)
    if x0 <= x1 and y0 <= y1:
        image[y0 : y1 + 1, x0 : x1 + 1] = color


def _draw_polyline(
    image: Image,
    xs: npt.NDArray[np.float64],
    ys: npt.NDArray[np.float64],
    color: Color,
    marker: int,
) -> None:
    """Draw a 2-px polyline through ``(xs, ys)`` by sampling each segment densely, with square
    markers of side ``marker`` at the points (none when ``marker`` is 0)."""
    height, width = image.shape[:2]
    px_parts: list[npt.NDArray[np.float64]] = [xs]
    py_parts: list[npt.NDArray[np.float64]] = [ys]
    for i in range(len(xs) - 1):
        steps = int(np.ceil(max(abs(xs[i + 1] - xs[i]), abs(ys[i + 1] - ys[i])) * 2)) + 1
        t = np.linspace(0.0, 1.0, steps + 1)
        px_parts.append(xs[i] + (xs[i + 1] - xs[i]) * t)
        py_parts.append(ys[i] + (ys[i + 1] - ys[i]) * t)
    px = np.rint(np.concatenate(px_parts)).astype(np.int64)
    py = np.rint(np.concatenate(py_parts)).astype(np.int64)
    for dx in (0, 1):
        for dy in (0, 1):
            qx, qy = px + dx, py + dy
            keep = (qx >= 0) & (qx < width) & (qy >= 0) & (qy < height)
            image[qy[keep], qx[keep]] = color
    if marker:
        half = marker // 2
        for x, y in zip(np.rint(xs).astype(int), np.rint(ys).astype(int), strict=True):
            x0, y0 = x - half, y - half
            _fill_rect(image, x0, y0, x0 + marker - 1, y0 + marker - 1, color)


def render_curves(
    losses: Sequence[float],
    accuracies: Sequence[float] | None = None,
    *,
    width: int = 640,
    height: int = 360,
    title: str = "",
) -> Image:
    """Draw the loss per round, and optionally the accuracy per round, as an RGB image.

    The image has a white background, a light-grey frame with horizontal grid lines, the loss as
    a blue polyline on a left-hand scale from 0 to the largest loss (extended down to the
    smallest loss if some loss is negative; 0..1 if every loss is 0), and the accuracy (values
    0..1) as an orange polyline on a right-hand scale 0..100 %. The x-axis runs over rounds
    1..N; a single round is drawn as one point in the middle. Labels give the scale ends, the
    first and last round, the last loss and accuracy, and the optional ``title``.

    Args:
        losses: the loss of each round, round 1 first.
        accuracies: the accuracy (0..1) of each round, as many as ``losses``, or ``None``.
        width: image width in pixels, at least 120.
        height: image height in pixels, at least 80.
        title: text drawn centred above the plot (upper-cased; characters outside the built-in
            font are drawn as ``?``).

    Returns:
        A ``uint8`` array of shape ``[height, width, 3]``.

    Raises:
        ValueError: if ``losses`` is empty, a loss or accuracy is NaN or infinite (the message
            names the round), an accuracy lies outside 0..1, ``accuracies`` has a different
            length from ``losses``, or the image is smaller than 120x80.
    """
    if not int_in(width, MIN_WIDTH):
        raise ValueError(f"width must be an integer of at least {MIN_WIDTH}, got {width!r}")
    if not int_in(height, MIN_HEIGHT):
        raise ValueError(f"height must be an integer of at least {MIN_HEIGHT}, got {height!r}")
    loss = _checked(losses, "loss")
    accuracy: npt.NDArray[np.float64] | None = None
    if accuracies is not None:
        accuracy = _checked(accuracies, "accuracy")
        if accuracy.size != loss.size:
            raise ValueError(
                f"got {accuracy.size} accuracies for {loss.size} losses; they must match"
            )
        outside = np.flatnonzero((accuracy < 0.0) | (accuracy > 1.0))
        if outside.size:
            first = int(outside[0])
            raise ValueError(
                f"accuracy of round {first + 1} is {float(accuracy[first])!r}, outside 0..1"
            )

    rounds = int(loss.size)
    low = min(0.0, float(loss.min()))
    high = max(0.0, float(loss.max()))
    if high <= low:  # every loss is 0
        high = low + 1.0

    scale = 2 if width >= 320 and height >= 180 else 1
    pad = 3 * scale
    text_h = _GLYPH_H * scale
    low_label, high_label = _format_value(low), _format_value(high)

    # Margins: title row and axis-name row on top, tick labels below, scales at the sides.
    top = pad + (text_h + pad if title else 0) + text_h + 2 * pad
    bottom = height - 1 - (2 * pad + text_h)
    left = 2 * pad + max(_text_width(low_label, scale), _text_width(high_label, scale))
    right_label_w = _text_width("100%", scale) if accuracy is not None else 0
    right = width - 1 - (2 * pad + right_label_w if accuracy is not None else 2 * pad)
    if right - left < 16 or bottom - top < 16:
        raise ValueError(f"a {width}x{height} image leaves no room for the plot")

    image = np.empty((height, width, 3), dtype=np.uint8)
    image[:] = WHITE

    # Grid lines, then the frame over them.
    for k in range(1, GRID_INTERVALS):
        y = round(bottom - (bottom - top) * k / GRID_INTERVALS)
        image[y, left + 1 : right] = GRID
    image[top, left : right + 1] = FRAME
    image[bottom, left : right + 1] = FRAME
    image[top : bottom + 1, left] = FRAME
    image[top : bottom + 1, right] = FRAME

    # Point positions; the lines keep one pixel inside the frame.
    inner_left, inner_right = left + 2, right - 3
    inner_top, inner_bottom = top + 2, bottom - 3
    if rounds == 1:
        xs = np.array([(inner_left + inner_right) / 2.0])
    else:
        xs = inner_left + (inner_right - inner_left) * np.arange(rounds) / (rounds - 1)
    spacing = (inner_right - inner_left) / max(rounds - 1, 1)
    marker = 4 if rounds == 1 or spacing >= 12 else 0

    def to_y(values: npt.NDArray[np.float64], lo: float, hi: float) -> npt.NDArray[np.float64]:
        return inner_bottom - (values - lo) / (hi - lo) * (inner_bottom - inner_top)

    if accuracy is not None:
        _draw_polyline(image, xs, to_y(accuracy, 0.0, 1.0), ACCURACY_ORANGE, marker)
    _draw_polyline(image, xs, to_y(loss, low, high), LOSS_BLUE, marker)

    # Title.
    y = pad
    if title:
        _draw_text(image, title, (width - _text_width(title, scale)) // 2, y, TEXT, scale)
        y += text_h + pad
    # The last values, centred over the plot, with the axis names over the two scales where
    # they leave room (at small sizes the names are dropped: the last values name both curves).
    gap = 2 * (_GLYPH_W + 1) * scale
    parts = [(f"last loss {_format_value(float(loss[-1]))}", LOSS_BLUE)]
    if accuracy is not None:
        parts.append((f"accuracy {_format_percent(float(accuracy[-1]))}", ACCURACY_ORANGE))
    total = sum(_text_width(text, scale) for text, _ in parts) + gap * (len(parts) - 1)
    x = (left + right - total) // 2
    loss_name_end = left + _text_width("loss", scale) + gap
    accuracy_name_start = right + 1 - _text_width("accuracy", scale) - gap
    if x >= loss_name_end and (accuracy is None or x + total <= accuracy_name_start):
        _draw_text(image, "loss", left, y, LOSS_BLUE, scale)
        if accuracy is not None:
            name_x = right - _text_width("accuracy", scale) + 1
            _draw_text(image, "accuracy", name_x, y, ACCURACY_ORANGE, scale)
    for text, color in parts:
        _draw_text(image, text, x, y, color, scale)
        x += _text_width(text, scale) + gap

    # Left scale: loss ends.
    _draw_text(image, high_label, left - pad - _text_width(high_label, scale), top, TEXT, scale)
    _draw_text(
        image,
        low_label,
        left - pad - _text_width(low_label, scale),
        bottom - text_h + 1,
        TEXT,
        scale,
    )
    # Right scale: accuracy ends.
    if accuracy is not None:
        _draw_text(image, "100%", right + pad, top, ACCURACY_ORANGE, scale)
        _draw_text(image, "0%", right + pad, bottom - text_h + 1, ACCURACY_ORANGE, scale)
    # X-axis: first and last round, and its name.
    tick_y = bottom + pad
    first_label, last_label = "1", str(rounds)
    if rounds == 1:
        _draw_text(image, "1", round(xs[0]) - _text_width("1", scale) // 2, tick_y, TEXT, scale)
    else:
        _draw_text(image, first_label, left, tick_y, TEXT, scale)
        last_x = right - _text_width(last_label, scale) + 1
        _draw_text(image, last_label, last_x, tick_y, TEXT, scale)
    name_x = (left + right - _text_width("round", scale)) // 2
    if rounds == 1:  # keep the name clear of the single tick label in the middle
        name_x = right - _text_width("round", scale) + 1
    _draw_text(image, "round", name_x, tick_y, TEXT, scale)
    return image


# --- PNG ----------------------------------------------------------------------------------------

_PNG_SIGNATURE: Final = b"\x89PNG\r\n\x1a\n"


def _chunk(kind: bytes, data: bytes) -> bytes:
    """One PNG chunk: length, type, data, and the CRC-32 of type and data."""
    crc = zlib.crc32(data, zlib.crc32(kind)) & 0xFFFFFFFF
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)


def encode_png(image: Image) -> bytes:
    """Encode an RGB ``uint8`` image ``[height, width, 3]`` as PNG bytes.

    Raises:
        ValueError: if ``image`` is not a ``uint8`` numpy array of shape ``[h, w, 3]`` with
            ``h`` and ``w`` positive.
    """
    if not isinstance(image, np.ndarray):
        raise ValueError(f"image must be a numpy array, got {type(image).__name__}")
    if image.dtype != np.uint8:
        raise ValueError(f"image must have dtype uint8, got {image.dtype}")
    if image.ndim != 3 or image.shape[2] != 3 or image.shape[0] < 1 or image.shape[1] < 1:
        raise ValueError(f"image must have shape [height, width, 3], got {image.shape}")
    height, width = int(image.shape[0]), int(image.shape[1])
    if height >= 2**31 or width >= 2**31:
        raise ValueError(f"image of {width}x{height} is too large for PNG")
    rows = np.ascontiguousarray(image).reshape(height, width * 3)
    # Filter type 0 (None) before every scanline.
    scanlines = np.concatenate([np.zeros((height, 1), dtype=np.uint8), rows], axis=1)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"".join(
        (
            _PNG_SIGNATURE,
            _chunk(b"IHDR", header),
            _chunk(b"IDAT", zlib.compress(scanlines.tobytes(), 9)),
            _chunk(b"IEND", b""),
        )
    )


def write_png(path: Path, image: Image) -> None:
    """Write an RGB ``uint8`` image ``[height, width, 3]`` to ``path`` as a PNG file.

    The file is written to a temporary file in the same folder, fsynced, and renamed into place,
    so a reader sees either the old file or the whole new one; the folder is created if needed.

    Raises:
        ValueError: if ``image`` is not a ``uint8`` numpy array of shape ``[h, w, 3]`` with
            ``h`` and ``w`` positive.
        OSError: if the file cannot be written.
    """
    data = encode_png(image)
    write_bytes_atomically(Path(path), data)


def write_loss_curve(
    path: Path,
    losses: Sequence[float],
    accuracies: Sequence[float] | None = None,
    *,
    title: str = "",
) -> Path:
    """Render the loss (and accuracy) curve with :func:`render_curves` and write it to ``path``
    as a 640x360 PNG with :func:`write_png`.

    Returns:
        ``path``.

    Raises:
        ValueError: as :func:`render_curves` does (empty losses, NaN or infinite values naming
            the round, accuracies outside 0..1 or of another length).
        OSError: if the file cannot be written.
    """
    write_png(path, render_curves(losses, accuracies, title=title))
    return Path(path)
