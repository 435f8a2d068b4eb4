"""The verdict cache is keyed by the task's definition, not its name, and so is the fork server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from coevo.evaluate import Evaluator, SandboxError
from coevo.evaluate.probe import ProbeTask
from tasks import get_task
from tasks.base import Instance, definition_hash
from tasks.tsp_construct import TSPConstruct

PLUGIN = '''
from coevo.evaluate.probe import ProbeTask


class Probe(ProbeTask):
    name = "probe"
'''


class DoubledTSP(TSPConstruct):
    """A plugin that keeps the built-in's name but scores every tour at twice its length."""

    name = "tsp_construct"

    def score(self, instance: Instance, solution: Any) -> float:
        return 2 * super().score(instance, solution)


def test_a_plugin_under_a_built_in_name_gets_its_own_verdict(tmp_path: Path) -> None:
    seed = get_task("tsp_construct").seed_code()
    with Evaluator("tsp_construct", limit=1, cache_dir=tmp_path) as built_in:
        original = built_in.evaluate(seed)
    with Evaluator(DoubledTSP(), limit=1, cache_dir=tmp_path) as plugin:
        own = plugin.evaluate(seed)
    assert original.valid and own.valid
    assert own.objective == pytest.approx(2 * original.objective)


def test_the_definition_covers_the_class_its_bases_and_their_sources(tmp_path: Path) -> None:
    assert definition_hash(DoubledTSP) != definition_hash(TSPConstruct)
    hashes = {definition_hash(ProbeTask)}
    for name, text in (("plugin.py", PLUGIN), ("edited.py", PLUGIN + "# edited\n")):
        (tmp_path / name).write_text(text)
        hashes.add(definition_hash(type(get_task(f"{tmp_path / name}:Probe"))))
    assert len(hashes) == 3


def test_the_fork_server_refuses_a_definition_other_than_the_evaluators(tmp_path: Path) -> None:
    """A plugin file edited after the evaluator read it: the warm fork server would run the new
    definition under the old one's key, so it refuses to start."""
    source = tmp_path / "plugin.py"
    source.write_text(PLUGIN)
    with Evaluator(get_task(f"{source}:Probe"), cache_dir=tmp_path / "cache") as evaluator:
        source.write_text(PLUGIN + "\n\ndef helper():\n    return 1\n")
        with pytest.raises(SandboxError, match="the fork server failed to start"):
            evaluator.evaluate(ProbeTask().seed_code())
