"""Prompt templates as evolvable data.

A `PromptTemplates` is an immutable mapping from component name to text with `$placeholders`
(`string.Template` syntax, so the braces prompts use for thoughts need no escaping). Each component has
a fixed set of placeholders it may use and a subset it must keep: an evolved component that drops
`$parents` would silently turn e1 into i1, so `with_component` refuses it.
"""

from __future__ import annotations

import re
import string
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

DEFAULT_TEMPLATES_PATH = Path(__file__).with_name("templates") / "default.toml"

EOH_OPERATORS: tuple[str, ...] = ("i1", "e1", "e2", "m1", "m2")
OPERATORS: tuple[str, ...] = (*EOH_OPERATORS, "tune")
"""EoH's five, plus `tune` (new values for a parent's numeric parameters, see `operators.constants`)."""

_INSTRUCTION = (frozenset({"function_name", "signature"}), frozenset())

# component -> (placeholders it may use, placeholders it must keep)
PLACEHOLDERS: Mapping[str, tuple[frozenset[str], frozenset[str]]] = MappingProxyType(
    {
        "system": (frozenset(), frozenset()),
        "eoh_user": (
            frozenset({"task_description", "parents", "hints", "instruction", "output_format"}),
            frozenset({"task_description", "parents", "hints", "instruction", "output_format"}),
        ),
        "parent": (frozenset({"index", "objective", "direction", "thought", "code"}), frozenset({"thought", "code"})),
        "output_format": (frozenset({"function_name", "signature"}), frozenset({"signature"})),
        "hints": (frozenset({"hints"}), frozenset({"hints"})),
        **{operator: _INSTRUCTION for operator in EOH_OPERATORS},
        "tune": (frozenset({"count", "values"}), frozenset({"values"})),
        "tune_demo": (frozenset(), frozenset()),
        "tune_demo_answer": (frozenset(), frozenset()),
        "reflect_short": (
            frozenset({"task_description", "better", "worse"}),
            frozenset({"task_description", "better", "worse"}),
        ),
        "reflect_long": (
            frozenset({"task_description", "previous", "recent"}),
            frozenset({"task_description", "previous", "recent"}),
        ),
        "rewrite": (
            frozenset({"component", "current", "feedback", "keep_placeholders"}),
            frozenset({"current", "feedback", "keep_placeholders"}),
        ),
    }
)

_BLANK_RUN = re.compile(r"\n{3,}")


def placeholder_problem(component: str, text: str) -> str | None:
    """Why `text` cannot serve as `component` (unknown name, bad `$`, missing placeholder), or None."""
    if component not in PLACEHOLDERS:
        return f"unknown prompt component {component!r}; known: {', '.join(PLACEHOLDERS)}"
    template = string.Template(text)
    if not template.is_valid():
        return f"component {component!r} has a malformed $placeholder (write a literal dollar as $$)"
    allowed, required = PLACEHOLDERS[component]
    used = set(template.get_identifiers())
    if unknown := sorted(used - allowed):
        return f"component {component!r} uses unknown placeholder(s) {', '.join('$' + u for u in unknown)}"
    if missing := sorted(required - used):
        return f"component {component!r} must keep placeholder(s) {', '.join('$' + m for m in missing)}"
    return None


@dataclass(frozen=True)
class PromptTemplates(Mapping[str, str]):
    """All prompt components; immutable, hashable by content, serialisable as a plain dict."""

    components: Mapping[str, str]

    def __post_init__(self) -> None:
        if missing := sorted(set(PLACEHOLDERS) - set(self.components)):
            raise ValueError(f"prompt templates lack component(s): {', '.join(missing)}")
        for name, text in self.components.items():
            if problem := placeholder_problem(name, text):
                raise ValueError(problem)
        object.__setattr__(self, "components", MappingProxyType(dict(self.components)))

    @classmethod
    def load(cls, path: Path | str = DEFAULT_TEMPLATES_PATH) -> PromptTemplates:
        """Read components from a TOML file of `name = "text"` entries."""
        with open(path, "rb") as handle:
            return cls(tomllib.load(handle))

    def with_component(self, name: str, text: str) -> PromptTemplates:
        """A copy with one component replaced; raises ValueError if the text breaks its placeholders."""
        return PromptTemplates({**self.components, name: text})

    def render(self, name: str, **values: str) -> str:
        """Fill a component's placeholders; collapses the blank lines that empty sections leave."""
        filled = string.Template(self.components[name]).substitute(values)
        return _BLANK_RUN.sub("\n\n", filled).strip()

    def to_dict(self) -> dict[str, str]:
        return dict(self.components)

    def __getitem__(self, name: str) -> str:
        return self.components[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.components)

    def __len__(self) -> int:
        return len(self.components)

    def __hash__(self) -> int:
        return hash(tuple(sorted(self.components.items())))


def default_templates() -> PromptTemplates:
    """The shipped templates (`templates/default.toml`)."""
    return PromptTemplates.load()
