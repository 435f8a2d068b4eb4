"""Replayable ES history: one JSON line per update, so a fine-tuned model is its base name plus a few KB.

Each line holds what the update was made of (seeds, signs, raw and shaped rewards, sigma, alpha,
the merged update coefficients, optimizer, scope, noise version). Lines are appended and fsync'd; a
line torn by a crash (no trailing newline) is cut off when the history is opened, so the file is always
a sequence of complete updates. `replay` rebuilds the weights bit for bit, optimizer state included.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Protocol

from torch import nn

from coevo.es.hosts import module_host
from coevo.es.optim import OptimizerConfig
from coevo.es.perturbation import Update
from coevo.es.protocols import WeightsHost

HISTORY_FILENAME = "es_history.jsonl"
"""A run directory's ES history, as `coevo run` writes it and `coevo serve --run-dir` reads it."""


@dataclass(frozen=True)
class UpdateRecord:
    """One line of the history; `update` is None when no update was applied (all members invalid, or
    sigma 0: unperturbed members)."""

    step: int
    seeds: tuple[int, ...]
    signs: tuple[int, ...]
    sigma: float
    raw_rewards: tuple[float | None, ...]
    """The members' rewards as told (None: invalid)."""
    shaped_rewards: tuple[float, ...] | None
    alpha: float
    scope: str
    noise_version: str
    update: Update | None
    residuals: tuple[float, ...] | None = None
    """Mirrored pairs: each reward (invalid ones penalised) less its pair's mean, what was shaped."""

    @property
    def has_direction(self) -> bool:
        """Whether the members' rewards differed, so the update points somewhere: equal rewards shape to
        all-zero coefficients, a step that (with plain SGD) leaves the weights where they were."""
        return self.update is not None and any(coeff != 0.0 for coeff in self.update.coeffs)

    def to_json(self) -> str:
        """One line of JSON; floats are written in shortest round-trip form, so replay is exact."""
        fields = asdict(self)
        fields["update"] = None
        if self.update is not None:
            fields["update"] = {
                "seeds": list(self.update.seeds),
                "coeffs": list(self.update.coeffs),
                "alpha": self.update.alpha,
                "optimizer": self.update.optimizer.model_dump(),
            }
        return json.dumps(fields, allow_nan=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, line: str) -> UpdateRecord:
        fields = json.loads(line)
        update = fields.pop("update")
        if update is not None:
            update = Update(
                seeds=tuple(update["seeds"]),
                coeffs=tuple(update["coeffs"]),
                alpha=update["alpha"],
                optimizer=OptimizerConfig(**update["optimizer"]),
            )
        shaped = fields.pop("shaped_rewards")
        residuals = fields.get("residuals")
        return cls(
            step=fields["step"],
            seeds=tuple(fields["seeds"]),
            signs=tuple(fields["signs"]),
            sigma=fields["sigma"],
            raw_rewards=tuple(fields["raw_rewards"]),
            shaped_rewards=None if shaped is None else tuple(shaped),
            alpha=fields["alpha"],
            scope=fields["scope"],
            noise_version=fields["noise_version"],
            update=update,
            residuals=None if residuals is None else tuple(residuals),
        )


class History(Protocol):
    """Where the engine keeps its updates: a JSONL file (`ESHistory`) or a run store's table."""

    def append(self, record: UpdateRecord) -> None:
        """Keep one record; records arrive in step order, 0, 1, ..."""
        ...

    def load(self) -> list[UpdateRecord]:
        """Every record kept so far, in step order."""
        ...


class ESHistory:
    """An append-only JSONL file of `UpdateRecord`s, durable after each append."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._cut_torn_tail()
        self._steps = len(self.load())

    def append(self, record: UpdateRecord) -> None:
        """Add one record; it is on disk (fsync'd) when this returns, and must continue the step count."""
        if record.step != self._steps:
            raise ValueError(f"history {self.path} holds {self._steps} steps; cannot append step {record.step}")
        created = not self.path.exists()
        with open(self.path, "a", encoding="utf-8") as file:
            file.write(record.to_json() + "\n")
            file.flush()
            os.fsync(file.fileno())
        if created:  # the new directory entry must survive a crash too
            directory = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(directory)
            finally:
                os.close(directory)
        self._steps += 1

    def load(self) -> list[UpdateRecord]:
        """All complete records, in step order."""
        if not self.path.exists():
            return []
        records = []
        for number, line in enumerate(self.path.read_text(encoding="utf-8").splitlines(), start=1):
            try:
                records.append(UpdateRecord.from_json(line))
            except (ValueError, KeyError, TypeError) as error:
                raise ValueError(f"{self.path}:{number}: corrupt history line ({error})") from None
        for position, record in enumerate(records):
            if record.step != position:
                raise ValueError(f"{self.path}: record {position} has step {record.step}; steps must run 0, 1, ...")
        return records

    def _cut_torn_tail(self) -> None:
        """Drop a final line without its newline: the write that made it never completed."""
        if not self.path.exists():
            return
        with open(self.path, "rb+") as file:
            data = file.read()
            complete = data.rfind(b"\n") + 1
            if complete < len(data):
                file.truncate(complete)
                file.flush()
                os.fsync(file.fileno())


def host_for(module: nn.Module, record: UpdateRecord | None) -> WeightsHost:
    """The host that made `record` (full rank, or low rank of the rank its noise version names)."""
    if record is None:
        return module_host(module, "full")
    match = re.search(r"\+lowrank-r(\d+)$", record.noise_version)
    return module_host(module, record.scope, int(match.group(1)) if match else 0)


def replay(target: WeightsHost | nn.Module, history: ESHistory | Sequence[UpdateRecord]) -> WeightsHost:
    """Apply a history's updates to base weights; returns the host (a new exact-mode one for a module).

    The result's weights_sha256() equals the live run's after the same steps, given the same base weights.
    """
    records = history.load() if isinstance(history, ESHistory) else list(history)
    if isinstance(target, nn.Module):
        target = host_for(target, records[0] if records else None)
    for record in records:
        if (record.scope, record.noise_version) != (target.scope, target.noise_version):
            raise ValueError(
                f"step {record.step} was made with scope {record.scope!r} and noise {record.noise_version!r}; "
                f"this host has {target.scope!r} and {target.noise_version!r}"
            )
        if record.update is not None:
            target.apply_update(record.update)
    return target
