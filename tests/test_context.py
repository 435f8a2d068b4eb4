"""The runner provides every service of both families' contexts, so a method written against its
family's context protocol alone runs in it, and hands the method a view of that protocol only."""

from __future__ import annotations

from pathlib import Path

import pytest

from coevo.context import EpisodeContext, HeuristicContext, Policy
from coevo.family import HEURISTICS, protocol_members
from coevo.run.config import validate
from coevo.run.session import start_run


def test_the_runner_provides_every_service_of_both_contexts_and_its_method_the_policy(tmp_path: Path) -> None:
    config = validate(
        {"method": "eoh+es", "task": "tsp_construct", "model": "scripted_llm:build", "budget": 3, "population_size": 2}
    )
    assert {"propose", "tell", "budget_left", "population", "llm"} <= protocol_members(HeuristicContext)
    assert {"play", "record_heldout", "tell"} <= protocol_members(EpisodeContext)
    assert "propose" not in protocol_members(EpisodeContext) and "play" not in protocol_members(HeuristicContext)
    with start_run(config, tmp_path) as runner:
        assert protocol_members(HeuristicContext) - set(dir(runner)) == set()
        assert protocol_members(EpisodeContext) - set(dir(runner)) == set()
        assert protocol_members(Policy) - set(dir(runner.method)) == set()
        assert runner.family is HEURISTICS
        assert runner.context.population is runner.population, "the view reaches the runner's services"
        with pytest.raises(AttributeError, match="HeuristicContext offers no 'play'"):
            runner.context.play
