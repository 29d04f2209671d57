"""Engine rows shaded per pixel column, and the chip diagram's cores: lit by activity or idle."""

import numpy as np
import pytest
from PySide6.QtGui import QColor

from neuronviz.items.raster import MIN_ALPHA, TrackRows
from neuronviz.theme import ENGINE_COLORS
from neuronviz.widgets.chip_diagram import ChipDiagram, ChipState
from sim.integrals import TABLE_MIN_POINTS, BusyIntegral, IntegralStack


def _every_column(busy_ns: float, columns: int = 10, width_ns: float = 100.0) -> BusyIntegral:
    starts = np.arange(columns) * width_ns
    return BusyIntegral(starts, np.full(columns, busy_ns))


def test_shades_follow_the_busy_fraction_and_keep_idle_columns_empty(qapp):
    rows = TrackRows(IntegralStack([_every_column(1.0), _every_column(33.0), _every_column(100.0),
                                    BusyIntegral(np.zeros(0), np.zeros(0))]), [QColor("#1f77b4")] * 4, 1000.0)
    px = rows.rasterise(0.0, 1000.0, 10)
    alpha = px >> 24
    assert np.all(alpha[0] == alpha[0, 0]) and np.all(alpha[1] == alpha[1, 0])  # one shade per row here
    nearly_idle, third, full, idle = alpha[:, 0]
    assert MIN_ALPHA < nearly_idle < MIN_ALPHA + 30  # 1% busy: visible, but faint
    assert third > 2 * nearly_idle  # a third busy reads clearly darker
    assert full == 255 and idle == 0
    blue = (px[2, 0] >> 0) & 0xFF
    assert blue == 0xB4  # fully busy: the engine's colour itself


def test_a_long_track_draws_from_its_table_with_the_shade_of_its_busy_fraction(qapp):
    """Zoomed out on a track too long to search per column, the rows come from the tabulated
    integral: a track busy half of every 10 ns draws the 50% shade in every column."""
    n = 2 * TABLE_MIN_POINTS
    stack = IntegralStack([BusyIntegral(np.arange(n) * 10.0, np.full(n, 5.0))])
    rows = TrackRows(stack, [QColor("#1f77b4")], n * 10.0)
    alpha = rows.rasterise(0.0, n * 10.0, 600)[0] >> 24
    assert stack._table is not None  # drawn from the table
    half = MIN_ALPHA + (255 - MIN_ALPHA) * np.sqrt(0.5)
    assert np.abs(alpha.astype(float) - half).max() <= 2


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
