"""The run panel: choose a model (or a config.json), mode, sizes (micro-batches per training
step too), dtype, chips (or one instance), cores per copy, attention and how KV heads are split, and for generating runs
the graphs the serving stack compiles (sequence length, buckets, NKI kernels, prefill chunks);
simulate in the background with progress and cancel; the results open as panes."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from neuronviz.runner import SimulationRunner
from neuronviz.session import Session
from sim.errors import ConfigError, SimError
from sim.hardware.chip import all_chips
from sim.hardware.instances import all_instances, default_instance
from sim.quant import QUANTS
from sim.run import ATTENTION, DTYPE_BYTES, GENERATING, MODES, NKI_KERNELS, RunConfig
from sim.sweep import Point, grid
from sim.workloads import preset_names
from sim.workloads.transformer import GQA_SHARDINGS

DEFAULT_CHIPS = ("inf1", "inf2", "trn1", "trn2")
DEFAULT_INSTANCE = "default for each chip"
NO_QUANT = "none (weights in the data type)"
DEFAULT_LNC = "chip default"
STACK_ATTENTION = "serving stack default"  # flash for generating runs, the compiler's ops otherwise
KERNEL_LABELS = {"qkv": "QKV", "mlp": "MLP", "attention": "attention"}
SWEEP_BATCHES = (1, 2, 4, 8, 16, 32)  # the Sweep button's batch sizes


class RunPanel(QWidget):
    sig_sweep = Signal(list)  # [Point]: the panel's configuration over instances and batch sizes

    def __init__(self, session: Session, runner: SimulationRunner,
                 confirm_replace: Callable[[], bool] = lambda: True, parent: QWidget | None = None) -> None:
        """``confirm_replace`` is asked before results replace the open runs (Keep unticked)."""
        super().__init__(parent)
        self.session, self.runner, self.confirm_replace = session, runner, confirm_replace
        self.generation = -1
        self.model = QComboBox()
        self.model.setEditable(True)
        self.model.addItems(preset_names())
        self.model.setCurrentText("bert-large")
        browse = QPushButton("config.json…")
        browse.clicked.connect(self._browse)
        self.mode = QComboBox()
        self.mode.addItems(MODES)
        self.batch = self._spin(1, 4096, 1)
        self.seq = self._spin(0, 131072, 0)
        self.seq.setSpecialValueText("model default")
        self.new_tokens = self._spin(1, 32768, 128)
        self.grad_accum = self._spin(1, 4096, 1)
        self.grad_accum.setToolTip("Training: micro-batches of Batch per step, their gradients summed before one "
                                   "all-reduce and optimizer update")
        self.grad_accum.setEnabled(False)
        self.users = self._spin(0, 100_000, 0)
        self.users.setSpecialValueText("batch")
        self.users.setToolTip("Serve: users each sending a request when their last is done (default: as many as "
                              "the batch the graphs are compiled for; more wait for a slot)")
        self.users.setEnabled(False)
        self.mode.currentTextChanged.connect(self._mode_changed)
        self.dtype = QComboBox()
        self.dtype.addItems(sorted(DTYPE_BYTES))
        self.dtype.setCurrentText("bf16")
        self.quant = QComboBox()
        self.quant.addItems([NO_QUANT, *QUANTS])
        self.quant.setToolTip("Weight matmuls quantized: weight-only int8/fp8 (dequantized on VectorE), fp8 "
                              "(FP8 weights and inputs), mxfp8/mxfp4 (Trainium3's MX matmuls)")
        self.lnc = QComboBox()
        self.lnc.addItems([DEFAULT_LNC, "1", "2"])
        self.lnc.setToolTip("Physical cores per logical NeuronCore on Trainium2/3 (the chip's default is 2)")
        self.chips = {key: QCheckBox(key) for key in all_chips()}
        for key, box in self.chips.items():
            box.setChecked(key in DEFAULT_CHIPS)
        self.instance = QComboBox()
        self.instance.addItem(DEFAULT_INSTANCE)
        self.instance.addItems(list(all_instances()))
        self.instance.setToolTip("One instance type instead of the ticked chips (its chip is implied)")
        self.instance.currentTextChanged.connect(
            lambda text: [box.setEnabled(text == DEFAULT_INSTANCE) for box in self.chips.values()])
        self.cores = self._spin(0, 512, 0)
        self.cores.setSpecialValueText("SDK default")
        self.cores.setToolTip("NeuronCores one model copy spans, split tensor-parallel")
        self.copies = self._spin(0, 512, 0)
        self.copies.setSpecialValueText("all")
        self.copies.setToolTip("Model copies running at once: all that the instance holds (throughput under load) "
                               "or 1 (a single request's latency, its copy alone on the chip)")
        self.attention = QComboBox()
        self.attention.addItems([STACK_ATTENTION, *ATTENTION])
        self.attention.setToolTip("Attention as one fused flash kernel (NxD Inference) or as the compiler's "
                                  "separate ops, their scores spilling when SBUF cannot hold them (torch-neuronx "
                                  "traces, Transformers NeuronX)")
        self.gqa = QComboBox()
        self.gqa.addItems(GQA_SHARDINGS)
        self.gqa.setToolTip("When the cores per copy do not divide a grouped-query model's KV heads: one replicated "
                            "KV head a core where the cores are a multiple of them (NxD Inference's default), or "
                            "convert-to-mha, a KV head for every query head (what Transformers NeuronX does)")
        self.sequence_parallel = QCheckBox("Sequence parallel")
        self.sequence_parallel.setToolTip("With several cores per copy, each keeps its share of the tokens outside "
                                          "attention and the MLP (all-gather and reduce-scatter instead of "
                                          "all-reduce)")
        self.generation_box = self._generation_settings()
        self.keep = QCheckBox("Keep the open runs")
        self.keep.setChecked(True)
        self.run_button = QPushButton("Simulate")
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.sweep_button = QPushButton("Sweep batch sizes")
        self.sweep_button.setToolTip("This model, mode, sequence, new tokens, data type, quantization and cores per "
                                     "copy on each ticked chip's instance (or the chosen one) at batch "
                                     + ", ".join(map(str, SWEEP_BATCHES)) + ", in the Sweep tab (with each stack's "
                                     "default graphs and attention)")
        self.sweep_button.clicked.connect(self.sweep)
        self.progress = QProgressBar()
        self.status = QLabel()
        self.status.setWordWrap(True)
        form = QFormLayout()
        model_row = QHBoxLayout()
        model_row.addWidget(self.model, 1)
        model_row.addWidget(browse)
        form.addRow("Model", model_row)
        form.addRow("Mode", self.mode)
        form.addRow("Batch", self.batch)
        form.addRow("Sequence / image", self.seq)
        form.addRow("New tokens", self.new_tokens)
        form.addRow("Micro-batches per step", self.grad_accum)
        form.addRow("Users (serve)", self.users)
        form.addRow("Data type", self.dtype)
        form.addRow("Quantization", self.quant)
        form.addRow("Logical core size", self.lnc)
        chip_row = QHBoxLayout()
        for box in self.chips.values():
            chip_row.addWidget(box)
        form.addRow("Chips", chip_row)
        form.addRow("Instance", self.instance)
        cores_row = QHBoxLayout()
        cores_row.addWidget(self.cores, 1)
        cores_row.addWidget(self.sequence_parallel)
        form.addRow("Cores per copy", cores_row)
        form.addRow("Copies running", self.copies)
        form.addRow("Attention", self.attention)
        form.addRow("KV heads", self.gqa)
        buttons = QHBoxLayout()
        buttons.addWidget(self.run_button)
        buttons.addWidget(self.cancel_button)
        buttons.addWidget(self.sweep_button)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.generation_box)
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

    def _generation_settings(self) -> QGroupBox:
        """The graphs a serving stack compiles for a generating run, as NxD Inference's settings name
        them (``neuronviz simulate --help`` has the same)."""
        self.max_seq = self._spin(0, 1_048_576, 0)
        self.max_seq.setSpecialValueText("prompt + new tokens")
        self.max_seq.setToolTip("Sequence length the graphs are compiled for (--max-seq)")
        self.one_graph = QCheckBox("One graph of the compiled length (no buckets)")
        self.one_graph.setToolTip("Instead of NxD Inference's powers-of-two buckets (--no-buckets)")
        self.context_buckets = QLineEdit()
        self.token_buckets = QLineEdit()
        for box, name, flag in ((self.context_buckets, "context-encoding", "--context-encoding-buckets"),
                                (self.token_buckets, "token-generation", "--token-generation-buckets")):
            box.setPlaceholderText("automatic")
            box.setToolTip(f"The {name} bucket lengths, e.g. 2048 4096 8192 ({flag}); empty: powers of two "
                           "up to the compiled length")
        self.kernels = {k: QCheckBox(KERNEL_LABELS[k]) for k in NKI_KERNELS}
        for k, box in self.kernels.items():
            box.setToolTip(f"NxD Inference's {k}_kernel_enabled" if k != "attention"
                           else "NxD Inference's attn_kernel_enabled: the flash kernel for every prompt bucket it "
                                "can take")
        self.beams = self._spin(1, 64, 1)
        self.beams.setSpecialValueText("1 (greedy)")
        self.beams.setToolTip("An encoder-decoder's (T5) beam search: hypotheses kept for each sequence, every "
                              "cache reordered by them each step (--beams)")
        self.prefill_chunk = self._spin(0, 131_072, 0)
        self.prefill_chunk.setSpecialValueText("whole prompt")
        self.prefill_chunk.setToolTip("Encode the prompt in chunks of this many tokens, as optimum-neuron's "
                                      "chunked prefill does: each chunk attends over the whole compiled cache "
                                      "(--prefill-chunk)")
        kernel_row = QHBoxLayout()
        for box in self.kernels.values():
            kernel_row.addWidget(box)
        kernel_row.addStretch(1)
        form = QFormLayout()
        form.addRow("Compiled length", self.max_seq)
        form.addRow(self.one_graph)
        form.addRow("Context buckets", self.context_buckets)
        form.addRow("Token buckets", self.token_buckets)
        form.addRow("NKI kernels", kernel_row)
        form.addRow("Prefill chunk", self.prefill_chunk)
        form.addRow("Beams (T5)", self.beams)
        box = QGroupBox("Generation graphs (decode, serve)")
        box.setLayout(form)
        box.setEnabled(False)
        self.one_graph.toggled.connect(lambda on: [b.setEnabled(not on)
                                                   for b in (self.context_buckets, self.token_buckets)])
        return box

    def _mode_changed(self, mode: str) -> None:
        self.grad_accum.setEnabled(mode == "training")
        self.users.setEnabled(mode == "serve")
        self.generation_box.setEnabled(mode in GENERATING)

    @staticmethod
    def _lengths(box: QLineEdit, name: str) -> tuple[int, ...] | None:
        """The bucket lengths typed in ``box`` (spaces or commas between them), None when empty."""
        try:
            lengths = tuple(int(w) for w in box.text().replace(",", " ").split())
        except ValueError:
            lengths = (0,)
        if any(n < 1 for n in lengths):
            raise ConfigError(f"{name} buckets must be positive whole numbers of positions, got {box.text()!r}")
        return lengths or None

    def _quant(self) -> str | None:
        """The quantization chosen, None for weights in the data type."""
        return None if self.quant.currentText() == NO_QUANT else self.quant.currentText()

    def _generation(self) -> dict:
        """The generation-graph settings of a decode or serve run (none otherwise)."""
        if not self.generation_box.isEnabled():
            return {}
        buckets = not self.one_graph.isChecked()
        return {"max_seq": self.max_seq.value() or None, "bucketing": buckets,
                "context_buckets": self._lengths(self.context_buckets, "context-encoding") if buckets else None,
                "token_buckets": self._lengths(self.token_buckets, "token-generation") if buckets else None,
                "nki_kernels": tuple(k for k, box in self.kernels.items() if box.isChecked()),
                "prefill_chunk": self.prefill_chunk.value(), "beams": self.beams.value()}

    @staticmethod
    def _spin(lo: int, hi: int, value: int) -> QSpinBox:
        box = QSpinBox()
        box.setRange(lo, hi)
        box.setValue(value)
        return box

    def _browse(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Model config", "", "Hugging Face config (*.json)")
        if path:
            self.model.setCurrentText(path)

    def configs(self) -> list[RunConfig]:
        """The runs the panel describes, one per chip ticked (or the one instance); raises
        :class:`ConfigError` for bucket lists that are not lengths."""
        instance = self.instance.currentText()
        if instance != DEFAULT_INSTANCE:
            targets = [(None, instance)]
        else:
            targets = [(k, None) for k, box in self.chips.items() if box.isChecked()]
        attention = self.attention.currentText()
        generation = self._generation()
        return [RunConfig(model=self.model.currentText().strip(), chip=chip, instance=inst,
                          mode=self.mode.currentText(), batch=self.batch.value(), seq=self.seq.value() or None,
                          new_tokens=self.new_tokens.value(), dtype=self.dtype.currentText(),
                          cores=self.cores.value() or None, copies=self.copies.value() or None,
                          grad_accum=self.grad_accum.value() if self.grad_accum.isEnabled() else 1,
                          concurrency=(self.users.value() or None) if self.users.isEnabled() else None,
                          quant=self._quant(),
                          lnc=None if self.lnc.currentText() == DEFAULT_LNC else int(self.lnc.currentText()),
                          attention=None if attention == STACK_ATTENTION else attention, gqa=self.gqa.currentText(),
                          sequence_parallel=self.sequence_parallel.isChecked(), **generation)
                for chip, inst in targets]

    def sweep_points(self) -> list[Point]:
        """The panel's configuration over the instances it names and :data:`SWEEP_BATCHES`."""
        instance = self.instance.currentText()
        if instance != DEFAULT_INSTANCE:
            instances = [instance]
        else:
            instances = [default_instance(chip).name for key, chip in all_chips().items()
                         if self.chips[key].isChecked()]
        return grid([self.model.currentText().strip()], instances, SWEEP_BATCHES, [self.seq.value() or None],
                    [self.cores.value() or None], [self.dtype.currentText()], [self.mode.currentText()],
                    new_tokens=self.new_tokens.value(),
                    quants=[self._quant()])

    def sweep(self) -> None:
        try:
            points = self.sweep_points()
        except SimError as exc:
            self.status.setText(str(exc))
            return
        self.status.setText(f"Sweeping {len(points)} configurations in the Sweep tab…")
        self.sig_sweep.emit(points)

    def start(self) -> None:
        try:
            configs = self.configs()
        except SimError as exc:
            self.status.setText(str(exc))
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
        self._idle(message)
        QMessageBox.warning(self, "Simulation failed", message)
