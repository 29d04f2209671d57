"""Engine rows shaded per pixel column, and the chip diagram's cores: lit by activity or idle."""

import numpy as np
import pytest
from PySide6.QtGui import QColor

from neuronviz.items.raster import TICK_BELOW, TrackRows
from neuronviz.theme import ENGINE_COLORS
from neuronviz.widgets.chip_diagram import ChipDiagram, ChipState
from sim.integrals import TABLE_INTERVALS, BusyIntegral, IntegralStack


def _every_column(busy_ns: float, columns: int = 10, width_ns: float = 100.0) -> BusyIntegral:
    starts = np.arange(columns) * width_ns
    return BusyIntegral(starts, np.full(columns, busy_ns))


def test_shades_are_linear_in_the_busy_fraction_and_idle_columns_stay_empty(qapp):
    rows = TrackRows(IntegralStack([_every_column(1.0), _every_column(33.0), _every_column(100.0),
                                    BusyIntegral(np.zeros(0), np.zeros(0))]), [QColor("#1f77b4")] * 4, 1000.0)
    shades, ticks = rows.rasterise(0.0, 1000.0, 10)
    alpha = shades >> 24
    assert np.all(alpha[0] == alpha[0, 0]) and np.all(alpha[1] == alpha[1, 0])  # one shade per row here
    assert alpha[:, 0].tolist() == [3, 84, 255, 0]  # 255 x 1%, 33% and 100% busy, and idle
    assert shades[3].tolist() == [0] * 10  # idle: transparent, the background shows
    assert shades[2, 0] == 0xFF1F77B4  # fully busy: the engine's colour itself
    assert ((shades[1, 0] >> 16) & 0xFF) == round(0x1F * 84 / 255)  # premultiplied: the colour at 33%
    # the 1% row is too faint to see: a tick in full colour says there was some activity
    assert ticks[0].tolist() == [0xFF1F77B4] * 10 and not ticks[1:].any()


def test_a_long_track_draws_from_its_table_with_the_shade_of_its_busy_fraction(qapp):
    """Zoomed out on a track too long to search per column, the rows come from the tabulated
    integral: a track busy half of every 10 ns draws the 50% shade in every column."""
    n = 2 * TABLE_INTERVALS
    stack = IntegralStack([BusyIntegral(np.arange(n) * 10.0, np.full(n, 5.0))])
    rows = TrackRows(stack, [QColor("#1f77b4")], n * 10.0)
    shades, ticks = rows.rasterise(0.0, n * 10.0, 600)
    assert stack._table is not None  # drawn from the table
    # within 1% of half: the columns snap to the table's times by up to a sixteenth of a pixel
    assert np.abs((shades[0] >> 24).astype(float) - 127.5).max() <= 2.55 and not ticks.any()


def test_a_tick_marks_only_columns_too_faint_to_see(qapp):
    busy_ns = np.array([0.0, 0.5, 9.0, 11.0, 50.0])  # of 100 ns columns
    rows = TrackRows(IntegralStack([BusyIntegral(np.arange(5) * 100.0, busy_ns)]), [QColor("#1f77b4")], 500.0)
    _, ticks = rows.rasterise(0.0, 500.0, 5)
    assert (ticks[0] != 0).tolist() == [False, True, True, False, False]
    assert TICK_BELOW == 0.1


def test_a_lone_copy_lights_one_core_and_draws_the_chips_others_idle(qapp):
    diagram = ChipDiagram()
    diagram.resize(230, 300)
    diagram.set_state(ChipState(cores=4, active=1, engines=("tensor", "vector", "scalar"),
                                activity={"tensor": 1.0}))
    img = diagram.grab().toImage()
    # NC0 (top left) has its Tensor cell filled with the engine's colour, NC3 (bottom right) not
    lit = img.pixelColor(30, 40)
    idle = img.pixelColor(30 + 115, 40 + 100)
    tensor = QColor(ENGINE_COLORS["tensor"])
    assert abs(lit.red() - tensor.red()) + abs(lit.blue() - tensor.blue()) < 40
    assert idle.lightness() > lit.lightness() + 60


def _engine_pixels(img, kinds=("tensor", "vector", "scalar")) -> int:
    """Pixels within a small distance of an engine's colour (outlines are antialiased)."""
    targets = [QColor(ENGINE_COLORS[k]) for k in kinds]
    count = 0
    for x in range(img.width()):
        for y in range(img.height()):
            c = img.pixelColor(x, y)
            if any(abs(c.red() - t.red()) + abs(c.green() - t.green()) + abs(c.blue() - t.blue()) < 60
                   for t in targets):
                count += 1
    return count


def test_a_short_diagram_keeps_its_gauges_and_leaves_the_cores_out(qapp):
    state = ChipState(cores=4, engines=("tensor", "vector", "scalar"), activity={"tensor": 1.0})
    short, tall = ChipDiagram(), ChipDiagram()
    short.resize(230, 110)
    tall.resize(230, 300)
    for d in (short, tall):
        d.set_state(state)
    assert _engine_pixels(short.grab().toImage()) == 0  # no crushed core boxes over the gauges
    assert _engine_pixels(tall.grab().toImage()) > 1000  # four cores of engine cells


def test_an_error_while_painting_a_row_reaches_the_excepthook(qapp, monkeypatch):
    """Inside a pyqtgraph view an exception in paint() would otherwise vanish, the row just blank."""
    import sys

    import pyqtgraph as pg

    seen = []
    monkeypatch.setattr(sys, "excepthook", lambda kind, exc, tb: seen.append(exc))
    stack = IntegralStack([_every_column(10.0)])
    monkeypatch.setattr(stack, "means", lambda *args: 1 / 0)
    view = pg.PlotWidget()
    view.addItem(TrackRows(stack, [QColor("#1f77b4")], 1000.0))
    view.resize(300, 100)
    view.grab()
    assert [type(exc) for exc in seen] == [ZeroDivisionError]


def test_core_boxes_take_the_grid_that_keeps_them_largest():
    # two cores side by side; four in two rows; eight (Trn2) four abreast in a short pane, two
    # abreast in a tall one
    assert ChipDiagram.core_grid(2, 170, 90)[0] == 2
    assert ChipDiagram.core_grid(4, 170, 90)[0] == 2
    assert ChipDiagram.core_grid(8, 170, 90) == pytest.approx((4, 38.75, 34.875))
    assert ChipDiagram.core_grid(8, 170, 400)[0] == 2
    assert ChipDiagram.core_grid(1, 170, 90)[0] == 1


def test_engine_cells_keep_their_busy_percent_when_short(qapp):
    """Eight cores (Trn2) leave cells one line tall: the name and % share the line, or the % stays alone."""
    from PySide6.QtCore import QRectF
    from PySide6.QtGui import QFont, QFontMetrics

    from neuronviz.widgets.chip_diagram import engine_label

    metrics = QFontMetrics(QFont())
    assert engine_label("tensor", 0.36, QRectF(0, 0, 80, 2 * metrics.height()), metrics) == "Tensor\n36%"
    assert engine_label("tensor", 0.36, QRectF(0, 0, 200, 20), metrics) == "Tensor 36%"
    assert engine_label("tensor", 0.36, QRectF(0, 0, 30, 20), metrics) == "36%"


def _slivers(start_ns: float, end_ns: float, busy: float, period_ns: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """Events far narrower than a pixel, busy ``busy`` of the time between ``start_ns`` and ``end_ns``."""
    starts = np.arange(start_ns, end_ns, period_ns)
    return starts, np.full(len(starts), busy * period_ns)


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_drawn_rows_are_the_background_where_idle_and_shade_monotonically_to_full_colour(qtbot, theme):
    import pyqtgraph as pg
    from PySide6.QtCore import QPointF

    from neuronviz.theme import apply_theme, palette

    apply_theme(theme)
    try:
        background, color = QColor(palette().background), QColor(ENGINE_COLORS["vector"])
        blocks = np.linspace(0.0, 1.0, 11)  # the ramp row: ten blocks of 100 ns, each busier than the last
        ramp = [_slivers(100.0 * k, 100.0 * (k + 1), f) for k, f in enumerate(blocks[1:])]
        rows = TrackRows(IntegralStack([
            BusyIntegral(np.zeros(0), np.zeros(0)),  # an engine that did nothing
            BusyIntegral(*_slivers(0.0, 1000.0, 0.5)),  # half busy in every pixel
            BusyIntegral(np.array([0.0]), np.array([1000.0])),  # busy all the time
            BusyIntegral(np.concatenate([s for s, _ in ramp]), np.concatenate([d for _, d in ramp])),
        ]), [color] * 4, 1000.0)
        plot = pg.PlotWidget(background=background)
        qtbot.addWidget(plot)
        for axis in ("left", "bottom"):
            plot.hideAxis(axis)
        plot.addItem(rows)
        plot.setXRange(0.0, 1000.0, padding=0)
        plot.setYRange(0.0, 4.0, padding=0)
        plot.resize(400, 200)
        plot.show()
        qtbot.waitExposed(plot)
        img = plot.grab().toImage()

        def pixel(t_ns: float, row: int) -> QColor:
            scene = plot.getViewBox().mapViewToScene(QPointF(t_ns, row + 0.5))
            p = plot.mapFromScene(scene)
            return img.pixelColor(p.x(), p.y())

        def rgb(c: QColor) -> tuple[int, int, int]:
            return c.red(), c.green(), c.blue()

        assert {rgb(pixel(t, 0)) for t in range(5, 1000, 10)} == {rgb(background)}  # idle: the background
        assert rgb(pixel(500.0, 2)) == rgb(color)  # busy all the time: the engine's colour
        half = pixel(500.0, 1)
        for channel in ("red", "green", "blue"):
            a, h, b = (getattr(c, channel)() for c in (background, half, color))
            assert abs(h - (a + b) / 2) <= 2  # halfway, linearly
        # the ramp: each block further from the background than the one before, on the way to the colour
        distance = [sum(abs(x - y) for x, y in zip(rgb(pixel(100.0 * k + 50.0, 3)), rgb(background), strict=True))
                    for k in range(10)]
        assert all(b > a for a, b in zip(distance, distance[1:], strict=False))
        assert rgb(pixel(950.0, 3)) == rgb(color)
    finally:
        apply_theme("light")
