"""A run's knobs in one validated object: the TOML file, `--set key=value` overrides, and defaults.

The keys every method shares (method, task, model, budget, seed, es, llm, eval, workload, ...) are
declared here; a method's own keys live in its `[settings]` table, checked by the model the method
declares (`Method.settings_model`), so this module knows no method's keys and imports no method. In the
same way the `[workload]` table is checked by the model its kind's class declares, and `llm.backend`'s
class checks the config it runs (`coevo.run.workload_registry`, `coevo.run.backend_registry`).

Defaults follow the reference grid (population 10, k = 1 direction per parent, sigma 1e-3 cosine to 0,
alpha 5e-4, z-scored rewards), so a config that names only method, task, model and budget is the
reference setting at that budget.
"""

from __future__ import annotations

import difflib
import importlib.util
import re
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny, ValidationError, field_validator, model_validator

from coevo.context import RunFacts
from coevo.es.shaping import SHAPINGS
from coevo.es.strategy import build_strategy
from coevo.extras import install_hint
from coevo.family import Family
from coevo.features import FEATURES
from coevo.plugins import PluginError, normalised
from coevo.run.backend_registry import backend_class, checked_options
from coevo.run.embedder_registry import BUILT_IN as BUILT_IN_EMBEDDERS
from coevo.run.embedder_registry import embedder_class
from coevo.run.ensemble_config import TEXT_ONLY_METHOD, EnsembleModel
from coevo.run.method_registry import method_class, method_names
from coevo.run.model_source import ModelSource
from coevo.run.workload_registry import settings_model, workload_class, workload_kinds
from coevo.workload import WorkloadSettings

METHODS = method_names()
"""The built-in method names (`coevo.run.method_registry`); installed packages and specs may name more."""


class ConfigError(ValueError):
    """A config that cannot run; the message is one line naming the problem."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ESSettings(_Section):
    sigma: float = Field(1e-3, gt=0, description="sigma_0 of the cosine schedule")
    sigma_final: float = Field(0.0, ge=0, description="sigma_T the schedule decays to; at 0 a step makes no update")
    alpha: float = Field(5e-4, gt=0, description="ES learning rate (no 1/sigma, as the reference)")
    directions_per_parent: int = Field(1, ge=1, description="k: ES directions per population slot")
    rank: int = Field(
        0,
        ge=0,
        description="0: full-rank members generated one by one; r > 0: rank-r "
        "EGGROLL members generated together in one batch",
    )
    scope: str = Field("full", description="full, all_linear or a parameter-name regex (rank > 0: not full)")
    shaping: Literal["zscore", "centered_rank"] = Field(
        "centered_rank", description="fitness shaping across the whole population before the update"
    )
    antithetic: bool = Field(
        True,
        description="mirrored pairs (eps, -eps) that share text, parent and sampling seed, so a pair's "
        "reward difference is its direction's effect alone",
    )
    reward: Literal["quality", "improvement"] = Field(
        "quality",
        description="heuristics: a child's own fitness (invalid: below the generation's worst valid), or "
        "the reference's child-minus-parent improvement",
    )
    strategy: str = Field(
        "openai-es",
        description="the rule from rewards to a step: openai-es, ars, or a plugin (docs/es.md#strategies)",
    )
    strategy_options: dict[str, Any] = Field(
        default_factory=dict, description="the strategy's own settings, e.g. {top_share = 0.5} for ars"
    )

    @model_validator(mode="after")
    def _strategy_builds(self) -> ESSettings:
        build_strategy(self.strategy, self.strategy_options, SHAPINGS[self.shaping], self.antithetic)
        return self


class LLMSettings(ModelSource):
    max_new_tokens: int = Field(384, ge=16)
    temperature: float = Field(0.8, ge=0)
    top_p: float = Field(0.95, gt=0, le=1)
    max_batch_size: int = Field(16, ge=1)
    threads: int | None = Field(
        None,
        ge=1,
        description="torch threads of an in-process model, over OMP_NUM_THREADS (default: the cores other work "
        "leaves idle, re-checked between batches)",
    )
    dtype: Literal["auto", "float32", "bfloat16"] = Field(
        "auto", description="compute dtype of a transformers model: auto = bf16 where the CPU has it natively"
    )
    ensemble: list[EnsembleModel] = Field(
        default_factory=list,
        description="more models beside the run's own, among which a bandit shares the operators' calls "
        "(docs/llm.md#model-ensembles)",
    )
    ensemble_exploration: float = Field(1.0, ge=0, description="the weight of the bandit's UCB1 exploration bonus")


class EvalSettings(_Section):
    split: Literal["search", "val"] = Field("search", description="what selection sees; test is never shown")
    limit: int | None = Field(None, ge=1, description="only the first N instances of the split")
    workers: int | None = Field(None, ge=1)


class OperatorSettings(_Section):
    """How the one-parent mutations (m1, m2) ask for their change: a whole function, as EoH does, or
    SEARCH/REPLACE blocks against the parent, as OpenEvolve and ShinkaEvolve mostly do
    (docs/runs.md#diff-edits)."""

    edit: Literal["full", "diff"] | dict[Literal["full", "diff"], float] = Field(
        "full",
        description="full, diff, or a table of probabilities such as {diff = 0.6, full = 0.4}, drawn per request",
    )
    diff_resamples: int = Field(
        3, ge=0, description="times a diff that does not apply is asked again before a full rewrite"
    )

    @field_validator("edit")
    @classmethod
    def _probabilities(cls, value: str | dict[str, float]) -> str | dict[str, float]:
        if isinstance(value, dict):
            if any(weight < 0 for weight in value.values()) or sum(value.values()) <= 0:
                raise ValueError("edit probabilities must be >= 0 with a positive sum")
        return value

    @property
    def diff_share(self) -> float:
        """The chance that a one-parent request asks for a diff (a table's weights normalised), what the
        operators' `EditPolicy` takes."""
        if isinstance(self.edit, str):
            return float(self.edit == "diff")
        return self.edit.get("diff", 0.0) / sum(self.edit.values())


class PopulationSettings(_Section):
    """How the population is laid out: islands in a ring, an elitist pool or a MAP-Elites grid on each,
    and how parents are drawn (docs/runs.md#population-structure). The defaults are EoH's one pool."""

    islands: int = Field(1, ge=1, description="islands that evolve apart, each ceil(population_size / islands) members")
    migration_interval: int = Field(
        5, ge=1, description="generations between migrations, each island sending its best to the next"
    )
    migration_rate: float = Field(
        0.1, gt=0, le=1, description="share of an island's members (at least one) copied at each migration"
    )
    archive: Literal["elite", "map-elites"] = Field(
        "elite", description="elite: the best distinct members; map-elites: the best of each cell of a feature grid"
    )
    features: list[str] = Field(
        ["code_length"], min_length=1, description=f"map-elites dimensions, built-in: {', '.join(FEATURES)}"
    )
    feature_bins: int = Field(10, ge=1, description="bins per feature dimension")
    feature_ranges: dict[str, tuple[float, float]] = Field(
        default_factory=dict, description="fixed [low, high] of a feature; the others follow the values seen"
    )
    parent_sampling: Literal["rank", "power-law", "weighted"] = Field(
        "rank",
        description="rank: EoH's 1 / (rank + n); power-law: (rank + 1) ** -exponent; weighted: sigmoid of the score",
    )
    power_law_exponent: float = Field(1.0, gt=0, description="the exponent of power-law sampling")
    weighted_sharpness: float = Field(
        10.0, gt=0, description="slope of weighted sampling's sigmoid, per standard deviation from the median"
    )

    @model_validator(mode="after")
    def _known_features(self) -> PopulationSettings:
        for name in [*self.features, *self.feature_ranges]:
            if name not in FEATURES:
                raise ValueError(f"unknown feature {name!r}; built-in features: {', '.join(FEATURES)}")
        for name, (low, high) in self.feature_ranges.items():
            if not low < high:
                raise ValueError(f"feature_ranges.{name} must be [low, high] with low < high, got [{low}, {high}]")
        return self


class NoveltySettings(_Section):
    """A check of each child before it is evaluated, as ShinkaEvolve's (docs/runs.md#novelty-before-evaluation):
    a child whose code embeds at or above `threshold` cosine to a population member's is shown to the run's
    LLM as a judge, next to that member; a child not judged novel is asked again, and after `tries`
    children the last is rejected: recorded, never evaluated, not charged to the budget. Off by default."""

    enabled: bool = Field(False, description="check children for novelty before evaluating them")
    threshold: float = Field(
        0.99, gt=0, le=1, description="cosine to the nearest member at or above which the judge is asked"
    )
    tries: int = Field(3, ge=1, description="children asked for per request before the last is rejected")
    embedder: str = Field(
        "hidden-states",
        description="hidden-states (the mean-pooled last hidden layer of the run's local model, or of the "
        "embedded smollm2-135m), or an embedder class as path/to/file.py:Class or package.module:Class",
    )

    @field_validator("embedder")
    @classmethod
    def _known_embedder(cls, value: str) -> str:
        """Built in, registered, or a class spec that loads (its path made absolute), before any model
        loads; a `PluginError` is a ValueError, so the config names it in one line."""
        if value not in BUILT_IN_EMBEDDERS:
            embedder_class(value)
        return normalised(value)


class RunConfig(_Section):
    """Everything a run needs; `budget` counts candidate evaluations (every proposal slot counts, but for
    a child the novelty check rejects)."""

    method: str
    task: str | None = Field(None, description="the AHD task; required for workload.kind = ahd")
    model: str = Field("smollm2-135m", description="embedded model name, model directory or module:factory")
    budget: int = Field(ge=1)
    seed: int = Field(0, ge=0)
    population_size: int = Field(10, ge=2)
    library: Literal["none", "seed", "all"] = Field(
        "seed", description="heuristics/ the population starts from: none, the task's seed, or seed + evolved"
    )
    init_samples: int | None = Field(
        None, ge=0, description="i1 samples in generation 0 (default: fill the population after the library)"
    )
    finalists: int = Field(10, ge=1, description="best distinct heuristics (on search) scored on val at the end")
    es: ESSettings = ESSettings()
    llm: LLMSettings = LLMSettings()
    eval: EvalSettings = EvalSettings()
    operators: OperatorSettings = OperatorSettings()
    population: PopulationSettings = PopulationSettings()
    novelty: NoveltySettings = NoveltySettings()
    workload: SerializeAsAny[WorkloadSettings] = WorkloadSettings()
    settings: dict[str, Any] = Field(
        default_factory=dict, description="the method's own keys, checked by its settings model (below)"
    )

    @model_validator(mode="before")
    @classmethod
    def _workload_table(cls, data: Any) -> Any:
        """The `[workload]` table as its kind's settings model (the kind's file path made absolute)."""
        if isinstance(data, dict):
            return {**data, "workload": workload_settings(data.get("workload", {}))}
        return data

    @field_validator("method")
    @classmethod
    def _known_method(cls, value: str) -> str:
        """A built-in or registered name, or a file/module spec (a file's path made absolute); the
        class is loaded here, so a broken method fails before any model loads."""
        try:
            method_class(value)
        except PluginError as exc:
            raise ValueError(str(exc)) from None
        return normalised(value)

    @field_validator("task")
    @classmethod
    def _known_task(cls, value: str | None) -> str | None:
        """A registered name, or a file/module spec (a file's path made absolute, so resume and Ray
        workers find it from any directory); the class must load and be a Task."""
        from tasks import UnknownTaskError, task_class

        if value is None:
            return value
        try:
            task_class(value)
        except UnknownTaskError as exc:
            raise ValueError(str(exc)) from None
        return normalised(value)

    @model_validator(mode="after")
    def _method_fits_workload(self) -> RunConfig:
        kind, family = self.workload.kind, self.family
        method = method_class(self.method)
        if family not in method.families:
            fitting = [name for name in METHODS if family in method_class(name).families]
            raise ValueError(
                f"method {self.method} does not run on the {kind} workload; choose one of: {', '.join(fitting)}"
            )
        if family.writes_code and self.task is None:
            raise ValueError("config key 'task' is required")
        if method.extra is not None and importlib.util.find_spec(method.extra[0]) is None:
            raise ValueError(
                f"method {self.method} needs the {method.extra[1]!r} extra: {install_hint(method.extra[1])}"
            )
        check_settings(self.method, self.settings)
        if self.novelty.enabled and not family.writes_code:
            raise ValueError(f"novelty.enabled checks the code of heuristics, which the {kind} workload does not write")
        return self

    @model_validator(mode="after")
    def _islands_fit(self) -> RunConfig:
        if self.population.islands > self.population_size:
            raise ValueError(
                f"population.islands ({self.population.islands}) cannot exceed population_size ({self.population_size})"
            )
        return self

    @model_validator(mode="after")
    def _ensemble_fits(self) -> RunConfig:
        check_ensemble(self)
        return self

    @model_validator(mode="after")
    def _backend_runs_it(self) -> RunConfig:
        checked_options(self.llm.backend, self.llm.engine_options)
        check = getattr(backend_class(self.llm.backend), "check", None)
        if check is not None:
            check(self)
        if self.es.rank and self.llm.dtype == "bfloat16":
            raise ValueError("low-rank ES (es.rank > 0) moves float32 weights: set llm.dtype = 'float32' or 'auto'")
        if self.es.rank and self.es.scope == "full":
            raise ValueError("low-rank ES (es.rank > 0) evolves linear weights only: set es.scope = 'all_linear'")
        return self

    @property
    def compute_dtype(self) -> str:
        """llm.dtype, where "auto" means float32 for weights that must live in fp32 (low-rank ES, GRPO's
        gradient steps) and the CPU's choice otherwise (`coevo.llm.precision`)."""
        if self.llm.dtype == "auto" and (self.es.rank or method_class(self.method).trains_by_gradient):
            return "float32"
        return self.llm.dtype

    @property
    def family(self) -> Family:
        """What this run's members are, as its workload class declares (`coevo.family`)."""
        return workload_class(self.workload.kind).family

    @property
    def facts(self) -> RunFacts:
        """What a method may know of this run beyond its `[settings]` (`coevo.context.RunFacts`)."""
        es = self.es
        return RunFacts(
            self.seed,
            self.budget,
            self.population_size,
            self.library,
            self.init_samples,
            es.antithetic,
            es.reward,
            es.directions_per_parent,
        )

    @property
    def uses_weights(self) -> bool:
        return method_class(self.method).uses_weights

    @property
    def subject(self) -> str:
        """What the run works on, for names and progress lines: the workload's subject (an environment at
        H), else the task."""
        return self.workload.subject or self.task


def parse_assignment(text: str) -> tuple[list[str], Any]:
    """`a.b=value` -> (["a", "b"], value); the value is read as TOML (numbers, booleans, lists) or a string."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--set expects key=value, got {text!r}")
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    return key.strip().split("."), value


def merge_overrides(data: dict[str, Any], assignments: list[str]) -> dict[str, Any]:
    """A copy of `data` with each `key=value` assignment applied (nested keys with dots)."""
    merged = {k: dict(v) if isinstance(v, dict) else v for k, v in data.items()}
    for text in assignments:
        path, value = parse_assignment(text)
        node = merged
        for part in path[:-1]:
            existing = node.get(part)
            if existing is not None and not isinstance(existing, dict):
                raise ConfigError(f"--set {text!r}: {part!r} is not a section")
            node = node.setdefault(part, {})
        node[path[-1]] = value
    return merged


def validate(data: dict[str, Any]) -> RunConfig:
    """A `RunConfig`, or ConfigError with the first problem on one line."""
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        # A misspelt key also leaves the key it meant missing: name the misspelling, not the gap.
        error = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
        where = ".".join(str(part) for part in error["loc"]) or "config"
        if error["type"] == "extra_forbidden":
            raise ConfigError(f"unknown config key {where!r}{_did_you_mean(error['loc'])}") from None
        if error["type"] == "missing":
            raise ConfigError(f"config key {where!r} is required") from None
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "value_error" and not error["loc"]:
            raise ConfigError(message) from None
        raise ConfigError(f"config key {where!r}: {message}") from None


def check_settings(method: str, settings: dict[str, Any]) -> None:
    """The `[settings]` table against the model `method` declares; ValueError (one line) naming the
    first key that is not the method's (and the method that has it, or the key it is close to) or
    whose value its model refuses."""
    model = method_class(method).settings_model
    known = {} if model is None else model.model_fields
    for key in settings:
        if key not in known:
            raise ValueError(f"unknown config key 'settings.{key}' for method {method}{_whose(key, method, known)}")
    if model is None:
        return
    try:
        model.model_validate(settings)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in ("settings", *error["loc"]))
        raise ValueError(f"config key {where!r}: {error['msg'].removeprefix('Value error, ')}") from None


def workload_settings(table: Any) -> WorkloadSettings:
    """The `[workload]` table validated by the model its kind's class declares; ValueError (one line)
    naming an unknown kind (and the registered ones), the first key that is not the kind's (and the kind
    that has it, or the key it is close to), or a value the model refuses."""
    if isinstance(table, WorkloadSettings):  # built in Python: checked as its kind's table, like a file's
        table = table.model_dump(exclude_unset=True) | {"kind": table.kind}
    if not isinstance(table, dict):
        raise ValueError("config key 'workload' must be a table")
    kind = table.get("kind", WorkloadSettings.model_fields["kind"].default)
    if not isinstance(kind, str):
        raise ValueError(f"config key 'workload.kind': expected a name or spec, got {kind!r}")
    try:
        model = settings_model(kind)
    except PluginError as exc:
        raise ValueError(str(exc)) from None
    for key in table:
        if key not in model.model_fields:
            hint = _workload_hint(key, kind, model)
            raise ValueError(f"unknown config key 'workload.{key}' for workload {kind}{hint}")
    try:
        return model.model_validate({**table, "kind": normalised(kind)})
    except ValidationError as exc:
        error = exc.errors()[0]
        message = error["msg"].removeprefix("Value error, ")
        if not error["loc"]:
            raise ValueError(message) from None
        where = ".".join(str(part) for part in ("workload", *error["loc"]))
        raise ValueError(f"config key {where!r}: {message}") from None


def _workload_hint(key: str, kind: str, model: type[BaseModel]) -> str:
    """The hint after an unknown `[workload]` key: the registered kinds that take it, else the key of
    `kind` it is close to, else none."""
    owners = [other for other in workload_kinds() if other != kind and key in settings_model(other).model_fields]
    if owners:
        return f" (a key of workload.kind = {', '.join(owners)})"
    close = difflib.get_close_matches(key, list(model.model_fields), n=1)
    return f" (did you mean 'workload.{close[0]}'?)" if close else ""


def _whose(key: str, method: str, known: Iterable[str]) -> str:
    """The hint after an unknown `[settings]` key: the other methods that take it, else the key of
    `method` it is close to, else none."""
    owners = [name for name in METHODS if name != method and key in _settings_keys(name)]
    if owners:
        return f" (a key of {', '.join(owners)})"
    close = difflib.get_close_matches(key, list(known), n=1)
    return f" (did you mean 'settings.{close[0]}'?)" if close else ""


def _settings_keys(method: str) -> tuple[str, ...]:
    model = method_class(method).settings_model
    return () if model is None else tuple(model.model_fields)


MOVED_TO_SETTINGS = {"coevo": None, "skills": None, "sample_batch": "batch"}
"""Top-level keys of configs written before each method owned its `[settings]` table -> the key's
name there (None: a table whose keys moved under their own names)."""


FORMER_WORKLOAD_KEYS = ("env", "horizon", "episodes", "heldout", "heldout_episodes", "heldout_every")
"""The keys every `[workload]` table held before each workload kind owned its keys; a stored run of a
kind that does not take them holds their defaults, which it never read."""


def from_stored(data: dict[str, Any]) -> dict[str, Any]:
    """A stored run's config as this version reads it, so runs stored before the methods and workloads
    owned their tables resume exactly: the keys of `MOVED_TO_SETTINGS` that the run's method reads move
    into its `[settings]`; the others (defaults of tables that method never read) are dropped, as are the
    `FORMER_WORKLOAD_KEYS` the run's workload kind does not take."""
    data = _without_former_workload_keys(data)
    if not MOVED_TO_SETTINGS.keys() & data.keys():
        return data
    moved: dict[str, Any] = {}
    for old, new in MOVED_TO_SETTINGS.items():
        if old in data:
            moved |= {new: data[old]} if new else data[old]
    try:
        keys = _settings_keys(data["method"])
    except ValueError:  # a method that no longer loads: validating the config says so
        keys = ()
    settings = {key: value for key, value in moved.items() if key in keys} | data.get("settings", {})
    return {key: value for key, value in data.items() if key not in MOVED_TO_SETTINGS} | {"settings": settings}


def _without_former_workload_keys(data: dict[str, Any]) -> dict[str, Any]:
    workload = data.get("workload")
    if not isinstance(workload, dict) or not FORMER_WORKLOAD_KEYS & workload.keys():
        return data
    try:
        known = settings_model(workload.get("kind", "ahd")).model_fields
    except PluginError:  # a kind that no longer loads: validating the config says so
        return data
    kept = {key: value for key, value in workload.items() if key in known or key not in FORMER_WORKLOAD_KEYS}
    return {**data, "workload": kept}


def _did_you_mean(loc: tuple[str | int, ...]) -> str:
    """ " (did you mean 'budget'?)" when an unknown key is close to a key its section knows, else ""."""
    if str(loc[0]) in MOVED_TO_SETTINGS:
        new = MOVED_TO_SETTINGS[str(loc[0])]
        return f" (a method's own keys are in its [settings] table{f': settings.{new}' if new else ''})"
    section: type[BaseModel] = RunConfig
    for part in loc[:-1]:
        field = section.model_fields.get(str(part))
        annotation = None if field is None else field.annotation
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return ""
        section = annotation
    close = difflib.get_close_matches(str(loc[-1]), list(section.model_fields), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def load_config(path: Path, assignments: list[str] = ()) -> RunConfig:
    """Read a TOML config and apply `--set` overrides. A task or environment named by a relative file
    path in the file is taken from the config file's directory (one from `--set`, from the current one)."""
    return validate(merge_overrides(plugin_paths_from(read_toml(path), path.parent), list(assignments)))


def plugin_paths_from(raw: dict[str, Any], directory: Path) -> dict[str, Any]:
    """`raw` with the file specs (`path/to/file.py:Name`) of `task`, `llm.backend` and of any
    `[workload]` key (its kind, an environment) made absolute from `directory`."""
    raw = dict(raw)
    if isinstance(raw.get("task"), str):
        raw["task"] = normalised(raw["task"], directory)
    for table, keys in (("workload", None), ("llm", ("backend",))):
        section = raw.get(table)
        if isinstance(section, dict):
            raw[table] = {
                key: _file_spec_from(value, directory) if keys is None or key in keys else value
                for key, value in section.items()
            }
    return raw


_FILE_SPEC = re.compile(r"\.py:[A-Za-z_]\w*$")


def _file_spec_from(value: Any, directory: Path) -> Any:
    return normalised(value, directory) if isinstance(value, str) and _FILE_SPEC.search(value) else value


def read_toml(path: Path) -> dict[str, Any]:
    """A config file's raw table; ConfigError (one line) when it is missing or not TOML."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read config {path}: {exc}") from None


# --- the rules of a config with an ensemble ------------------------------------------------------
def model_names(config: RunConfig) -> list[str]:
    """The ensemble's models in order of precedence: the run's own first, then the entries."""
    return [config.model, *(entry.label for entry in config.llm.ensemble)]


def arm_config(config: RunConfig, entry: EnsembleModel) -> RunConfig:
    """The config an entry's backend checks and loads: the run's, with the entry's model and backend, no
    ensemble, and a method that moves no weights."""
    llm = config.llm.model_copy(
        update={field: getattr(entry, field) for field in ModelSource.model_fields} | {"ensemble": []}
    )
    updates = {"model": entry.model, "llm": llm, "method": TEXT_ONLY_METHOD, "settings": {}, "es": type(config.es)()}
    return config.model_copy(update=updates)


def check_ensemble(config: RunConfig) -> None:
    """ValueError (one line) when the config's ensemble cannot run: prices on some models only, or
    without an ensemble; two models of one name; a workload without heuristic operators; ES with no
    local model to perturb; an entry its backend refuses."""
    entries = config.llm.ensemble
    if not entries:
        if config.llm.priced:
            raise ValueError(
                "llm.cost_per_completion_token prices the models of an ensemble, and [[llm.ensemble]] names none"
            )
        return
    names = model_names(config)
    if repeated := sorted({name for name in names if names.count(name) > 1}):
        raise ValueError(f"llm.ensemble: two models are called {repeated[0]!r}; give one a name")
    if len({config.llm.priced, *(entry.priced for entry in entries)}) > 1:
        raise ValueError("llm.ensemble: set cost_per_completion_token on every model (the run's in [llm]) or on none")
    if not config.family.writes_code:
        raise ValueError(
            f"llm.ensemble shares the heuristic operators' calls, and the {config.workload.kind} workload has none"
        )
    if config.uses_weights and config.llm.backend == "openai":
        raise ValueError(
            f"method {config.method} perturbs the run's own model, and llm.api_base makes it a prompt-only server: "
            "make a local model the run's model and list the servers in [[llm.ensemble]]"
        )
    for index, entry in enumerate(entries):
        check = getattr(backend_class(entry.backend), "check", None)
        try:
            checked_options(entry.backend, entry.engine_options)
            if check is not None:
                check(arm_config(config, entry))
        except ValueError as exc:
            raise ValueError(f"llm.ensemble[{index}] ({entry.label}): {exc}") from None
