"""The skill methods' `[settings]` table: the library a run starts from and the knobs of the skill loop."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator


class SkillsSettings(BaseModel):
    """The `[settings]` table of `skills` and `es-then-skills` (and of `coevo`, with its own keys)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    library: str | None = Field(None, description="a directory of skill folders (SKILL.md layout) to start from")
    prompt_tokens: int = Field(512, ge=16, description="token budget of the rendered library")
    analyses: int = Field(4, ge=1, description="failed trajectories analysed per generation (one LLM call each)")
    max_edits: int = Field(2, ge=1, description="edits the analyses are merged into per generation")
    min_sources: int = Field(2, ge=1, description="trajectories a lesson must be seen in (recurrence gate)")
    heldout_episodes: int = Field(8, ge=1, description="val episodes of the strict-improvement gate")
    answer_tokens: int = Field(160, ge=16, description="answer length of one trajectory analysis")
    show_share: float = Field(
        0.5, gt=0, le=1, description="share of the members each skill is shown to (the rest measure its absence)"
    )
    retrieve: int | None = Field(
        None, ge=1, description="show each observation only its top-k skills by relevance (None: all that fit)"
    )

    @field_validator("library")
    @classmethod
    def _readable_library(cls, value: str | None) -> str | None:
        if value is not None:
            from coevo.skills.library import load_library
            from coevo.skills.skill_md import SkillFormatError

            try:
                load_library(Path(value))
            except SkillFormatError as exc:
                raise ValueError(str(exc)) from None
        return value
