"""What a remote worker holds for a run: its workload, and the model and weights host that the run's
ES history moves, so a member's job carries only seeds and history lines, never weights.

Plain Python, so it is tested without a cluster; an executor (`coevo.run.ray_executor`) only schedules
jobs onto replicas and hands the results back to the driver, the one writer of the run store.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from coevo.es.update_log import UpdateRecord, replay
from coevo.run.config import RunConfig, validate
from coevo.run.proposals import ProposalJob, ProposedMember, propose_member
from coevo.workload import Evaluation, Member

if TYPE_CHECKING:
    from coevo.llm.base import LLM


class StaleReplica(Exception):
    """A worker's replica is not at the member's ES step (it restarted between jobs); carries its step."""

    def __init__(self, step: int) -> None:
        super().__init__(f"replica holds {step} ES updates")
        self.step = step


class MemberReplica:
    """What runs on a worker: the run's workload, and the model and weights host history lines move on.

    The model loads only where members need it (an agent run plays under it, an AHD ES run writes with
    it): a heuristic-design run without ES only scores code on its workers, which hold the sandbox alone.
    Plain Python, so it is tested without Ray; `RayExecutor` runs it as an actor.
    """

    def __init__(self, config_data: dict[str, Any], threads: int = 1) -> None:
        from coevo.llm.ledger import BudgetLedger
        from coevo.operators.diff_edit import EditPolicy
        from coevo.operators.eoh_operators import EoHOperators
        from coevo.run.build import build_host, build_workload
        from tasks import get_task

        config = validate(config_data)
        writes_code = config.family.writes_code
        llm = loaded_llm(config, threads) if config.uses_weights or not writes_code else None
        self.host = build_host(llm, config) if llm is not None and config.uses_weights else None
        self.workload = build_workload(config, llm, self.host)
        self.operators: EoHOperators | None = None
        """The AHD ES operators (None without ES or on the agent workload); a job's sampling and templates
        override theirs."""
        if writes_code and llm is not None:
            self.operators = EoHOperators(
                llm,
                get_task(config.task),
                BudgetLedger(),
                edits=EditPolicy(config.operators.diff_share, config.operators.diff_resamples),
            )
        self.step = 0

    def play(self, lines: Sequence[str], generation: int, index: int, member: Member, traces: bool) -> Evaluation:
        """Apply the history lines this replica lacks, then play member `index` of generation `generation`."""
        self._sync(lines, 0 if member.weights is None else member.weights.step)
        workload = self.workload.at_generation(generation)
        return workload.evaluate_at(index, member, traces=traces)

    def propose(self, lines: Sequence[str], job: ProposalJob) -> ProposedMember:
        """Apply the history lines this replica lacks, then write AHD member `job` and score it here."""
        from coevo.llm.ledger import BudgetLedger
        from coevo.operators.records import Proposal

        self._sync(lines, job.weights.step)
        ledger = BudgetLedger()
        item = propose_member(replace(self.operators, ledger=ledger), self.host, job)
        evaluation = None
        if isinstance(item, Proposal):
            (evaluation,) = self.workload.evaluate([Member(item.code, job.weights)], traces=True)
        return ProposedMember(item, evaluation, ledger.to_dict())

    def score(self, code: str) -> Evaluation:
        """The sandbox's verdict on exactly `code` (the driver chose it), whatever this worker saw before."""
        (evaluation,) = self.workload.verdicts([code])
        return evaluation

    def _sync(self, lines: Sequence[str], wanted: int) -> None:
        """Move the replica to ES step `wanted` with the lines it lacks, or say which step it holds."""
        records = [UpdateRecord.from_json(line) for line in lines]
        missing = [r for r in records if r.step >= self.step]
        if self.host is not None and missing:
            if missing[0].step != self.step:
                raise StaleReplica(self.step)
            replay(self.host, missing)
            self.step += len(missing)
        if self.host is not None and self.step != wanted:
            raise StaleReplica(self.step)

    def weights_sha256(self) -> str | None:
        return None if self.host is None else self.host.weights_sha256()


def loaded_llm(config: RunConfig, threads: int) -> LLM:
    """The run's LLM, on `threads` torch threads (a worker's share of its node)."""
    import torch

    from coevo.run.build import load_llm

    torch.set_num_threads(threads)
    return load_llm(config)
