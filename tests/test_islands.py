"""Population structure: islands in a ring, the MAP-Elites archive, parent sampling, and exact resume."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from test_runner import BASE as RUNNER_BASE

from coevo.candidate import Candidate
from coevo.islands import IslandPopulation, PopulationStructure
from coevo.map_elites import GridArchive
from coevo.parent_sampling import ParentSampling
from coevo.population import Population
from coevo.run.config import ConfigError, validate
from coevo.run.report import render_report
from coevo.run.session import resume_run, start_run
from coevo.run.store import RunStore


def candidate(code: str, fitness: float | None, parents: tuple[str, ...] = ()) -> Candidate:
    return Candidate(
        code=code, thought="", operator="m1" if parents else "i1", generation=1, parents=parents, fitness=fitness
    )


def founders(count: int) -> list[Candidate]:
    return [candidate(f"founder{i}", float(i)) for i in range(count)]


def test_parentless_children_join_the_islands_in_turn_not_all_island_zero() -> None:
    population = IslandPopulation(9, PopulationStructure(islands=3))
    population.add(founders(6))
    assert [sorted(c.code for c in island.members) for island in population.islands] == [
        ["founder0", "founder3"],
        ["founder1", "founder4"],
        ["founder2", "founder5"],
    ]


def test_islands_stay_isolated_between_migrations() -> None:
    """Every parent draw is from one island and each child joins it, so without a migration every member
    descends from founders of its own island only."""
    population = IslandPopulation(12, PopulationStructure(islands=3, migration_interval=1000))
    population.add(founders(6))
    home = {c.key: i for i, island in enumerate(population.islands) for c in island.members}
    rng = np.random.default_rng(1)
    serial = 0
    for generation in range(1, 8):
        children = []
        for _ in range(6):
            parents = population.select(rng, 2)
            islands_of_parents = {home[p.key] for p in parents}
            assert len(islands_of_parents) == 1, "a draw mixed islands"
            serial += 1
            child = candidate(f"child{serial}", float(rng.normal()), tuple(p.key for p in parents))
            home[child.key] = islands_of_parents.pop()
            children.append(child)
        population.add(children)
        assert not population.end_generation(generation)
        for index, island in enumerate(population.islands):
            assert {home[c.key] for c in island.members} == {index}, f"a candidate crossed into island {index}"
    assert all(len(island) == 4 for island in population.islands), "every island filled from its own children"


def test_migration_copies_each_islands_best_share_to_the_next_in_the_ring() -> None:
    structure = PopulationStructure(islands=3, migration_interval=2, migration_rate=0.5)
    population = IslandPopulation(12, structure)
    population.add(founders(12))  # island i: founders i, i + 3, i + 6, i + 9
    before = [[c.code for c in island.members] for island in population.islands]
    assert not population.end_generation(1) and [[c.code for c in i.members] for i in population.islands] == before
    assert population.end_generation(2)
    for index, island in enumerate(population.islands):
        sender = before[(index - 1) % 3]
        arrived = {c.code for c in island.members} - set(before[index])
        assert arrived == set(sender[:2]), "the best half (2 of 4) of the previous island arrives"
    copies = [c.key for island in population.islands for c in island.members]
    assert len(population.members) == len(set(copies)) < len(copies), "a migrant's copies count once"


def test_one_elite_island_with_rank_weights_draws_exactly_as_the_eoh_pool() -> None:
    single, island = Population(4), IslandPopulation(4)
    first, second = np.random.default_rng(7), np.random.default_rng(7)
    for round_ in range(6):
        offered = [candidate(f"r{round_}c{i}", float((round_ * 5 + i * 3) % 7)) for i in range(4)]
        single.add(offered)
        island.add(offered)
        assert island.members == single.members
        assert single.select(first, 2) == island.select(second, 2)


@pytest.mark.parametrize("share", [1, 2, 3])
def test_children_of_one_parent_drawn_on_two_islands_follow_their_draws(share: int) -> None:
    """A migrant lives on two islands; drawn on each, its children (`share` per draw, as mirrored ES
    members are) join the island of the draw they came from."""
    population = IslandPopulation(2, PopulationStructure(islands=2, migration_interval=1))
    population.add([candidate("migrant", 1.0)])
    population.end_generation(1)
    rng = np.random.default_rng(0)
    draws = [population.select(rng, 1)[0] for _ in range(2)]
    assert [p.key for p in draws] == [population.islands[0].best.key] * 2
    children = [candidate(f"child{i}", 2.0 + i, (draws[0].key,)) for i in range(2 * share)]
    assert population.placements(children) == [0] * share + [1] * share


def test_a_crossover_needs_two_members_on_one_island() -> None:
    population = IslandPopulation(4, PopulationStructure(islands=2))
    population.add(founders(2))
    assert len(population) == 2 and not population.can_draw(2)
    population.add([candidate("late", 9.0)])
    assert population.can_draw(2) and len(population.select(np.random.default_rng(0), 2)) == 2


def test_map_elites_keeps_the_best_of_each_cell() -> None:
    archive = GridArchive(["code_length"], bins=4, ranges={"code_length": (0.0, 40.0)})
    archive.add([candidate("a" * 5, 1.0), candidate("b" * 6, 3.0), candidate("c" * 35, 0.5), candidate("d" * 25, 2.0)])
    assert sorted(c.code[0] for c in archive.members) == ["b", "c", "d"], "a and b share the first bin"
    assert [archive.cell(c) for c in archive.members] == [(0,), (2,), (3,)]
    archive.add([candidate("e" * 90, -5.0)])  # beyond the fixed range: the last bin, where c is better
    assert "e" * 90 not in {c.code for c in archive.members}
    assert archive.occupancy() == (3, 4)


def test_map_elites_follows_the_running_range_of_a_feature() -> None:
    archive = GridArchive(["code_length"], bins=2)
    archive.add([candidate("a" * 10, 1.0), candidate("b" * 20, 2.0)])
    assert len(archive) == 2
    archive.add([candidate("c" * 40, 0.0)])  # the range widens to [10, 40]: a and b now share bin 0
    assert sorted(c.code[0] for c in archive.members) == ["b", "c"]
    assert archive.running == {"code_length": (10.0, 40.0)}


def test_power_law_and_weighted_sampling_favour_the_best_as_documented() -> None:
    fitnesses = [10.0, 1.0, 0.9, 0.8]
    rank = ParentSampling("rank").weights(fitnesses)
    power = ParentSampling("power-law", power_law_exponent=2.0).weights(fitnesses)
    weighted = ParentSampling("weighted").weights(fitnesses)
    even = ParentSampling("weighted").weights([1.1, 1.0, 0.9, 0.8])  # the same ranks, even gaps
    assert power[0] / power[1] == pytest.approx(4.0) and power[0] / power[3] == pytest.approx(16.0)
    assert rank[0] / rank[1] == pytest.approx(5 / 4)
    assert weighted[0] / weighted[1] > even[0] / even[1], "weighted follows the gap in score, not the rank"
    assert weighted[1] > weighted[3] and even[1] > even[3], "and still orders the close ones"
    members = [candidate(f"m{i}", f) for i, f in enumerate(fitnesses)]
    rng = np.random.default_rng(0)
    draws = [ParentSampling("weighted").draw(rng, members, 1)[0].code for _ in range(400)]
    assert draws.count("m0") / 400 == pytest.approx(weighted[0] / weighted.sum(), abs=0.08)


def test_state_round_trips_through_json_and_draws_continue_identically() -> None:
    structure = PopulationStructure(islands=2, archive="map-elites", features=("code_length", "ast_nodes"))
    population = IslandPopulation(6, structure)
    population.add([candidate("x" * (i + 1) + " + 1" * i, float(i)) for i in range(8)])
    population.select(np.random.default_rng(0), 1)
    copy = IslandPopulation(6, structure)
    copy.restore(json.loads(json.dumps(population.state())))
    assert copy.state() == population.state()
    assert copy.select(np.random.default_rng(3), 2) == population.select(np.random.default_rng(3), 2)
    child = candidate("child + 1 + 1", 99.0, population.drawn[-1][0])
    population.add([child])
    copy.add([child])
    assert copy.state() == population.state()


BASE = {
    **RUNNER_BASE,
    "method": "eoh",
    "population": {
        "islands": 3,
        "migration_interval": 1,
        "archive": "map-elites",
        "features": ["code_length"],
        "feature_bins": 3,
        "parent_sampling": "power-law",
    },
}


@pytest.mark.parametrize("method", ["eoh", "eoh+es"])
def test_islands_resume_exactly_and_every_island_gets_children(tmp_path: Path, method: str) -> None:
    config = validate({**BASE, "method": method})
    with start_run(config, tmp_path / "straight") as straight:
        straight.run()
        expected = straight.store.last_state()
    islands = expected["islands"]["islands"]
    assert all(island["members"] for island in islands), "an island was left empty"
    store = RunStore.open(tmp_path / "straight")
    page = render_report(store)
    store.close()
    assert "<h2>Islands and archive</h2>" in page
    for index, island in enumerate(islands):
        assert f"<td>{island['members'][0]['key']}</td><td>{len(island['members'])} / 3</td>" in page, index
    interrupted = start_run(config, tmp_path / "resumed")
    for _ in range(3):
        interrupted.run_step()
    interrupted.close()
    with resume_run(tmp_path / "resumed") as resumed:
        resumed.run()
        actual = resumed.store.last_state()
    assert actual["islands"] == expected["islands"]
    assert actual["best"] == expected["best"] and actual["rng"] == expected["rng"]
    assert actual["weights_sha256"] == expected["weights_sha256"]


@pytest.mark.parametrize(
    ("population", "message"),
    [
        ({"islands": 5}, "population.islands (5) cannot exceed population_size (4)"),
        ({"features": ["colour"]}, "unknown feature 'colour'"),
        ({"feature_ranges": {"code_length": [10, 10]}}, "low < high"),
    ],
)
def test_bad_population_settings_fail_with_one_line(population: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)) as raised:
        validate({**BASE, "population": population})
    assert "\n" not in str(raised.value)
