"""The `[population]` layout's section of report.html: the islands (`coevo.islands`) and, with
MAP-Elites, the cells of each island's grid that the run filled."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from coevo.run.report_html import escaped, table
from coevo.run.report_section import ReportSection

if TYPE_CHECKING:
    from coevo.run.store import RunStore


def islands(store: RunStore, config: dict[str, Any], state: dict[str, Any]) -> str | None:
    """Each island's size and best member, and with MAP-Elites the cells it fills of its grid; None for
    EoH's single pool, which the lineage already shows."""
    settings = config.get("population") or {}
    kept = (state.get("islands") or {}).get("islands", [])
    grid = settings.get("archive") == "map-elites"
    if len(kept) < 2 and not grid:
        return None
    headers = ["island", "members", "best search objective", "best candidate"]
    if grid:
        headers.append("occupied cells")
        cells = settings["feature_bins"] ** len(settings["features"])
    rows = []
    for index, island in enumerate(kept):
        best = island["members"][:1]
        row = [index, len(island["members"]), *((best[0]["objective"], best[0]["key"]) if best else ("-", "-"))]
        rows.append([*row, f"{len(island['members'])} / {cells}"] if grid else row)
    note = f"Features: {', '.join(settings['features'])}, {settings['feature_bins']} bins each." if grid else ""
    return table(rows, headers) + (f'<p class="note">{escaped(note)}</p>' if note else "")


ISLANDS_SECTION = ReportSection("Islands and archive", islands)
