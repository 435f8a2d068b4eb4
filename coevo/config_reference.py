"""The config reference (docs/config.md), written from the settings models so it cannot drift from them.

Every key of a run config, of the `[tune]` table and of the ES engine's Python settings is read from
the pydantic models' fields (name, type, constraints, default, description), nothing is typed twice.
Regenerate with::

    python -m coevo.config_reference > docs/config.md

This module sits at the command line's layer: it imports the run config, the tune space and the ES
engine, and nothing below it imports it.
"""

from __future__ import annotations

import inspect
import types
import typing
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

REGENERATE = "python -m coevo.config_reference > docs/config.md"
"""The one command that rewrites docs/config.md."""

_BOUNDS = (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<="))
"""Constraint attributes of pydantic's field metadata, and how the reference writes them."""


def config_reference() -> str:
    """docs/config.md as markdown: the run config's keys by section, the `[tune]` knobs, the ES engine's."""
    from coevo.es.engine import ESConfig
    from coevo.run.config import RunConfig

    lines = [
        "# Config reference",
        "",
        f"Generated from the settings models by `{REGENERATE}`; do not edit by hand.",
        "`tests/test_config_reference.py` fails when this file and the models disagree.",
        "",
        "## The run config",
        "",
        "A run is one TOML file (`coevo run CONFIG.toml`). Every key can also be set on the command line",
        "with `--set key=value` (`--set es.sigma=2e-3`); the value is read as TOML, else as a string. An",
        "unknown or misspelt key, or a value out of range, exits 2 with one line naming the key.",
        "",
    ]
    lines += _model_sections(RunConfig, prefix="", title="top-level keys")
    lines += _method_settings()
    lines += _workload_tables()
    lines += ["## The `[tune]` table", ""]
    lines += _TUNE_TABLE
    lines += [
        "## Python API: `coevo.es.engine.ESConfig`",
        "",
        "The ES engine's own settings, for `ESEngine(ESConfig(...), host)` from Python (the run config's",
        "`[es]` section is translated into these by the runner).",
        "",
    ]
    lines += _model_sections(ESConfig, prefix="", title="`ESConfig` arguments", toml=False)
    return "\n".join(lines).rstrip("\n") + "\n"


def _model_sections(model: type[BaseModel], prefix: str, title: str, toml: bool = True) -> list[str]:
    """A table of `model`'s plain keys, then one sub-heading per nested section (variants of a union each);
    `toml` titles a nested section as its TOML table (`[es]`), else by its dotted name and class."""
    plain: list[tuple[str, FieldInfo]] = []
    nested: list[tuple[str, FieldInfo, list[type[BaseModel]]]] = []
    for name, field in model.model_fields.items():
        sections = _section_models(field.annotation)
        if sections:
            nested.append((name, field, sections))
        else:
            plain.append((name, field))
    lines = [f"### {title}", ""]
    doc = _own_doc(model)
    if doc:
        lines += [doc, ""]
    if plain:
        lines += ["| key | type | default | description |", "| --- | --- | --- | --- |"]
        lines += [_row(prefix + name, field) for name, field in plain]
        lines.append("")
    for name, field, sections in nested:
        for section in sections:
            lines += _section(section, prefix + name, field, toml)
    return lines


def _section(section: type[BaseModel], key: str, field: FieldInfo, toml: bool) -> list[str]:
    """One nested section; a member of a discriminated union is titled by its discriminator's value, and
    a list of tables (`[[key]]`) lists the keys of one entry."""
    if _is_list(field.annotation):
        lines = _model_sections(section, "", f"`[[{key}]]` entries", toml)
    else:
        title = f"`[{key}]`" if toml else f"`{key}` (`{section.__name__}`)"
        lines = _model_sections(section, key + ".", title, toml)
    discriminator = field.discriminator if isinstance(field.discriminator, str) else None
    if discriminator and discriminator in section.model_fields:
        tag = _default_text(section.model_fields[discriminator])
        lines[0] = f"{lines[0]} ({discriminator} = {tag})"
    if field.description:
        lines[1:1] = ["", _cell(field.description)]
    return lines


def _section_models(annotation: Any) -> list[type[BaseModel]]:
    """The models a field nests: [M] for a section or a list of M, each variant of a union of models, []
    otherwise."""
    if _is_model(annotation):
        return [annotation]
    if _is_list(annotation) and _is_model(typing.get_args(annotation)[0]):
        return [typing.get_args(annotation)[0]]
    if typing.get_origin(annotation) is typing.Annotated:
        return _section_models(typing.get_args(annotation)[0])
    if _is_union(annotation):
        members = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        if members and all(_is_model(member) for member in members):
            return members
    return []


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _is_list(annotation: Any) -> bool:
    return typing.get_origin(annotation) is list


def _is_union(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (typing.Union, types.UnionType)


def _own_doc(model: type[BaseModel]) -> str:
    doc = model.__dict__.get("__doc__")
    return " ".join(inspect.cleandoc(doc).split()) if doc else ""


def _row(key: str, field: FieldInfo) -> str:
    kind = _type_text(field.annotation)
    bounds = [
        f"{sign} {getattr(item, attr)}"
        for item in field.metadata
        for attr, sign in _BOUNDS
        if getattr(item, attr, None) is not None
    ]
    if bounds:
        kind = f"{kind}, {', '.join(bounds)}"
    return f"| `{key}` | {_cell(kind)} | {_cell(_default_text(field))} | {_cell(field.description or '')} |"


def _type_text(annotation: Any) -> str:
    """A field's type as a reader of TOML sees it: `"a" or "b"`, `int or unset`, `list of str`."""
    if annotation is type(None):
        return "unset"
    if annotation is Any:
        return "any"
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        return " or ".join(f'"{arg}"' if isinstance(arg, str) else str(arg) for arg in args)
    if origin is typing.Annotated:
        return _type_text(args[0])
    if _is_union(annotation):
        return " or ".join(_type_text(arg) for arg in args)
    if origin in (tuple, list, set, frozenset):
        items = [arg for arg in args if arg is not Ellipsis]
        return "list" if not items else f"list of {_type_text(items[0])}"
    if origin is dict:
        return "table" if not args else f"table of {_type_text(args[1])}"
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def _default_text(field: FieldInfo) -> str:
    if field.default_factory is not None:
        return _toml(field.default_factory())
    if field.default is PydanticUndefined:
        return "required"
    return _toml(field.default)


def _toml(value: Any) -> str:
    """A default as it would be written in the TOML file (None: the key left out)."""
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key} = {_toml(item)}" for key, item in value.items()) + "}"
    if isinstance(value, BaseModel):
        return "see below"
    return repr(value)


def _method_settings() -> list[str]:
    """The built-in methods, and the `[settings]` table of each method that takes one (one section for
    the methods that share a model)."""
    from coevo.run.method_registry import method_class, method_names

    classes = {name: method_class(name) for name in method_names()}
    lines = [
        "### `method` and its `[settings]`",
        "",
        "`method` is a built-in name below, a name an installed package registers under the",
        "`coevo.methods` entry-point group, or `path/to/method.py:Class` / `package.module:Class`. The keys",
        "above are shared by every method; a method's own keys are in the `[settings]` table, checked by the",
        "model the method declares, so a key of another method than the one named is refused.",
        "",
        "| method | evolves the weights | `[settings]` |",
        "| --- | --- | --- |",
    ]
    for name, cls in classes.items():
        settings = "see below" if cls.settings_model is not None else "none"
        lines.append(f"| `{name}` | {'yes' if cls.uses_weights else 'no'} | {settings} |")
    lines.append("")
    sharing: dict[type[BaseModel], list[str]] = {}
    for name, cls in classes.items():
        if cls.settings_model is not None:
            sharing.setdefault(cls.settings_model, []).append(name)
    for model, names in sharing.items():
        lines += _model_sections(model, "settings.", "`[settings]` of " + ", ".join(f"`{name}`" for name in names))
    return lines


def _workload_tables() -> list[str]:
    """The built-in workload kinds, and the `[workload]` keys each kind's class declares beyond `kind`."""
    from coevo.run.workload_registry import workload_class, workload_kinds
    from coevo.workload import WorkloadSettings

    classes = {kind: workload_class(kind) for kind in workload_kinds()}
    lines = [
        "### `[workload]` of each kind",
        "",
        "`workload.kind` is a built-in kind below, a name an installed package registers under the",
        "`coevo.workloads` entry-point group, or `path/to/workload.py:Class` / `package.module:Class`. The",
        "other keys of the table are the kind's own, checked by the settings model its class declares, so a",
        "key of another kind is refused.",
        "",
        "| kind | members are | own keys |",
        "| --- | --- | --- |",
    ]
    for kind, cls in classes.items():
        lines.append(f"| `{kind}` | {cls.family.members} | {'see below' if cls.settings_model else 'none'} |")
    lines.append("")
    for kind, cls in classes.items():
        if cls.settings_model is None:
            continue
        own = {
            name: field
            for name, field in cls.settings_model.model_fields.items()
            if name not in WorkloadSettings.model_fields
        }
        lines += [f"### `[workload]` of kind = `{kind}`", ""]
        if doc := _own_doc(cls.settings_model):
            lines += [doc, ""]
        lines += ["| key | type | default | description |", "| --- | --- | --- | --- |"]
        lines += [_row(f"workload.{name}", field) for name, field in own.items()]
        lines.append("")
    return lines


_TUNE_TABLE = [
    "`coevo tune CONFIG.toml` searches the keys its `[tune]` table names; the rest of the file is the",
    "base config of every trial. A knob is any key above by its dotted path, quoted where it has dots;",
    "for instance (each knob where the base config has that method, workload kind or ES strategy):",
    "",
    "```toml",
    "[tune]",
    '"es.sigma" = {low = 5e-4, high = 1e-2, log = true}',
    "population_size = {choices = [4, 8]}",
    '"settings.prompt_pool" = {choices = [1, 2, 4]}  # method = "coevo"',
    '"workload.episodes" = {low = 2, high = 8, step = 2}  # workload.kind = "agent"',
    '"es.strategy_options.top_share" = {low = 0.25, high = 1.0}  # es.strategy = "ars"',
    "```",
    "",
    "The path is checked against the model that owns it (the run config's sections, the method's",
    "`[settings]`, the workload kind's `[workload]`, the ES strategy's options); an unknown key exits 2",
    "with one line naming the table and the keys it has. The key's type says what it takes: an int key",
    "a range of whole numbers, `{low = ..., high = ..., log = true}` (optionally `step`), or",
    "`choices = [...]`; a float key a range or choices; any other key (bool, string, one of fixed",
    "values, a list) choices only, a list's choices as lists. Every range end and choice is validated",
    "as a full run config before the first trial.",
    "",
]
"""The `[tune]` section: tune reads the models above, so it has no keys of its own to list."""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def main() -> None:
    print(config_reference(), end="")


if __name__ == "__main__":
    main()
