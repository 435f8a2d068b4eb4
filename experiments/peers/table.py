"""coevo head to head with OpenEvolve, LLM4AD and ShinkaEvolve: same model, budget and instances.

    python experiments/peers/table.py [--quick] [--json] [--systems ...] [--tasks ...] [--seeds 0 1]

Runs every (system, task, seed) cell not yet finished (a finished cell is its record,
experiments/peers/cells/<model>/<system>__<task>__s<seed>.json, committed, so an interrupted table
resumes, across sessions and clones; the runs' bulky files stay in the git-ignored work/), then writes experiments/peers/results.json, results.md
and results.png (best search gap against evaluations, one line per system). The peers talk to one
`coevo serve` started here (answers capped at 384 new tokens) and score candidates with coevo's task
functions on coevo's search split (scoring.py); coevo's own methods run `coevo run`. Every run's
search-best heuristic is then scored by coevo's Evaluator on val and test.

--quick: 4 evaluations, SmolLM2, 128-token answers, tsp_construct, seed 0, 8 val and 8 test
instances: checks the plumbing of every system; it writes under experiments/peers/work/quick/ only.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import urllib.request
import warnings
from pathlib import Path
from typing import Any

PEERS_DIR = Path(__file__).resolve().parent
REPO = PEERS_DIR.parents[1]
sys.path[:0] = [str(REPO), str(PEERS_DIR)]

from rows import SEED, SYSTEMS, best_so_far, markdown, table_rows  # noqa: E402

from tasks import TASK_NAMES  # noqa: E402

PEER_SCRIPTS = {"openevolve": "openevolve_peer.py", "llm4ad": "llm4ad_peer.py", "shinka": "shinka_peer.py"}
CoevoArms = dict[str, tuple[str, tuple[str, ...]]]
"""Per coevo system of a table: (method, config assignments applied over the method's reference config)."""
COEVO_METHODS: CoevoArms = {"coevo-eoh": ("eoh", ()), "coevo": ("coevo", ())}
LOG_NAME = "evaluations.jsonl"


def cpu_model() -> str:
    """The CPU's model name as lscpu shows it (from /proc/cpuinfo), for the records of where a cell ran."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return "unknown"
    names = [line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")]
    return names[0] if names else "unknown"


def _get(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=30) as reply:
        return json.load(reply)


def start_server(
    model: str, port: int, max_tokens: int, log: Path, transcript: Path
) -> tuple[subprocess.Popen[bytes], str]:
    """`coevo serve` in its own process; returns once it answers /v1/models."""
    command = [sys.executable, "-m", "coevo.cli", "serve", "--model", model, "--port", str(port)]
    command += ["--max-tokens-cap", str(max_tokens), "--transcript", str(transcript)]
    process = subprocess.Popen(command, cwd=REPO, stdout=log.open("ab"), stderr=subprocess.STDOUT)
    base_url = f"http://127.0.0.1:{port}/v1"
    while process.poll() is None:
        try:
            _get(f"{base_url}/models")
            return process, base_url
        except OSError:
            time.sleep(2)
    raise SystemExit(f"table: coevo serve exited with {process.returncode}; see {log}")


def _last_line(path: Path) -> str:
    lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()] if path.exists() else []
    return lines[-1][:300] if lines else "no output"


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def run_peer(system: str, task: str, seed: int, args: argparse.Namespace, base_url: str, cell: Path) -> dict[str, Any]:
    """One peer run; its evaluations from the scoring log, its LLM use from the server's ledger, and
    the answers it was sent from the server's transcript (copied to the cell's transcript.jsonl)."""
    before = _get(f"{base_url}/ledger")
    answered_before = len(_lines(args.transcript))
    command = [sys.executable, str(PEERS_DIR / PEER_SCRIPTS[system]), "--task", task, "--seed", str(seed)]
    command += ["--evaluations", str(args.evaluations), "--base-url", base_url, "--model", args.model]
    command += ["--out", str(cell), "--concurrency", str(args.concurrency), "--max-tokens", str(args.max_tokens)]
    command += args.peer_flags.get(system, [])
    with (cell / "peer.log").open("ab") as output:
        returncode = subprocess.run(command, stdout=output, stderr=subprocess.STDOUT, cwd=REPO).returncode
    after = _get(f"{base_url}/ledger")
    answers = _lines(args.transcript)[answered_before:]
    (cell / "transcript.jsonl").write_text("".join(line + "\n" for line in answers))
    records = [json.loads(line) for line in _lines(cell / LOG_NAME)]
    if returncode != 0 and not records:
        return {"status": "failed", "error": f"{system} exited {returncode}: {_last_line(cell / 'peer.log')}"}
    records = records[: args.evaluations]
    stopped = cell / "stopped.json"
    return {
        "status": "done",
        "candidates": [{"valid": r["valid"], "gap_pct": r["gap_pct"], "code": r["code"]} for r in records],
        "llm_calls": after["requests"] - before["requests"],
        "prompt_tokens": after["prompt_tokens"] - before["prompt_tokens"],
        "completion_tokens": after["completion_tokens"] - before["completion_tokens"],
        "finish_reasons": [json.loads(line)["finish_reason"] for line in answers],
        "stopped_on": json.loads(stopped.read_text())["reason"]
        if stopped.exists()
        else f"own budget (exit {returncode})",
    }


def run_coevo(system: str, task: str, seed: int, args: argparse.Namespace, cell: Path) -> dict[str, Any]:
    """One `coevo run` of the system's method at its reference config plus the system's assignments
    (args.arms); its use from the run store."""
    from coevo.run.store import RunStore

    method, assignments = args.arms[system]
    config = REPO / "experiments" / "configs" / f"{task}__{method.replace('+', '_')}.toml"
    sets = {"budget": args.evaluations, "seed": seed, "model": args.model, "llm.max_new_tokens": args.max_tokens}
    command = [sys.executable, "-m", "coevo.cli", "run", str(config), "--run-dir", str(cell / "run")]
    for assignment in [f"{key}={value}" for key, value in sets.items()] + list(assignments):
        command += ["--set", assignment]
    with (cell / "run.log").open("ab") as output:
        returncode = subprocess.run(command, stdout=output, stderr=subprocess.STDOUT, cwd=REPO).returncode
    if returncode != 0:
        return {"status": "failed", "error": f"coevo run exited {returncode}: {_last_line(cell / 'run.log')}"}
    store = RunStore.open(cell / "run")
    try:
        made = [candidate for _, candidate in store.candidates()]
        totals = store.llm_totals()
        finish_reasons = [call["finish_reason"] for call in store.llm_calls()]
    finally:
        store.close()
    return {
        "status": "done",
        "candidates": [{"valid": c.valid, "gap_pct": c.gap_pct, "code": c.code} for c in made][: args.evaluations],
        "llm_calls": totals["calls"],
        "prompt_tokens": totals["prompt_tokens"],
        "completion_tokens": totals["completion_tokens"],
        "finish_reasons": finish_reasons,
        "stopped_on": "own budget",
    }


def held_out_scores(
    task: str, code: str, args: argparse.Namespace, splits: tuple[str, ...] = ("val", "test")
) -> dict[str, float | None]:
    """A heuristic's gap and mean objective on each split named ("<split>_gap", "<split>_objective"),
    by coevo's sandboxed Evaluator (the winners': val and test)."""
    from coevo.evaluate import Evaluator

    limits = {"search": None, "val": args.val_limit, "test": args.test_limit}
    scores: dict[str, float | None] = {}
    for split in splits:
        with Evaluator(task, split, limit=limits[split], workers=args.workers) as evaluator:  # type: ignore[arg-type]
            result = evaluator.evaluate(code)
        scores[f"{split}_gap"], scores[f"{split}_objective"] = result.gap_pct, result.objective
    return scores


def record_path(system: str, task: str, seed: int, args: argparse.Namespace) -> Path:
    return args.cells / args.model / f"{system}__{task}__s{seed}.json"


def seed_record(task: str, args: argparse.Namespace) -> None:
    """The reference row's record: the seed heuristic every system starts from, scored as the winners are."""
    path = args.cells / args.model / f"seed__{task}.json"
    if path.exists():
        return
    from scoring import seed_program

    gaps = held_out_scores(task, seed_program(task), args, ("search", "val", "test"))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"system": SEED, "task": task, "status": "done", **gaps}, indent=1) + "\n")


def run_cell(system: str, task: str, seed: int, args: argparse.Namespace, base_url: str | None) -> dict[str, Any]:
    cell = args.work / args.model / f"{system}__{task}__s{seed}"
    done = record_path(system, task, seed, args)
    if done.exists():
        return json.loads(done.read_text())
    if cell.exists():  # an interrupted cell restarts from scratch: the peers cannot resume exactly
        subprocess.run(["rm", "-rf", str(cell)], check=True)
    cell.mkdir(parents=True)
    done.parent.mkdir(parents=True, exist_ok=True)
    started = time.time()
    if system in args.arms:
        outcome = run_coevo(system, task, seed, args, cell)
    else:
        assert base_url is not None
        outcome = run_peer(system, task, seed, args, base_url, cell)
    record: dict[str, Any] = {"system": system, "task": task, "seed": seed, "model": args.model, **outcome}
    record["wall_s"], record["cpu"] = time.time() - started, cpu_model()
    if outcome["status"] == "done":
        candidates = record.pop("candidates")
        finish_reasons = record.pop("finish_reasons")
        record["cut_share"] = finish_reasons.count("length") / max(1, len(finish_reasons))
        gaps = [c["gap_pct"] if c["valid"] else None for c in candidates]
        record["evaluations"] = len(candidates)
        record["valid_share"] = sum(g is not None for g in gaps) / max(1, len(candidates))
        record["curve"] = best_so_far(gaps)
        valid = [c for c in candidates if c["valid"] and c["gap_pct"] is not None]
        winner = min(valid, key=lambda c: c["gap_pct"]) if valid else None
        record["search_gap"] = None if winner is None else winner["gap_pct"]
        record["winner"] = None if winner is None else winner["code"]
        record.update(held_out_scores(task, winner["code"], args) if winner else {"val_gap": None, "test_gap": None})
    else:
        record["error"] = outcome["error"]
    done.write_text(json.dumps(record, indent=1) + "\n")
    return record


def plot(cells: list[dict[str, Any]], path: Path) -> None:
    """Best search gap against evaluations, mean over seeds, one line per system, one panel per task."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    tasks = sorted({c["task"] for c in cells if c["status"] == "done"})
    if not tasks:
        return
    # One colour and dash per system across panels; the dashes keep curves that coincide visible.
    dashes = ["-", "--", "-.", ":", (0, (5, 1, 1, 1))]
    styles = {system: (f"C{i}", dash) for i, (system, dash) in enumerate(zip(SYSTEMS, dashes, strict=True))}
    figure, axes = plt.subplots(1, len(tasks), figsize=(6 * len(tasks), 4), squeeze=False)
    for axis, task in zip(axes[0], tasks):
        for system in SYSTEMS:
            curves = [
                c["curve"] for c in cells if c["system"] == system and c["task"] == task and c["status"] == "done"
            ]
            if not curves:
                continue
            length = max(map(len, curves))
            # A run holds its last best to the longest run's end; one with no evaluations has no best.
            held = [c + (c[-1:] or [None]) * (length - len(c)) for c in curves]
            padded = np.array([[np.nan if v is None else v for v in curve] for curve in held])
            with warnings.catch_warnings():  # before a system's first valid candidate its mean is undefined
                warnings.simplefilter("ignore", RuntimeWarning)
                mean = np.nanmean(padded, axis=0)
            label = f"{system} ({len(curves)} seed{'s' * (len(curves) > 1)})"
            colour, dash = styles[system]
            axis.plot(np.arange(1, length + 1), mean, colour, linestyle=dash, linewidth=2, label=label)
        axis.set(title=task, xlabel="candidate evaluations", ylabel="best search gap %")
        axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def shared_arguments(parser: argparse.ArgumentParser) -> None:
    """The options every head-to-head table takes (this one and packing_table.py)."""
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    parser.add_argument("--evaluations", type=int, default=64)
    parser.add_argument("--model", default="qwen-coder-0.5b")
    parser.add_argument("--port", type=int, default=8123)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=384, help="new tokens per answer, for every system")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--report-only", action="store_true", help="run nothing: rewrite the results from the records")


def run_cells(cells_wanted: list[tuple[str, str, int]], args: argparse.Namespace) -> list[dict[str, Any]]:
    """Score each task's seed, run every (system, task, seed) cell not yet recorded (one `coevo serve`
    for the peers, started on the first peer cell that needs it), and return every record of args.model."""
    args.work.mkdir(parents=True, exist_ok=True)
    args.transcript = args.work / f"transcript-{args.port}.jsonl"  # one server per port: its answers in order
    for task in dict.fromkeys(task for _, task, _ in cells_wanted):
        seed_record(task, args)
    server, base_url = None, None
    try:
        for index, (system, task, seed) in enumerate(cells_wanted, 1):
            print(f"[{index}/{len(cells_wanted)}] {system} {task} seed {seed}", file=sys.stderr, flush=True)
            needs_server = system not in args.arms
            if needs_server and not record_path(system, task, seed, args).exists() and server is None:
                log = args.work / "serve.log"
                server, base_url = start_server(args.model, args.port, args.max_tokens, log, args.transcript)
            record = run_cell(system, task, seed, args, base_url)
            print(
                f"    {record['status']}: val gap {record.get('val_gap')}, {record.get('error', '')}", file=sys.stderr
            )
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=60)
    return [json.loads(p.read_text()) for p in sorted((args.cells / args.model).glob("*.json"))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    shared_arguments(parser)
    parser.add_argument("--quick", action="store_true", help="a plumbing check in minutes (SmolLM2, 4 evaluations)")
    parser.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=SYSTEMS)
    parser.add_argument("--tasks", nargs="+", default=["tsp_construct", "bpp_online"], choices=TASK_NAMES)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--val-limit", type=int, default=None, help="first N val instances (default: all)")
    parser.add_argument("--test-limit", type=int, default=None, help="first N test instances (default: all)")
    args = parser.parse_args()
    out = PEERS_DIR
    args.work, args.cells, args.arms, args.peer_flags = PEERS_DIR / "work", PEERS_DIR / "cells", COEVO_METHODS, {}
    if args.quick:
        args.evaluations, args.model, args.seeds, args.max_tokens = 4, "smollm2-135m", [0], 128
        args.tasks, args.val_limit, args.test_limit = ["tsp_construct"], 8, 8
        out = args.work = args.cells = PEERS_DIR / "work" / "quick"
    cells_wanted = (
        [] if args.report_only else [(s, t, seed) for t in args.tasks for s in args.systems for seed in args.seeds]
    )
    cells = run_cells(cells_wanted, args)
    rows = table_rows(cells)
    payload = {"model": args.model, "budget": args.evaluations, "max_tokens": args.max_tokens, "rows": rows}
    text = markdown(rows, args.model, args.evaluations, args.max_tokens)
    contained = PEERS_DIR / "containment.json"
    if contained.exists():  # written by containment.py: each system's evaluator against tests/hostile/
        import containment

        payload["containment"] = json.loads(contained.read_text())["rows"]
        text += "\nContainment (containment.py: tests/hostile/ cases through each system's own evaluator):\n\n"
        text += containment.markdown(payload["containment"])
    (out / "results.json").write_text(json.dumps(payload, indent=1) + "\n")
    (out / "results.md").write_text(text)
    plot(cells, out / "results.png")
    print(json.dumps(payload, indent=1) if args.json else (out / "results.md").read_text())


if __name__ == "__main__":
    main()
