"""The runner: the one loop every method shares.

A method is a policy (`coevo.methods`, named in `coevo.run.method_registry`); the runner provides the
services of its family's context (`coevo.context`), and the method sees it through that protocol alone
(`coevo.run.context_view`): proposing
heuristics with the LLM (under the current weights, or one perturbation per request), scoring them
through the executor and the workload protocol (`coevo.workload`; the AHD workload runs them in the
sandbox, here or on the executor's workers), the ES engine, the budget, and the store. A run is a
sequence of steps (one phase of a generation each); a step commits atomically with the state it
leaves, and every random choice in it derives from (config seed, step), so re-running an interrupted
step reproduces it exactly. A member's sampling seed is bound to its index in the population
(`_generate`), never to how its backend calls were batched.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from fractions import Fraction
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from coevo.candidate import Candidate, WeightsRef
from coevo.context import Policy
from coevo.es.engine import ESConfig, ESEngine, UpdateStats
from coevo.es.perturbation import Perturbation
from coevo.es.protocols import WeightsHost
from coevo.es.schedules import ScheduleConfig
from coevo.es.update_log import HISTORY_FILENAME
from coevo.evaluate.evaluator import Evaluator
from coevo.islands import IslandPopulation, PopulationStructure
from coevo.llm.base import LLM, SamplingParams
from coevo.llm.ledger import BudgetLedger
from coevo.novelty import NotNovel
from coevo.operators.diff_edit import EditPolicy
from coevo.operators.eoh_operators import EoHOperators, ProposalRequest
from coevo.operators.records import Proposal, Rejection, TextProposal
from coevo.parent_sampling import ParentSampling
from coevo.population import PromptVariant
from coevo.run.build import build_host, build_method, build_workload, configured_evaluator
from coevo.run.config import ConfigError, PopulationSettings, RunConfig
from coevo.run.context_view import ContextView
from coevo.run.executor import Executor, LocalExecutor
from coevo.run.heldout import SuccessRate, heldout_success
from coevo.run.model_choice import operators_llm
from coevo.run.novelty_gate import NoveltyGate, ProposalCall
from coevo.run.proposals import ProposalJob, propose_member
from coevo.run.store import RunStore, StoreHistory
from coevo.workload import EpisodeWorkload, Evaluation, Member, Workload
from tasks import get_task
from tasks.base import SplitName


class SeedHeuristicError(ConfigError):
    """The task's own seed heuristic is invalid on it: a broken problem, reported in one line."""


class Runner:
    """Runs one config's method step by step over a store, continuing after the store's last step."""

    def __init__(
        self,
        config: RunConfig,
        store: RunStore,
        run_dir: Path,
        llm: LLM,
        workload: Workload | None = None,
        executor: Executor | None = None,
    ) -> None:
        """`workload` scores the proposals; by default the AHD workload on `config.eval.split`.
        `executor` plays the members of `play` (default: in this process)."""
        remote = executor is not None and not isinstance(executor, LocalExecutor)
        if config.novelty.enabled and config.uses_weights and remote:
            raise ConfigError(
                "novelty.enabled: ES members are written and scored on the executor's workers, "
                "where no novelty check runs; run with the local executor"
            )
        self.config = config
        self.store = store
        self.run_dir = run_dir
        self.llm = llm
        self.task = None if config.task is None else get_task(config.task)
        """The AHD task; None on the agent workload, which writes no heuristics."""
        self.ledger = BudgetLedger()
        self.sampling = SamplingParams(
            max_new_tokens=config.llm.max_new_tokens, temperature=config.llm.temperature, top_p=config.llm.top_p
        )
        self.writer = operators_llm(config, llm, store)
        """What the operators write with: `llm`, or the bandit's router over `llm` and `[[llm.ensemble]]`."""
        self.model_name = config.model if config.llm.ensemble else None
        """What the store calls `llm` in its calls' rows: None in a run of one model."""
        self.operators = self._operators()
        self.host: WeightsHost | None = build_host(llm, config) if config.uses_weights else None
        self.workload: Workload = workload or build_workload(config, llm, self.host, run_dir / "eval-cache")
        self.family = config.family
        """What the run's members are: the method sees the runner through this family's context."""
        self.method: Policy = build_method(config, self.family)
        self.context = ContextView(self, self.family.context)
        self.population = IslandPopulation(config.population_size, population_structure(config.population))
        self.prompts = self.method.prompt_pool()
        self.rng = np.random.default_rng(config.seed)
        self.evaluations = 0
        self.policy_calls = 0
        """LLM calls made while scoring members (an agent's turns), which the store's llm_calls table does not hold."""
        self.step = 0
        self.generation = 0
        self.phase = 0
        self.best: Candidate | None = None
        self.heldout: dict[str, dict[str, Any]] = {}
        """Held-out measurements of an agent run ("before", "after"), carried in the step state."""
        self.on_progress: Callable[[Runner], None] | None = None
        """Called after every batch of evaluations (progress bars)."""
        self.on_generation: Callable[[Runner], None] | None = None
        """Called once a generation's last step has committed (tuning reports intermediate values)."""
        self._calls_in_step = 0
        self._exported_updates: int | None = None
        """ES updates this process has mirrored to the JSONL file; None before its first export."""
        self.engine: ESEngine | None = None
        if self.host is not None:
            self.engine = ESEngine.resume(
                self._es_config(), self.host, StoreHistory(store, 0), progress=self._budget_spent
            )
        self.executor: Executor = executor or LocalExecutor()
        self.novelty = NoveltyGate.from_config(config, llm, store)
        """The novelty check before evaluation (`[novelty]`); None when off."""
        if (state := store.last_state()) is not None:
            self._restore(state)

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the workload's and the executor's workers and close the store (the run stays resumable)."""
        self.workload.close()
        self.executor.close()
        self.store.close()

    # --- the loop ----------------------------------------------------------------------------------
    @property
    def budget_left(self) -> int:
        return max(self.config.budget - self.evaluations, 0)

    @property
    def finished(self) -> bool:
        return self.budget_left == 0

    def run(self) -> Candidate | None:
        """Run steps until the budget is spent; returns the best candidate."""
        stalled = 0
        with self.store.running():
            while not self.finished:
                used = self.evaluations
                self.run_step()
                stalled = stalled + 1 if self.evaluations == used else 0
                if stalled > 2 * len(self.method.phases) + 1:
                    raise RuntimeError(f"{self.config.method} made no evaluation in {stalled} steps; stopping")
        return self.best

    def run_step(self) -> None:
        """One phase of one generation, committed with the state it leaves (or not at all)."""
        phase = "init" if self.generation == 0 else self.method.phases[self.phase]
        self._calls_in_step = 0
        if self.engine is not None:
            self.engine.history = StoreHistory(self.store, self.step)
        self.store.begin_step()
        try:
            self.method.run_phase(self.context, phase)
            generation, self.phase = self.generation, self.phase + 1
            if phase == "init" or self.phase == len(self.method.phases):
                self.generation, self.phase = self.generation + 1, 0
                if phase != "init":
                    self.population.end_generation(generation)
                    self._measure_curve(generation)
            self.store.commit_step(self.step, generation, phase, self._state())
        except BaseException:
            self.store.abort_step()
            raise
        self.step += 1
        self._export_history()
        if self.phase == 0 and self.on_generation is not None:
            self.on_generation(self)

    # --- the services of the contexts methods receive (coevo.context) ------------------------------
    @property
    def es_updates(self) -> int:
        return 0 if self.engine is None else self.engine.step

    def propose(
        self,
        requests: Sequence[ProposalRequest],
        perturbations: Sequence[Perturbation] | None = None,
        prompt_ids: Sequence[str | None] | None = None,
    ) -> list[Candidate]:
        """Ask for one heuristic per request (request i under perturbation i if given), evaluate them
        all, record everything, and charge the budget; requests beyond the budget are dropped. With the
        novelty check on, a child rejected as not novel is neither evaluated nor charged."""
        count = min(len(requests), self.budget_left)
        requests = list(requests[:count])
        perturbations = None if perturbations is None else list(perturbations[:count])
        prompt_ids = list(prompt_ids[:count]) if prompt_ids is not None else [None] * count
        weights = [self._weights_ref(p) for p in perturbations or [None] * count]
        items, verdicts = self._written_and_scored(requests, perturbations, weights, prompt_ids)
        evaluations = iter(verdicts)
        candidates = []
        for index, item in enumerate(items):
            written = self._written_under(item, weights[index])
            call = self.store.add_llm_call(self.step, item, written, prompt_ids[index], self.model_name)
            evaluation = next(evaluations) if isinstance(item, Proposal) else None
            candidate = self._candidate(item, written, prompt_ids[index], evaluation)
            self.store.add_candidate(self.step, candidate, call, evaluation)
            candidates.append(candidate)
            self._track_best(candidate)
        self.evaluations += count - sum(isinstance(item, NotNovel) for item in items)
        self._progress()
        return candidates

    def play(
        self, perturbations: Sequence[Perturbation | None], shown: str | Sequence[Member] = "", traces: bool = False
    ) -> list[Evaluation]:
        """Score members (under perturbation i each; None: the live weights) on this generation's
        instances and charge the budget; members beyond the budget are dropped. `shown` is the text
        every member is shown, or per member its own (text or retrieval, weights ignored)."""
        views = [Member(shown)] * len(perturbations) if isinstance(shown, str) else shown
        members = [
            replace(view, weights=self._weights_ref(p))
            for view, p in zip(views, perturbations[: self.budget_left], strict=False)
        ]
        evaluations = self.executor.play(
            self.generation_workload(),
            members,
            generation=self.generation,
            traces=traces,
            history=self.store.es_records,
        )
        self.charge(len(members), sum(e.llm_calls for e in evaluations))
        return evaluations

    def generation_workload(self) -> EpisodeWorkload:
        """The episode workload over this generation's episodes (its window moved on)."""
        return self.workload.at_generation(self.generation)

    def charge(self, evaluations: int, llm_calls: int = 0) -> None:
        """Count evaluations a method spent on its own (never past the budget), and the LLM calls they
        took that the store does not record (an agent's turns); report progress."""
        self.evaluations += min(evaluations, self.budget_left)
        self.policy_calls += llm_calls
        self._progress()

    def add_library(self, codes: dict[str, str]) -> list[Candidate]:
        """Evaluate heuristics from the skill library (name -> code) and charge the budget for them."""
        names = list(codes)[: self.budget_left]
        evaluations = self._verdicts([Member(codes[name]) for name in names])
        candidates = []
        for name, evaluation in zip(names, evaluations, strict=True):
            candidate = self._scored(
                Candidate(
                    code=codes[name],
                    thought=f"library heuristic {name}",
                    operator="library",
                    generation=self.generation,
                ),
                evaluation,
            )
            if name == "seed" and not candidate.valid:
                raise SeedHeuristicError(
                    f"task {self.config.task!r}: its seed heuristic fails on its own search instances: {candidate.reason}"
                )
            self.store.add_candidate(self.step, candidate, None, evaluation)
            candidates.append(candidate)
            self._track_best(candidate)
        self.evaluations += len(names)
        self._progress()
        return candidates

    def record_text(self, items: Sequence[Proposal | TextProposal | Rejection], prompt_id: str | None = None) -> None:
        """Store the LLM calls that make no candidate: reflections, prompt rewrites, held-out probes."""
        for item in items:
            self.store.add_llm_call(self.step, item, self._weights_ref(None), prompt_id, self.model_name)

    def register_prompt(self, variant: PromptVariant) -> None:
        self.store.add_prompt(self.step, variant.id, variant.to_dict())

    def ask(self) -> list[Perturbation]:
        return self._engine().ask()

    def tell(self, perturbations: Sequence[Perturbation], rewards: Sequence[float | None]) -> UpdateStats:
        return self._engine().tell(perturbations, rewards)

    def record_heldout(self, when: str) -> SuccessRate:
        """Measure held-out success now (the live weights, with the text the method shows) and keep it
        in the step state under `when` ("before", a generation of the learning curve, "after"); the
        "after" figure, measured once the steps are done, also goes to the store's `heldout` meta key."""
        finished = max(self.generation - 1, 0)  # generation 0 (init) changes no weights
        measured = heldout_success(
            self.workload, self.method.heldout_view(), self.method.updates(self.context), finished
        )
        self.heldout[when] = asdict(measured)
        if when == "after":
            self.store.set_meta("heldout", json.dumps(self.heldout))
        return measured

    def _measure_curve(self, finished_generation: int) -> None:
        """Held-out success every `workload.heldout_every` generations of a run that measured its base
        weights; not after the last one, which the run's "after" figure measures."""
        if "before" not in self.heldout:  # only episode runs measure their base weights
            return
        every = self.workload.heldout_every
        if every and finished_generation % every == 0 and not self.finished:
            self.record_heldout(f"generation {finished_generation}")

    def sampling_for_call(self) -> SamplingParams:
        """This step's next sampling seed: a pure function of (run seed, step, call index).

        A call is one service request of the method (a population's proposals, a reflection), however
        many backend calls it takes, so the index depends on the method's logic alone.
        """
        digest = hashlib.blake2b(f"{self.config.seed}:{self.step}:{self._calls_in_step}".encode(), digest_size=4)
        self._calls_in_step += 1
        return replace(self.sampling, seed=int.from_bytes(digest.digest(), "little"))

    def evaluator_for(self, split: SplitName) -> Evaluator:
        """An evaluator of `split` under the run's eval settings (instance limit, workers) and cache, so
        held-out scoring is measured as search scoring is."""
        return configured_evaluator(self.config, split, self.run_dir / "eval-cache")

    @property
    def evaluator(self) -> Evaluator:
        """The sandbox of the heuristic workload, for callers that reach it themselves (code skills' tests)."""
        return self.workload.evaluator

    def weights_sha256(self) -> str | None:
        return None if self.host is None else self.host.weights_sha256()

    # --- internals ---------------------------------------------------------------------------------
    def _engine(self) -> ESEngine:
        if self.engine is None:
            raise RuntimeError(f"method {self.config.method} has no ES engine")
        return self.engine

    def _budget_spent(self) -> Fraction:
        """The share of the budget spent, which the ES schedules follow: a generation's cost varies
        (crossovers skipped while the population is small, refills), so a count of updates planned
        from the budget can end early or late, and sigma should reach its floor as the budget runs out."""
        return Fraction(self.evaluations, self.config.budget)

    def _operators(self) -> EoHOperators | None:
        if self.task is None:
            return None
        return EoHOperators(
            self.writer,
            self.task,
            self.ledger,
            sampling=self.sampling,
            edits=EditPolicy(self.config.operators.diff_share, self.config.operators.diff_resamples),
        )

    def _track_best(self, candidate: Candidate) -> None:
        if candidate.valid and (self.best is None or candidate.fitness > self.best.fitness):
            self.best = candidate

    def _progress(self) -> None:
        if self.on_progress is not None:
            self.on_progress(self)

    def _written_and_scored(
        self,
        requests: list[ProposalRequest],
        perturbations: list[Perturbation] | None,
        weights: list[WeightsRef],
        prompt_ids: list[str | None],
    ) -> tuple[list[Proposal | Rejection], list[Evaluation]]:
        """The answers to `requests` and the verdicts of those that parsed, in order: ES members written
        and scored on the executor's workers where it has any, the others written here, passed through
        the novelty check when it is on, and scored by it."""
        sampling = self.sampling_for_call()
        jobs = None
        if perturbations is not None:
            sampling = replace(sampling, requests_per_stream=2 if self.config.es.antithetic else 1)
            members = zip(requests, perturbations, weights, strict=True)
            jobs = [
                ProposalJob(request, perturbation, weight, replace(sampling, first_request=index))
                for index, (request, perturbation, weight) in enumerate(members)
            ]
            remote = self.executor.propose(jobs, generation=self.generation, history=self.store.es_records)
            if remote is not None:
                for proposed in remote:
                    self.ledger.absorb(BudgetLedger.from_dict(proposed.usage))
                items = [proposed.item for proposed in remote]
                self.workload.remember(item.code for item in items if isinstance(item, Proposal))
                return items, [proposed.evaluation for proposed in remote if proposed.evaluation is not None]
        items = self._generate(requests, jobs, sampling)
        if self.novelty is not None:
            rewrite = partial(self._rewrite, requests, jobs)
            call = ProposalCall(self.step, sampling, self.ledger, weights, prompt_ids, self._weights_ref(None), rewrite)
            items = self.novelty.screen(items, self.population.members, call)
        scored = [Member(item.code, w) for item, w in zip(items, weights, strict=True) if isinstance(item, Proposal)]
        return items, self._verdicts(scored)

    def _verdicts(self, heuristics: list[Member]) -> list[Evaluation]:
        """Heuristics scored by the executor (this process's sandbox, or its workers'); the store keeps
        the episodes."""
        return self.executor.score(self.workload, heuristics, generation=self.generation, history=self.store.es_records)

    def _generate(
        self, requests: list[ProposalRequest], jobs: list[ProposalJob] | None, sampling: SamplingParams
    ) -> list[Proposal | Rejection]:
        """Request i (member i) samples stream i of one seed for the whole population, whether the
        members run one at a time (full rank), in chunks of `llm.max_batch_size` (low rank) or together
        (the same texts in fp32; in bf16 a text can depend on its batch, see docs/llm.md)."""
        if jobs is None:
            return self.operators.propose_many(requests, sampling)
        local = replace(self.operators, llm=self.llm)  # the ES weights belong to the local model they perturb
        population = getattr(self.host, "population", None)
        if population is None:  # full rank: each member's weights exist one at a time
            return [propose_member(local, self.host, job) for job in jobs]
        items: list[Proposal | Rejection] = []
        chunk = self.config.llm.max_batch_size
        for start in range(0, len(requests), chunk):  # low rank: a batch row per member
            members = [job.perturbation for job in jobs[start : start + chunk]]
            items += local.propose_many(
                requests[start : start + chunk],
                replace(sampling, first_request=start),
                rows=lambda indices, members=members: population(members, list(indices)),
            )
        return items

    def _rewrite(
        self,
        requests: list[ProposalRequest],
        jobs: list[ProposalJob] | None,
        indices: Sequence[int],
        sampling: SamplingParams,
    ) -> list[Proposal | Rejection]:
        """Requests `indices` asked again under `sampling`'s seed (the novelty check's resample): together
        without ES, else each member alone under its own weights, on its own stream."""
        if jobs is None:
            return self.operators.propose_many([requests[i] for i in indices], sampling)
        return [
            propose_member(
                self.operators, self.host, replace(jobs[i], sampling=replace(jobs[i].sampling, seed=sampling.seed))
            )
            for i in indices
        ]

    def _weights_ref(self, perturbation: Perturbation | None) -> WeightsRef:
        return WeightsRef.of(self.config.model, self.es_updates, perturbation)

    def _written_under(self, item: Proposal | Rejection, weights: WeightsRef) -> WeightsRef:
        """`weights`, unless another model of the ensemble wrote `item`: then that model's fixed weights."""
        model = item.completion.model
        return weights if model in (None, self.config.model) else WeightsRef(model, 0)

    def _candidate(
        self, item: Proposal | Rejection, weights: WeightsRef, prompt_id: str | None, evaluation: Evaluation | None
    ) -> Candidate:
        candidate = Candidate(
            code=item.code if isinstance(item, Proposal) else "",
            thought=item.thought if isinstance(item, Proposal) else "",
            operator=item.operator,
            generation=self.generation,
            parents=item.parents,
            prompt_id=prompt_id,
            weights=weights,
            reason=item.reason if isinstance(item, Rejection) else None,
        )
        return candidate if evaluation is None else self._scored(candidate, evaluation)

    @staticmethod
    def _scored(candidate: Candidate, evaluation: Evaluation) -> Candidate:
        if not evaluation.valid:
            return replace(candidate, reason=evaluation.reason)
        return replace(candidate, fitness=evaluation.reward, objective=evaluation.objective, gap_pct=evaluation.gap_pct)

    def _es_config(self) -> ESConfig:
        es = self.config.es
        population = self.method.es_population()
        if es.antithetic and population % 2:
            raise ConfigError(f"es.antithetic pairs the ES members of an update, but {population} is odd")
        return ESConfig(
            population_size=population,
            sigma=ScheduleConfig(start=es.sigma, end=es.sigma_final, kind="cosine"),
            alpha=ScheduleConfig(start=es.alpha),
            total_steps=self.method.planned_updates(),
            shaping=es.shaping,
            antithetic=es.antithetic,
            strategy=es.strategy,
            strategy_options=es.strategy_options,
            seed=self.config.seed,
        )

    def _state(self) -> dict[str, Any]:
        return {
            "evaluations": self.evaluations,
            "policy_calls": self.policy_calls,
            "generation": self.generation,
            "phase": self.phase,
            "population": [c.to_dict() for c in self.population.members],
            "islands": self.population.state(),
            "best": None if self.best is None else self.best.to_dict(),
            "rng": self.rng.bit_generator.state,
            "ledger": self.ledger.to_dict(),
            "prompts": [v.to_dict() for v in self.prompts.variants],
            "es_step": None if self.engine is None else self.engine.step,
            "weights_sha256": self.weights_sha256(),
            "heldout": self.heldout,
            "method": self.method.state(),
        }

    def _restore(self, state: dict[str, Any]) -> None:
        self.step = state["step"] + 1
        self.evaluations = state["evaluations"]
        self.policy_calls = state.get("policy_calls", 0)  # absent from runs stored before it was counted
        self.generation = state["generation"]
        self.phase = state["phase"]
        self.population.restore(state.get("islands") or _one_island(state["population"]))
        self.best = None if state["best"] is None else Candidate.from_dict(state["best"])
        self.rng.bit_generator.state = state["rng"]
        self.ledger = BudgetLedger.from_dict(state["ledger"])
        self.operators = self._operators()
        self.prompts.variants = [PromptVariant.from_dict(v) for v in state["prompts"]]
        self.heldout = state.get("heldout", {})
        self.method.restore(state.get("method"))
        self.workload.remember(candidate.code for _, candidate in self.store.candidates())
        if self.engine is not None and self.engine.step != state["es_step"]:
            raise RuntimeError(
                f"store holds {self.engine.step} ES updates but its last step expects {state['es_step']}"
            )
        if state["weights_sha256"] is not None and self.weights_sha256() != state["weights_sha256"]:
            raise RuntimeError("replayed weights differ from the stored run's; was the base model changed?")

    def _export_history(self) -> None:
        """Mirror new ES updates to the JSONL file after a step that added some.

        Lines are appended (one write of whole lines, fsync'd), so a run writes each record once. A
        process's first export rewrites the file from the store instead (write, then rename): that
        drops whatever a crash tore off an append, and anything the store rolled back.
        """
        if self.engine is None or self.engine.step == self._exported_updates:
            return
        path = self.run_dir / HISTORY_FILENAME
        fresh = self._exported_updates is None
        lines = "".join(record.to_json() + "\n" for record in self.store.es_records(self._exported_updates or 0))
        if fresh:
            staging = path.with_suffix(".tmp")
            staging.write_text(lines)
            os.replace(staging, path)
        else:
            with open(path, "a", encoding="utf-8") as mirror:
                mirror.write(lines)
                mirror.flush()
                os.fsync(mirror.fileno())
        self._exported_updates = self.engine.step


def _one_island(members: list[dict[str, Any]]) -> dict[str, Any]:
    """The population state of a run stored before islands: its members on one island."""
    return {"islands": [{"members": members}], "turn": 0, "arrivals": 0, "drawn": []}


def summary(store: RunStore) -> dict[str, Any]:
    """The `coevo runs show --json` object for a stored run: what it ran on (a task, or an environment
    whose held-out success it measured), what it spent, its answer and its weights."""
    config = store.config
    state = store.last_state() or {}
    return {
        "status": store.status(),
        "method": config["method"],
        "task": config["task"],
        "env": (config.get("workload") or {}).get("env"),
        "evaluations": state.get("evaluations", 0),
        "llm_calls": store.llm_call_count(),
        "best": store.answer_summary(),
        "heldout": store.heldout_figures(),
        "weights_sha256": state.get("weights_sha256"),
    }


def population_structure(settings: PopulationSettings) -> PopulationStructure:
    """The `PopulationStructure` the config's `[population]` table describes."""
    return PopulationStructure(
        islands=settings.islands,
        migration_interval=settings.migration_interval,
        migration_rate=settings.migration_rate,
        archive=settings.archive,
        features=tuple(settings.features),
        feature_bins=settings.feature_bins,
        feature_ranges=dict(settings.feature_ranges),
        sampling=ParentSampling(settings.parent_sampling, settings.power_law_exponent, settings.weighted_sharpness),
    )
