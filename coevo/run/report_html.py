"""The pieces report.html is built from, shared by the generic report and every plugin's section.

Every string taken from the store goes through `escaped`: code, thoughts and prompts are LLM output and
may hold markup, or characters the page could not even be written with. A note below a table or a plot
is a ``<p class="note">``, which the page's style greys out.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from coevo.shown import shown

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def escaped(text: str) -> str:
    """``text`` for the page: shown (``coevo.shown``, lines kept), then HTML-escaped."""
    return html.escape(shown(text, lines=True))


def section(title: str, body: str) -> str:
    """One titled section of the page."""
    return f"<section><h2>{escaped(title)}</h2>\n{body}\n</section>"


def table(rows: Iterable[Sequence[Any]], headers: Sequence[str] = ()) -> str:
    """A table of escaped cells, with a header row when `headers` are given; numbers are right-aligned."""
    head = "<tr>" + "".join(f"<th>{escaped(h)}</th>" for h in headers) + "</tr>" if headers else ""
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="num">{cell}</td>' if isinstance(cell, int | float) else f"<td>{escaped(str(cell))}</td>"
            for cell in row
        )
        + "</tr>"
        for row in rows
    )
    return f"<table>{head}{body}</table>"


def image(figure: Figure, alt: str) -> str:
    """A matplotlib figure as a PNG embedded in the page (a data URI: the page links nothing)."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=90)
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f'<img alt="{escaped(alt)}" src="data:image/png;base64,{data}">'
