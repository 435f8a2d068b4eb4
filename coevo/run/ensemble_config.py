"""The `[[llm.ensemble]]` entries of a run config: the models a bandit chooses among beside the run's own
(the rules a config with them must follow are `coevo.run.config.check_ensemble`).

The run's own model (`model`, `[llm]`) is always the first arm: it is the local model whose weights ES
perturbs, so ES members write with it alone, and every other model is asked for text only. An entry
is therefore checked and loaded as a prompt-only run of its model (`coevo.run.config.arm_config`).
"""

from __future__ import annotations

from pydantic import Field

from coevo.run.model_source import ModelSource

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
