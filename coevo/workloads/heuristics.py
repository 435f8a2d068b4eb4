"""The heuristic-design (AHD) workload: a member is heuristic code, scored by the sandboxed evaluator.

The weights a member names wrote its code and play no part in running it, so members with equal code
get equal verdicts. Code with the logic of a heuristic this workload already scored (the same
`code_fingerprint`: new comments or names only) is scored as that heuristic, from the evaluator's
cache, so a cosmetic copy never costs sandbox time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from coevo.candidate import Sense
from coevo.evaluate.evaluator import EvalResult, Evaluator
from coevo.family import HEURISTICS
from coevo.operators.fingerprint import code_fingerprint
from coevo.operators.records import direction
from coevo.workload import Evaluation, Member, WorkloadSettings

if TYPE_CHECKING:
    from coevo.context import RunFacts
    from coevo.es.protocols import WeightsHost
    from coevo.llm.base import LLM


class AHDWorkload:
    """The `Workload` over one `Evaluator` (one task, split and instance set)."""

    family = HEURISTICS
    settings_model = None
    """`[workload]` takes no key beyond `kind`: the task and `[eval]` say what is scored."""
    name: str
    sense: Sense
    evaluator: Evaluator

    @classmethod
    def build(
        cls,
        settings: WorkloadSettings,
        facts: RunFacts,
        llm: LLM | None,
        host: WeightsHost | None = None,
        sandbox: Callable[[], Evaluator] | None = None,
    ) -> AHDWorkload:
        """The run's sandbox (`sandbox()`: the task's evaluator on the scoring split, under the run's eval
        settings and verdict cache); the LLM and weights only write the code, so they play no part here."""
        return cls(sandbox())

    def __init__(self, evaluator: Evaluator) -> None:
        self.evaluator = evaluator
        self.name = evaluator.task.name
        self.sense = evaluator.task.sense
        self._known: dict[str, str] = {}
        """Fingerprint -> the first code evaluated with that logic."""

    def evaluate(self, members: Sequence[Member], *, traces: bool = False) -> list[Evaluation]:
        """Verdicts in order; heuristics have no episodes, so `traces` brings none."""
        return self.verdicts(self.codes(members))

    def codes(self, members: Sequence[Member]) -> list[str]:
        """The code each member is scored as: the first this workload saw with its logic. A remote
        executor ships these, so a worker's verdict is the one this process would give."""
        return [self._first_with_logic(m.text) for m in members]

    def verdicts(self, codes: Sequence[str]) -> list[Evaluation]:
        """The sandbox's verdicts on exactly `codes`, in order: a worker scores what `codes` named so."""
        return [self._evaluation(result) for result in self.evaluator.evaluate_many(codes)]

    def remember(self, texts: Iterable[str]) -> None:
        for text in texts:
            if text:  # rejected answers have no code and no verdict
                self._first_with_logic(text)

    def _first_with_logic(self, code: str) -> str:
        """The first code seen with `code`'s logic; code that does not parse goes on to its verdict."""
        try:
            return self._known.setdefault(code_fingerprint(code), code)
        except ValueError:
            return code

    def close(self) -> None:
        self.evaluator.close()

    def _evaluation(self, result: EvalResult) -> Evaluation:
        if result.valid:
            feedback = (
                f"mean objective {result.objective:.6g} over {result.n_instances} instances ({direction(self.sense)})"
            )
        else:
            feedback = f"invalid: {result.reason}"
        return Evaluation(
            sense=self.sense,
            split=result.split,
            per_instance=result.per_instance,
            objective=result.objective,
            reason=result.reason,
            feedback=feedback,
            gap_pct=result.gap_pct,
            seconds=result.seconds,
        )
