"""The window's layout at the sizes people use (1280x720, 1920x1080): panes at their readable
height, nothing drawn over anything else, docks within their cap, headers cut at phrases."""

import re
from html import unescape

import pytest
from PySide6.QtCore import QPointF, QRect, QRectF, Qt
from PySide6.QtWidgets import QCheckBox, QDockWidget, QLabel

from neuronviz.main_window import BOTTOM_DOCK_SHARE
from neuronviz.widgets.chip_diagram import MIN_HEIGHT, ChipDiagram, ChipState
from neuronviz.widgets.header import ELLIPSIS, WORD_JOINER, PhraseHeader, phrases
from neuronviz.widgets.pane import TRACK_ROW_MIN_PX

SIZES = ((1280, 720), (1920, 1080))


def _dock(window, name: str) -> QDockWidget:
    return next(d for d in window.findChildren(QDockWidget) if d.objectName() == name)


def _settle(qtbot, window, size) -> None:
    window.resize(*size)
    qtbot.waitUntil(lambda: window.size().width() == size[0] and window.size().height() == size[1], timeout=2000)
    qtbot.wait(60)  # the queued band counts and the docks' sizes


def _on_screen(widget) -> bool:
    return widget.isVisible() and not widget.visibleRegion().isEmpty()


def _labels(window) -> list[tuple[str, QRect]]:
    """Every text drawn on screen: the labels, the pane headers and the parts of each chip diagram,
    each with its rectangle in the window."""
    out = []
    for w in window.findChildren(QLabel) + window.findChildren(PhraseHeader):
        if _on_screen(w) and w.width() > 0 and w.height() > 0:
            out.append((w.objectName() or type(w).__name__, QRect(w.mapTo(window, w.rect().topLeft()), w.size())))
    for d in window.findChildren(ChipDiagram):
        if _on_screen(d):
            at = d.mapTo(window, d.rect().topLeft())
            out += [(f"diagram {name}", r.toAlignedRect().translated(at)) for name, r in d.parts().items()]
    return out


@pytest.mark.parametrize("theme", ["light", "dark"])
@pytest.mark.parametrize("size", SIZES)
def test_every_pane_keeps_its_readable_height_and_no_text_overlaps_another(demo_window, qtbot, size, theme):
    try:
        demo_window.set_theme(theme)
        _settle(qtbot, demo_window, size)
        _assert_readable(demo_window)
        for pane in demo_window.panes:
            assert pane.timeline.height() >= pane.timeline.minimumHeight(), pane.run.title
            vb = pane.timeline.getViewBox()  # and that height goes to the rows, not the corner under their names
            row_px = vb.mapViewToScene(QPointF(0, 1)).y() - vb.mapViewToScene(QPointF(0, 0)).y()
            assert row_px >= TRACK_ROW_MIN_PX - 1, (pane.run.title, row_px)
            assert pane.diagram.isVisible()  # at both sizes the demo's panes have room for it
            assert "gauge3" in pane.diagram.parts(), pane.run.title
        labels = _labels(demo_window)
        assert sum(name.startswith("diagram requests") for name, _ in labels) == 3  # the panes streaming requests
        _assert_apart(labels)
    finally:
        demo_window.set_theme("system")


def _assert_readable(window) -> None:
    """Every pane at least its minimum height, and all of them in view (none scrolled away)."""
    assert all(p.height() >= p.minimumSizeHint().height() for p in window.panes)
    assert window.pane_area.verticalScrollBar().maximum() == 0


def _assert_apart(labels: list[tuple[str, QRect]]) -> None:
    for i, (a, ra) in enumerate(labels):
        for b, rb in labels[i + 1:]:
            assert not ra.intersects(rb), (a, ra, b, rb)


def test_the_chip_diagram_gives_up_its_parts_in_steps_and_never_overlaps():
    state = ChipState(cores=8, requests_done=1, requests_total=10, topology="ring", topology_dims=(4,))
    diagram = ChipDiagram()
    diagram.set_state(state)
    seen = []
    for h in range(MIN_HEIGHT - 10, 420, 3):
        diagram.resize(230, h)
        parts = diagram.parts()
        if h < MIN_HEIGHT:
            assert parts == {}  # the pane leaves the diagram out
            continue
        rects = list(parts.values())
        for k, r in enumerate(rects):
            assert QRectF(diagram.rect()).contains(r)
            assert not any(r.intersects(o) for o in rects[k + 1:]), (h, parts)
        shown = tuple(n for n in ("requests", "cores", "topology") if n in parts)
        if not seen or seen[-1] != shown:
            seen.append(shown)
    # the gauges alone, then the requests line, the cores, the topology: each kept once it comes
    assert seen == [(), ("requests",), ("requests", "cores"), ("requests", "cores", "topology")]


def test_the_bottom_dock_keeps_within_its_cap_for_every_tab_and_across_launches(demo_window, qtbot, settings):
    from neuronviz.app import build_window

    _settle(qtbot, demo_window, (1280, 720))
    summary = _dock(demo_window, "Summary")
    before = summary.height()
    cap = BOTTOM_DOCK_SHARE * 720
    scaling = _dock(demo_window, "Scaling")
    scaling.raise_()
    qtbot.waitUntil(lambda: _on_screen(scaling), timeout=2000)
    qtbot.wait(60)
    assert scaling.height() <= cap
    _assert_readable(demo_window)
    _assert_apart(_labels(demo_window))  # "requests done 1 of 10" was drawn over the SBUF bar here
    for name in ("Roofline", "Layer details", "Summary"):
        _dock(demo_window, name).raise_()
        qtbot.wait(60)
        assert _dock(demo_window, name).height() <= cap, name
    assert summary.height() == before  # back to its table's height, not the Scaling plots'
    demo_window.resizeDocks([summary], [700], Qt.Orientation.Vertical)
    assert demo_window.close()  # the state saved with the dock as tall as the window let it be
    again = build_window(None, settings)
    qtbot.addWidget(again)
    again.resize(1280, 720)
    again.show()
    qtbot.waitExposed(again)
    qtbot.wait(60)
    assert _dock(again, "Summary").height() <= cap
    _assert_readable(again)


def _plain(html: str) -> str:
    """The text of ``html`` as the header's document holds it (a <br> a line separator)."""
    text = unescape(re.sub(r"<[^>]*>", "", re.sub(r"<br>", "\u2028", html)))
    return text.replace("\xa0", " ").replace(WORD_JOINER, "")


def _line_starts(header: PhraseHeader) -> list[int]:
    """Where each drawn line of the header starts in its plain text (one paragraph; the word
    joiners the header keeps words with not counted)."""
    block = header._doc.begin()
    assert block.next().isValid() is False
    layout, text = block.layout(), block.text()
    starts = [layout.lineAt(k).textStart() for k in range(layout.lineCount())]
    return [at - text[:at].count(WORD_JOINER) for at in starts]


def test_a_header_wraps_only_between_phrases_and_a_long_one_ends_with_an_ellipsis(demo_window, qtbot):
    _settle(qtbot, demo_window, (1280, 720))
    pane = demo_window.panes[3]  # Trainium2: "1 core/copy × 64 copies"
    header = pane.header
    assert "× 64&nbsp;copies" in header.text()
    elided = 0
    for width in range(260, 1000, 37):
        header.resize(width, header.height())
        shown = header.shown_text()
        assert header.shown_text() == "".join(phrases(shown))  # what is shown is cut into the same phrases
        starts, at = {0}, 0  # where each phrase starts in the plain text; a line may start only there
        for piece in phrases(shown):
            at += len(_plain(piece))
            starts.add(at)
            if piece.endswith("<br>"):
                starts.add(at)
        assert set(_line_starts(header)) <= starts, (width, shown)
        assert len(_line_starts(header)) <= header.max_lines
        assert "64 copies" not in _plain(shown) or "× 64 copies" in _plain(shown)
        if header.elided():
            elided += 1
            assert _plain(shown).endswith(ELLIPSIS) and not _plain(shown).endswith(f"·{ELLIPSIS}")
            assert _plain(header.text()) in _plain(header.toolTip())  # the whole header in its tooltip
            assert _plain(header.text()).startswith(_plain(shown)[:-1])
        else:
            assert _plain(shown) == _plain(header.text())
            assert _plain(header.text()) not in _plain(header.toolTip())
    assert 0 < elided < len(range(260, 1000, 37))  # narrow widths cut it, wide ones not
    header.resize(300, header.height())
    assert header.elided()  # too long for three lines of 300 px: the title and what fits after it
    assert _plain(header.shown_text()).startswith(pane.run.title)


@pytest.mark.parametrize("size", [(1280, 720), (1600, 780), (1600, 900), (1920, 1080)])
def test_every_pane_of_a_comparison_shows_the_same_counter_bands(demo_window, qtbot, size):
    _settle(qtbot, demo_window, size)
    fitting = min(p.bands_fitting() for p in demo_window.panes)
    qtbot.waitUntil(lambda: [p._shown_bands for p in demo_window.panes] == [fitting] * 4, timeout=2000)
    for pane in demo_window.panes:
        assert [legend.isVisible() for legend in pane.legends] == [k < fitting for k in range(len(pane.bands))]
        if fitting:
            assert pane.counters.getViewBox().viewRange()[1] == [0, fitting]


@pytest.mark.parametrize("size", [(1280, 720), (1600, 1000)])
def test_the_run_form_fits_its_dock_without_scrolling_sideways_or_cutting_a_label(demo_window, qtbot, size):
    _settle(qtbot, demo_window, size)
    demo_window.run_dock.show()
    qtbot.waitUntil(lambda: demo_window.run_panel.isVisible(), timeout=2000)
    qtbot.wait(60)
    scroll = demo_window.run_dock.widget()
    assert scroll.horizontalScrollBar().maximum() == 0
    assert scroll.viewport().width() >= demo_window.run_panel.minimumSizeHint().width()
    labels = [w for w in demo_window.run_panel.findChildren(QLabel) + demo_window.run_panel.findChildren(QCheckBox)
              if w.isVisible() and w.text()]
    assert {"Model", "Sequence parallel"} <= {w.text() for w in labels}
    for label in labels:
        assert label.width() >= label.minimumSizeHint().width(), label.text()
        assert label.mapTo(scroll.viewport(), label.rect().topRight()).x() <= scroll.viewport().width(), label.text()


def test_durations_and_ratios_have_one_format_each():
    from sim.catalogue import duration, times

    assert [duration(ns) for ns in (2.8002e6, 8_400.7e3, 12_345.0, 950.0, 3.2e9)] == [
        "2.800 ms", "8.401 ms", "12.35 µs", "950.0 ns", "3.200 s"]
    assert times(9.50642) == "9.506×"


def test_a_figure_reads_the_same_in_the_header_summary_playback_and_tables(demo_window, qtbot):
    from sim.catalogue import duration, number

    session, summary = demo_window.session, demo_window.summary
    speed = summary.columns.index("speed-up")
    for row, pane in enumerate(demo_window.panes[1:], 1):  # the first run is the baseline
        assert f"<b>{summary.item(row, speed).text()}×</b>" in pane.header.text()
    session.set_playhead(0.3)
    t = 0.3 * session.max_duration_ns
    assert demo_window.playback.readout.text() == f"t = {duration(t)} of {duration(session.max_duration_ns)}"
    session.select_layer("layer5.mlp")
    details = demo_window.details.table
    layer = next(s for s in session.runs[0].analysis.layers if s.name == "layer5.mlp")
    assert details.item(0, 1).text() == number(layer.time_ns / 1e3)


@pytest.mark.parametrize("size", SIZES)
def test_the_roofline_names_its_runs_beside_the_plot_and_keeps_its_axis_titles(demo_window, qtbot, size):
    from neuronviz.widgets.roofline import RooflineView

    _settle(qtbot, demo_window, size)
    dock = _dock(demo_window, "Roofline")
    dock.raise_()
    qtbot.waitUntil(lambda: _on_screen(dock), timeout=2000)
    qtbot.wait(60)
    view = dock.findChild(RooflineView)
    item = view.plot.getPlotItem()
    legend = view.legend.sceneBoundingRect()
    assert len(view.legend.items) == len(demo_window.panes)
    # at 1280x720 its dock is short: a legend inside the plot covered the marks and pushed out the titles
    assert legend.left() >= item.getViewBox().sceneBoundingRect().right() - 1  # beside the plot, not over it
    shown = QRectF(view.plot.rect())
    for name in ("left", "bottom"):
        label = item.getAxis(name).label
        margin = label.document().documentMargin()  # the text item's padding around its glyphs
        text = label.mapRectToScene(label.boundingRect()).adjusted(margin, margin, -margin, -margin)
        assert shown.contains(text), (name, size)
    assert shown.contains(legend)
