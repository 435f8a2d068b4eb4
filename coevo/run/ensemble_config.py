"""The `[[llm.ensemble]]` entries of a run config: the models a bandit chooses among beside the run's own,
and the rules a config with them must follow.

The run's own model (`model`, `[llm]`) is always the first arm: it is the local model whose weights ES
perturbs, so ES members write with it alone, and every other model is asked for text only. An entry
is therefore checked and loaded as a prompt-only run of its model (`arm_config`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field

from coevo.run.backend_registry import backend_class
from coevo.run.model_source import ModelSource

if TYPE_CHECKING:
    from coevo.run.config import RunConfig

TEXT_ONLY_METHOD = "sample"
"""The method an arm's own config names: one that never moves weights, as no arm but the run's own is moved."""


class EnsembleModel(ModelSource):
    """One `[[llm.ensemble]]` entry: a model beside the run's own, on its own backend; the sampling keys
    (`llm.max_new_tokens`, `llm.temperature`, ...) are the run's."""

    model: str = Field(description="embedded model name, model directory, module:factory, or the server's model")
    name: str | None = Field(None, description="what the run store and the report call it (default: model)")

    @property
    def label(self) -> str:
        return self.name or self.model


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
    if not config.capabilities.heuristics:
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
        if check is not None:
            try:
                check(arm_config(config, entry))
            except ValueError as exc:
                raise ValueError(f"llm.ensemble[{index}] ({entry.label}): {exc}") from None
