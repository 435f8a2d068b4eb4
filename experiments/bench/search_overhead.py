"""What the search machinery adds per candidate, against evaluating that candidate.

Per candidate, in alternating rounds: applying a SEARCH/REPLACE diff to its parent (`coevo.operators.diff_edit`),
adding it to a 5-island population with ring migration and to a MAP-Elites grid (`coevo.islands`,
`coevo.map_elites`), the novelty check's embedding of its code with the default embedder (the mean-pooled last
hidden layer of the embedded smollm2-135m, loaded as `coevo.llm.embedding` loads it for a run without a model of
its own) and its nearest member among a population's vectors (`coevo.novelty`; the judge, asked only at or above
the threshold, is not timed), and scoring it in the sandbox on the task's search instances (`coevo.evaluate`).
Prints each side's seconds per candidate and the ratio of each overhead to the evaluation (the target for diffs
and archives: well under 1%).

Usage: python experiments/bench/search_overhead.py [--task tsp_construct] [--candidates 20] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from collections.abc import Callable

import numpy as np
from rounds import alternate, ratio_summary

from coevo.candidate import Candidate
from coevo.evaluate import Evaluator
from coevo.islands import IslandPopulation, PopulationStructure
from coevo.llm.embedded import DEFAULT_MODEL
from coevo.llm.embedding import HiddenStateEmbedder
from coevo.llm.hf import HFBackend
from coevo.novelty import nearest
from coevo.operators.diff_edit import apply_blocks, parse_blocks
from tasks import get_task


def variants(seed_code: str, count: int, tag: int) -> list[tuple[str, str]]:
    """`count` (diff answer, code it gives) pairs, each tagging the seed's last line with a comment of its
    own, so no candidate of any round is served from the evaluator's cache."""
    last = seed_code.rstrip().splitlines()[-1]
    out = []
    for index in range(count):
        replacement = f"{last}  # round {tag} variant {index}"
        answer = f"<<<<<<< SEARCH\n{last}\n=======\n{replacement}\n>>>>>>> REPLACE\n"
        out.append((answer, seed_code.replace(last, replacement)))
    return out


def cpu_name() -> str:
    """The processor's model name, as benchmarks report it (CPUs differ between machines)."""
    for line in open("/proc/cpuinfo", encoding="utf-8"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.machine()


def timed(work: Callable[[], object], count: int) -> float:
    started = time.perf_counter()
    work()
    return (time.perf_counter() - started) / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="tsp_construct")
    parser.add_argument("--candidates", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    task = get_task(args.task)
    seed = task.seed_code()
    rng = np.random.default_rng(0)
    rounds = iter(range(4 * args.rounds))
    answers = variants(seed, args.candidates, next(rounds))
    backend = HFBackend.load(DEFAULT_MODEL)  # as a run's fallback loads it, in the CPU's compute dtype
    embedder = HiddenStateEmbedder(backend.model, backend.tokenizer, backend.name)
    population = [seed, *(code for _, code in answers)]
    members = {str(index): vector for index, vector in enumerate(embedder.embed(population))}

    def diffs() -> None:
        for answer, expected in answers:
            blocks, _ = parse_blocks(answer)
            assert apply_blocks(seed, blocks) == expected

    def archives() -> None:
        structure = PopulationStructure(
            islands=5, migration_interval=1, archive="map-elites", features=("code_length",)
        )
        population = IslandPopulation(10, structure)
        for index, (_, code) in enumerate(answers):
            population.add([Candidate(code=code, thought="", operator="m1", generation=1, fitness=float(rng.normal()))])
            population.end_generation(index + 1)

    def embeddings() -> float:
        codes = [code for _, code in variants(seed, args.candidates, next(rounds))]
        return timed(lambda: [nearest(embedder.embed([code])[0], members) for code in codes], len(codes))

    with Evaluator(task, "search") as evaluator:
        evaluator.evaluate(seed)  # the fork server starts outside the timed region

        def evaluations() -> float:
            codes = [code for _, code in variants(seed, args.candidates, next(rounds))]
            return timed(lambda: evaluator.evaluate_many(codes), len(codes))

        samples = alternate(
            {
                "diff": lambda: timed(diffs, len(answers)),
                "archive": lambda: timed(archives, len(answers)),
                "embed": embeddings,
                "evaluate": evaluations,
            },
            args.rounds,
        )
    print(f"cpu  {cpu_name()}, {os.cpu_count()} cores; task {args.task}")
    for side, seconds in samples.items():
        print(f"{side:<10} {1e3 * float(np.median(seconds)):10.3f} ms per candidate")
    for side in ("diff", "archive", "embed"):
        for name, value in ratio_summary(f"{side}_over_evaluate", samples[side], samples["evaluate"]).items():
            print(f"{name:<28} {value:.5f}")


if __name__ == "__main__":
    main()
