"""Where a model runs and what its tokens cost: the keys the run's own model (`[llm]`) and each model
of an ensemble (`[[llm.ensemble]]`) share, with the rules that read them.

`llm.backend` names a class registered under ``coevo.backends`` (`coevo.run.backend_registry`); a table
that sets `api_base` and leaves the backend at its default names an OpenAI-compatible server.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from coevo.plugins import normalised
from coevo.run.backend_registry import backend_class

DEFAULT_BACKEND = "transformers"


class ModelSource(BaseModel):
    """The backend a model runs on, and the price of its tokens (which an ensemble's bandit may weigh)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    api_base: str | None = Field(None, description="an OpenAI-compatible server; prompt-only")
    backend: str = Field(
        DEFAULT_BACKEND,
        description="transformers (a local model), vllm (a local model; perturbs and updates inside vLLM's "
        "workers), openai (the server at api_base; set by api_base alone), or a registered name or spec",
    )
    engine_options: dict[str, str | int | float | bool] = Field(
        default_factory=dict,
        description="the backend's own keys, checked by its options model (vllm: vllm.LLM options such as dtype, "
        "max_model_len, gpu_memory_utilization); a backend without one takes none",
    )
    cost_per_prompt_token: float = Field(
        0.0, ge=0, description="the price of a prompt token; with cost_per_completion_token only"
    )
    cost_per_completion_token: float | None = Field(
        None,
        gt=0,
        description="the price of a completion token: an ensemble priced on every model rewards improvement "
        "per cost instead of per completion token",
    )

    @model_validator(mode="before")
    @classmethod
    def _server_backend(cls, data: Any) -> Any:
        """`api_base` on the default backend names an OpenAI-compatible server, as it always has."""
        if (
            isinstance(data, dict)
            and data.get("api_base") is not None
            and data.get("backend", DEFAULT_BACKEND) == DEFAULT_BACKEND
        ):
            return {**data, "backend": "openai"}
        return data

    @field_validator("backend")
    @classmethod
    def _known_backend(cls, value: str) -> str:
        """A registered name, or a spec whose class loads (a file's path made absolute); a `PluginError`
        is a ValueError, which pydantic reports as its one line."""
        backend_class(value)
        return normalised(value)

    @model_validator(mode="after")
    def _priced_whole(self) -> ModelSource:
        if self.cost_per_prompt_token and self.cost_per_completion_token is None:
            raise ValueError("cost_per_prompt_token needs cost_per_completion_token")
        return self

    @property
    def priced(self) -> bool:
        return self.cost_per_completion_token is not None

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        """What one call cost at these prices (0 unpriced)."""
        return self.cost_per_prompt_token * prompt_tokens + (self.cost_per_completion_token or 0.0) * completion_tokens
