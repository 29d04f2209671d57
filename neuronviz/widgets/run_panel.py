"""The run panel: every option a ``neuronviz simulate`` run takes, as a form built from the same
declaration (:data:`sim.options.OPTIONS`), a field enabled where the mode uses it; the chips to
compare (or one instance); simulate in the background with progress and cancel; the results open
as panes. *Run > Edit and re-run* fills it from a pane's run (:meth:`RunPanel.load`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from neuronviz.runner import SimulationRunner
from neuronviz.session import Session
from neuronviz.widgets.option_fields import OptionField
from sim import options
from sim.description import RunDescription
from sim.errors import SimError
from sim.hardware.chip import all_chips
from sim.hardware.instances import default_instance
from sim.run import RunConfig
from sim.sweep import Point, grid

DEFAULT_CHIPS = ("inf1", "inf2", "trn1", "trn2")
SWEEP_BATCHES = (1, 2, 4, 8, 16, 32)  # the Sweep button's batch sizes
# a field that does not apply while another option has a value: the bucket lists with one graph
UNLESS = {"context_buckets": ("one_graph", True), "token_buckets": ("one_graph", True)}


def label_of(option: options.Option) -> str:
    """How an error names an option the user set in the panel: its label, quoted."""
    return f"'{option.label}'"


class RunPanel(QWidget):
    sig_sweep = Signal(list)  # [Point]: the panel's configuration over instances and batch sizes

    def __init__(self, session: Session, runner: SimulationRunner,
                 confirm_replace: Callable[[], bool] = lambda: True, parent: QWidget | None = None) -> None:
        """``confirm_replace`` is asked before results replace the open runs (Keep unticked)."""
        super().__init__(parent)
        self.session, self.runner, self.confirm_replace = session, runner, confirm_replace
        self.generation = -1
        self.fields = {o.name: OptionField(o) for o in options.OPTIONS}
        self.chips = {key: QCheckBox(key) for key in all_chips()}
        for key, box in self.chips.items():
            box.setChecked(key in DEFAULT_CHIPS)
        self.fields["instance"].widget.currentTextChanged.connect(self._targets_changed)
        self.fields["mode"].widget.currentTextChanged.connect(self._applies)
        for other, _ in UNLESS.values():
            self.fields[other].widget.toggled.connect(self._applies)
        self.keep = QCheckBox("Keep the open runs")
        self.keep.setChecked(True)
        self.run_button = QPushButton("Simulate")
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.sweep_button = QPushButton("Sweep batch sizes")
        self.sweep_button.setToolTip("This configuration on each ticked chip's instance (or the chosen one) at batch "
                                     + ", ".join(map(str, SWEEP_BATCHES)) + ", in the Sweep tab")
        self.sweep_button.clicked.connect(self.sweep)
        self.progress = QProgressBar()
        self.status = QLabel()
        self.status.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.addLayout(self._form(options.GENERAL))
        for group in (options.TRAINING, options.MOE, options.GENERATION):
            box = QGroupBox(group[:1].upper() + group[1:])
            box.setLayout(self._form(group))
            layout.addWidget(box)
        buttons = QHBoxLayout()
        for button in (self.run_button, self.cancel_button, self.sweep_button):
            buttons.addWidget(button)
        layout.addWidget(self.keep)
        layout.addLayout(buttons)
        layout.addWidget(self.progress)
        layout.addWidget(self.status)
        layout.addStretch(1)
        self.run_button.clicked.connect(self.start)
        self.cancel_button.clicked.connect(self.cancel)
        runner.sig_progress.connect(self._progress)
        runner.sig_finished.connect(self._finished)
        runner.sig_failed.connect(self._failed)
        self._applies()

    def _form(self, group: str) -> QFormLayout:
        """The fields of ``group``, in the declaration's order; the chips to compare after the model's."""
        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        for option in options.OPTIONS:
            if option.group != group:
                continue
            field = self.fields[option.name].widget
            if option.kind == options.SWITCH:  # a switch says what it is: a row of its own
                form.addRow(field)
                continue
            row = QHBoxLayout()
            row.addWidget(field, 1)
            if option.name == "model":
                browse = QPushButton("config.json…")
                browse.clicked.connect(self._browse)
                row.addWidget(browse)
            form.addRow(option.label, row)
            if option.name == "model":
                chip_row = QHBoxLayout()
                for box in self.chips.values():
                    chip_row.addWidget(box)
                form.addRow("Chips", chip_row)
        return form

    def _targets_changed(self, instance: str) -> None:
        one = self.fields["instance"].value() is not None
        for box in self.chips.values():
            box.setEnabled(not one)

    def _applies(self, *_: object) -> None:
        """Enable each field where the chosen mode uses it (and what it depends on allows it)."""
        mode = self.fields["mode"].value()
        for name, field in self.fields.items():
            on = mode in field.option.modes
            if name in UNLESS:
                other, value = UNLESS[name]
                on = on and self.fields[other].value() != value
            field.set_enabled(on)

    def _browse(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Model config", "", "Hugging Face config (*.json)")
        if path:
            self.fields["model"].set(path)

    def values(self) -> dict[str, Any]:
        """Every option's value: what its field holds where it applies, its default where it does
        not (an inference has no micro-batches). Raises :class:`sim.errors.ConfigError` naming the
        field that holds something it does not take."""
        return {name: field.value() if field.widget.isEnabled() else field.option.default
                for name, field in self.fields.items()}

    def configs(self) -> list[RunConfig]:
        """The runs the panel describes, one per chip ticked (or the one instance)."""
        values = self.values()
        if values["instance"] is not None:
            return [options.config(values)]
        return [options.config(values, chip=key) for key, box in self.chips.items() if box.isChecked()]

    def load(self, cfg: RunConfig) -> None:
        """Show ``cfg`` in the form (a pane's run, to change something and run it again): every
        option as it set it, and its chip ticked alone when it named no instance."""
        for name, value in options.values_of(cfg).items():
            self.fields[name].set(value)
        if cfg.instance is None and cfg.chip is not None:
            for key, box in self.chips.items():
                box.setChecked(key == cfg.chip)
        self._applies()
        self.status.setText(f"The settings of {cfg.model} ({cfg.mode}): change any and simulate again.")

    def load_measured(self, run: RunDescription) -> None:
        """Set the form up to simulate what a device profile measured: its instance and logical
        core size; the model and its sizes are the user's to say (a profile does not name them)."""
        d = run.deployment
        self.fields["instance"].set(d.instance)
        if d.lnc > 1:
            self.fields["lnc"].set(d.lnc)
        self._applies()
        self.fields["model"].widget.setFocus()
        self.status.setText(f"Measured on {d.instance}: choose the model it ran (a preset or its config.json), its "
                            "batch, sequence and mode, then Simulate: the simulation opens beside the profile, and "
                            "Operators and Regions compare them block by block.")

    def sweep_points(self) -> list[Point]:
        """The panel's configuration over the instances it names and :data:`SWEEP_BATCHES`."""
        v = self.values()
        if v["instance"] is not None:
            instances = [v["instance"]]
        else:
            instances = [default_instance(chip).name for key, chip in all_chips().items()
                         if self.chips[key].isChecked()]
        return grid([v["model"]], instances, SWEEP_BATCHES, [v["seq"]], [v["cores"]], [v["dtype"]], [v["mode"]],
                    new_tokens=v["new_tokens"], quants=[v["quant"]])

    def _say(self, exc: SimError) -> None:
        self.status.setText(options.in_terms_of(str(exc), label_of))

    def sweep(self) -> None:
        try:
            points = self.sweep_points()
        except SimError as exc:
            self._say(exc)
            return
        self.status.setText(f"Sweeping {len(points)} configurations in the Sweep tab…")
        self.sig_sweep.emit(points)

    def start(self) -> None:
        try:
            configs = self.configs()
        except SimError as exc:
            self._say(exc)
            return
        if not configs:
            self.status.setText("Tick at least one chip.")
            return
        if not self.keep.isChecked() and not self.confirm_replace():
            return
        self.generation = self.runner.start(configs)
        self.progress.setRange(0, len(configs))
        self.progress.setValue(0)
        self.status.setText(f"Simulating {len(configs)} run(s)…")
        self.run_button.setEnabled(False)
        self.cancel_button.setEnabled(True)

    def cancel(self) -> None:
        self.runner.cancel()
        self._idle("Cancelled.")

    def _idle(self, message: str) -> None:
        self.run_button.setEnabled(True)
        self.cancel_button.setEnabled(False)
        self.status.setText(message)

    def _progress(self, gen: int, done: int, total: int) -> None:
        if gen == self.generation:
            self.progress.setValue(done)

    def _finished(self, gen: int, runs: list) -> None:
        if gen != self.generation:
            return
        if self.keep.isChecked():
            self.session.add_runs(runs)
        else:
            self.session.set_runs(runs)
        self._idle(f"Added {len(runs)} run(s).")

    def _failed(self, gen: int, message: str) -> None:
        if gen != self.generation:
            return
        message = options.in_terms_of(message, label_of)
        self._idle(message)
        QMessageBox.warning(self, "Simulation failed", message)
