"""The runner provides every service of the context methods receive, so a method written against
`coevo.context.Context` alone runs in it."""

from __future__ import annotations

from pathlib import Path

from coevo.context import Context, Policy
from coevo.run.config import validate
from coevo.run.session import start_run


def members(protocol: type) -> set[str]:
    declared = {name for name in vars(protocol) if not name.startswith("_")}
    return declared | set(protocol.__annotations__)


def test_the_runner_provides_every_service_of_the_context_and_its_method_the_policy(tmp_path: Path) -> None:
    config = validate(
        {"method": "eoh+es", "task": "tsp_construct", "model": "scripted_llm:build", "budget": 3, "population_size": 2}
    )
    assert {"propose", "play", "tell", "budget_left", "population", "llm"} <= members(Context)
    with start_run(config, tmp_path) as runner:
        assert members(Context) - set(dir(runner)) == set()
        assert members(Policy) - set(dir(runner.method)) == set()
