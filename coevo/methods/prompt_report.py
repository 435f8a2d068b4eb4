"""The prompt pool's section of report.html (every method has one, `Method.prompt_pool`; `coevo`
rewrites its variants): each variant, its uses and score, and each rewrite beside the text it replaced."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from coevo.run.report_html import escaped, table
from coevo.run.report_section import ReportSection

if TYPE_CHECKING:
    from coevo.run.store import RunStore


def prompt_changes(store: RunStore, config: dict[str, Any], state: dict[str, Any]) -> str:
    """Every prompt variant (the initial ones, then each rewrite with its parent's text beside it)."""
    first = next(store.states(), None)
    initial = [] if first is None else first["prompts"]
    rewrites = store.prompts()
    final = {v["id"]: v for v in state.get("prompts", [])}
    rows = []
    for variant in [*initial, *rewrites]:
        kept = final.get(variant["id"])
        rows.append(
            (
                variant["id"],
                variant["parent"] or "-",
                variant["changed"] or "-",
                variant.get("step", 0),
                "evicted" if kept is None else kept["uses"],
                "evicted" if kept is None else f"{kept['score']:.4g}" if kept["uses"] else "untried",
            )
        )
    variants = table(rows, ("variant", "parent", "changed component", "made at step", "uses", "score (mean reward)"))
    if not rewrites:
        return variants + '<p class="note">The prompts did not change in this run.</p>'
    texts = {v["id"]: v for v in [*initial, *rewrites]}
    return variants + "".join(_rewrite_details(variant, texts.get(variant["parent"])) for variant in rewrites)


PROMPT_CHANGES = ReportSection("How the prompts changed", prompt_changes)


def _rewrite_details(variant: dict[str, Any], parent: dict[str, Any] | None) -> str:
    component = variant["changed"]

    def text(of: dict[str, Any]) -> str:
        return (of["notes"] if component == "notes" else of["templates"][component]) or "(empty)"

    before = "" if parent is None else f"<p>before ({escaped(parent['id'])}):</p><pre>{escaped(text(parent))}</pre>"
    return (
        f"<details><summary>{escaped(variant['id'])}: rewrote {escaped(component)}</summary>"
        f"{before}<p>after:</p><pre>{escaped(text(variant))}</pre></details>"
    )
