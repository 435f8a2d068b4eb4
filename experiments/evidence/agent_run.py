"""Record a finished agent run (es or grpo) in the evidence file: its held-out episodes before and after,
paired by seed, and its learning curve as a committed plot; or a `coevo tune` study's trials.

    python experiments/evidence/agent_run.py RUN_DIR --key gridnav --config experiments/evidence/gridnav_es.toml
    python experiments/evidence/agent_run.py STUDY_DIR --tune --key gridnav_tune --config experiments/evidence/gridnav_tune.toml

The key's object is what `experiments/evidence/summary.py` computes the README's figures from:
`{"config", "command", "episode_seeds", "base", "after"}` (0/1 per episode), plus the curve's points.
The other keys of the file are kept.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from evidence_file import RESULTS, merge

from coevo.run.heldout import SuccessRate, measured_curve
from coevo.run.learning_curve import curve_figure, training_rewards
from coevo.run.store import RunStore, StoreError

HERE = Path(__file__).resolve().parent


def run_record(run_dir: Path, config: str) -> tuple[dict[str, object], list[SuccessRate], list]:
    """The evidence object of one finished run, its held-out curve and its training rewards."""
    store = RunStore.open(run_dir)
    try:
        heldout = store.heldout_figures()
        records = store.es_records()
    finally:
        store.close()
    if not {"before", "after"} <= heldout.keys():
        raise SystemExit(f"{run_dir}: the run has no held-out figure before and after; is it finished?")
    before, after = SuccessRate(**heldout["before"]), SuccessRate(**heldout["after"])
    if list(before.seeds) != list(after.seeds):
        raise SystemExit(f"{run_dir}: the episodes before and after differ, so they cannot be paired")
    curve = measured_curve(heldout)
    record = {
        "config": config,
        "command": f"coevo run {config}",
        "split": after.split,
        "updates": after.updates,
        "episode_seeds": list(after.seeds),
        "base": list(before.outcomes),
        "after": list(after.outcomes),
        "curve": [{"generation": m.generation, "successes": m.successes, "episodes": m.episodes} for m in curve],
    }
    return record, curve, training_rewards(records)


def tune_record(directory: Path, config: str) -> list[dict[str, object]]:
    """Every trial of the study `coevo tune --dir DIRECTORY` kept: its settings, its held-out success
    before and after training, and how it ended (a failed trial's error included)."""
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    storage = JournalStorage(JournalFileBackend(str(directory / "journal.log")))
    study = optuna.load_study(study_name=Path(config).stem, storage=storage)
    command = f"coevo tune {config} --trials {len(study.trials)} --pruner none"
    return [
        {
            "number": trial.number,
            "params": trial.params,
            "before": trial.user_attrs.get("heldout_before"),
            "after": trial.user_attrs.get("heldout_after"),
            "state": _ended(trial),
            "command": command,
        }
        for trial in study.trials
    ]


def _ended(trial) -> str:
    """How a trial ended, in words: a trial still marked running was stopped with its study."""
    if trial.state.name == "RUNNING":
        return "stopped unfinished"
    return trial.state.name.lower() + (f": {trial.user_attrs['error']}" if "error" in trial.user_attrs else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path, help="a run directory, or a study directory with --tune")
    parser.add_argument("--tune", action="store_true", help="record the trials of a coevo tune study")
    parser.add_argument("--key", required=True, help="the evidence key, e.g. gridnav or grpo")
    parser.add_argument("--config", required=True, help="the config the run was started from, as a repo path")
    parser.add_argument("--plot", type=Path, help="where to write the learning curve (default: HERE/KEY.png)")
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.tune:
        merge(args.key, tune_record(args.run_dir, args.config), args.results)
        print(f"{args.key}: trials of {args.run_dir} recorded")
        return 0
    try:
        record, curve, train = run_record(args.run_dir, args.config)
    except (StoreError, KeyError) as exc:
        print(f"error: {args.run_dir}: {exc}", file=sys.stderr)
        return 2
    merge(args.key, record, args.results)
    plot = args.plot or HERE / f"{args.key}.png"
    curve_figure(train, curve).savefig(plot, dpi=110)
    print(f"{args.key}: {sum(record['base'])} -> {sum(record['after'])} of {len(record['after'])}; {plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
