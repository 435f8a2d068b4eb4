"""Which settings model owns a dotted config path, and what kind of value a study may search there.

A `[tune]` knob names any key of the run config by its path: `population_size`, `es.sigma`, a key of
the run's method (`settings.prompt_pool`), of its workload kind (`workload.episodes`) or of its ES
strategy (`es.strategy_options.top_share`). The path is walked through the models of the base config
as it validated, so each plugin's table is checked by the model that plugin declares and tune knows
no plugin's keys.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel

from coevo.es.strategy import strategy_class
from coevo.run.config import ConfigError, RunConfig
from coevo.run.method_registry import method_class

Kind = Literal["int", "float", "choices"]
"""What a knob ranges over: whole numbers or reals (a range or choices), or choices only."""

PLUGIN_TABLES: dict[tuple[str, ...], Callable[[RunConfig], type[BaseModel] | None]] = {
    ("settings",): lambda config: method_class(config.method).settings_model,
    ("es", "strategy_options"): lambda config: strategy_class(config.es.strategy).Settings,
}
"""Tables the run config holds as plain dicts, checked by the model of the plugin the config names
(the `[workload]` table needs no entry: the config holds it as its kind's model)."""


def knob_kind(config: RunConfig, dotted: str) -> Kind:
    """The kind of the key at `dotted` in `config`; ConfigError (one line) naming the table and its
    known keys where the path leaves the config, or where it names a table rather than a key."""
    *tables, key = dotted.split(".")
    model = _table_model(config, ())
    for depth, table in enumerate(tables):
        _field(model, table, tables[:depth], dotted)
        model = _table_model(config, tuple(tables[: depth + 1]))
        if model is None:
            raise ConfigError(f"{tune_key(dotted)}: {'.'.join(tables[: depth + 1])} is a value, not a table")
    annotation = _field(model, key, tables, dotted)
    if _table_model(config, (*tables, key)) is not None:
        raise ConfigError(f"{tune_key(dotted)}: {dotted} is a table; name one of its keys")
    return _kind(annotation)


def _table_model(config: RunConfig, path: tuple[str, ...]) -> type[BaseModel] | None:
    """The model of the table at `path` (the run config itself at ()), None where `path` holds a value;
    an empty model for a plugin that declares no keys."""
    node: object = config
    for depth, part in enumerate(path):
        node = getattr(node, part) if isinstance(node, BaseModel) else None
        if (owner := PLUGIN_TABLES.get(path[: depth + 1])) is not None:
            node = (owner(config) or NoSettings).model_validate(node)
    return type(node) if isinstance(node, BaseModel) else None


def _field(model: type[BaseModel], key: str, tables: list[str], dotted: str) -> object:
    """The annotation of `model`'s field `key`; ConfigError naming the table and its fields if none."""
    if key not in model.model_fields:
        where = f"[{'.'.join(tables)}] ({model.__qualname__})" if tables else f"the run config ({model.__qualname__})"
        known = ", ".join(model.model_fields) or "none"
        raise ConfigError(f"{tune_key(dotted)}: no field {key} in {where}; known: {known}")
    return model.model_fields[key].annotation


def _kind(annotation: object) -> Kind:
    """int or float where the key holds that number (or is unset), else choices: a bool, a string,
    one of fixed values, a list or a table is no range."""
    options = [annotation]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        options = [option for option in typing.get_args(annotation) if option is not type(None)]
    if options == [int]:
        return "int"
    if options == [float]:
        return "float"
    return "choices"


def tune_key(dotted: str) -> str:
    """The knob as errors name it, its `[tune]` key quoted where it has dots: `tune."es.sigma"`."""
    return f'tune."{dotted}"' if "." in dotted else f"tune.{dotted}"


class NoSettings(BaseModel):
    """The table of a plugin that declares no settings model."""
