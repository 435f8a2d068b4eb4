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
from typing import Any

from evidence_file import RESULTS

from coevo.stats import WilcoxonResult, compare_paired, smallest_exact_p, wilcoxon_signed_rank, wilson_interval

PAGE = RESULTS.parent.parent / "RESULTS.md"

HEADER = """# What coevo's evolution measurably changes

Each claim with the command that reproduces it, its interval and its p, including the ones that do not
hold. The page is generated from [evidence/results.json](evidence/results.json) by
`python experiments/evidence/summary.py`; the scripts that measure write that file. Other measured
results: [bench](bench/RESULTS.md) (speed), [agents](agents/RESULTS.md), [skills](skills/RESULTS.md),
[peers](peers/FINDINGS.md).
"""

BPP_GRID_POOL = 3
"""`settings.prompt_pool` of the bpp_online grid's coevo runs: the default when they were made."""


def rate(successes: int, n: int) -> str:
    low, high = wilson_interval(successes, n)
    return f"{successes}/{n} ({100 * successes / n:.1f}%, 95% CI {100 * low:.1f}-{100 * high:.1f}%)"


def speed_section(speedup: dict[str, Any] | None) -> str:
    if not speedup:
        return "## Speed of the agent inner loop\n\nNot measured yet.\n"
    bf16 = "has" if speedup["cpu_has_native_bf16"] else "has no"
    return (
        "## Speed of the agent inner loop\n\n"
        f"An ES generation of the agent workload runs {speedup['agent_generation']:.2f}x as fast as before the lean"
        f" decode loop (fp32 forced: {speedup['agent_generation_fp32']:.2f}x), median of alternating rounds, on a"
        f" CPU that {bf16} native bf16. Command: `python experiments/bench/agents.py --speedup`; details in"
        " [bench/RESULTS.md](bench/RESULTS.md).\n"
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


def paired_episodes(title: str, record: dict[str, Any] | None, plot: str) -> str:
    """Base against trained weights on the same held-out episodes: rates, the discordant pairs, the
    paired test (exact where the pairs are few) and the curve."""
    if not record:
        return f"## {title}\n\nNot run yet.\n"
    base, after = record["base"], record["after"]
    n = len(after)
    differences = [a - b for a, b in zip(after, base, strict=True)]
    test = wilcoxon_signed_rank(differences)
    gained, lost = differences.count(1), differences.count(-1)
    significant = test.p_value < 0.05
    if significant and sum(after) > sum(base):
        verdict = "holds at p < 0.05"
    elif significant:
        verdict = "does not hold: success fell, at p < 0.05"
    else:
        verdict = "does not hold at p < 0.05"
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
        f" signed-rank p = {test.p_value:.3g} ({test.method}, n = {test.n}). The claim that training raised"
        f" held-out success {verdict}.",
    ]
    curve = record.get("curve", [])
    if len(curve) > 2:
        points = ", ".join(f"{p['successes']}/{p['episodes']} at generation {p['generation']}" for p in curve)
        lines += ["", f"Held-out success along the run: {points}. Learning curve: [{plot}](evidence/{plot})."]
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
        f"`{trials[0]['command']}`; each trial is worth its val success after training.\n\n" + "\n".join(rows) + "\n"
    )


def paired_shift(values: list[float], reference: list[float]) -> tuple[float, WilcoxonResult]:
    """How far the mean of `values` lies from that of `reference`, and the signed-rank test of the
    per-episode differences (the two lists pair by position)."""
    differences = [v - r for v, r in zip(values, reference, strict=True)]
    return sum(differences) / len(differences), wilcoxon_signed_rank(differences)


def move_choice_section(record: dict[str, Any] | None, sampled: dict[str, Any] | None = None) -> str:
    """The probability of a closing first move under chance, base and trained weights, paired by episode,
    and a random walker's success beside the base model's (`sampled`: the gridnav run's record)."""
    if not record:
        return ""
    chance, base = record["chance"], record["base"]
    n = len(base)

    def against(values: list[float], reference: list[float]) -> str:
        shift, test = paired_shift(values, reference)
        return f"{shift:+.4f} (p = {test.p_value:.3g})"

    base_shift, base_test = paired_shift(base, chance)
    rows = [
        "| weights | mean probability of a closing move | against chance | against base |",
        "| --- | --- | --- | --- |",
        f"| chance (a move drawn at random) | {sum(chance) / n:.3f} | | |",
        f"| base | {sum(base) / n:.3f} | {base_shift:+.4f} (p = {base_test.p_value:.3g}) | |",
    ]
    for name, figures in record["runs"].items():
        after = figures["after"]
        rows.append(
            f"| {name} ({figures['updates']} updates) | {sum(after) / n:.3f} | {against(after, chance)} |"
            f" {against(after, base)} |"
        )
    skill = (
        "The base weights choose better than chance, at p < 0.05"
        if base_test.p_value < 0.05 and base_shift > 0
        else "The base weights choose no better than chance at p < 0.05: there is no reading of the coordinates"
        " for ES to sharpen, only one to build"
    )
    moved = max((abs(sum(f["after"]) - sum(base)) / n for f in record["runs"].values()), default=0.0)
    walker = sum(record["random_walk_success"])
    rows += ["", f"{skill}. The runs moved the mean by at most {moved:.4f}."]
    rows.append(
        f"A walker that picks one of the four moves at random every turn (a valid move, no reading) solves"
        f" {walker:.1f} of these {n} episodes on average"
    )
    if sampled and sampled["episode_seeds"] == record["episode_seeds"]:
        solved = sum(sampled["base"])
        than = "fewer than" if solved < walker else "as many as" if solved == walker else "more than"
        rows[-1] += f"; the base model, sampling its replies, solved {solved} (first section), {than} the walker"
    rows[-1] += "."
    return (
        "## Does the model prefer the move that closes in?\n\n"
        "`python experiments/evidence/move_choice.py RUN...` (each run named by its config in"
        f" experiments/evidence): at the first turn of the first {n} {record['split']} episodes of"
        f' {record["env"]} H={record["horizon"]}, the policy\'s prompt followed by "move", and the probability'
        f" {record['model']} gives each direction next, renormalised over the four (no sampling). Differences"
        " of the means, with the two-sided signed-rank p paired by episode:\n\n" + "\n".join(rows) + "\n"
    )


def move_choice_es_section(record: dict[str, Any] | None) -> str:
    """ES trained on the closing-move probability itself: its held-out curve, last against first."""
    if not record:
        return ""
    curve = record["curve"]
    first, last = curve[0]["heldout"], curve[-1]["heldout"]
    n = len(first)
    shift, test = paired_shift(last, first)
    points = ", ".join(f"{sum(p['heldout']) / n:.3f} at generation {p['generation']}" for p in curve)
    settings = record["settings"]
    return (
        "\nES trained on this probability itself (no sampling anywhere), each member worth its mean over"
        f" {settings['turns']} fresh search episodes a generation, {settings['population']} mirrored low-rank"
        f" members (rank {settings['rank']}), sigma {settings['sigma']:g}, alpha {settings['alpha']:g}:"
        f" `{record['command']}`. Held-out mean on the same {n} {record['split']} episodes: {points};"
        f" last against first, paired by episode, {shift:+.4f}"
        f" (two-sided signed-rank p = {test.p_value:.3g}).\n"
    )


def bpp_section(record: dict[str, Any] | None) -> str:
    """Each ES arm against eoh of the same seed, on the gap of the run's answer (lower is better)."""
    title = "## Co-evolution against prompt-only on bpp_online"
    if not record or not record["seeds"]:
        pending = f" ({len(record['pending'])} seeds under way)" if record else ""
        return f"{title}\n\nNot run yet{pending}.\n"
    lines = [
        title,
        "",
        f"`{record['command']}`, then `python experiments/evidence/bpp_pairs.py runs/bpp_evidence`:"
        f" all three runs finished on seeds {', '.join(map(str, record['seeds']))} (n = {len(record['seeds'])}),"
        f" at least {record['updates']} ES updates per ES run, of which"
        f" {min(record['directed_updates'])} to {max(record['directed_updates'])} had a direction (members whose"
        " rewards all tie make a zero step). Each run's answer is its finalists' best on val;"
        " a win is a lower gap than eoh's on the same seed. The last machine's run stores are in"
        " `experiments/evidence/bpp_runs.tar.xz` (unpack it into `runs/` to re-score them); runs finished on"
        " earlier machines keep the figures recorded there.",
        "",
    ]
    if (seeds := len(record["seeds"])) < 6:
        lines += [
            f"With {seeds} paired seeds the exact test cannot give p below {smallest_exact_p(seeds):.3g} (every pair one way),"
            " so no result here can be significant at p < 0.05; the wins, ties and losses carry the finding.",
            "",
        ]
    for split, key in (("val", "pairs"), ("test", "test_pairs")):
        for name, pairs in record[key].items():
            verdict = compare_paired([b - a for a, b in pairs]).sentence() if pairs else "no seed to pair"
            lines.append(f"- {name}, {split} gap: {verdict}")
    for run, reason in record["invalid_on_test"].items():
        lines.append(f"- {run} is left out of the test pairs, invalid on test: {reason}")
    lines += ["", bpp_runs_table(record)]
    if "coevo" in record["runs"]:
        lines += ["", coevo_credit_note(record)]
    if record["pending"]:
        lines += ["", f"Seeds still running: {record['pending']}."]
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
    )


def bpp_runs_table(record: dict[str, Any]) -> str:
    """Per seed and arm: the answer's val and test gap, the valid share of what the model wrote, and for
    the ES arms the updates that had a direction out of all."""
    arms = list(record["runs"])
    rows = ["| seed | " + " | ".join(arms) + " |", "| --- |" + " --- |" * len(arms)]
    for seed in record["seeds"]:
        cells = []
        for arm in arms:
            run = record["runs"][arm][str(seed)]
            test = "invalid" if run["test"] is None else f"{run['test']:.2f}"
            cell = f"{run['val']:.2f} / {test}, valid {run['valid_rate']:.0%}"
            if run["updates"]:
                cell += f", {run['directed_updates']}/{run['updates']} directed"
            cells.append(cell)
        rows.append(f"| {seed} | " + " | ".join(cells) + " |")
    return "Gap % on val / test of each run's answer:\n\n" + "\n".join(rows)


def mean_gap(side: dict[str, Any]) -> str:
    """A side's mean search gap of its valid answers, or "-" when none was valid."""
    return "-" if side["mean_gap_pct"] is None else f"{side['mean_gap_pct']:.2f}"


def against_seed(side: dict[str, Any], seed_gap: float) -> str:
    """How many of a side's valid answers score better than, as, and worse than the seed heuristic."""
    gaps = [s["gap_pct"] for s in side["samples"] if s["valid"] and s["gap_pct"] is not None]
    return "/".join(
        str(n) for n in (sum(g < seed_gap for g in gaps), gaps.count(seed_gap), sum(g > seed_gap for g in gaps))
    )


def weights_effect_section(entries: dict[str, Any] | None) -> str:
    """Same prompts and sampling seeds under base and trained weights (`weights_effect.py`)."""
    if not entries:
        return ""
    rows = [
        "| run | updates (directed) | valid code | better / as / worse than the seed | mean search gap %"
        " | answers scored differently |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name, figures in entries.items():
        before, after = figures["before"], figures["after"]
        gaps = " -> ".join(mean_gap(side) for side in (before, after))
        seed = " -> ".join(against_seed(side, figures["seed_gap_pct"]) for side in (before, after))
        changed = sum(b != a for b, a in zip(before["samples"], after["samples"], strict=True))
        rows.append(
            f"| {name} | {figures['updates']} ({figures['directed_updates']}) |"
            f" {before['valid_rate']:.0%} -> {after['valid_rate']:.0%} | {seed} | {gaps} |"
            f" {changed} of {figures['samples']} |"
        )
    samples = next(iter(entries.values()))["samples"]
    return (
        "\n### What the weights changed\n\n"
        f"`python experiments/evidence/weights_effect.py RUN...`: {samples} answers to the m1 and m2 prompts on"
        " the seed heuristic, the same sampling seeds under the base weights and under each run's replayed"
        " weights. An answer that scores as the seed is the seed rewritten; the mean gap is the valid answers'"
        f" mean, which one poor answer moves.{base_sides_note(entries)}\n\n" + "\n".join(rows) + "\n"
    )


def base_sides_note(entries: dict[str, Any]) -> str:
    """Where runs were measured in calls whose base answers differ, which runs share which base."""
    bases: dict[str, list[str]] = {}
    for name, figures in entries.items():
        bases.setdefault(json.dumps(figures["before"], sort_keys=True), []).append(name)
    if len(bases) < 2:
        return ""
    groups = "; ".join(
        f"{', '.join(names)} ({entries[names[0]]['before']['valid_rate']:.0%} valid)" for names in bases.values()
    )
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
        " each format.\n\n" + "\n".join(rows) + "\n\n"
        f"Paired by answer: {differences.count(1)} usable only under the current format,"
        f" {differences.count(-1)} only under the former; two-sided signed-rank p = {test.p_value:.3g}"
        f" ({test.method}, n = {test.n}).\n"
    )


def render(evidence: dict[str, Any]) -> str:
    gridnav = paired_episodes("ES on gridnav: held-out success of SmolLM2-135M", evidence.get("gridnav"), "gridnav.png")
    return "\n".join(
        [
            HEADER,
            speed_section(evidence.get("speedup")) + decode_section(evidence.get("decode")),
            gridnav + ("\n" + tune_section(evidence.get("gridnav_tune")) if evidence.get("gridnav_tune") else ""),
            paired_episodes("ES on gridnav with greedy decoding", evidence.get("gridnav_greedy"), "gridnav_greedy.png"),
            paired_episodes(
                "ES on gridnav with shared sampling streams and mirrored pairs",
                evidence.get("gridnav_shared"),
                "gridnav_shared.png",
            ),
            paired_episodes("GRPO at the same episodes", evidence.get("grpo"), "grpo.png"),
            move_choice_section(evidence.get("gridnav_move_choice"), evidence.get("gridnav"))
            + move_choice_es_section(evidence.get("gridnav_move_choice_es")),
            bpp_section(evidence.get("bpp_online"))
            + weights_effect_section(evidence.get("ahd_weights_effect"))
            + answer_format_section(evidence.get("answer_format")),
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
