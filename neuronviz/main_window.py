"""The main window only arranges: panes in a grid, playback bar, docks, menus and shortcuts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PySide6.QtCore import QSettings, Qt, QTimer
from PySide6.QtGui import QAction, QActionGroup, QCursor, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QDockWidget,
    QFileDialog,
    QFrame,
    QGridLayout,
    QLabel,
    QMainWindow,
    QMenu,
    QMessageBox,
    QProgressDialog,
    QScrollArea,
    QStyle,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from neuronviz import __version__
from neuronviz.files import (
    OPEN_FILTERS,
    SAVE_FILTERS,
    check_comparison,
    files_label,
    on_one_clock,
    open_problem,
    open_runs,
    opened_paths,
    reading_bytes,
    save_runs,
    with_suffix_of,
)
from neuronviz.memory import release_memory
from neuronviz.runner import FileLoader, SimulationRunner
from neuronviz.session import SIMULATED, Session
from neuronviz.theme import THEMES, apply_theme, restyle_plots
from neuronviz.widgets.area_stats import AreaStats
from neuronviz.widgets.export_actions import ExportActions
from neuronviz.widgets.layer_details import LayerDetails
from neuronviz.widgets.operators import OperatorsView
from neuronviz.widgets.pane import ComparisonPane, comparison_bands
from neuronviz.widgets.playback import PlaybackBar
from neuronviz.widgets.ranks import RanksView
from neuronviz.widgets.regions import RegionsView
from neuronviz.widgets.requests import RequestsView
from neuronviz.widgets.roofline import RooflineView
from neuronviz.widgets.run_panel import RunPanel
from neuronviz.widgets.scaling import ScalingView
from neuronviz.widgets.summary import SummaryTable
from neuronviz.widgets.sweep_view import SweepView
from sim.errors import SimError

ABOUT = ("<b>neuronviz {version}</b><p>A simulator of the AWS Neuron chip generations (Inferentia1 and 2, "
         "Trainium1 to 3) and a viewer of what their engines, SRAM and memory do while a model runs.</p>"
         "<p>Simulated figures are estimates: <code>neuronviz validate</code> compares them with published "
         "Neuron measurements (docs/accuracy.md).</p>")
MAX_RECENT = 10
BACKGROUND_OPEN_BYTES = 32 << 20  # files that may take more than this to read (together) open in a worker thread
OPEN_PROGRESS_STEPS = 1000  # the progress bar of a background open; the last step waits for the panes
SUMMARY_HEIGHT = 150  # a bottom tab with nothing to size it by (an empty table, a view with nothing to show)
BOTTOM_DOCK_SHARE = 0.4  # the bottom docks never take more of the window's height than this
PANE_ROWS_KEPT = 2  # rows of panes the docks leave their readable height; more scroll
SCALING_HEIGHT = 320  # the Scaling and Sweep tabs' plots with readable axes
ROOFLINE_HEIGHT = 420
# the dock tabs after the Summary, Layer details and Selection: what makes each view, its height when shown
TABS = (("Scaling", ScalingView, SCALING_HEIGHT), ("Sweep", SweepView, SCALING_HEIGHT),
        ("Roofline", RooflineView, ROOFLINE_HEIGHT), ("Operators", OperatorsView, SCALING_HEIGHT),
        ("Regions", RegionsView, SCALING_HEIGHT), ("Requests", RequestsView, SCALING_HEIGHT),
        ("Ranks", RanksView, SCALING_HEIGHT))
# made with the window: they cost nothing until shown (their analysis waits), and the Operators table's
# height is the least the docks may be given
EAGER_TABS = ("Operators", "Regions", "Ranks")
ZOOM_STEP = 1.25
PAN_STEP = 0.1
PLAYHEAD_STEP = 0.01
SHORTCUTS = (
    ("Space", "play / pause"), ("Left / Right", "move the playhead by 1%"), ("Home / End", "start / end"),
    ("+ / - or W / S", "zoom in / out around the mouse (or the playhead)"), ("A / D", "pan left / right"),
    ("F", "fit the selected window, or the whole run"), ("Esc", "clear the layer and window selection"),
    ("Drag on a timeline", "select a time window (totals in the Selection tab)"),
    ("Wheel, Shift+drag", "zoom, pan"),
    ("M, right-click", "drop a marker at the playhead or the pointer; the last two select their window"),
)


class MainWindow(QMainWindow):
    def __init__(self, session: Session, settings: QSettings) -> None:
        super().__init__()
        self.session, self.settings = session, settings
        self.runner = SimulationRunner(self)
        self.loader = FileLoader(open_runs, self)
        self.loader.sig_finished.connect(self._opened)
        self.loader.sig_failed.connect(self._open_failed)
        self.loader.sig_progress.connect(self._open_progress)
        self.opening: QProgressDialog | None = None
        self._opening: tuple[int, bool] | None = None  # generation and replace flag of a background open
        self.exports = ExportActions(self, session, settings)
        self.pane_menu: QMenu | None = None
        self.panes: list[ComparisonPane] = []
        self.grid_host = QWidget()
        self.grid = QGridLayout(self.grid_host)
        self.grid.setContentsMargins(2, 2, 2, 2)
        self.grid.setSpacing(4)
        self.empty = QLabel("Open a trace (File > Open) or simulate one (Run panel).")
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.playback = PlaybackBar(session)
        self.playback.sig_find_next.connect(self.find_next)
        session.sig_search_changed.connect(self._count_matches)
        central = QWidget()
        layout = QVBoxLayout(central)
        layout.setContentsMargins(0, 0, 0, 0)
        # the panes scroll rather than go below their readable height (a comparison of many runs)
        self.pane_area = QScrollArea()
        self.pane_area.setWidget(self.grid_host)
        self.pane_area.setWidgetResizable(True)
        self.pane_area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.pane_area.setFrameShape(QFrame.Shape.NoFrame)
        layout.addWidget(self.pane_area, 1)
        layout.addWidget(self.playback)
        self.setCentralWidget(central)
        self.summary = SummaryTable(session)
        self.details = LayerDetails(session)
        self.area_stats = AreaStats(session)
        self.run_panel = RunPanel(session, self.runner, confirm_replace=self.confirm_discard)
        self._dock("Summary", self.summary, Qt.DockWidgetArea.BottomDockWidgetArea)
        details = self._dock("Layer details", self.details, Qt.DockWidgetArea.BottomDockWidgetArea)
        self.tabifyDockWidget(self.findChild(QDockWidget, "Summary"), details)
        selection = self._dock("Selection", self.area_stats, Qt.DockWidgetArea.BottomDockWidgetArea)
        for dock in (self.findChild(QDockWidget, "Summary"), details, selection):
            self._size_when_shown(dock, SUMMARY_HEIGHT)
        self.tabifyDockWidget(details, selection)
        self._views: dict[str, QWidget] = {}  # the tabs' views made so far (see view())
        previous = selection
        for title, _, height in TABS:
            previous = self._tab(title, previous, height)
        for title in EAGER_TABS:
            self.view(title)
        sweep = self.findChild(QDockWidget, "Sweep")
        self.run_panel.sig_sweep.connect(lambda points: (sweep.raise_(), self.sweep.start_sweep(points, "Run panel")))
        self.findChild(QDockWidget, "Summary").raise_()
        run_scroll = QScrollArea()  # the panel scrolls rather than squeeze its rows in a short window
        run_scroll.setWidget(self.run_panel)
        run_scroll.setWidgetResizable(True)
        run_scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)  # it fits the dock's width
        run_scroll.setFrameShape(QFrame.Shape.NoFrame)
        # as wide as the form's labels and fields: nothing cut, nothing to scroll sideways
        run_scroll.setMinimumWidth(self.run_panel.minimumSizeHint().width()
                                   + run_scroll.verticalScrollBar().sizeHint().width())
        run_dock = self._dock("Run", run_scroll, Qt.DockWidgetArea.RightDockWidgetArea)
        run_dock.hide()
        self.run_dock = run_dock
        self.resizeDocks([details], [self._wanted_height(details, SUMMARY_HEIGHT)], Qt.Orientation.Vertical)
        self._menus(run_dock)
        self._shortcuts()
        self.setAcceptDrops(True)
        session.sig_runs_changed.connect(self.rebuild_panes)
        self.rebuild_panes()
        self.resize(1600, 1000)
        geometry = settings.value("window/geometry")
        if geometry is not None:
            self.restoreGeometry(geometry)
        state = settings.value("window/state")
        if state is not None:
            self.restoreState(state)

    # --- layout ---------------------------------------------------------------------------
    def _tab(self, title: str, after: QDockWidget, height: int) -> QDockWidget:
        """A bottom dock tabbed after ``after``, its view made when the tab is first brought
        forward (:meth:`view`), given ``height`` pixels when it is shown (its plots and tables are
        unreadable squeezed)."""
        dock = self._dock(title, QWidget(), Qt.DockWidgetArea.BottomDockWidgetArea)
        self.tabifyDockWidget(after, dock)
        # a tab behind another hears it is hidden when the window is shown, the tab in front shown
        dock.visibilityChanged.connect(lambda shown: shown and not dock.visibleRegion().isEmpty()
                                       and self.view(title))
        self._size_when_shown(dock, height)
        return dock

    def _follow_panes(self, view: QWidget) -> None:
        """A view drawn on the panes' clock (the Ranks strip) shows the first pane's range."""
        if hasattr(view, "follow_timeline"):
            view.follow_timeline(self.panes[0].timeline if self.panes else None)

    def _size_when_shown(self, dock: QDockWidget, height: int) -> None:
        """Size the bottom docks for ``dock`` each time its tab is brought forward, and when runs
        give it something else to show (a tab behind another counts as visible, with nothing of
        it on screen): the docks never keep the height of the last tab that needed more."""
        dock.visibilityChanged.connect(lambda shown: shown and not dock.visibleRegion().isEmpty()
                                       and self._size_dock(dock, height))
        self.session.sig_runs_changed.connect(
            lambda *_: not dock.visibleRegion().isEmpty() and self._size_dock(dock, height))

    def view(self, title: str) -> QWidget:
        """The view of the dock tab ``title``, made the first time it is shown or asked for (the
        tabs behind the Summary cost the launch nothing)."""
        if title not in self._views:
            make = next(make for t, make, _ in TABS if t == title)
            view = self._views[title] = make(self.session)
            if hasattr(view, "sig_show_span"):
                view.sig_show_span.connect(self.show_span)
            self._follow_panes(view)  # and again whenever rebuild_panes makes new panes
            dock = self.findChild(QDockWidget, title)
            placeholder = dock.widget()
            dock.setWidget(view)
            view.show()  # a widget given to a dock on screen is not shown with it
            placeholder.deleteLater()
        return self._views[title]

    scaling = property(lambda self: self.view("Scaling"), doc="The Scaling tab's view.")
    sweep = property(lambda self: self.view("Sweep"), doc="The Sweep tab's view.")
    roofline = property(lambda self: self.view("Roofline"), doc="The Roofline tab's view.")
    operators = property(lambda self: self.view("Operators"), doc="The Operators tab's view.")
    regions = property(lambda self: self.view("Regions"), doc="The Regions tab's view.")
    requests = property(lambda self: self.view("Requests"), doc="The Requests tab's view.")
    ranks = property(lambda self: self.view("Ranks"), doc="The Ranks tab's view.")

    def _wanted_height(self, dock: QDockWidget, height: int) -> int:
        """The height ``dock`` asks for: a table's rows, header and scroll bar (at most ``height``),
        a plot's ``height`` (it is unreadable squeezed), or :data:`SUMMARY_HEIGHT` for a view that
        has nothing to show for these runs but a line saying so."""
        view = dock.widget()
        empty = getattr(view, "has_nothing_to_show", None)
        if empty is not None and empty():
            return SUMMARY_HEIGHT
        title = dock.height() - view.height() if dock.isVisible() else self.style().pixelMetric(
            QStyle.PixelMetric.PM_TitleBarHeight)
        if isinstance(view, QTableView) and view.model() is not None and view.model().rowCount():
            rows = view.horizontalHeader().height() + view.verticalHeader().length()
            content = rows + view.horizontalScrollBar().sizeHint().height() + 2 * view.frameWidth()
            return min(height, content + title)
        return height

    def _size_dock(self, dock: QDockWidget, height: int) -> None:
        """Give the bottom docks what ``dock`` asks for (:meth:`_wanted_height`), within their cap;
        the panes keep their minimum height (they would scroll below it)."""
        if self.dockWidgetArea(dock) != Qt.DockWidgetArea.BottomDockWidgetArea or dock.isFloating():
            return
        self.resizeDocks([dock], [min(self._wanted_height(dock, height), self._bottom_cap(dock))],
                         Qt.Orientation.Vertical)

    def _bottom_cap(self, dock: QDockWidget) -> int:
        """The most the bottom docks (``dock`` among them) may be given: what leaves the first
        :data:`PANE_ROWS_KEPT` rows of panes their minimum height (header and a timeline of readable
        rows) without scrolling, and never more than :data:`BOTTOM_DOCK_SHARE` of the window."""
        spare = self.pane_area.viewport().height() - self._panes_height()
        return max(dock.minimumSizeHint().height(), min(int(BOTTOM_DOCK_SHARE * self.height()), dock.height() + spare))

    def _panes_height(self) -> int:
        """The height of the first :data:`PANE_ROWS_KEPT` rows of panes at their minimum."""
        rows: dict[int, int] = {}
        for pane in self.panes:
            i = self.grid.indexOf(pane)
            if i >= 0:
                r = self.grid.getItemPosition(i)[0]
                rows[r] = max(rows.get(r, 0), pane.minimumSizeHint().height())
        kept = sorted(rows)[:PANE_ROWS_KEPT]
        margins = self.grid.contentsMargins()
        return (sum(rows[r] for r in kept) + self.grid.verticalSpacing() * max(0, len(kept) - 1)
                + margins.top() + margins.bottom())

    def resizeEvent(self, event) -> None:
        """A window made shorter, or restored with docks taller than it now leaves room for, caps them."""
        super().resizeEvent(event)
        for dock in self.findChildren(QDockWidget):
            if (self.dockWidgetArea(dock) == Qt.DockWidgetArea.BottomDockWidgetArea and not dock.isFloating()
                    and not dock.visibleRegion().isEmpty()):
                cap = self._bottom_cap(dock)
                if dock.height() > cap:
                    self.resizeDocks([dock], [cap], Qt.Orientation.Vertical)
                break

    def _same_bands(self) -> None:
        """Every pane shows the counter bands that fit in all of them, so that they line up."""
        shown = [pane for pane in self.panes if pane.parent() is not None]  # not one taken out to be exported
        fitting = min((pane.bands_fitting() for pane in shown), default=None)
        for pane in shown:
            pane.set_band_cap(fitting)

    def _dock(self, title: str, widget: QWidget, area: Qt.DockWidgetArea) -> QDockWidget:
        dock = QDockWidget(title, self)
        dock.setObjectName(title)
        dock.setWidget(widget)
        self.addDockWidget(area, dock)
        return dock

    def rebuild_panes(self) -> None:
        for pane in self.panes:
            pane.retire()
            self.grid.removeWidget(pane)
            pane.deleteLater()
        if self.panes:  # once Qt has deleted them, what they and their runs held goes back to the system
            QTimer.singleShot(0, release_memory)
        self.grid.removeWidget(self.empty)
        self.empty.setParent(None)
        runs = self.session.runs
        bands = comparison_bands(runs)  # every pane the same bands, so that they line up
        self.panes = [ComparisonPane(self.session, run, bands=bands) for run in runs]
        for pane in self.panes:
            pane.sig_context_menu.connect(lambda pos, at, pane=pane: self._pane_menu(pane, pos, at))
            pane.sig_band_room.connect(self._same_bands, Qt.ConnectionType.QueuedConnection)  # after the resize
        cols = 1 if len(runs) <= 1 else (2 if len(runs) <= 4 else 3)
        for i, pane in enumerate(self.panes):
            self.grid.addWidget(pane, i // cols, i % cols)
            if i:
                pane.timeline.setXLink(self.panes[0].timeline)
        rows = -(-len(runs) // cols)
        for r in range(self.grid.rowCount()):  # rows of equal height, whatever each pane's minimum
            self.grid.setRowStretch(r, 1 if r < rows else 0)
        for c in range(self.grid.columnCount()):
            self.grid.setColumnStretch(c, 1 if c < cols else 0)
        if not self.panes:
            self.grid.addWidget(self.empty, 0, 0)
        for view in self._views.values():
            self._follow_panes(view)
        self.fit()
        self._update_title()

    def fit(self) -> None:
        """Show the selected window, or every run whole (the shared axis spans the longest run)."""
        if self.panes:
            end = 1.0 if self.session.normalised else self.session.max_duration_ns
            a, b = self.session.area or (0.0, 1.0)
            self.panes[0].timeline.setXRange(a * end, b * end, padding=0.01)

    def _update_title(self) -> None:
        name = Path(self.session.path).name if self.session.path else (
            "demo comparison" if any(r.source == "demo" for r in self.session.runs) else "")
        mark = " *" if self.session.unsaved else ""
        self.setWindowTitle(f"neuronviz — {name}{mark}" if name else f"neuronviz{mark}")

    # --- menus and shortcuts ----------------------------------------------------------------
    def _menus(self, run_dock: QDockWidget) -> None:
        file = self.menuBar().addMenu("&File")
        self._action(file, "&Open…", self.open_dialog, QKeySequence.StandardKey.Open)
        self._action(file, "Open &profile directory…", self.open_profile_dialog, "Ctrl+Shift+O")
        self._action(file, "&Add to comparison…", self.add_dialog, "Ctrl+Shift+A")
        self.recent_menu = file.addMenu("Open &recent")
        self._refresh_recent()
        self._action(file, "&Save as…", self.save_dialog, QKeySequence.StandardKey.Save)
        file.addSeparator()
        export = file.addMenu("&Export")
        self._action(export, "&Image of the view (PNG, SVG)…", lambda: self.exports.export_image(), "Ctrl+E")
        self._action(export, "&Copy image of the view", lambda: self.exports.copy_image(), "Ctrl+Shift+C")
        self._action(export, "&Animation (GIF)…", self.exports.export_animation, "Ctrl+Shift+E")
        self._action(export, "&Summary table (CSV)…", self.exports.export_csv)
        export.addSeparator()
        export.addAction("Right-click a pane to export only that pane").setEnabled(False)
        file.addSeparator()
        self._action(file, "&Quit", self.close, QKeySequence.StandardKey.Quit)
        view = self.menuBar().addMenu("&View")
        self.normalise_action = self._action(view, "&Normalise each run to its own duration",
                                             self._toggle_normalised, "N")
        self.normalise_action.setCheckable(True)
        self._action(view, "&Fit", self.fit, "F")
        self.baseline_menu = view.addMenu("&Baseline")
        self.baseline_menu.aboutToShow.connect(self._fill_baseline_menu)
        theme_menu = view.addMenu("&Theme")
        group = QActionGroup(self)
        current = str(self.settings.value("view/theme", "system"))
        for name in THEMES:
            action = theme_menu.addAction(name.capitalize() if name != "system" else "Follow the system")
            action.setCheckable(True)
            action.setChecked(name == current)
            action.triggered.connect(lambda _=False, name=name: self.set_theme(name))
            group.addAction(action)
        view.addSeparator()
        for dock in self.findChildren(QDockWidget):
            view.addAction(dock.toggleViewAction())
        run = self.menuBar().addMenu("&Run")
        self._action(run, "&Simulate…", lambda: (run_dock.show(), run_dock.raise_()), "Ctrl+R")
        self._action(run, "&Edit and re-run the baseline…", lambda: self.edit_and_rerun(self.session.baseline),
                     "Ctrl+Shift+R")
        help_menu = self.menuBar().addMenu("&Help")
        self._action(help_menu, "&Keyboard shortcuts", self.show_shortcuts, "?")
        self._action(help_menu, "&About neuronviz", self.show_about)

    def _action(self, menu, text: str, slot, shortcut=None) -> QAction:
        action = QAction(text, self)
        if shortcut is not None:
            action.setShortcut(QKeySequence(shortcut))
        action.triggered.connect(slot)
        menu.addAction(action)
        return action

    def _shortcuts(self) -> None:
        keys = {
            "Space": self.playback.toggle, "Right": lambda: self.playback.step(PLAYHEAD_STEP),
            "Left": lambda: self.playback.step(-PLAYHEAD_STEP), "Home": lambda: self.session.set_playhead(0.0),
            "End": lambda: self.session.set_playhead(1.0), "+": lambda: self.zoom(1 / ZOOM_STEP),
            "=": lambda: self.zoom(1 / ZOOM_STEP), "-": lambda: self.zoom(ZOOM_STEP),
            "W": lambda: self.zoom(1 / ZOOM_STEP), "S": lambda: self.zoom(ZOOM_STEP),
            "A": lambda: self.pan(-PAN_STEP), "D": lambda: self.pan(PAN_STEP),
            "Escape": self.clear_selection,
            "M": lambda: self.session.add_marker(self.session.playhead),
            "Ctrl+F": lambda: (self.playback.search.setFocus(), self.playback.search.selectAll()),
        }
        for key, slot in keys.items():
            QShortcut(QKeySequence(key), self, slot, context=Qt.ShortcutContext.WindowShortcut)

    def _playhead_x(self) -> float:
        return self.session.playhead * (1.0 if self.session.normalised else self.session.max_duration_ns)

    def _mouse_x(self) -> float | None:
        """The time (x) under the mouse pointer if it is over a pane's tracks."""
        for pane in self.panes:
            view = pane.graphics.viewport()
            pos = view.mapFromGlobal(QCursor.pos())
            if view.rect().contains(pos):
                vb = pane.timeline.getViewBox()
                scene = pane.graphics.mapToScene(pos)
                if vb.sceneBoundingRect().contains(scene):
                    return vb.mapSceneToView(scene).x()
        return None

    def zoom(self, factor: float) -> None:
        """Zoom every pane (they are linked) around the mouse pointer when it is over a timeline,
        as in Perfetto, else around the playhead; ``factor`` < 1 zooms in."""
        if not self.panes:
            return
        (x0, x1), _ = self.panes[0].timeline.viewRange()
        mouse = self._mouse_x()
        c = min(max(self._playhead_x() if mouse is None else mouse, x0), x1)
        self.panes[0].timeline.setXRange(c - (c - x0) * factor, c + (x1 - c) * factor, padding=0)

    def pan(self, fraction: float) -> None:
        if not self.panes:
            return
        (x0, x1), _ = self.panes[0].timeline.viewRange()
        dx = (x1 - x0) * fraction
        self.panes[0].timeline.setXRange(x0 + dx, x1 + dx, padding=0)

    def _toggle_normalised(self, on: bool) -> None:
        self.session.set_normalised(on)
        self.fit()

    def _count_matches(self, text: str) -> None:
        runs = self.session.runs
        n = len(runs[0].view.find_layers(text)) if runs and text else 0
        self.playback.matches.setText(f"{n:,} layer{'' if n == 1 else 's'}" if text else "")

    def find_next(self, backwards: bool = False) -> None:
        """Select the next layer of the first run that matches the search, after the playhead
        (before it when ``backwards``); the playhead moves to it and the view follows."""
        if not self.session.runs or not self.session.search:
            return
        run = self.session.runs[0]
        found = run.view.find_layers(self.session.search)
        if not len(found):
            return
        starts = run.trace.layer_start_ns[found]
        now = self.session.time_of(run)
        if backwards:
            before = np.flatnonzero(starts < now - 1e-6)
            i = found[before[-1]] if len(before) else found[-1]
        else:
            after = np.flatnonzero(starts > now + 1e-6)
            i = found[after[0]] if len(after) else found[0]
        t0 = float(run.trace.layer_start_ns[i])
        scale = 1.0 / run.duration_ns if self.session.normalised else 1.0 / self.session.max_duration_ns
        self.session.set_playhead(t0 * scale)
        self.session.select_layer(run.trace.layer_names[i])
        (x0, x1), _ = self.panes[0].timeline.viewRange()
        x = t0 * self._x_unit(run)
        if not x0 <= x <= x1:
            half = (x1 - x0) / 2
            self.panes[0].timeline.setXRange(x - half, x + half, padding=0)

    def show_span(self, run_index: int, start_ns: float, end_ns: float) -> None:
        """Select the window ``[start_ns, end_ns]`` of run ``run_index`` and zoom the panes to it."""
        if not 0 <= run_index < len(self.session.runs) or not self.panes:
            return
        run = self.session.runs[run_index]
        scale = 1.0 / run.duration_ns if self.session.normalised else 1.0 / self.session.max_duration_ns
        self.session.set_area(start_ns * scale, end_ns * scale)
        unit = self._x_unit(run)
        pad = (end_ns - start_ns) * 0.05
        self.panes[0].timeline.setXRange((start_ns - pad) * unit, (end_ns + pad) * unit, padding=0)

    def _x_unit(self, run) -> float:
        return 1.0 / run.duration_ns if self.session.normalised else 1.0

    def clear_selection(self) -> None:
        self.session.select_layer("")
        self.session.clear_area()

    def set_theme(self, name: str) -> None:
        """Switch between the system's, the light and the dark theme; remembered between launches."""
        apply_theme(name)
        self.settings.setValue("view/theme", name)
        self.rebuild_panes()
        restyle_plots(self)  # the tabs' plots, made once

    def _fill_baseline_menu(self) -> None:
        self.baseline_menu.clear()
        for i, run in enumerate(self.session.runs):
            action = self.baseline_menu.addAction(run.title)
            action.setCheckable(True)
            action.setChecked(i == self.session.baseline)
            action.triggered.connect(lambda _=False, i=i: self.session.set_baseline(i))

    def _pane_menu(self, pane: ComparisonPane, global_pos, at: float = -1.0) -> None:
        menu = QMenu(self)
        if at >= 0:
            menu.addAction("Add marker here", lambda: self.session.add_marker(at))
        if self.session.markers:
            menu.addAction("Clear markers", self.session.clear_markers)
        if at >= 0 or self.session.markers:
            menu.addSeparator()
        menu.addAction("Export this pane as image (PNG, SVG)…", lambda: self.exports.export_image(pane))
        menu.addAction("Copy image of this pane", lambda: self.exports.copy_image(pane))
        menu.addSeparator()
        index = self.panes.index(pane)
        if pane.run.trace.run.measured:  # what a device measured: the simulator's prediction beside it
            menu.addAction("Simulate this…", lambda: self.simulate_this(index))
        else:
            menu.addAction("Edit and re-run…", lambda: self.edit_and_rerun(index))
        menu.addAction("Make this the baseline", lambda: self.session.set_baseline(index))
        menu.addAction("Close this pane", lambda: self.close_pane(index))
        menu.popup(global_pos)
        self.pane_menu = menu  # kept for tests and so it is not collected while open

    def edit_and_rerun(self, index: int) -> None:
        """Open run ``index``'s configuration in the Run panel, every field as the run set it."""
        if not 0 <= index < len(self.session.runs):
            return
        run = self.session.runs[index]
        cfg = run.trace.run.software.config
        if cfg is None:
            QMessageBox.information(self, "Edit and re-run", f"{run.title} was not simulated by neuronviz: it has no "
                                    "configuration to run again.")
            return
        self.run_panel.load(cfg)
        self.run_dock.show()
        self.run_dock.raise_()

    def simulate_this(self, index: int) -> None:
        """Set the Run panel up to simulate the run a device profile (run ``index``) measured."""
        run = self.session.runs[index].trace.run
        if not run.deployment.instance:
            QMessageBox.information(self, "Simulate this", "The profile names no instance neuronviz has data of: "
                                    "choose the instance in the Run panel.")
        self.run_panel.load_measured(run)
        self.run_dock.show()
        self.run_dock.raise_()

    def close_pane(self, index: int) -> None:
        if self.confirm_discard([self.session.runs[index]]):
            self.session.remove_run(index)

    def show_about(self) -> None:
        QMessageBox.about(self, "About neuronviz", ABOUT.format(version=__version__))

    def show_shortcuts(self) -> None:
        rows = "".join(f"<tr><td><b>{k}</b></td><td>{v}</td></tr>" for k, v in SHORTCUTS)
        QMessageBox.information(self, "Keyboard shortcuts", f"<table>{rows}</table>")

    # --- files ------------------------------------------------------------------------------
    def open_dialog(self) -> None:
        paths, _ = QFileDialog.getOpenFileNames(self, "Open traces", self._last_dir(), ";;".join(OPEN_FILTERS))
        if paths:
            self.open_files(paths)

    def add_dialog(self) -> None:
        """Open traces or profiles beside the runs already open (the comparison keeps them)."""
        paths, _ = QFileDialog.getOpenFileNames(self, "Add to the comparison", self._last_dir(),
                                                ";;".join(OPEN_FILTERS))
        if paths:
            self.open_files(paths, replace=False)

    def open_profile_dialog(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Open a Neuron Explorer profile (its directory of Parquet "
                                                      "tables)", self._last_dir())
        if path:
            self.open_files([path])

    def open_files(self, paths: list[str], replace: bool = True) -> bool:
        """Open ``paths``; a bad file shows its one-line reason and leaves the open runs alone.

        Big files are read in a worker thread behind a cancellable progress dialog; then this
        returns True once loading has started, and the panes appear when it is done."""
        if replace and not self.confirm_discard():
            return False
        paths = opened_paths(paths)
        self._cancel_opening()  # a file still loading in the background must not replace these later
        if sum(map(reading_bytes, paths)) > BACKGROUND_OPEN_BYTES:
            self._open_in_background(paths, replace)
            return True
        try:
            runs = on_one_clock([run for path in paths for run in open_runs(path)])
            self._check_comparison(runs, paths, replace)
            for run in runs:  # what the panes draw from, made where a failure is a dialog, not an exception in Qt
                run.view  # noqa: B018
                run.metrics  # noqa: B018
        except Exception as exc:  # noqa: BLE001 - whatever a file makes a reader raise is a dialog, never a crash
            QMessageBox.warning(self, "Cannot open trace", open_problem(paths, exc))
            return False
        self._show_opened(runs, paths, replace)
        return True

    def _check_comparison(self, runs: list, paths: list[str], replace: bool) -> None:
        check_comparison(len(runs) + (0 if replace else len(self.session.runs)), files_label(paths))

    def _show_opened(self, runs: list, paths: list[str], replace: bool) -> None:
        for path in paths:
            self._remember(path)
        if replace:  # another comparison: nothing of the last one's sweep or search stays
            self.session.set_runs(runs, path=paths[0] if len(paths) == 1 else "")
            if "Sweep" in self._views:
                self.sweep.clear()
            self.playback.search.clear()
        else:
            self.session.add_runs(runs)

    def _open_in_background(self, paths: list[str], replace: bool) -> None:
        names = ", ".join(Path(p).name for p in paths)
        progress = QProgressDialog(f"Opening {names}…", "Cancel", 0, OPEN_PROGRESS_STEPS, self)
        progress.setWindowTitle("Opening traces")
        progress.setWindowModality(Qt.WindowModality.WindowModal)
        progress.setMinimumDuration(300)
        progress.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        progress.canceled.connect(self._cancel_opening)
        progress.setValue(0)  # starts the minimum-duration timer: without a value Qt never shows it
        self.opening = progress
        self._opening = (self.loader.start(list(paths)), replace)

    def _open_progress(self, gen: int, share: float) -> None:
        if self.opening is not None and self._opening is not None and gen == self._opening[0]:
            self.opening.setValue(min(round(share * OPEN_PROGRESS_STEPS), OPEN_PROGRESS_STEPS - 1))

    def _opened(self, gen: int, runs: list, paths: list) -> None:
        # a result can be on its way when the user cancels: the loader's generation decides
        if self._opening is not None and gen == self._opening[0] and self.loader.current(gen):
            replace = self._opening[1]
            self._end_opening()
            try:
                self._check_comparison(runs, paths, replace)
            except SimError as exc:
                QMessageBox.warning(self, "Cannot open trace", str(exc))
                return
            self._show_opened(runs, paths, replace)

    def _open_failed(self, gen: int, reason: str) -> None:
        if self._opening is not None and gen == self._opening[0]:
            self._end_opening()
            QMessageBox.warning(self, "Cannot open trace", reason)

    def _end_opening(self) -> None:
        dialog, self.opening, self._opening = self.opening, None, None
        if dialog is not None:
            dialog.canceled.disconnect(self._cancel_opening)  # closing a progress dialog emits it
            dialog.close()

    def _cancel_opening(self) -> None:
        self.loader.cancel()
        self._end_opening()

    def save_dialog(self) -> None:
        if not self.session.runs:
            return
        path, chosen = QFileDialog.getSaveFileName(self, "Save traces", self._last_dir(), ";;".join(SAVE_FILTERS))
        if path:
            self.save_to(with_suffix_of(path, chosen))

    def save_to(self, path: str) -> bool:
        try:
            save_runs(path, self.session.runs)
        except SimError as exc:
            QMessageBox.warning(self, "Cannot save", str(exc))
            return False
        self.session.mark_saved(path)
        self._remember(path)
        self._update_title()
        return True

    def _last_dir(self) -> str:
        recent = self.settings.value("files/recent", []) or []
        return str(Path(recent[0]).parent) if recent else ""

    def _remember(self, path: str) -> None:
        full = str(Path(path).resolve())
        recent = [p for p in (self.settings.value("files/recent", []) or []) if p != full]
        self.settings.setValue("files/recent", [full, *recent][:MAX_RECENT])
        self._refresh_recent()

    def _refresh_recent(self) -> None:
        self.recent_menu.clear()
        recent = self.settings.value("files/recent", []) or []
        for path in recent:
            action = self.recent_menu.addAction(path)
            action.triggered.connect(lambda _=False, p=path: self.open_files([p]))
        self.recent_menu.setEnabled(bool(recent))

    def dragEnterEvent(self, event) -> None:
        if event.mimeData().hasUrls():
            event.acceptProposedAction()

    def dropEvent(self, event) -> None:
        paths = [u.toLocalFile() for u in event.mimeData().urls() if u.isLocalFile()]
        if paths:
            self.open_files(paths)

    def confirm_discard(self, runs: list | None = None) -> bool:
        """Ask before simulated runs that were never saved (of ``runs``, default all) are lost;
        False means: keep them."""
        if not any(r.source == SIMULATED for r in (self.session.runs if runs is None else runs)):
            return True
        answer = QMessageBox.question(
            self, "Unsaved runs", "Runs simulated in this session have not been saved. Save them first?",
            QMessageBox.StandardButton.Save | QMessageBox.StandardButton.Discard | QMessageBox.StandardButton.Cancel,
            QMessageBox.StandardButton.Save)
        if answer == QMessageBox.StandardButton.Save:
            self.save_dialog()
            return not self.session.unsaved
        return answer == QMessageBox.StandardButton.Discard

    def closeEvent(self, event) -> None:
        if not self.confirm_discard():
            event.ignore()
            return
        self.runner.cancel()
        self.loader.cancel()
        if "Scaling" in self._views:
            self.scaling.runner.cancel()
        if "Sweep" in self._views:
            self.sweep.shutdown()
        self.settings.setValue("window/geometry", self.saveGeometry())
        self.settings.setValue("window/state", self.saveState())
        super().closeEvent(event)
