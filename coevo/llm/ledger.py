"""The budget ledger: what the LLM side cost, per backend and operator (or per server route).

Methods are compared at equal budgets, so every generate call is recorded: calls, requests, prompt and
completion tokens, and wall time. Operators may run in threads; the ledger is safe to share. It
serialises to a plain dict so a run store can checkpoint it and resume adds to the restored totals.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields

from coevo.llm.base import Completion


@dataclass
class Usage:
    """Totals for one (backend, operator) pair."""

    calls: int = 0
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    wall_seconds: float = 0.0
    failed_requests: int = 0
    """Completions whose finish_reason was "error"."""

    def add(self, other: Usage) -> None:
        for field in fields(self):
            setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))


class BudgetLedger:
    """Thread-safe accumulation of `Usage` keyed by (backend name, operator name)."""

    def __init__(self) -> None:
        self._usage: dict[tuple[str, str], Usage] = {}
        self._lock = threading.Lock()

    def record(self, backend: str, operator: str, completions: Sequence[Completion], wall_seconds: float) -> None:
        """Add one generate call that returned `completions` after `wall_seconds`."""
        usage = Usage(
            calls=1,
            requests=len(completions),
            prompt_tokens=sum(c.prompt_tokens for c in completions),
            completion_tokens=sum(c.completion_tokens for c in completions),
            wall_seconds=wall_seconds,
            failed_requests=sum(c.finish_reason == "error" for c in completions),
        )
        with self._lock:
            self._usage.setdefault((backend, operator), Usage()).add(usage)

    def absorb(self, other: BudgetLedger) -> None:
        """Add another ledger's totals (the calls a remote worker made for this run)."""
        with other._lock:
            entries = [(key, Usage(**asdict(usage))) for key, usage in other._usage.items()]
        with self._lock:
            for key, usage in entries:
                self._usage.setdefault(key, Usage()).add(usage)

    def usage(self, backend: str | None = None, operator: str | None = None) -> Usage:
        """Totals over the entries matching the given backend and/or operator (None matches all)."""
        total = Usage()
        with self._lock:
            for (entry_backend, entry_operator), usage in self._usage.items():
                if backend in (None, entry_backend) and operator in (None, entry_operator):
                    total.add(usage)
        return total

    def to_dict(self) -> dict[str, dict[str, dict[str, float]]]:
        """{backend: {operator: usage fields}}, JSON-ready."""
        with self._lock:
            snapshot = {key: Usage(**asdict(usage)) for key, usage in self._usage.items()}
        nested: dict[str, dict[str, dict[str, float]]] = {}
        for (backend, operator), usage in sorted(snapshot.items()):
            nested.setdefault(backend, {})[operator] = asdict(usage)
        return nested

    @classmethod
    def from_dict(cls, data: Mapping[str, Mapping[str, Mapping[str, float]]]) -> BudgetLedger:
        """Inverse of `to_dict`; raises ValueError on unknown fields."""
        ledger = cls()
        known = {field.name for field in fields(Usage)}
        for backend, operators in data.items():
            for operator, values in operators.items():
                if unknown := set(values) - known:
                    listed = ", ".join(sorted(unknown))
                    raise ValueError(f"ledger entry {backend}/{operator} has unknown field(s): {listed}")
                ledger._usage[(backend, operator)] = Usage(**values)  # type: ignore[arg-type]
        return ledger
