"""`es` on the agent workload with a tiny random Llama: rewards, trajectories, determinism, bad input."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from tiny_lm import build_tiny_agent

from coevo.candidate import WeightsRef
from coevo.cli import main
from coevo.run.config import ConfigError, load_config
from coevo.run.heldout import measured_curve
from coevo.run.learning_curve import training_rewards
from coevo.run.session import start_run
from coevo.run.store import RunStore
from coevo.workload import Member
from coevo.workloads.agents import AgentWorkload
from tasks.agents.splits import split_seeds

CONFIG = """
method = "es"
model = "tiny_lm:build_tiny_agent"
budget = 8
seed = 1
population_size = 4
[es]
sigma = 0.5
alpha = 0.1
[workload]
kind = "agent"
env = "gridnav"
horizon = 2
episodes = 4
heldout_episodes = 6
"""


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "agent.toml"
    path.write_text(CONFIG)
    return path


def test_es_runs_two_generations_on_episodes_and_replays_exactly(config: Path, tmp_path: Path, one_torch_thread):
    runs = []
    for name in ("a", "b"):
        runner = start_run(load_config(config), tmp_path / name, build_tiny_agent())
        with runner:
            assert runner.store.meta("compute_dtype") == "float32"  # the tiny agent computes in fp32
            runner.run()
            runs.append((runner.weights_sha256(), runner.store.es_records(0), dict(runner.heldout)))
    (sha_a, records_a, heldout_a), (sha_b, records_b, _) = runs
    assert len(records_a) == 2, "budget 8 / population 4: two ES updates"
    assert [r.to_json() for r in records_a] == [r.to_json() for r in records_b]
    assert sha_a == sha_b
    assert heldout_a["before"]["episodes"] == 6 and heldout_a["before"]["updates"] == "0 ES updates"


def test_a_member_is_scored_per_episode_under_its_own_weights_and_prompt(one_torch_thread):
    llm = build_tiny_agent()
    seeds = split_seeds("search")[:4]
    workload = AgentWorkload(llm, "gridnav", 2, tuple(seeds), host=llm.weights_host("full"))
    base_sha = workload.host.weights_sha256()
    perturbed = Member("Think, then move.", WeightsRef("tiny", 0, seed=7, sigma=0.5))
    members = [Member(""), perturbed, Member("")]
    first, second, third = workload.evaluate(members, traces=True)

    assert workload.host.weights_sha256() == base_sha, "the perturbation is undone after the member"
    assert len(first.rewards) == 4 and all(r in (0.0, 1.0) for r in first.rewards)
    assert first.reward == sum(first.rewards) / 4
    assert first.feedback.startswith(f"solved {int(sum(first.rewards))} of 4 episodes")
    episode = first.trajectories[0]
    assert episode.instance == f"gridnav-H2/{seeds[0]}" and episode.turns[0].observation.startswith("You are in")
    assert 1 <= len(episode.turns) <= 6 and episode.reward == first.rewards[0]
    # Sampling is bound to the member's index: the same member at another index samples differently,
    # and re-running an index replays it whatever else is in the batch.
    again = workload.evaluate([Member(""), perturbed], traces=True)[1]
    assert again.trajectories == second.trajectories
    alone = workload.evaluate([Member("")], traces=True)[0]
    assert alone.trajectories == first.trajectories
    assert third.trajectories != first.trajectories


def test_workload_temperature_zero_decodes_greedily_so_members_differ_only_by_weights(tmp_path, one_torch_thread):
    def actions(temperature: str) -> list[tuple[str, ...]]:
        text = CONFIG + (f"temperature = {temperature}\n" if temperature else "")
        config = load_config(_toml(tmp_path, text))
        workload = AgentWorkload.build(config.workload, config.facts, build_tiny_agent())
        played = workload.evaluate([Member(""), Member("")], traces=True)
        return [tuple(turn.action for t in e.trajectories for turn in t.turns) for e in played]

    first, second = actions("0")
    assert first == second, "greedy: the member's index no longer changes what it plays"
    sampled_first, sampled_second = actions("")
    assert sampled_first != sampled_second, "sampled (the default 0.7): each index samples its own stream"
    with pytest.raises(ConfigError, match="workload.temperature"):
        load_config(_toml(tmp_path, CONFIG + "temperature = -1\n"))


def test_the_prompt_text_precedes_every_observation():
    seen: list[str] = []

    class Recording:
        def generate_each(self, items):
            seen.extend(messages[0]["content"] for messages, _ in items)
            return [type("C", (), {"text": "move up", "completion_tokens": 2})() for _ in items]

    workload = AgentWorkload(Recording(), "gridnav", 2, (split_seeds("val")[0],))
    (evaluation,) = workload.evaluate([Member("Always read the goal first.")], traces=True)
    assert seen and all(prompt.startswith("Always read the goal first.\n\nYou are in") for prompt in seen)
    assert all(turn.tokens == 2 for turn in evaluation.trajectories[0].turns)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("workload.env=mazes", "unknown environment 'mazes'"),
        ("workload.horizon=3", "horizon 3 is out of range for gridnav"),
        ("method=eoh", "method eoh does not run on the agent workload"),
        ("workload.kind=ahd", "unknown config key 'workload.env' for workload ahd (a key of workload.kind = agent)"),
        ("workload.kind=mazes", "unknown workload 'mazes'; known workloads: "),
    ],
)
def test_bad_agent_config_exits_2_with_one_line(config: Path, tmp_path: Path, capsys, override: str, message: str):
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(config, [override])
    assert main(["run", str(config), "--run-dir", str(tmp_path / "r"), "--set", override]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("coevo: error: ") and "\n" not in err and message in err
    assert not (tmp_path / "r" / "run.sqlite").exists()


def test_es_is_refused_on_the_ahd_workload_and_ahd_needs_a_task(tmp_path: Path):
    with pytest.raises(
        ConfigError, match=r"method es does not run on the ahd workload; choose one of: coevo, eoh, eoh\+es, .*sample"
    ):
        load_config(_toml(tmp_path, 'method = "es"\ntask = "tsp_construct"\nbudget = 4\n'))
    with pytest.raises(ConfigError, match="config key 'task' is required"):
        load_config(_toml(tmp_path, 'method = "eoh"\nbudget = 4\n'))


def test_the_cli_prints_held_out_success_before_and_after(config: Path, tmp_path: Path, capsys, one_torch_thread):
    assert main(["run", str(config), "--run-dir", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert "base (0 ES updates) success on val: " in out and "95% CI" in out
    assert "trained (2 ES updates) success on val: " in out
    assert "2 ES updates changed held-out success by " in out
    assert (tmp_path / "r" / "report.html").exists()

    # `runs show` describes the agent run by its environment and held-out success, as the run ended
    assert main(["runs", "show", str(tmp_path / "r")]) == 0
    shown = capsys.readouterr().out
    assert ": finished, es on gridnav\n" in shown and "heuristic" not in shown
    held_out = [line for line in out.splitlines() if " success on val: " in line or "changed held-out" in line]
    assert len(held_out) == 3 and all(f"  {line}\n" in shown for line in held_out)
    assert main(["runs", "show", str(tmp_path / "r"), "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert (facts["task"], facts["env"], facts["best"]) == (None, "gridnav", None)
    assert [(when, figure["updates"], figure["episodes"]) for when, figure in facts["heldout"].items()] == [
        ("before", "0 ES updates", 6),
        ("after", "2 ES updates", 6),
    ]


def test_held_out_success_every_generation_draws_the_learning_curve(tmp_path: Path, one_torch_thread):
    text = CONFIG.replace("budget = 8", "budget = 12").replace('env = "gridnav"', 'env = "gridnav-dense"')
    config = _toml(tmp_path, text + "heldout_every = 1\n")
    assert main(["run", str(config), "--run-dir", str(tmp_path / "r")]) == 0
    store = RunStore.open(tmp_path / "r")
    heldout, records = json.loads(store.meta("heldout")), store.es_records(0)
    assert store.last_state()["heldout"] == {k: v for k, v in heldout.items() if k != "after"}
    store.close()
    curve = measured_curve(heldout)
    assert [m.generation for m in curve] == [0, 1, 2, 3], "before, generations 1 and 2, after the last (3)"
    assert list(heldout) == ["before", "generation 1", "generation 2", "after"]
    assert [m.updates for m in curve] == [f"{n} ES updates" for n in range(4)]
    seeds = split_seeds("val")[:6]
    assert all(list(m.seeds) == seeds and sum(m.outcomes) == m.successes for m in curve)
    train = training_rewards(records)
    assert [g for g, *_ in train] == [1, 2, 3]
    assert all(low <= mean <= high for _, mean, low, high in train)
    page = (tmp_path / "r" / "report.html").read_text()
    assert "<h2>Learning curve</h2>" in page and "Held-out success measured 4 times on the same 6 val episodes" in page


def test_the_reference_sudoku_config_is_the_reference_setting():
    reference = load_config(Path(__file__).parent.parent / "experiments" / "agents" / "sudoku_es.toml")
    assert (reference.population_size, reference.budget // reference.population_size) == (32, 100)
    assert (reference.es.sigma, reference.es.sigma_final, reference.es.alpha) == (1e-3, 2.5e-4, 5e-4)
    assert (reference.workload.env, reference.workload.episodes) == ("sudoku", 32)


def _toml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "c.toml"
    path.write_text(text)
    return path


def test_antithetic_members_come_in_mirrored_pairs_and_an_odd_population_is_one_line(
    config: Path, tmp_path: Path, capsys, one_torch_thread
) -> None:
    runner = start_run(load_config(config, ["es.antithetic=true"]), tmp_path / "pairs", build_tiny_agent())
    with runner:
        runner.run()
        records = runner.store.es_records(0)
    assert len(records) == 2
    for record in records:
        assert record.seeds[0::2] == record.seeds[1::2] and set(record.signs[0::2]) == {1} == {
            -s for s in record.signs[1::2]
        }
    odd = ["--set", "es.antithetic=true", "--set", "population_size=3", "--set", "budget=6"]
    assert main(["run", str(config), "--run-dir", str(tmp_path / "odd"), *odd]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "coevo: error: es.antithetic pairs the ES members of an update, but 3 is odd"
    assert not (tmp_path / "odd").exists(), "a refused run leaves no directory behind"


def test_held_out_success_is_measured_on_the_workloads_held_out_split(one_torch_thread):
    from coevo.run.heldout import heldout_success

    llm = build_tiny_agent()
    workload = AgentWorkload(llm, "gridnav", 2, tuple(split_seeds("search")[:2]), heldout="test", heldout_limit=3)
    measured = heldout_success(workload, None, "0 ES updates", generation=0)
    assert measured.split == "test" and measured.seeds == tuple(split_seeds("test")[:3])
    assert measured.successes == sum(measured.outcomes) and measured.episodes == 3


def test_runs_show_counts_every_turn_the_agent_played_as_an_llm_call(config: Path, tmp_path: Path, capsys, one_torch_thread):
    llm = build_tiny_agent()
    calls = []
    real_generate_each = llm.generate_each
    llm.generate_each = lambda items: calls.append(len(items)) or real_generate_each(items)
    with start_run(load_config(config), tmp_path / "r", llm) as runner:
        runner.run()
        runner.record_heldout("after")
    assert main(["runs", "show", str(tmp_path / "r"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["llm_calls"] == sum(calls) > 0
    assert main(["report", str(tmp_path / "r")]) == 0
    assert f"<td>LLM calls</td><td>{sum(calls)}</td>" in (tmp_path / "r" / "report.html").read_text()
