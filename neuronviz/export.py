"""Exporting what the window shows: PNG, SVG, animations (GIF or PNG frames) and the summary as CSV.

One rendering path serves the window's menus and the headless CLI: a widget (the main window or
one pane) is laid out at the requested size and painted by Qt into an image or an SVG generator,
so an export is exactly what the window shows. Every file is written to a temporary name and
renamed into place, so a failed or cancelled export leaves nothing half-written.
"""

from __future__ import annotations

import csv
import io
import math
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from PySide6.QtCore import QPoint, QRect, QSize
from PySide6.QtGui import QImage, QPainter
from PySide6.QtSvg import QSvgGenerator
from PySide6.QtWidgets import QApplication, QGraphicsItem, QGraphicsView, QWidget

from neuronviz.session import Session
from neuronviz.widgets.summary import summary_csv_rows
from sim.errors import SimError, TraceFileError
from sim.io.atomic import atomic_path

if TYPE_CHECKING:
    from PIL import Image

IMAGE_SUFFIXES = (".png", ".svg")
MIN_SIZE, MAX_SIZE = QSize(200, 150), QSize(8000, 8000)
MAX_FRAMES = 2000
MAX_ANIMATION_PIXELS = 1_500_000_000  # frames x width x height: 1.5 GB of palette frames
GIF_COLORS = 256
SVG_DPI = 96  # CSS pixels: the SVG's width and height in mm come out as the widget's size in pixels

FrameProgress = Callable[[int, int], bool]  # (frames done, frames in all) -> False to cancel
# called once an output is whole, before it replaces its target: what it raises leaves the target as
# it was (the CLI's check that nothing failed while the view was painted)
Verify = Callable[[], None]


def _nothing_failed() -> None:
    """The default :data:`Verify`: the window's own painting reports its failures itself."""


class ExportError(SimError):
    """An export that cannot be written (bad size, bad path, unknown format)."""


class ExportCancelled(Exception):
    """The user stopped a long export; nothing was written."""


def parse_size(text: str) -> QSize:
    """``"1600x900"`` -> QSize; a one-line :class:`ExportError` otherwise."""
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise ExportError(f"bad size '{text}': use WIDTHxHEIGHT, e.g. 1600x900") from None
    if not (MIN_SIZE.width() <= w <= MAX_SIZE.width() and MIN_SIZE.height() <= h <= MAX_SIZE.height()):
        raise ExportError(f"bad size '{text}': width {MIN_SIZE.width()}-{MAX_SIZE.width()} and "
                          f"height {MIN_SIZE.height()}-{MAX_SIZE.height()} pixels")
    return QSize(w, h)


def check_target(path: str | os.PathLike, suffixes: tuple[str, ...]) -> Path:
    target = Path(path)
    name = target.name.lower()
    if not name.endswith(suffixes):
        raise ExportError(f"{path}: unsupported output type (use {', '.join(suffixes)})")
    if not target.parent.is_dir():
        raise ExportError(f"{path}: folder {target.parent} does not exist")
    if target.exists() and not target.is_file():
        raise ExportError(f"{path}: not a regular file (a directory, device or pipe)")
    return target


@contextmanager
def _atomic(target: Path) -> Iterator[Path]:
    """A temporary path beside ``target``, renamed onto it when the block succeeds, as every save
    is (:func:`sim.io.atomic.atomic_path`: a symbolic link written through, a long name kept)."""
    try:
        with atomic_path(target) as tmp:
            yield tmp
    except TraceFileError as exc:
        raise ExportError(str(exc)) from None


def _lay_out(widget: QWidget, size: QSize | None) -> None:
    if size is not None:
        widget.resize(size)
    QApplication.processEvents()
    QApplication.processEvents()


def render(widget: QWidget, size: QSize | None = None) -> QImage:
    """What ``widget`` shows, at ``size`` when given (laid out again at that size)."""
    _lay_out(widget, size)
    return widget.grab().toImage()


def _save_png(image: QImage, target: Path, verify: Verify = _nothing_failed) -> None:
    with _atomic(target) as tmp:
        if not image.save(str(tmp), "PNG"):
            raise ExportError(f"{target}: cannot write the image")
        verify()


def write_png(image: QImage, path: str | os.PathLike) -> None:
    _save_png(image, check_target(path, (".png",)))


@contextmanager
def _painted_afresh(widget: QWidget) -> Iterator[None]:
    """Graphics items that the window keeps as device pixmaps (axes, legends, rasters) paint
    themselves while inside, so that in an SVG their text stays text and their lines stay lines."""
    views = [view for view in (widget, *widget.findChildren(QGraphicsView)) if isinstance(view, QGraphicsView)]
    items = [item for view in views for item in view.scene().items()]
    modes = [item.cacheMode() for item in items]
    for item in items:
        item.setCacheMode(QGraphicsItem.CacheMode.NoCache)
    try:
        yield
    finally:
        for item, mode in zip(items, modes, strict=True):
            item.setCacheMode(mode)


def write_svg(widget: QWidget, path: str | os.PathLike, size: QSize | None = None,
              verify: Verify = _nothing_failed) -> None:
    """``widget`` painted into a vector SVG: text stays text, lines and bars stay shapes."""
    target = check_target(path, (".svg",))
    _lay_out(widget, size)
    with _atomic(target) as tmp:
        generator = QSvgGenerator()
        generator.setFileName(str(tmp))
        generator.setSize(widget.size())
        generator.setResolution(SVG_DPI)
        generator.setViewBox(QRect(0, 0, widget.width(), widget.height()))
        generator.setTitle(widget.windowTitle() or "neuronviz")
        generator.setDescription("exported by neuronviz")
        painter = QPainter()
        if not painter.begin(generator):
            raise ExportError(f"{target}: cannot write the SVG")
        try:
            with _painted_afresh(widget):
                widget.render(painter, QPoint())
        finally:
            painter.end()
        verify()


def write_image(widget: QWidget, path: str | os.PathLike, size: QSize | None = None,
                verify: Verify = _nothing_failed) -> None:
    """PNG or SVG by the name's suffix."""
    target = check_target(path, IMAGE_SUFFIXES)
    if target.suffix.lower() == ".svg":
        write_svg(widget, target, size, verify)
    else:
        _save_png(render(widget, size), target, verify)


def frame_count(fps: int, seconds: float, size: QSize | None = None) -> int:
    """Frames of an animation; an :class:`ExportError` when there are too few, or too many to hold
    (a GIF keeps every frame, one byte per pixel, until it is written)."""
    wanted = fps * seconds
    frames = round(wanted) if math.isfinite(wanted) else None  # a product beyond any float has no round number
    if frames is None or not 2 <= frames <= MAX_FRAMES:
        made = f"more than {MAX_FRAMES}" if frames is None else frames
        raise ExportError(f"{fps} frames/s for {seconds:g} s makes {made} frames: choose 2 to {MAX_FRAMES}")
    if size is not None and frames * size.width() * size.height() > MAX_ANIMATION_PIXELS:
        most = MAX_ANIMATION_PIXELS // (size.width() * size.height())
        raise ExportError(f"{frames} frames of {size.width()}x{size.height()} are too many to hold: at this size "
                          f"at most {most} (fewer frames per second, fewer seconds or a smaller size)")
    return frames


def _frames(session: Session, widget: QWidget, frames: int, size: QSize | None,
            progress: FrameProgress | None) -> Iterator[QImage]:
    """The widget with the playhead swept from the start to the end of the longest run."""
    _lay_out(widget, size)
    for k in range(frames):
        if progress is not None and not progress(k, frames):
            raise ExportCancelled
        session.set_playhead(k / (frames - 1))
        yield render(widget)
    if progress is not None:
        progress(frames, frames)


def _to_pil(image: QImage) -> Image.Image:
    from PIL import Image  # only exports need it: not loaded when the app starts

    rgb = image.convertToFormat(QImage.Format.Format_RGB888)
    row = rgb.bytesPerLine()
    a = np.frombuffer(rgb.constBits(), np.uint8, rgb.sizeInBytes()).reshape(rgb.height(), row)
    return Image.fromarray(np.ascontiguousarray(a[:, : 3 * rgb.width()]).reshape(rgb.height(), rgb.width(), 3))


def is_frame_folder(path: str | os.PathLike) -> bool:
    """``-o DIR/`` (or an existing folder) asks for a numbered PNG sequence instead of a GIF."""
    return str(path).endswith(("/", os.sep)) or Path(path).is_dir()


def write_animation(session: Session, widget: QWidget, path: str | os.PathLike, fps: int, seconds: float,
                    size: QSize | None = None, progress: FrameProgress | None = None,
                    verify: Verify = _nothing_failed) -> int:
    """The playback as an animated GIF, or numbered PNGs in a folder; returns the frame count.

    ``progress`` is called before each frame and may return False to cancel: then nothing is
    written (a GIF is renamed into place only when complete; frames already written to a folder
    are removed). The playhead is put back where it was.
    """
    frames = frame_count(fps, seconds, size or widget.size())
    playhead = session.playhead
    try:
        if is_frame_folder(path):
            _write_frame_folder(session, widget, Path(path), frames, size, progress, verify)
        else:
            _write_gif(session, widget, check_target(path, (".gif",)), fps, frames, size, progress, verify)
    finally:
        session.set_playhead(playhead)
    return frames


def _write_gif(session: Session, widget: QWidget, target: Path, fps: int, frames: int, size: QSize | None,
               progress: FrameProgress | None, verify: Verify) -> None:
    from PIL import Image

    images: list[Image.Image] = []
    palette: Image.Image | None = None
    for image in _frames(session, widget, frames, size, progress):
        rgb = _to_pil(image)
        if palette is None:  # one palette for every frame: colours do not flicker as the playhead moves
            palette = rgb.quantize(GIF_COLORS, method=Image.Quantize.MEDIANCUT)
        images.append(rgb.quantize(palette=palette, dither=Image.Dither.NONE))
    with _atomic(target) as tmp:
        images[0].save(tmp, "GIF", save_all=True, append_images=images[1:], duration=round(1000 / fps), loop=0,
                       optimize=False, disposal=1)
        verify()


def _write_frame_folder(session: Session, widget: QWidget, folder: Path, frames: int, size: QSize | None,
                        progress: FrameProgress | None, verify: Verify) -> None:
    """Numbered PNGs in ``folder``, rendered into a temporary folder beside it and moved in only
    when every frame is done: a cancel or a failure leaves the folder as it was, and frames of an
    earlier, longer export do not stay mixed in."""
    if not folder.parent.is_dir():
        raise ExportError(f"{folder}: folder {folder.parent} does not exist")
    if folder.exists() and not folder.is_dir():
        raise ExportError(f"{folder}: exists and is not a folder")
    try:
        staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    except OSError as exc:
        raise ExportError(f"{folder}: cannot write ({exc.strerror or exc})") from None
    try:
        digits = len(str(frames))
        for k, image in enumerate(_frames(session, widget, frames, size, progress), 1):
            if not image.save(str(staging / f"frame_{k:0{digits}d}.png"), "PNG"):
                raise ExportError(f"{folder}: cannot write frame {k}")
        verify()
        folder.mkdir(exist_ok=True)
        for old in folder.glob("frame_*.png"):
            old.unlink()
        for done in sorted(staging.iterdir()):
            done.replace(folder / done.name)
    except OSError as exc:
        raise ExportError(f"{folder}: cannot write ({exc.strerror or exc})") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def write_summary_csv(session: Session, path: str | os.PathLike) -> int:
    """The summary table as CSV, one row per run, with each run's configuration; returns the rows."""
    target = check_target(path, (".csv",))
    header, rows = summary_csv_rows(session)
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(["" if v is None else v for v in row] for row in rows)
    with _atomic(target) as tmp:
        tmp.write_text(text.getvalue(), encoding="utf-8")
    return len(rows)
