"""Progress of a long command: a live bar on a terminal, whole lines in a log.

Rich draws a bar by redrawing one line at the console's width; written to a file or a pipe (a log, a
CI job) it shows only its last state, cut to 80 columns mid-word. There each change of the count is
printed instead as one whole line, holding what the bar's text columns hold.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, ProgressColumn, TaskID
from rich.text import Text


class LineProgress(Progress):
    """A `Progress` that prints a whole line whenever a task's count or description changes."""

    def __init__(self, *columns: ProgressColumn, console: Console) -> None:
        super().__init__(*columns, console=console, disable=True)
        self._shown: dict[TaskID, tuple[float, str]] = {}

    def update(self, task_id: TaskID, **changes: Any) -> None:
        super().update(task_id, **changes)
        task = next(t for t in self.tasks if t.id == task_id)
        now = (task.completed, task.description)
        if self._shown.get(task_id) != now:
            self._shown[task_id] = now
            texts = [column(task) for column in self.columns if not isinstance(column, (BarColumn, str))]
            line = " ".join(text.plain.strip() for text in texts if isinstance(text, Text) and text.plain.strip())
            self.console.print(line, soft_wrap=True, markup=False, highlight=False)


def progress_bars(*columns: ProgressColumn, console: Console | None = None) -> Progress:
    """A live `Progress` over `columns` on a terminal, a `LineProgress` otherwise."""
    console = console or Console(stderr=True)
    if console.is_terminal:
        return Progress(*columns, console=console, transient=False)
    return LineProgress(*columns, console=console)
