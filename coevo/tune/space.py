"""The `[tune]` table of a config: which run knobs a study searches, and over what.

Each entry names a key of the run config by its dotted path (`"es.sigma"`, `"settings.prompt_pool"`,
`"workload.episodes"`, `population_size`) and either a range (`{low, high, log?, step?}`) or a list
of `choices`; everything else in the file is the base config every trial starts from. The table is
checked before any trial runs: each path against the model that owns it (`coevo.tune.paths`), whose
field type says whether it takes a range, and every range end and every choice as a full run config,
so a study cannot discover a bad value hours in.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna

from coevo.run.config import ConfigError, RunConfig, plugin_paths_from, read_toml, validate
from coevo.run.session import check_task
from coevo.tune.paths import Kind, knob_kind, tune_key

_RANGE_KEYS = {"low", "high", "log", "step"}


@dataclass(frozen=True)
class Knob:
    """One searched knob, named by its dotted path in the run config (also its Optuna parameter's
    name): a numeric range, or categorical choices (lists travel as joined strings, since Optuna's
    categorical values must be scalars)."""

    name: str
    kind: Kind
    low: float | None = None
    high: float | None = None
    log: bool = False
    step: float | None = None
    choices: tuple[Any, ...] = ()

    @property
    def path(self) -> tuple[str, ...]:
        return tuple(self.name.split("."))

    def suggest(self, trial: optuna.Trial) -> Any:
        if self.choices:
            labels = [_label(choice) for choice in self.choices]
            picked = trial.suggest_categorical(self.name, labels)
            return self.choices[labels.index(picked)]
        if self.kind == "int":
            return trial.suggest_int(self.name, self.low, self.high, step=self.step or 1, log=self.log)
        return trial.suggest_float(self.name, self.low, self.high, step=self.step, log=self.log)

    def extremes(self) -> tuple[Any, ...]:
        return self.choices or (self.low, self.high)

    def value_of(self, param: Any) -> Any:
        """The config value behind a stored Optuna parameter (a choice's label back to the choice)."""
        if self.choices:
            return next(choice for choice in self.choices if _label(choice) == param)
        return param


@dataclass(frozen=True)
class TuneSpace:
    """The base config (as TOML data, without `[tune]`) and the knobs searched over it."""

    base: dict[str, Any]
    knobs: tuple[Knob, ...]

    def suggest(self, trial: optuna.Trial) -> RunConfig:
        """The trial's config: the base with each knob's suggested value."""
        return validate(self.with_values({knob.name: knob.suggest(trial) for knob in self.knobs}))

    def with_values(self, values: dict[str, Any]) -> dict[str, Any]:
        """The base data with `values` (knob name -> config value) set at the knobs' paths."""
        data = copy.deepcopy(self.base)
        for knob in self.knobs:
            if knob.name in values:
                *sections, key = knob.path
                node = data
                for section in sections:
                    node = node.setdefault(section, {})
                node[key] = values[knob.name]
        return data

    def from_params(self, params: dict[str, Any]) -> dict[str, Any]:
        """The config data of a finished trial from its Optuna params."""
        return self.with_values({k.name: k.value_of(params[k.name]) for k in self.knobs if k.name in params})


def load_space(path: Path) -> TuneSpace:
    """Read a config with a `[tune]` table; ConfigError (one line) on any problem in either."""
    data = plugin_paths_from(read_toml(path), path.parent)
    table = data.pop("tune", None)
    if not isinstance(table, dict) or not table:
        raise ConfigError(
            f'{path} has no [tune] table naming the keys to search, e.g. "es.sigma" = {{low = .., high = ..}}'
        )
    base = validate(data)
    check_task(base)  # a broken problem fails here, in one line, not in every trial
    knobs = _knob_specs(table)
    space = TuneSpace(data, tuple(_knob(name, knob_kind(base, name), spec) for name, spec in knobs.items()))
    for knob in space.knobs:
        for value in knob.extremes():
            try:
                validate(space.with_values({knob.name: value}))
            except ConfigError as exc:
                raise ConfigError(f"{tune_key(knob.name)} = {_label(value)}: {exc}") from None
    return space


def _knob_specs(table: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Dotted path -> spec. A key written unquoted (`es.sigma = {..}`, or a `[tune.es]` table) is the
    same path to TOML, which nests it: a table holding only tables and none of a spec's keys is a
    group of knobs, opened here."""
    specs: dict[str, Any] = {}
    for key, spec in table.items():
        group = isinstance(spec, dict) and spec and all(isinstance(v, dict) for v in spec.values())
        if group and not spec.keys() & {*_RANGE_KEYS, "choices"}:
            specs |= _knob_specs(spec, f"{prefix}{key}.")
        else:
            specs[prefix + key] = spec
    return specs


def _knob(name: str, kind: Kind, spec: Any) -> Knob:
    if not isinstance(spec, dict):
        raise ConfigError(f"{tune_key(name)} must be a table: {{low = .., high = ..}} or {{choices = [..]}}")
    if "choices" in spec:
        choices = spec["choices"]
        if set(spec) != {"choices"} or not isinstance(choices, list) or not choices:
            raise ConfigError(f"{tune_key(name)}: choices must be a non-empty list, alone in its table")
        if len({_label(c) for c in choices}) < len(choices):
            raise ConfigError(f"{tune_key(name)}: choices repeat")
        return Knob(name, kind, choices=tuple(tuple(c) if isinstance(c, list) else c for c in choices))
    if kind == "choices":
        raise ConfigError(f"{tune_key(name)} is not an int or float key: it takes choices = [..], not a range")
    unknown = set(spec) - _RANGE_KEYS
    if unknown or not {"low", "high"} <= set(spec):
        raise ConfigError(f"{tune_key(name)}: a range takes low, high and optionally log, step (got {', '.join(spec)})")
    low, high, log, step = spec["low"], spec["high"], spec.get("log", False), spec.get("step")
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in (low, high)) or not low < high:
        raise ConfigError(f"{tune_key(name)}: needs numbers low < high, got low = {low!r}, high = {high!r}")
    if not isinstance(log, bool) or (log and low <= 0):
        raise ConfigError(f"{tune_key(name)}: log must be true or false, and a log range needs low > 0")
    if kind == "int" and not all(isinstance(v, int) for v in (low, high, step or 1)):
        raise ConfigError(f"{tune_key(name)} is a whole number: low, high and step must be integers")
    if step is not None and (log or not isinstance(step, int | float) or step <= 0):
        raise ConfigError(f"{tune_key(name)}: step must be a positive number, and not with log = true")
    return Knob(name, kind, low=low, high=high, log=log, step=step)


def _label(choice: Any) -> Any:
    return ",".join(map(str, choice)) if isinstance(choice, list | tuple) else choice
