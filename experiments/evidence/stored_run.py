"""A finished run's store as the evidence scripts read it: its config, its ES updates, the dtype it
computed in, and its model under the base or the final weights (the base with the updates replayed,
which reproduces the run's weights exactly)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path

from evidence_file import RESULTS

from coevo.es.update_log import UpdateRecord, replay
from coevo.llm.base import LLM
from coevo.run.build import build_host, load_llm
from coevo.run.config import RunConfig, from_stored, validate
from coevo.run.session import recorded_dtype
from coevo.run.store import RunStore, StoreError


@dataclass(frozen=True)
class StoredRun:
    """What a measurement of a run's weights needs from its store."""

    path: Path
    config: RunConfig
    records: list[UpdateRecord]
    dtype: str

    @classmethod
    def open(cls, run_dir: Path) -> StoredRun:
        """The run at `run_dir`; a run without ES updates is refused (its weights are the base's)."""
        store = RunStore.open(run_dir)
        try:
            run = cls(run_dir, validate(from_stored(store.config)), store.es_records(), recorded_dtype(store))
        finally:
            store.close()
        if not run.records:
            raise StoreError(f"{run_dir}: the run made no ES update, so its weights are the base weights")
        return run

    def model(self, replayed: bool) -> tuple[LLM, str]:
        """The run's model under its base weights, or its final ones if `replayed` (a fresh load each
        time: replaying moves the loaded weights), and the hash of those weights."""
        llm = load_llm(self.config, self.dtype)
        host = build_host(llm, self.config)
        if replayed:
            replay(host, self.records)
        return llm, host.weights_sha256()


def same_base(runs: Sequence[StoredRun], setting: Callable[[StoredRun], Hashable], what: str) -> None:
    """Refuse, in one line, runs whose base side differs (`setting` is what the base side depends on,
    and may itself refuse a run; `what` names it): one base side then serves them all."""
    first, *others = [(run, setting(run)) for run in runs]
    for run, other in others:
        if other != first[1]:
            raise StoreError(
                f"{run.path} and {first[0].path} differ in {what}, so their base sides differ: measure them in"
                " separate calls"
            )


def runs_parser(description: str, runs_help: str, default_names: str) -> argparse.ArgumentParser:
    """The command line of a script that measures runs: RUN_DIR..., --name per run, --results."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("run_dirs", nargs="+", type=Path, help=runs_help)
    parser.add_argument("--name", nargs="+", help=f"the entries' names, one per run (default: {default_names})")
    parser.add_argument("--results", type=Path, default=RESULTS)
    return parser


def parse_runs(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """`parser`'s arguments, refused in one line when --name does not give one name per run."""
    args = parser.parse_args(argv)
    if args.name is not None and len(args.name) != len(args.run_dirs):
        parser.error(f"--name gives {len(args.name)} names for {len(args.run_dirs)} runs")
    return args
