"""docs/config.md is generated from the settings models; these checks keep it from going stale."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from coevo.config_reference import REGENERATE, _model_sections, config_reference
from coevo.run.config import RunConfig

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "config.md"


def test_docs_config_md_is_what_the_generator_prints():
    assert DOC.read_text(encoding="utf-8") == config_reference(), (
        f"docs/config.md is stale: the settings models changed. Regenerate it with `{REGENERATE}`"
    )


def test_the_regenerate_command_prints_the_reference():
    module = REGENERATE.split()[2]
    printed = subprocess.run([sys.executable, "-m", module], cwd=ROOT, capture_output=True, text=True, check=True)
    assert printed.stdout == config_reference()


def test_every_run_config_key_is_listed_with_its_default():
    text = config_reference()
    for name, field in RunConfig.model_fields.items():
        assert f"`{name}`" in text or f"`[{name}]`" in text, name
    assert "| `es.sigma` | float, > 0 | 0.001 |" in text
    assert "| `budget` | int, >= 1 | required |" in text


class _Agent(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Literal["agent"] = "agent"
    episodes: int = Field(32, ge=1, description="episodes | per member")


class _Heuristic(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Literal["ahd"] = "ahd"
    limit: int | None = None


class _Toy(BaseModel):
    """A toy config."""

    names: tuple[str, ...] = ("a", "b")
    workload: Annotated[_Agent | _Heuristic, Field(discriminator="kind", description="what members play")] = (
        _Heuristic()
    )


def test_a_discriminated_union_gets_one_section_per_variant_titled_by_its_tag():
    text = "\n".join(_model_sections(_Toy, prefix="", title="keys"))
    assert "A toy config." in text and '| `names` | list of str | ["a", "b"] |' in text
    assert '### `[workload]` (kind = "agent")' in text and '### `[workload]` (kind = "ahd")' in text
    assert "| `workload.episodes` | int, >= 1 | 32 | episodes \\| per member |" in text
    assert "| `workload.limit` | int or unset | unset |" in text
    assert text.count("what members play") == 2


def test_each_methods_settings_table_is_documented_once_for_the_methods_sharing_it():
    text = config_reference()
    assert "### `[settings]` of `sample`, `sample+es`" in text
    assert "### `[settings]` of `es-then-skills`, `skills`" in text
    assert "| `settings.batch` | int, >= 1 | 20 |" in text
    assert '| `settings.operators` | list of str | ["m2", "m1", "e2", "e1"] |' in text
    assert "| `settings.library` | str or unset | unset |" in text
    assert "sample_batch" not in text and "`[coevo]`" not in text and "`[skills]`" not in text
