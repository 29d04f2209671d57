"""A form field for each run option, built from its declaration (:mod:`sim.options`): a number box,
a list to choose from, a switch, a line of lengths or of rates or a row of switches, each with the option's
label, help, bounds and default, and what leaving it unset means."""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QHBoxLayout,
    QLineEdit,
    QSpinBox,
    QWidget,
)

from sim import options
from sim.errors import ConfigError
from sim.options import Option

FLOAT_DECIMALS = 3
LIST_CHARS = 12  # a list is as wide as this many characters, whatever its longest entry: the form never scrolls


class OptionField:
    """The widget of one option: :meth:`value` reads what the user set (None where the option is
    left unset), :meth:`set` shows a value."""

    def __init__(self, option: Option) -> None:
        self.option = option
        self.widget = self._make()
        self.widget.setToolTip(f"<p>{options.in_terms_of(option.help, _label)}</p>")
        self.set(option.default)

    def _make(self) -> QWidget:
        o = self.option
        if o.kind == options.SWITCH:
            return QCheckBox(o.label)
        if o.kind == options.SET:
            row = QWidget()
            layout = QHBoxLayout(row)
            layout.setContentsMargins(0, 0, 0, 0)
            self.boxes = {c: QCheckBox(c) for c in o.choices}
            for box in self.boxes.values():
                layout.addWidget(box)
            layout.addStretch(1)
            return row
        if o.kind == options.INT:
            box = QSpinBox()
            box.setRange(int(o.lo) - (1 if o.none else 0), int(o.hi))
            if o.none:
                box.setSpecialValueText(o.none)
            return box
        if o.kind == options.FLOAT:
            box = QDoubleSpinBox()
            box.setDecimals(FLOAT_DECIMALS)
            step = 10 ** -FLOAT_DECIMALS
            box.setRange(o.lo - (step if o.none else 0.0), o.hi)
            box.setSingleStep(0.1 if o.hi <= 1 else 1.0)
            if o.none:
                box.setSpecialValueText(o.none)
            return box
        if o.kind == options.CHOICE:
            box = _combo()
            box.addItems(([o.none] if o.none else []) + [str(c) for c in o.choices])
            return box
        if o.kind == options.TEXT and o.choices:
            box = _combo()
            box.setEditable(True)
            box.addItems(([o.none] if o.none else []) + list(o.choices))
            return box
        box = QLineEdit()
        box.setPlaceholderText(o.none or "")
        return box

    def set(self, value: Any) -> None:
        o, w = self.option, self.widget
        if o.kind == options.SWITCH:
            w.setChecked(bool(value))
        elif o.kind == options.SET:
            for c, box in self.boxes.items():
                box.setChecked(c in (value or ()))
        elif o.kind in (options.INT, options.FLOAT):
            w.setValue(w.minimum() if value is None else value)
        elif o.kind == options.CHOICE or (o.kind == options.TEXT and o.choices):
            w.setCurrentText(o.none if value is None else str(value))
        elif o.kind == options.LENGTHS:
            w.setText(" ".join(map(str, value or ())))
        elif o.kind == options.RATES:
            w.setText(",".join(f"{v:g}" for v in value or ()))
        else:
            w.setText("" if value is None else str(value))

    def value(self) -> Any:
        """What the field holds, as the option takes it; raises :class:`ConfigError` naming the
        field for text that is not a value of it."""
        o, w = self.option, self.widget
        if o.kind == options.SWITCH:
            return w.isChecked()
        if o.kind == options.SET:
            return tuple(c for c, box in self.boxes.items() if box.isChecked())
        if o.kind in (options.INT, options.FLOAT):
            if o.none and w.value() == w.minimum():
                return None
            return w.value()
        if o.kind == options.CHOICE:
            text = w.currentText()
            return None if text == o.none else next(c for c in o.choices if str(c) == text)
        if o.kind == options.LENGTHS:
            return self._lengths(w.text())
        if o.kind == options.RATES:
            return self._rates(w.text())
        text = (w.currentText() if isinstance(w, QComboBox) else w.text()).strip()
        return None if not text or text == o.none else text

    def _lengths(self, text: str) -> tuple[int, ...] | None:
        """The lengths typed (spaces or commas between them), None for none."""
        try:
            lengths = tuple(int(word) for word in text.replace(",", " ").split())
            self.option.check(lengths)
        except ValueError:
            raise ConfigError(f"{self.option.label}: positive whole numbers of positions, got {text!r}") from None
        return lengths or None

    def _rates(self, text: str) -> tuple[float, ...] | None:
        """The rates typed (commas or spaces between them), None for none."""
        try:
            rates = tuple(float(word) for word in text.replace(",", " ").split())
            if rates:
                self.option.check(rates)
        except ValueError:
            raise ConfigError(f"{self.option.label}: one rate or several separated by commas, each from 0 to 1, got "
                              f"{text!r}") from None
        return rates or None

    def set_enabled(self, on: bool) -> None:
        self.widget.setEnabled(on)


def _combo() -> QComboBox:
    box = QComboBox()
    box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
    box.setMinimumContentsLength(LIST_CHARS)
    return box


def _label(option: Option) -> str:
    return f"'{option.label}'"
