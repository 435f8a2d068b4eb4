"""Write experiments/RESULTS.md from experiments/evidence/results.json: every figure in it is computed
here from the recorded outcomes, never typed.

    python experiments/evidence/summary.py            # rewrite experiments/RESULTS.md
    python experiments/evidence/summary.py --check    # exit 1 if the committed page is stale
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bpp_pairs import TASK as BPP_TASK
from bpp_pairs import Setting
from evidence_file import RESULTS

from coevo.candidate import Candidate
from coevo.stats import (
    WilcoxonResult,
    compare_paired,
    holm,
    poisson_binomial_p,
    smallest_exact_p,
    wilcoxon_signed_rank,
    wilson_interval,
)
from tasks import get_task

PAGE = RESULTS.parent.parent / "RESULTS.md"
ARCHIVE = RESULTS.parent / "bpp_runs.tar.xz"
"""The archived run stores of the bpp_online grid (`bpp_pairs.py`), as `tar -cJf` packed its --out."""
ARCHIVE_V2 = RESULTS.parent / "bpp_v2_runs.tar.xz"
"""The same for the second grid (PROTOCOL.md section 3), finished and unfinished runs alike."""


@dataclass(frozen=True)
class GridPage:
    """How the page presents one bpp_online grid of the evidence file."""

    title: str
    archive: Path
    first: bool
    """The first grid, run before mirrored pairs: its coevo runs get the note on their credit split."""


GRID_PAGES = {
    "bpp_online": GridPage("## Co-evolution against prompt-only on bpp_online", ARCHIVE, first=True),
    "bpp_online_v2": GridPage(
        "## Co-evolution against prompt-only on bpp_online, second grid (pre-registered)", ARCHIVE_V2, first=False
    ),
}
AGENT_MODEL = "smollm2-135m"
"""The model `experiments/bench/agents.py --speedup` times."""
PAIRED_RUNS = {
    "gridnav": ("ES on gridnav: held-out success of SmolLM2-135M", "gridnav.png"),
    "gridnav_greedy": ("ES on gridnav with greedy decoding", "gridnav_greedy.png"),
    "gridnav_shared": ("ES on gridnav with shared sampling streams and mirrored pairs", "gridnav_shared.png"),
    "grpo": ("GRPO at the same episodes", "grpo.png"),
}
"""The evidence keys of trained agent runs measured on held-out episodes: section title and plot."""
NOT_ARCHIVED = (
    "Its run store is not archived in the repo, so these figures are as recorded, not re-scorable"
    " (rerunning the command trains afresh)."
)

HEADER = """# What coevo's evolution measurably changes

Each claim with the command that reproduces it, its interval and its p, including the ones that do not
hold. The page is generated from [evidence/results.json](evidence/results.json) by
`python experiments/evidence/summary.py`; the scripts that measure write that file. Other measured
results: [bench](bench/RESULTS.md) (speed), [agents](agents/RESULTS.md), [skills](skills/RESULTS.md),
[peers](peers/FINDINGS.md).

Tests that read the same held-out episodes (or the same baseline runs) are Holm-corrected together, and
a change is called significant only where its corrected p is below 0.05. Each section says whether the
run stores behind its figures are archived in the repo, and so can be re-scored, or not.
"""

BPP_GRID_POOL = 3
"""`settings.prompt_pool` of the bpp_online grid's coevo runs: the default when they were made."""


def rate(successes: int, n: int) -> str:
    low, high = wilson_interval(successes, n)
    return f"{successes}/{n} ({100 * successes / n:.1f}%, 95% CI {100 * low:.1f}-{100 * high:.1f}%)"


@dataclass(frozen=True)
class Corrected:
    """A test's p and its Holm-adjusted p among the `family` tests that share its data."""

    raw: float
    adjusted: float
    family: int

    def short(self) -> str:
        return f"p = {self.raw:.3g}, Holm {self.adjusted:.3g}"


def significant(raw: float, corrected: Corrected | None) -> bool:
    """Below 0.05, judged on the corrected p where the test shares its data with others."""
    return (corrected.adjusted if corrected else raw) < 0.05


def success_test(record: dict[str, Any]) -> WilcoxonResult:
    """Base against trained weights, paired by episode (on 0/1 outcomes: the exact McNemar test)."""
    return wilcoxon_signed_rank([a - b for a, b in zip(record["after"], record["base"], strict=True)])


def walker_p(record: dict[str, Any], sampled: dict[str, Any] | None) -> float | None:
    """The base model's sampled successes (`sampled`, a gridnav run's record) against a random walker's
    success rate on each of the same episodes (`record`, the move-choice record); None if they differ."""
    if not sampled or sampled["episode_seeds"] != record["episode_seeds"]:
        return None
    return poisson_binomial_p(sum(sampled["base"]), record["random_walk_success"])


def move_choice_tests(record: dict[str, Any]) -> dict[str, tuple[float, WilcoxonResult]]:
    """The closing-move probability of base and trained weights against chance, and of each run's
    against the base's: each test's shift of the mean and its signed-rank test, by name."""
    tests = {"move choice: base vs chance": paired_shift(record["base"], record["chance"])}
    for name, figures in record["runs"].items():
        tests[f"move choice: {name} vs chance"] = paired_shift(figures["after"], record["chance"])
        tests[f"move choice: {name} vs base"] = paired_shift(figures["after"], record["base"])
    return tests


def move_choice_es_test(record: dict[str, Any]) -> tuple[float, WilcoxonResult]:
    """The held-out probability at the last generation against the first, paired by episode."""
    return paired_shift(record["curve"][-1]["heldout"], record["curve"][0]["heldout"])


def episode_tests(evidence: dict[str, Any]) -> dict[str, tuple[tuple[int, ...], float]]:
    """Every test the page makes on held-out agent episodes, by name: the episodes it reads and its p."""
    tests = {
        key: (tuple(evidence[key]["episode_seeds"]), success_test(evidence[key]).p_value)
        for key in PAIRED_RUNS
        if evidence.get(key)
    }
    if choice := evidence.get("gridnav_move_choice"):
        seeds = tuple(choice["episode_seeds"])
        if (p := walker_p(choice, evidence.get("gridnav"))) is not None:
            tests["walker"] = (seeds, p)
        tests |= {name: (seeds, test.p_value) for name, (_, test) in move_choice_tests(choice).items()}
    if trained := evidence.get("gridnav_move_choice_es"):
        tests["move choice ES"] = (tuple(trained["episode_seeds"]), move_choice_es_test(trained)[1].p_value)
    return tests


def corrected_by_episodes(tests: dict[str, tuple[tuple[int, ...], float]]) -> dict[str, Corrected]:
    """Holm's correction within each family of tests that read the same episodes."""
    families: dict[tuple[int, ...], dict[str, float]] = {}
    for name, (seeds, p) in tests.items():
        families.setdefault(seeds, {})[name] = p
    return {
        name: Corrected(family[name], adjusted, len(family))
        for family in families.values()
        for name, adjusted in holm(family).items()
    }


def speed_section(speedup: dict[str, Any] | None, decode: dict[str, Any] | None = None) -> str:
    """The agent ES generation against the baseline revision, split into shorter replies and faster
    tokens where that was recorded, and what the lean decode loop alone gives (`decode`)."""
    if not speedup:
        return "## Speed of the agent inner loop\n\nNot measured yet.\n"
    bf16 = "has" if speedup["cpu_has_native_bf16"] else "has no"
    lines = [
        "## Speed of the agent inner loop",
        "",
        f"An ES generation of the agent workload runs {speedup['agent_generation']:.2f}x as fast as at the"
        f" baseline revision (fp32 forced: {speedup['agent_generation_fp32']:.2f}x), median of alternating rounds,"
        f" on a CPU that {bf16} native bf16. The baseline precedes three changes: the compute dtype chosen from"
        " the CPU, the stop at the end of the one-line action, and the lean decode loop. Command:"
        " `python experiments/bench/agents.py --speedup`; details in [bench/RESULTS.md](bench/RESULTS.md). A"
        " timing keeps no store to re-score: the command measures it again.",
        "",
    ]
    for figure, name in (("agent_generation", "dtype chosen from the CPU"), ("agent_generation_fp32", "fp32 forced")):
        lines.append(f"- {name}: " + split_sentence(speedup, figure))
    if decode and AGENT_MODEL in decode:
        lean = decode[AGENT_MODEL]
        lines += [
            "",
            f"The lean decode loop alone, on the same tokens in the same dtype ({lean['dtype']}), runs"
            f" {lean['lean_over_generate_batch1']:.2f}x as fast as transformers' `generate` on one stream and"
            f" {lean['lean_over_generate_batch8']:.2f}x on a batch of 8 ({AGENT_MODEL}, Decode speed below): that,"
            " not the ratios above, is what the loop is credited with.",
        ]
    return "\n".join(lines) + "\n"


def split_sentence(speedup: dict[str, Any], figure: str) -> str:
    """One ratio as shorter replies times faster tokens, and whether both sides made the same moves."""
    if f"{figure}_reply_tokens" not in speedup:
        return (
            f"{speedup[figure]:.2f}x; its split into shorter replies and faster tokens, and the check that both"
            " sides make the same moves, are pending: not recorded when it was measured; the command now records"
            " them (bench/RESULTS.md estimates the split from the ranges it printed)."
        )
    same, compared = speedup[f"{figure}_same_moves"]
    differing = speedup.get(f"{figure}_differing_moves", [])
    where = f" (they differ in {', '.join(differing)})" if differing else ""
    return (
        f"{speedup[figure]:.2f}x: the baseline decoded {speedup[f'{figure}_reply_tokens']:.2f}x as many tokens"
        f" (shorter replies) and this tree {speedup[f'{figure}_per_token']:.2f}x as many tokens a second (medians"
        f" of the per-round ratios); both sides made the same moves in {same} of {compared} episodes{where}."
    )


def decode_section(decode: dict[str, Any] | None) -> str:
    """Tokens per second of the in-process backend, per model, one stream and a batch of 8."""
    if not decode:
        return ""
    rows = [
        "| model | dtype | threads | one stream tok/s (per CPU s) | batch of 8 tok/s (per CPU s) | lean / generate, one stream |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    anchors = []
    for model, d in decode.items():
        rows.append(
            f"| {model} | {d['dtype']} | {d['torch_threads']} | {d['lean_batch1_tokens_per_s']:.1f}"
            f" ({d['lean_batch1_tokens_per_cpu_s']:.1f}) | {d['lean_batch8_tokens_per_s']:.1f}"
            f" ({d['lean_batch8_tokens_per_cpu_s']:.1f}) | {d['lean_over_generate_batch1']:.2f} |"
        )
        if "anchor_tokens_per_s" in d:
            anchors.append(
                f"{model}: the lean loop's one stream is {d['lean_batch1_over_anchor']:.2f} of the"
                f" {d['anchor_tokens_per_s']:g} tokens/s that issue 32 quotes for llama.cpp on the same model's"
                " GGUF (measured on another machine, quiet, so the ratio is indicative only)."
            )
    cpus = sorted({d["cpu"] for d in decode.values()})
    return (
        "\n### Decode speed\n\n"
        f"`python experiments/bench/decode.py --model M --record` on {', '.join(cpus)} (32 new tokens a request,"
        " alternating rounds, the best round; per CPU s divides by this process's CPU time, which moves"
        " less with the machine's other load):\n\n" + "\n".join(rows) + "\n" + "".join(f"\n{a}\n" for a in anchors)
    )


def success_verdict(rose: bool, raw: float, corrected: Corrected | None) -> str:
    """Whether the claim that training raised success holds, judged on the corrected p where the test
    shares its episodes with others; a change significant only before the correction is said as such."""
    if significant(raw, corrected):
        return "holds at p < 0.05" if rose else "does not hold: success fell, at p < 0.05"
    if raw < 0.05:
        return f"does not hold: success {'rose' if rose else 'fell'} at p < 0.05 before the correction, not after it"
    return "does not hold at p < 0.05"


def paired_episodes(title: str, record: dict[str, Any] | None, plot: str, corrected: Corrected | None = None) -> str:
    """Base against trained weights on the same held-out episodes: rates, the discordant pairs, the
    paired test (exact where the pairs are few), corrected with the tests that share the episodes, and
    the curve."""
    if not record:
        return f"## {title}\n\nNot run yet.\n"
    base, after = record["base"], record["after"]
    n = len(after)
    test = success_test(record)
    differences = [a - b for a, b in zip(after, base, strict=True)]
    gained, lost = differences.count(1), differences.count(-1)
    verdict = success_verdict(sum(after) > sum(base), test.p_value, corrected)
    correction = (
        f"; Holm-corrected over the {corrected.family} tests on these episodes, p = {corrected.adjusted:.3g}"
        if corrected
        else ""
    )
    lines = [
        f"## {title}",
        "",
        f"`{record['command']}` ({record['updates']}), measured on the first {n} {record['split']} episodes:",
        "",
        "| weights | success |",
        "| --- | --- |",
        f"| base | {rate(sum(base), n)} |",
        f"| after training | {rate(sum(after), n)} |",
        "",
        f"Paired by episode: {gained} episodes solved only after training, {lost} only before; two-sided"
        f" signed-rank p = {test.p_value:.3g} ({test.method}, n = {test.n}){correction}. The claim that training"
        f" raised held-out success {verdict}.",
    ]
    curve = record.get("curve", [])
    if len(curve) > 2:
        points = ", ".join(f"{p['successes']}/{p['episodes']} at generation {p['generation']}" for p in curve)
        lines += ["", f"Held-out success along the run: {points}. Learning curve: [{plot}](evidence/{plot})."]
    lines += ["", NOT_ARCHIVED]
    return "\n".join(lines) + "\n"


def tune_section(trials: list[dict[str, Any]] | None) -> str:
    if not trials:
        return ""
    rows = ["| trial | settings | val success before -> after | outcome |", "| --- | --- | --- | --- |"]
    for trial in trials:
        settings = ", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in trial["params"].items())
        measured = f"{trial['before']} -> {trial['after']}" if trial.get("after") else "-"
        rows.append(f"| {trial['number']} | {settings} | {measured} | {trial['state']} |")
    return (
        "### The settings search\n\n"
        f"`{trials[0]['command']}`; each trial is worth its val success after training. The study's store is not"
        " archived in the repo: these figures are as recorded, not re-scorable.\n\n" + "\n".join(rows) + "\n"
    )


def paired_shift(values: list[float], reference: list[float]) -> tuple[float, WilcoxonResult]:
    """How far the mean of `values` lies from that of `reference`, and the signed-rank test of the
    per-episode differences (the two lists pair by position)."""
    differences = [v - r for v, r in zip(values, reference, strict=True)]
    return sum(differences) / len(differences), wilcoxon_signed_rank(differences)


def p_text(raw: float, corrected: Corrected | None) -> str:
    """A p as the page prints it: with its Holm-corrected value where the test shares its episodes."""
    return corrected.short() if corrected else f"p = {raw:.3g}"


def move_choice_section(
    record: dict[str, Any] | None,
    sampled: dict[str, Any] | None = None,
    corrected: Mapping[str, Corrected] | None = None,
) -> str:
    """The probability of a closing first move under chance, base and trained weights, paired by episode,
    and a random walker's success beside the base model's (`sampled`: the gridnav run's record), each p
    beside its Holm-corrected value (`corrected`, by test name) where the test shares its episodes."""
    if not record:
        return ""
    corrected = corrected or {}
    chance, base = record["chance"], record["base"]
    n = len(base)
    tests = move_choice_tests(record)

    def cell(name: str) -> str:
        shift, test = tests[name]
        return f"{shift:+.4f} ({p_text(test.p_value, corrected.get(name))})"

    rows = [
        "| weights | mean probability of a closing move | against chance | against base |",
        "| --- | --- | --- | --- |",
        f"| chance (a move drawn at random) | {sum(chance) / n:.3f} | | |",
        f"| base | {sum(base) / n:.3f} | {cell('move choice: base vs chance')} | |",
    ]
    for name, figures in record["runs"].items():
        rows.append(
            f"| {name} ({figures['updates']} updates) | {sum(figures['after']) / n:.3f} |"
            f" {cell(f'move choice: {name} vs chance')} | {cell(f'move choice: {name} vs base')} |"
        )
    base_shift, base_test = tests["move choice: base vs chance"]
    base_corrected = corrected.get("move choice: base vs chance")
    if significant(base_test.p_value, base_corrected):
        skill = f"The base weights choose {'better' if base_shift > 0 else 'worse'} than chance, at p < 0.05"
    else:
        skill = (
            "The base weights' difference from chance is not significant at p < 0.05: these figures show no"
            " reading of the coordinates for ES to sharpen, only one to build"
        )
    moved = max((abs(sum(f["after"]) - sum(base)) / n for f in record["runs"].values()), default=0.0)
    rows += ["", f"{skill}. The runs moved the mean by at most {moved:.4f}."]
    rows.append(walker_sentence(record, sampled, corrected))
    holm_note = (
        f" Holm: the p corrected over the {base_corrected.family} tests this page makes on these episodes (the held-out"
        " success of each run above, the walker and this section)."
        if base_corrected
        else ""
    )
    return (
        "## Does the model prefer the move that closes in?\n\n"
        "`python experiments/evidence/move_choice.py RUN...` (each run named by its config in"
        f" experiments/evidence): at the first turn of the first {n} {record['split']} episodes of"
        f' {record["env"]} H={record["horizon"]}, the policy\'s prompt followed by "move", and the probability'
        f" {record['model']} gives each direction next, renormalised over the four (no sampling). Differences"
        f" of the means, with the two-sided signed-rank p paired by episode.{holm_note} It reads the runs'"
        " stores, which are not archived: not re-scorable from the repo.\n\n" + "\n".join(rows) + "\n"
    )


def walker_sentence(record: dict[str, Any], sampled: dict[str, Any] | None, corrected: Mapping[str, Corrected]) -> str:
    """A random walker's expected successes, and the base model's against them where it played the same
    episodes (exact Poisson-binomial test on the walker's per-episode rates)."""
    n = len(record["random_walk_success"])
    walker = sum(record["random_walk_success"])
    sentence = (
        f"A walker that picks one of the four moves at random every turn (a valid move, no reading) solves"
        f" {walker:.1f} of these {n} episodes on average (its rate on each episode from random walks)"
    )
    p = walker_p(record, sampled)
    if p is None:
        return sentence + "."
    solved = sum(sampled["base"])
    than = "fewer" if solved < walker else "more" if solved > walker else "as many"
    test = corrected.get("walker")
    verdict = f"significantly {than}" if significant(p, test) else f"{than}, not significantly at p < 0.05"
    return (
        f"{sentence}; the base model, sampling its replies, solved {solved} (first section): {verdict}"
        f" (exact two-sided test against the walker's rate on each episode, {p_text(p, test)})."
    )


def move_choice_es_section(record: dict[str, Any] | None, corrected: Corrected | None = None) -> str:
    """ES trained on the closing-move probability itself: its held-out curve, last against first."""
    if not record:
        return ""
    curve = record["curve"]
    n = len(curve[0]["heldout"])
    shift, test = move_choice_es_test(record)
    points = ", ".join(f"{sum(p['heldout']) / n:.3f} at generation {p['generation']}" for p in curve)
    settings = record["settings"]
    return (
        "\nES trained on this probability itself (no sampling anywhere), each member worth its mean over"
        f" {settings['turns']} fresh search episodes a generation, {settings['population']} mirrored low-rank"
        f" members (rank {settings['rank']}), sigma {settings['sigma']:g}, alpha {settings['alpha']:g}:"
        f" `{record['command']}`. Held-out mean on the same {n} {record['split']} episodes: {points};"
        f" last against first, paired by episode, {shift:+.4f}"
        f" (two-sided signed-rank {p_text(test.p_value, corrected)}). The script keeps no run store; the command"
        " measures it afresh.\n"
    )


def archived_runs(archive: Path = ARCHIVE) -> set[tuple[str, ...]]:
    """The run directories whose stores `archive` holds, as path parts (the grid's --out name first)."""
    if not archive.exists():
        return set()
    with tarfile.open(archive) as packed:
        return {Path(name).parent.parts for name in packed.getnames() if Path(name).name == "run.sqlite"}


def is_archived(run_dir: Path, archived: set[tuple[str, ...]]) -> bool:
    """Whether `run_dir` (wherever it was measured) ends with one of the archived run directories."""
    return any(run_dir.parts[-len(parts) :] == parts for parts in archived)


def grid_run_dirs(record: dict[str, Any]) -> dict[tuple[str, int], Path]:
    """Each (arm, seed) of the bpp grid's record and its run directory under the grid's --out name."""
    budget = int(re.search(r"--budgets (\d+)", record["command"])[1])
    out = Path(Path(re.search(r"--out (\S+)", record["command"])[1]).name)
    return {
        (arm, seed): Setting(task=BPP_TASK, budget=budget, method=arm, seed=seed).run_dir(out)
        for arm in record["runs"]
        for seed in record["seeds"]
    }


def seed_key(task: str) -> str:
    """The key of the task's seed heuristic: a run whose answer has it answered the seed unchanged."""
    return Candidate(code=get_task(task).seed_code(), thought="", operator="library", generation=0).key


def archive_note(record: dict[str, Any], archived: set[tuple[str, ...]], archive: Path = ARCHIVE) -> str:
    """Which of the grid's runs can be re-scored from the archive, and which keep recorded figures only."""
    runs = grid_run_dirs(record)
    kept = [f"{arm} s{seed}" for (arm, seed), run_dir in runs.items() if is_archived(run_dir, archived)]
    lost = [f"{arm} s{seed}" for (arm, seed), run_dir in runs.items() if not is_archived(run_dir, archived)]
    note = f"Run stores archived in `experiments/evidence/{archive.name}`"
    note += f" (`tar -xJf` it into `runs/` to re-score them): {', '.join(kept) or 'none'}."
    if lost:
        note += (
            f" Not archived (finished on earlier machines whose stores are gone): {', '.join(lost)}; their"
            " figures are as recorded there, not re-scorable from the repo."
        )
    return note


def bpp_section(
    record: dict[str, Any] | None, archived: set[tuple[str, ...]] | None = None, key: str = "bpp_online"
) -> str:
    """Each ES arm against eoh of the same seed, on the gap of the run's answer (lower is better); the
    comparisons share eoh's runs, so their p are also given Holm-corrected together."""
    page = GRID_PAGES[key]
    if not record or not record["seeds"]:
        pending = f" ({len(record['pending'])} seeds under way)" if record else ""
        protocol = "" if page.first else " Its protocol: [PROTOCOL.md](evidence/PROTOCOL.md), section 3."
        return f"{page.title}\n\nNot run yet{pending}.{protocol}\n"
    out = re.search(r"--out (\S+)", record["command"])[1]
    key_option = "" if key == "bpp_online" else f" --key {key}"
    lines = [
        page.title,
        "",
        f"`{record['command']}`, then `python experiments/evidence/bpp_pairs.py {out}{key_option}`:"
        f" all three runs finished on seeds {', '.join(map(str, record['seeds']))} (n = {len(record['seeds'])}),"
        f" at least {record['updates']} ES updates per ES run, of which"
        f" {min(record['directed_updates'])} to {max(record['directed_updates'])} had a direction (members whose"
        " rewards all tie make a zero step). Each run's answer is its finalists' best on val;"
        " a win is a lower gap than eoh's on the same seed.",
        "",
    ]
    if (seeds := len(record["seeds"])) < 6:
        lines += [
            f"With {seeds} paired seeds the exact test cannot give p below {smallest_exact_p(seeds):.3g} (every pair one way),"
            " so no result here can be significant at p < 0.05; the wins, ties and losses carry the finding.",
            "",
        ]
    paired = {
        f"{name}, {split} gap": pairs
        for split, key in (("val", "pairs"), ("test", "test_pairs"))
        for name, pairs in record[key].items()
    }
    comparisons = {name: compare_paired([b - a for a, b in pairs]) for name, pairs in paired.items() if pairs}
    adjusted = holm({name: c.test.p_value for name, c in comparisons.items()})
    for name in paired:
        verdict = (
            f"{comparisons[name].sentence()}; Holm-corrected over the {len(comparisons)} comparisons, which share"
            f" eoh's runs: p = {adjusted[name]:.3g}"
            if name in comparisons
            else "no seed to pair"
        )
        lines.append(f"- {name}: {verdict}")
    for run, reason in record["invalid_on_test"].items():
        lines.append(f"- {run} is left out of the test pairs, invalid on test: {reason}")
    lines += ["", bpp_runs_table(record, seed_key(BPP_TASK)), "", archive_note(record, archived or set(), page.archive)]
    if page.first and "coevo" in record["runs"]:
        lines += ["", coevo_credit_note(record)]
    if record["pending"]:
        lines += ["", f"Seeds still running: {record['pending']}."]
    return "\n".join(lines) + "\n"


def operator_section(record: dict[str, Any] | None) -> str:
    """The operator's held-out result (PROTOCOL.md section 3), whichever way it came out."""
    title = "### The operator on tasks ES never saw (pre-registered)"
    if not record:
        return (
            f"\n{title}\n\nNot measured yet: it needs the second grid's eoh+es run of seed 0"
            " (`python experiments/evidence/operator_heldout.py RUN_DIR --tasks tsp_construct kp_construct"
            " --per-task 100 --in-task`).\n"
        )
    lines = [f"\n{title}\n"]
    for name, figures in record.items():
        tests = figures["held_out"]["tests"]
        tasks = ", ".join(figures["held_out"]["tasks"])
        lines.append(
            f"{name} (trained on {figures['trained_on']}, {figures['updates']} updates of which"
            f" {figures['directed_updates']} directed), answers on {tasks} under the base and the trained weights,"
            " the same prompts and streams (exact McNemar, Holm over the two endpoints, alpha 0.05):"
        )
        for endpoint, result in tests.items():
            verdict = "significant" if result["p_holm"] < 0.05 else "not significant"
            lines.append(
                f"- {endpoint}: {result['base']}/{result['n']} -> {result['trained']}/{result['n']} (gained"
                f" {result['gained']}, lost {result['lost']}; p = {result['p']:.3g}, Holm {result['p_holm']:.3g},"
                f" {verdict})"
            )
    return "\n".join(lines) + "\n"


def coevo_credit_note(record: dict[str, Any]) -> str:
    """Why coevo's weights move less often than eoh+es's: its credit split leaves a lone member no signal."""
    directed = sorted(record["runs"]["coevo"][str(seed)]["directed_updates"] for seed in record["seeds"])
    population = re.search(r"population_size=(\d+)", record["command"])
    setting = f"population_size {population[1]} over" if population else "a population over"
    return (
        "These runs predate mirrored pairs: coevo told ES each member's reward less the mean of the members that"
        " shared its prompt variant, so a member alone on its variant had a residual of zero whatever it scored;"
        f" with {setting} the then default pool of {BPP_GRID_POOL} variants (`settings.prompt_pool`, assigned in"
        " turn), only the members that"
        " shared a variant could give a direction, and only when their rewards differed. Directed updates of the"
        f" coevo runs, sorted: {', '.join(map(str, directed))} (the table gives each run's out of its updates)."
        " Where a run made none, the split is not the whole story: in the archived stores of coevo seeds 2 and 3"
        " every ES child either scored exactly as its best parent or was invalid while its parent was the"
        " population's worst, and the improvement reward gives both 0, so no split could find a direction."
    )


def bpp_runs_table(record: dict[str, Any], seed: str) -> str:
    """Per seed and arm: the answer's val and test gap, marked where it is the seed heuristic unchanged
    (its key is `seed`), the valid share of what the model wrote, and for the ES arms the updates that
    had a direction out of all."""
    arms = list(record["runs"])
    rows = ["| seed | " + " | ".join(arms) + " |", "| --- |" + " --- |" * len(arms)]
    for number in record["seeds"]:
        cells = []
        for arm in arms:
            run = record["runs"][arm][str(number)]
            test = "invalid" if run["test"] is None else f"{run['test']:.2f}"
            cell = f"{run['val']:.2f} / {test}{' (seed)' if run['key'] == seed else ''}, valid {run['valid_rate']:.0%}"
            if run["updates"]:
                cell += f", {run['directed_updates']}/{run['updates']} directed"
            cells.append(cell)
        rows.append(f"| {number} | " + " | ".join(cells) + " |")
    return (
        "Gap % on val / test of each run's answer; (seed): the answer is the task's seed heuristic unchanged"
        " (its key, the hash of its code, is the seed's), so no finalist the run wrote beat the seed on val:\n\n"
        + "\n".join(rows)
    )


def mean_gap(side: dict[str, Any]) -> str:
    """A side's mean search gap of its valid answers, or "-" when none was valid."""
    return "-" if side["mean_gap_pct"] is None else f"{side['mean_gap_pct']:.2f}"


def against_seed(side: dict[str, Any], seed_gap: float) -> str:
    """How many of a side's valid answers score better than, as, and worse than the seed heuristic."""
    gaps = [s["gap_pct"] for s in side["samples"] if s["valid"] and s["gap_pct"] is not None]
    return "/".join(
        str(n) for n in (sum(g < seed_gap for g in gaps), gaps.count(seed_gap), sum(g > seed_gap for g in gaps))
    )


def valid_change_tests(entries: dict[str, Any]) -> dict[str, Corrected]:
    """Per run, the exact paired test of its valid answers against the base side's (the same sampling
    seeds: on 0/1 outcomes the exact McNemar test), Holm-corrected among the runs compared with the same
    base answers."""
    tests: dict[str, Corrected] = {}
    for names in base_groups(entries):
        raw = {}
        for name in names:
            before, after = entries[name]["before"]["samples"], entries[name]["after"]["samples"]
            raw[name] = wilcoxon_signed_rank(
                [int(a["valid"]) - int(b["valid"]) for b, a in zip(before, after, strict=True)]
            ).p_value
        tests |= {name: Corrected(raw[name], adjusted, len(raw)) for name, adjusted in holm(raw).items()}
    return tests


def weights_effect_section(entries: dict[str, Any] | None, archived: set[tuple[str, ...]] | None = None) -> str:
    """Same prompts and sampling seeds under base and trained weights (`weights_effect.py`)."""
    if not entries:
        return ""
    rows = [
        "| run | updates (directed) | valid code (paired p, Holm-corrected) | better / as / worse than the seed"
        " | mean search gap % | answers scored differently | run store |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    valid_tests = valid_change_tests(entries)
    for name, figures in entries.items():
        before, after = figures["before"], figures["after"]
        gaps = " -> ".join(mean_gap(side) for side in (before, after))
        seed = " -> ".join(against_seed(side, figures["seed_gap_pct"]) for side in (before, after))
        changed = sum(b != a for b, a in zip(before["samples"], after["samples"], strict=True))
        stored = "run" in figures and is_archived(Path(figures["run"]), archived or set())
        store = "archived" if stored else "not archived"
        rows.append(
            f"| {name} | {figures['updates']} ({figures['directed_updates']}) |"
            f" {before['valid_rate']:.0%} -> {after['valid_rate']:.0%} ({valid_tests[name].short()}) | {seed} |"
            f" {gaps} |"
            f" {changed} of {figures['samples']} | {store} |"
        )
    samples = next(iter(entries.values()))["samples"]
    moved = [name for name, test in valid_tests.items() if significant(test.raw, test)]
    verdict = (
        f"the change is significant at p < 0.05 after the correction for {', '.join(moved)} only"
        if moved
        else "no run's change is significant at p < 0.05 after the correction"
    )
    return (
        "\n### What the weights changed\n\n"
        f"`python experiments/evidence/weights_effect.py RUN...`: {samples} answers to the m1 and m2 prompts on"
        " the seed heuristic, the same sampling seeds under the base weights and under each run's replayed"
        " weights. An answer that scores as the seed is the seed rewritten; the mean gap is the valid answers'"
        " mean, which one poor answer moves. The valid share's p is the exact paired test (McNemar) of each"
        " run's answers against the base answers of its call, Holm-corrected among the runs that share those"
        f" base answers: {verdict}.{base_sides_note(entries)}"
        " A run whose store is not archived can be measured again only where its store is.\n\n" + "\n".join(rows) + "\n"
    )


def base_groups(entries: dict[str, Any]) -> list[list[str]]:
    """The runs grouped by the base answers they were compared with (one group per measuring call)."""
    bases: dict[str, list[str]] = {}
    for name, figures in entries.items():
        bases.setdefault(json.dumps(figures["before"], sort_keys=True), []).append(name)
    return list(bases.values())


def base_sides_note(entries: dict[str, Any]) -> str:
    """Where runs were measured in calls whose base answers differ, which runs share which base."""
    bases = base_groups(entries)
    if len(bases) < 2:
        return ""
    groups = "; ".join(f"{', '.join(names)} ({entries[names[0]]['before']['valid_rate']:.0%} valid)" for names in bases)
    return (
        f" The runs were measured in {len(bases)} calls whose base answers differ: {groups}. A call on another"
        " machine can draw other base texts from the same fp32 weights (its CPU's float kernels round"
        " differently), so each run is compared with the base side of its own call."
    )


def answer_format_section(record: dict[str, Any] | None) -> str:
    """The operators' answer format before and after its change, on the same prompts and streams."""
    if not record:
        return ""
    former, current = record["former"], record["current"]
    n = record["samples"]
    differences = [
        int(c["valid"]) - int(f["valid"]) for f, c in zip(former["samples"], current["samples"], strict=True)
    ]
    test = wilcoxon_signed_rank(differences)
    rows = [
        "| answer format | valid code | of which score as the seed | mean search gap % of the valid |",
        "| --- | --- | --- | --- |",
    ]
    for name, side in (("former: idea in braces first", former), ("current: idea in the docstring", current)):
        gap = mean_gap(side)
        as_seed = sum(s["valid"] and s["gap_pct"] == record["seed_gap_pct"] for s in side["samples"])
        rows.append(f"| {name} | {rate(sum(s['valid'] for s in side['samples']), n)} | {as_seed} | {gap} |")
    return (
        "\n### The operators' answer format\n\n"
        f"`{record['command']}`: {n} answers of {record['model']} to m1 and m2 on the {record['task']} seed"
        f" heuristic (search gap {record['seed_gap_pct']:.2f}%), the same prompts and sampling streams under"
        " each format. No run store: the command measures it afresh from the shipped model.\n\n"
        + "\n".join(rows)
        + "\n\n"
        f"Paired by answer: {differences.count(1)} usable only under the current format,"
        f" {differences.count(-1)} only under the former; two-sided signed-rank p = {test.p_value:.3g}"
        f" ({test.method}, n = {test.n}).\n"
    )


LEARNABILITY_COMMANDS = """```console
$ OMP_NUM_THREADS=1 nice -n 10 python experiments/evidence/learnability.py train --model smollm2-135m \\
    --task multiply_mixed --gens 50 --pop 16 --k 16 --sigma 1e-3 --alpha 2e-3 --run-dir runs/learn/es
$ ... the same with --shuffle --run-dir runs/learn/control
$ python experiments/evidence/learnability.py heldout --model smollm2-135m --task multiply_mixed \\
    --trained runs/learn/es --control runs/learn/control --results experiments/evidence/results.json
```"""


def learnability_section(record: dict[str, Any]) -> str:
    """The pre-registered learnability result (experiments/evidence/PROTOCOL.md), whichever way it came out."""
    sides = record["sides"]
    lines = [
        "## Does ES sharpen a skill the base model has? (pre-registered)",
        "",
        f"{record['model']} on `{record['task']}`, as [PROTOCOL.md](evidence/PROTOCOL.md) fixed before the runs:"
        f" {len(sides['base']['argmax'])} held-out questions never asked in training, scored by the argmax of"
        " the options' teacher-forced log-probabilities (primary), and the first"
        f" {len(sides['base']['sampled'])} answered by sampling (secondary).",
        "",
        "| weights | argmax accuracy | sampled accuracy | mean log-prob of the right option |",
        "| --- | --- | --- | --- |",
    ]
    for side, figures in sides.items():
        lines.append(
            f"| {side} | {rate(sum(figures['argmax']), len(figures['argmax']))}"
            f" | {rate(sum(figures['sampled']), len(figures['sampled']))} | {figures['logp']:.4f} |"
        )
    lines += [
        "",
        "| test (paired per question, exact McNemar) | gained | lost | p | Holm p (family) |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, test in record["tests"].items():
        lines.append(
            f"| {name} | {test['gained']} | {test['lost']} | {test['p_two_sided']:.3g}"
            f" | {test['p_holm']:.3g} ({test['family']}) |"
        )
    verdict = (
        "met: the trained weights answer more held-out questions right than the base and the control, both at Holm p < 0.01"
        if record["primary_endpoint_met"]
        else "not met: the pre-registered test did not show the trained weights ahead of both the base and the"
        " control at Holm p < 0.01, so no gain is claimed"
    )
    base_sampled = sides["base"]["sampled"]
    floor = (
        f" The sampled endpoint sits near its floor ({sum(base_sampled)} of {len(base_sampled)} right for the"
        " base within its 8 new tokens), so it can show little either way."
        if sum(base_sampled) < 0.05 * len(base_sampled)
        else ""
    )
    lines += [
        "",
        f"Primary endpoint {verdict}.{floor}",
        "",
        "The two runs' settings, per-generation rewards and ES histories are archived in"
        " [evidence/learnability/stores](evidence/learnability/stores): `heldout` replays each history onto"
        " the base model, so every figure here is re-scorable from the repo.",
        "",
        LEARNABILITY_COMMANDS,
        "",
    ]
    return "\n".join(lines)


def render(
    evidence: dict[str, Any],
    archived: set[tuple[str, ...]] | None = None,
    archived_v2: set[tuple[str, ...]] | None = None,
) -> str:
    """The page; `archived` and `archived_v2` (default: the archives' run directories) decide which runs
    of the two grids are re-scorable."""
    archived = archived_runs() if archived is None else archived
    archived_v2 = archived_runs(ARCHIVE_V2) if archived_v2 is None else archived_v2
    corrected = corrected_by_episodes(episode_tests(evidence))
    agent_runs = [
        paired_episodes(title, evidence.get(key), plot, corrected.get(key))
        for key, (title, plot) in PAIRED_RUNS.items()
    ]
    if evidence.get("gridnav_tune"):
        agent_runs[0] += "\n" + tune_section(evidence["gridnav_tune"])
    return "\n".join(
        [
            HEADER,
            *([learnability_section(evidence["learnability"])] if evidence.get("learnability") else []),
            speed_section(evidence.get("speedup"), evidence.get("decode")) + decode_section(evidence.get("decode")),
            *agent_runs,
            move_choice_section(evidence.get("gridnav_move_choice"), evidence.get("gridnav"), corrected)
            + move_choice_es_section(evidence.get("gridnav_move_choice_es"), corrected.get("move choice ES")),
            bpp_section(evidence.get("bpp_online"), archived)
            + weights_effect_section(evidence.get("ahd_weights_effect"), archived)
            + answer_format_section(evidence.get("answer_format")),
            bpp_section(evidence.get("bpp_online_v2"), archived_v2, key="bpp_online_v2")
            + operator_section(evidence.get("operator_heldout")),
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed page differs")
    args = parser.parse_args(argv)
    page = render(json.loads(RESULTS.read_text(encoding="utf-8")))
    if args.check:
        if PAGE.read_text(encoding="utf-8") != page:
            print(f"{PAGE} is stale: run python experiments/evidence/summary.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(page, encoding="utf-8")
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
