"""A pane's header: rich text that wraps only between its phrases ("31,833 tokens/s", "× 32 copies"
never break inside), on at most a few lines; a header longer than that shows the phrases that fit
and an ellipsis, the whole text in its tooltip. It measures and paints one text document, so what
it measures is what it draws."""

from __future__ import annotations

import math
import re

from PySide6.QtGui import QAbstractTextDocumentLayout, QPainter, QPalette, QTextDocument
from PySide6.QtWidgets import QSizePolicy, QWidget

HEADER_LINES = 3  # the most lines a header takes; past them its end is cut with an ellipsis
ELLIPSIS = "…"
_TAG_OR_TEXT = re.compile(r"<[^>]*>|[^<]+")
# a space where a line may break: after a separator's dot, after a gap (" &nbsp; ") and before a
# "×" (which then begins its phrase: "× 32 copies")
_BREAKABLE = re.compile(r"(?<=·) |(?<=&nbsp;) | (?=×(?: |&nbsp;))")
# where the text layout would break a word (after a slash or a hyphen: "core/copy", "bert-large"),
# a word joiner holds it together
_JOINS = re.compile(f"([/-])(?!{chr(0x2060)})")
WORD_JOINER = chr(0x2060)
_TRAILING = re.compile(r"(?:\s|&nbsp;|·)+$")  # what is left of a separator where a header is cut


def phrases(html: str) -> list[str]:
    """``html`` cut where a line may break, each piece with the space it ends with; inside a piece
    every space is made non-breaking. Tags are left whole (their spaces are not text)."""
    out, piece = [], ""
    for token in _TAG_OR_TEXT.findall(html):
        if token.startswith("<"):
            if token.lower().startswith("<br"):
                out.append(piece + token)
                piece = ""
            else:
                piece += token
            continue
        parts = _BREAKABLE.split(token)
        for k, part in enumerate(parts):
            piece += _JOINS.sub(r"\1" + WORD_JOINER, part.replace(" ", "&nbsp;"))
            if k < len(parts) - 1:
                out.append(piece + " ")
                piece = ""
    if piece:
        out.append(piece)
    return out


class PhraseHeader(QWidget):
    """A header of rich text, wrapped between phrases on at most ``max_lines`` lines, as tall as
    the lines it shows. :meth:`text` is the whole header, :meth:`shown_text` what is drawn."""

    def __init__(self, max_lines: int = HEADER_LINES, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.max_lines = max_lines
        self._html, self._note, self._shown, self._elided = "", "", "", False
        self._doc = QTextDocument()
        self._doc.setDocumentMargin(0)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)

    def text(self) -> str:
        return self._html

    def shown_text(self) -> str:
        return self._shown

    def elided(self) -> bool:
        """Whether the header is cut (the whole text then in its tooltip)."""
        return self._elided

    def set_text(self, html: str, note: str = "") -> None:
        """Show ``html``; ``note`` (rich text) is its tooltip, after the whole header when it is cut."""
        self._html, self._note = html, note
        self._fit()

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        if event.oldSize().width() != event.size().width():
            self._fit()

    def changeEvent(self, event) -> None:
        super().changeEvent(event)
        if event.type() in (event.Type.FontChange, event.Type.PaletteChange):
            self._fit()

    def _lay_out(self, html: str, width: float) -> tuple[int, float]:
        """Lines and widest line of ``html`` laid out in ``width`` pixels."""
        doc = self._doc
        doc.setDefaultFont(self.font())
        doc.setHtml(html)
        doc.setTextWidth(width)
        lines, block = 0, doc.begin()
        while block.isValid():
            lines += block.layout().lineCount()
            block = block.next()
        return lines, doc.idealWidth()

    def _fits(self, html: str, width: float) -> bool:
        lines, widest = self._lay_out(html, width)
        return lines <= self.max_lines and widest <= width + 0.5

    def _fit(self) -> None:
        width = max(1, self.contentsRect().width())
        pieces = phrases(self._html)
        shown = "".join(pieces)
        self._elided = not self._fits(shown, width)
        if self._elided:  # the phrases that fit, then the ellipsis
            lo, hi = 0, len(pieces)  # pieces[:lo] fit with the ellipsis, pieces[:hi] do not
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (mid, hi) if self._fits(self._cut(pieces, mid), width) else (lo, mid)
            shown = self._cut(pieces, lo)
        self._shown = shown
        self._lay_out(shown, width)
        self.setFixedHeight(math.ceil(self._doc.size().height()) + self.contentsMargins().top()
                            + self.contentsMargins().bottom())
        whole = f"<p>{self._html}</p>" if self.elided() else ""
        self.setToolTip(whole + self._note)
        self.update()

    @staticmethod
    def _cut(pieces: list[str], n: int) -> str:
        """The first ``n`` pieces and the ellipsis, without the separator they end with."""
        return _TRAILING.sub("", "".join(pieces[:n])) + ELLIPSIS

    def paintEvent(self, event) -> None:
        p = QPainter(self)
        r = self.contentsRect()
        p.translate(r.topLeft())
        context = QAbstractTextDocumentLayout.PaintContext()
        context.palette = self.palette()
        context.palette.setColor(QPalette.ColorRole.Text, self.palette().color(QPalette.ColorRole.WindowText))
        self._doc.documentLayout().draw(p, context)
        p.end()
