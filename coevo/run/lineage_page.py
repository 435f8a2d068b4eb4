"""The run's lineage as an interactive tree: lineage.html, a self-contained page beside the report.

Every heuristic the run made is a node under the first parent its prompt showed (a crossover's other
parents are named on the node), with its score, operator, model and island; opening a node shows its
unified diff against that parent, computed here so the page carries no diff code. The script and style
are package files (lineage_page.js, lineage_page.css) inlined into the page, so it works from file://
with no network. Candidate text (code, thoughts, reasons) is LLM output that may hold markup: it
reaches the page only as JSON in a data block, with <, > and & written as \\u escapes so nothing in it
can close the block, and the script writes it with textContent, never as markup. Subtrees deeper than
`OPEN_DEPTH` start collapsed and are built only when opened, so runs of a few thousand heuristics stay
quick to load.
"""

from __future__ import annotations

import difflib
import html
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib.resources import files
from typing import Any

from coevo.candidate import Candidate
from coevo.run.store import RunStore
from coevo.shown import shown

LINEAGE_NAME = "lineage.html"
OPEN_DEPTH = 2
"""Tree levels shown open when the page loads (roots and their children); deeper ones start collapsed,
except the path down to the run's answer."""


@dataclass(frozen=True)
class LineageNode:
    """One distinct heuristic of the run, placed in the tree."""

    candidate: Candidate
    parent: int | None
    """Index of its tree parent (the first of its parents the run stored), None for a root."""
    model: str | None
    """The model its LLM call names (an ensemble's choice), else the base model of the weights it was
    written under; None for a candidate no model wrote (the library)."""
    island: int | None
    """The first island that kept it among its members; None where none did (an invalid heuristic, or one
    worse than every member) or the run has one island."""
    diff: str
    """Unified diff of its code against its tree parent's (every line added for a root)."""
    ancestor: bool
    """The run's answer or one of its ancestors, crossover parents included."""


def kept_by_key(candidates: Iterable[Candidate]) -> dict[str, Candidate]:
    """Each key's first valid candidate (the one the population kept), else its first one."""
    by_key: dict[str, Candidate] = {}
    for candidate in candidates:
        known = by_key.get(candidate.key)
        if known is None or (candidate.valid and not known.valid):
            by_key[candidate.key] = candidate
    return by_key


def island_homes(states: Iterable[dict[str, Any]]) -> dict[str, int]:
    """The first island that kept each heuristic among its members, read from the step states (a
    migrant's copies on later islands do not move it); empty for a run with one island."""
    homes: dict[str, int] = {}
    islands = 0
    for state in states:
        layout = (state.get("islands") or {}).get("islands", [])
        islands = max(islands, len(layout))
        for index, island in enumerate(layout):
            for member in island["members"]:
                homes.setdefault(member["key"], index)
    return homes if islands > 1 else {}


def lineage_nodes(
    candidates: Sequence[Candidate],
    models: Sequence[str | None],
    homes: Mapping[str, int],
    answer_key: str | None,
) -> list[LineageNode]:
    """The tree over `candidates` (in the order made, `models` beside them), one node per key.

    A node hangs under its first parent that was made before it, so the tree has no cycle whatever
    the store holds; a node without one is a root.
    """
    by_key = kept_by_key(candidates)
    model_of = {
        c.key: m or (c.weights.base if c.weights is not None else None)
        for c, m in zip(candidates, models, strict=True)
        if c is by_key[c.key]
    }
    index = {key: position for position, key in enumerate(by_key)}
    ancestors = _ancestry(answer_key, by_key)
    nodes = []
    for position, (key, candidate) in enumerate(by_key.items()):
        parent = next((p for p in candidate.parents if p in index and index[p] < position), None)
        before = "" if parent is None else by_key[parent].code
        nodes.append(
            LineageNode(
                candidate=candidate,
                parent=None if parent is None else index[parent],
                model=model_of[key],
                island=homes.get(key),
                diff=_unified_diff(before, candidate.code, parent or "(no parent)", key),
                ancestor=key in ancestors,
            )
        )
    return nodes


def _ancestry(key: str | None, by_key: Mapping[str, Candidate]) -> set[str]:
    """`key` and the keys of every stored ancestor of it, crossover parents included."""
    found: set[str] = set()
    pending = [] if key is None else [key]
    while pending:
        current = pending.pop()
        if current in by_key and current not in found:
            found.add(current)
            pending += by_key[current].parents
    return found


def _unified_diff(before: str, after: str, before_name: str, after_name: str) -> str:
    lines = difflib.unified_diff(
        before.splitlines(), after.splitlines(), fromfile=before_name, tofile=after_name, lineterm=""
    )
    return "\n".join(lines)


def render_lineage_page(store: RunStore) -> str:
    """The whole lineage page for one stored run."""
    config = store.config
    candidates = [c for _, c in store.candidates()]
    answer, _ = store.answer()
    answer_key = None if answer is None else answer.key
    homes = island_homes(store.states())
    nodes = lineage_nodes(candidates, store.candidate_models(), homes, answer_key)
    title = f"coevo lineage: {config['method']} on {config['task']}"
    data = {
        "nodes": [_node_json(node) for node in nodes],
        "answer": next((i for i, node in enumerate(nodes) if node.candidate.key == answer_key), None),
        "islands": bool(homes),
        "open_depth": OPEN_DEPTH,
    }
    roots = sum(node.parent is None for node in nodes)
    summary = (
        f"{len(candidates)} candidates, {len(nodes)} distinct heuristics, {roots} of them without a stored parent."
        " Click a heuristic for its fields and its diff against its parent; the arrow opens its children."
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{_text(title)}</title><style>{_package_file('lineage_page.css')}</style></head>\n"
        f'<body><h1>{_text(title)}</h1>\n<p class="note">{_text(summary)}</p>\n'
        '<div class="controls"><button type="button" id="show-answer">Show the answer</button>'
        '<button type="button" id="open-all">Open all</button>'
        '<button type="button" id="close-all">Close all</button></div>\n'
        '<ul id="lineage" class="tree"></ul>\n'
        f'<script type="application/json" id="lineage-data">{_script_json(data)}</script>\n'
        f"<script>{_package_file('lineage_page.js')}</script>\n</body></html>\n"
    )


def _node_json(node: LineageNode) -> dict[str, Any]:
    candidate = node.candidate
    return {
        "key": candidate.key,
        "parent": node.parent,
        "parents": list(candidate.parents),
        "score": "invalid" if candidate.objective is None else f"{candidate.objective:.6g}",
        "operator": shown(candidate.operator),
        "generation": candidate.generation,
        "model": "-" if node.model is None else shown(node.model),
        "island": "-" if node.island is None else str(node.island),
        "weights": "-" if candidate.weights is None else shown(candidate.weights.label()),
        "prompt": shown(candidate.prompt_id or "default"),
        "thought": shown(candidate.thought, lines=True),
        "reason": None if candidate.reason is None else shown(candidate.reason, lines=True),
        "diff": shown(node.diff, lines=True),
        "ancestor": node.ancestor,
    }


def _text(text: str) -> str:
    return html.escape(shown(text))


def _script_json(value: Any) -> str:
    """JSON for a <script type="application/json"> block: <, > and & only occur inside JSON strings,
    and as \\u escapes no text can end the block or open a comment in it."""
    encoded = json.dumps(value, ensure_ascii=True)
    return encoded.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def _package_file(name: str) -> str:
    return files("coevo.run").joinpath(name).read_text(encoding="utf-8")
