"""The run store: one SQLite database (WAL) per run directory holding everything a run did.

A run advances in steps; each step is one transaction. Everything a step writes (LLM calls,
candidates, evaluations with the episodes behind them, the ES update) and the state it leaves
(population, RNG, ledger, prompt pool) commit together, so a process killed at any instant leaves the
store at the end of its last whole step and `resume` repeats the interrupted step exactly. Readers
(`runs show`, reports) see committed steps while a run is writing, thanks to WAL.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from coevo.candidate import Candidate, WeightsRef
from coevo.es.update_log import UpdateRecord
from coevo.operators.records import Proposal, Rejection, TextProposal
from coevo.shown import shown
from coevo.workload import Evaluation, Trajectory, Turn

if TYPE_CHECKING:
    from coevo.novelty import Judgement

DB_NAME = "run.sqlite"

TRAJECTORIES = """
CREATE TABLE IF NOT EXISTS trajectories (
    id INTEGER PRIMARY KEY, evaluation INTEGER NOT NULL, step INTEGER NOT NULL, instance TEXT NOT NULL,
    reward REAL NOT NULL, turns TEXT NOT NULL);
"""
"""Episodes (turns as JSON) next to the evaluation they were scored in; also added to older stores on open."""

NOVELTY = """
CREATE TABLE IF NOT EXISTS embeddings (key TEXT PRIMARY KEY, step INTEGER NOT NULL, vector BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS novelty_checks (
    id INTEGER PRIMARY KEY, step INTEGER NOT NULL, key TEXT NOT NULL, neighbour TEXT NOT NULL,
    similarity REAL NOT NULL, judge TEXT NOT NULL, outcome TEXT NOT NULL, judge_call INTEGER NOT NULL);
"""
"""The novelty check's records (`coevo.run.novelty_gate`): each candidate's code embedding (float32
bytes), and each child judged for being too close to a member (the judge's verdict: yes, no or
unreadable; the outcome: novel, resampled or rejected); also added to older stores on open."""

SCHEMA = (
    """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS steps (
    step INTEGER PRIMARY KEY, generation INTEGER NOT NULL, phase TEXT NOT NULL,
    finished_at REAL NOT NULL, state TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS llm_calls (
    id INTEGER PRIMARY KEY, step INTEGER NOT NULL, operator TEXT NOT NULL, prompt TEXT NOT NULL,
    response TEXT NOT NULL, prompt_tokens INTEGER, completion_tokens INTEGER, seconds REAL,
    finish_reason TEXT, weights TEXT, prompt_id TEXT, outcome TEXT, edit TEXT, model TEXT);
CREATE TABLE IF NOT EXISTS candidates (
    id INTEGER PRIMARY KEY, step INTEGER NOT NULL, key TEXT NOT NULL, llm_call INTEGER,
    data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS evaluations (
    id INTEGER PRIMARY KEY, candidate INTEGER NOT NULL, step INTEGER NOT NULL, split TEXT NOT NULL,
    valid INTEGER NOT NULL, objective REAL, gap_pct REAL, reason TEXT, seconds REAL, per_instance TEXT);
CREATE TABLE IF NOT EXISTS es_updates (step INTEGER PRIMARY KEY, run_step INTEGER NOT NULL, record TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS prompts (id TEXT PRIMARY KEY, step INTEGER NOT NULL, data TEXT NOT NULL);
"""
    + TRAJECTORIES
    + NOVELTY
)


LLM_CALL_EDIT = "ALTER TABLE llm_calls ADD COLUMN edit TEXT"
"""What kind of diff answer a call was ("applied", "failed", "fallback"; NULL for a whole-function
request, `coevo.operators.diff_edit`); added to older stores on open."""

EDIT_KINDS: tuple[str, ...] = ("applied", "failed", "fallback")
NOVELTY_OUTCOMES: tuple[str, ...] = ("novel", "resampled", "rejected")

LLM_CALL_MODEL = "ALTER TABLE llm_calls ADD COLUMN model TEXT"
"""Which model of an ensemble answered the call (`coevo.llm.ensemble`; NULL in a run of one model);
added to older stores on open."""


class StoreError(Exception):
    """The run directory holds no readable run."""


class RunStore:
    """Typed access to a run's database; writes happen inside `step()` transactions."""

    def __init__(self, connection: sqlite3.Connection, path: Path) -> None:
        self._db = connection
        self.path = path

    @classmethod
    def create(cls, run_dir: Path, config: dict[str, Any]) -> RunStore:
        """A new store in `run_dir` (created if needed); refuses a directory that already holds a run."""
        run_dir.mkdir(parents=True, exist_ok=True)
        path = run_dir / DB_NAME
        if path.exists():
            raise StoreError(f"{run_dir} already holds a run; use `coevo resume {run_dir}` or another --run-dir")
        store = cls(_connect(path), path)
        with store._db:
            store._db.executescript(SCHEMA)
            store._db.executemany(
                "INSERT INTO meta VALUES (?, ?)",
                [("config", json.dumps(config)), ("status", "running"), ("created_at", str(time.time()))],
            )
        store.mark_running()
        return store

    @classmethod
    def open(cls, run_dir: Path) -> RunStore:
        path = Path(run_dir) / DB_NAME
        if not path.is_file():
            raise StoreError(f"no run found in {run_dir} (missing {DB_NAME})")
        try:
            store = cls(_connect(path), path)
            store._db.execute(TRAJECTORIES)
            store._db.executescript(NOVELTY)
            columns = _columns(store._db).get("llm_calls", ["edit", "model"])
            for column, migration in (("edit", LLM_CALL_EDIT), ("model", LLM_CALL_MODEL)):
                if column not in columns:
                    store._db.execute(migration)
            damage = _schema_damage(store._db)
            if damage is None:
                store.meta("config")
        except (sqlite3.DatabaseError, KeyError) as exc:
            raise StoreError(f"cannot read run in {run_dir}: {exc}") from None
        if damage is not None:
            store.close()
            raise StoreError(f"{path} is damaged: {damage}; it is not a run coevo can read")
        return store

    def close(self) -> None:
        self._db.close()

    # --- meta ------------------------------------------------------------------------------------
    def meta(self, key: str) -> str:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        if row is None:
            raise KeyError(key)
        return row[0]

    def validation(self) -> dict[str, Any] | None:
        """The held-out selection stored at the end of the run (`coevo.run.validation`), if any."""
        try:
            return json.loads(self.meta("validation"))
        except KeyError:
            return None

    def answer(self) -> tuple[Candidate | None, str]:
        """The run's answer and the split it was chosen on: the val pick once validated, else the
        best on search (None before any valid heuristic)."""
        validation = self.validation()
        if validation is not None and validation["best_key"] is not None:
            key = validation["best_key"]
            answer = next((c for _, c in reversed(self.candidates()) if c.key == key), None)
            if answer is None:
                raise StoreError(f"{self.path}: the validated answer {key} is not among the run's candidates")
            return answer, validation["split"]
        best = (self.last_state() or {}).get("best")
        return (None if best is None else Candidate.from_dict(best)), "search"

    def answer_summary(self) -> dict[str, Any] | None:
        """The run's answer as every reader shows it (`runs show`, `runs export`, the report): its key,
        code, the split it was chosen on, and its figures under the name of each split they were
        measured on (`search` always, the validation split once validated)."""
        answer, chosen_on = self.answer()
        if answer is None:
            return None
        figures = {"search": {"objective": answer.objective, "gap_pct": answer.gap_pct}}
        validation = self.validation()
        if validation is not None and validation["best_key"] == answer.key:
            held_out = validation["best"]
            validated = {"objective": held_out["objective"], "gap_pct": held_out["gap_pct"]}
            figures = {validation["split"]: validated} | figures
        return {"key": answer.key, "chosen_on": chosen_on, "figures": figures, "code": answer.code}

    def heldout_figures(self) -> dict[str, dict[str, Any]]:
        """The run's held-out success measurements (`coevo.run.heldout`) by when they were taken: those in
        its last committed step, and the "after" figure kept once the run is done; empty when none."""
        figures = dict((self.last_state() or {}).get("heldout", {}))
        try:
            figures |= json.loads(self.meta("heldout"))
        except KeyError:
            pass
        return figures

    def mark_running(self) -> None:
        """Status `running`, owned by this process: `status()` calls the run interrupted once it is gone."""
        with self._db:
            self._db.executemany(
                "INSERT OR REPLACE INTO meta VALUES (?, ?)",
                [("status", "running"), ("process", json.dumps(_this_process()))],
            )

    def mark_interrupted(self) -> None:
        """A running run whose process stops before it finishes (Ctrl-C, SIGTERM, an error) is
        `interrupted`; a status set on purpose (finished, pruned) stays."""
        with self._db:
            self._db.execute("UPDATE meta SET value = 'interrupted' WHERE key = 'status' AND value = 'running'")

    @contextmanager
    def running(self) -> Iterator[None]:
        """Status `running` while the block runs, `interrupted` if it raises (Ctrl-C, SIGTERM, an error),
        `finished` once it returns: a run is finished only when all its work, held-out figures included, is."""
        self.mark_running()
        try:
            yield
        except BaseException:
            self.mark_interrupted()
            raise
        self.set_meta("status", "finished")

    def status(self) -> str:
        """The stored status, except that a `running` run whose process is gone (killed, machine
        restarted) is `interrupted`; a run owned by another host is taken at its word."""
        status = self.meta("status")
        try:
            owner = json.loads(self.meta("process"))
        except KeyError:  # a store from before processes were recorded
            return status
        if status == "running" and owner["host"] == socket.gethostname() and not _is_alive(owner):
            return "interrupted"
        return status

    def set_meta(self, key: str, value: str) -> None:
        with self._db:
            self._db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    @property
    def config(self) -> dict[str, Any]:
        return json.loads(self.meta("config"))

    # --- steps -----------------------------------------------------------------------------------
    def begin_step(self) -> None:
        """Open the step's transaction: nothing written until `commit_step` survives a crash."""
        self._db.execute("BEGIN IMMEDIATE")

    def commit_step(self, step: int, generation: int, phase: str, state: dict[str, Any]) -> None:
        self._db.execute(
            "INSERT INTO steps VALUES (?, ?, ?, ?, ?)", (step, generation, phase, time.time(), json.dumps(state))
        )
        self._db.execute("COMMIT")

    def abort_step(self) -> None:
        if self._db.in_transaction:
            self._db.execute("ROLLBACK")

    def last_state(self) -> dict[str, Any] | None:
        """The state left by the last committed step, with its step number under "step"."""
        row = self._db.execute("SELECT step, state FROM steps ORDER BY step DESC LIMIT 1").fetchone()
        return None if row is None else {**json.loads(row[1]), "step": row[0]}

    def states(self) -> Iterator[dict[str, Any]]:
        for step, generation, phase, finished_at, state in self._db.execute(
            "SELECT step, generation, phase, finished_at, state FROM steps ORDER BY step"
        ):
            yield {**json.loads(state), "step": step, "generation": generation, "phase": phase, "at": finished_at}

    # --- records written inside a step ----------------------------------------------------------
    def add_llm_call(
        self,
        step: int,
        item: Proposal | Rejection | TextProposal,
        weights: WeightsRef | None,
        prompt_id: str | None,
        model: str | None = None,
    ) -> int:
        """Record the call behind `item` and return its id; a diff request's failed answers before it
        (`Proposal.edit`) are recorded first, as calls of their own. Each names the model its completion
        is tagged with, else `model` (None: the run's one model)."""
        edit = getattr(item, "edit", None)
        if edit is not None:
            for failed in edit.failures:
                self._add_call(step, failed, weights, prompt_id, "failed", model)
        return self._add_call(step, item, weights, prompt_id, None if edit is None else edit.outcome, model)

    def _add_call(
        self,
        step: int,
        item: Proposal | Rejection | TextProposal,
        weights: WeightsRef | None,
        prompt_id: str | None,
        edit: str | None,
        model: str | None,
    ) -> int:
        completion = item.completion
        outcome = f"rejected: {shown(item.reason)}" if isinstance(item, Rejection) else "accepted"
        cursor = self._db.execute(
            "INSERT INTO llm_calls (step, operator, prompt, response, prompt_tokens, completion_tokens, seconds,"
            " finish_reason, weights, prompt_id, outcome, edit, model) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                step,
                item.operator,
                json.dumps(item.prompt),
                completion.text,
                completion.prompt_tokens,
                completion.completion_tokens,
                completion.seconds,
                completion.finish_reason,
                None if weights is None else json.dumps(weights.__dict__),
                prompt_id,
                outcome,
                edit,
                completion.model or model,
            ),
        )
        return int(cursor.lastrowid)

    def add_candidate(self, step: int, candidate: Candidate, llm_call: int | None, result: Evaluation | None) -> None:
        cursor = self._db.execute(
            "INSERT INTO candidates (step, key, llm_call, data) VALUES (?, ?, ?, ?)",
            (step, candidate.key, llm_call, json.dumps(candidate.to_dict())),
        )
        if result is not None:
            evaluation = self._db.execute(
                "INSERT INTO evaluations (candidate, step, split, valid, objective, gap_pct, reason, seconds,"
                " per_instance) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    cursor.lastrowid,
                    step,
                    result.split,
                    int(result.valid),
                    result.objective,
                    result.gap_pct,
                    None if result.reason is None else shown(result.reason),  # SQLite refuses lone surrogates
                    result.seconds,
                    json.dumps(list(result.per_instance)),
                ),
            )
            self._add_trajectories(step, int(evaluation.lastrowid), result.trajectories or ())

    def _add_trajectories(self, step: int, evaluation: int, trajectories: Iterable[Trajectory]) -> None:
        self._db.executemany(
            "INSERT INTO trajectories (evaluation, step, instance, reward, turns) VALUES (?, ?, ?, ?, ?)",
            [
                (evaluation, step, t.instance, t.reward, json.dumps([turn.__dict__ for turn in t.turns]))
                for t in trajectories
            ],
        )

    def add_es_update(self, run_step: int, record: UpdateRecord) -> None:
        self._db.execute("INSERT INTO es_updates VALUES (?, ?, ?)", (record.step, run_step, record.to_json()))

    def add_prompt(self, step: int, variant_id: str, data: dict[str, Any]) -> None:
        self._db.execute("INSERT OR REPLACE INTO prompts VALUES (?, ?, ?)", (variant_id, step, json.dumps(data)))

    def add_embedding(self, step: int, key: str, vector: np.ndarray) -> None:
        self._db.execute(
            "INSERT OR IGNORE INTO embeddings VALUES (?, ?, ?)", (key, step, vector.astype(np.float32).tobytes())
        )

    def add_novelty_check(self, step: int, judgement: Judgement, outcome: str, judge_call: int) -> None:
        """Record a judged child (`coevo.novelty`) with its outcome (`NOVELTY_OUTCOMES`) and the judge's call."""
        self._db.execute(
            "INSERT INTO novelty_checks (step, key, neighbour, similarity, judge, outcome, judge_call)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (step, judgement.key, judgement.neighbour, judgement.similarity, judgement.verdict, outcome, judge_call),
        )

    # --- reading ---------------------------------------------------------------------------------
    def es_records(self, since: int = 0) -> list[UpdateRecord]:
        """The ES updates from step `since` on, in step order."""
        rows = self._db.execute("SELECT record FROM es_updates WHERE step >= ? ORDER BY step", (since,)).fetchall()
        return [UpdateRecord.from_json(row[0]) for row in rows]

    def candidates(self) -> list[tuple[int, Candidate]]:
        """(step, candidate) for every candidate in the order they were made."""
        rows = self._db.execute("SELECT step, data FROM candidates ORDER BY id").fetchall()
        return [(step, Candidate.from_dict(json.loads(data))) for step, data in rows]

    def candidate_models(self) -> list[str | None]:
        """Beside `candidates()`, the model each one's LLM call names: None for a candidate no call wrote
        (the library) and for every candidate of a store whose calls record no model."""
        if "model" not in _columns(self._db)["llm_calls"]:
            return [None] * self._db.execute("SELECT COUNT(*) FROM candidates").fetchone()[0]
        rows = self._db.execute(
            "SELECT l.model FROM candidates c LEFT JOIN llm_calls l ON l.id = c.llm_call ORDER BY c.id"
        ).fetchall()
        return [model for (model,) in rows]

    def per_instance(self, key: str) -> tuple[float, ...]:
        """The natural-sign per-instance scores of the last evaluation of the candidate with `key`."""
        row = self._db.execute(
            "SELECT e.per_instance FROM evaluations e JOIN candidates c ON c.id = e.candidate"
            " WHERE c.key = ? ORDER BY e.id DESC LIMIT 1",
            (key,),
        ).fetchone()
        return () if row is None else tuple(json.loads(row[0]))

    def trajectories(self) -> list[StoredTrajectory]:
        """Every stored episode with the generation and candidate it belongs to, in the order made."""
        rows = self._db.execute(
            "SELECT s.generation, c.key, t.instance, t.reward, t.turns FROM trajectories t"
            " JOIN evaluations e ON e.id = t.evaluation JOIN candidates c ON c.id = e.candidate"
            " JOIN steps s ON s.step = t.step ORDER BY t.id"
        ).fetchall()
        return [
            StoredTrajectory(
                generation, key, Trajectory(instance, tuple(Turn(**turn) for turn in json.loads(turns)), reward)
            )
            for generation, key, instance, reward, turns in rows
        ]

    def llm_totals(self, operator: str | None = None) -> dict[str, int]:
        """Calls and tokens of every LLM call, or of one operator's (e.g. `coevo.novelty.JUDGE`)."""
        calls, prompt_tokens, completion_tokens = self._db.execute(
            "SELECT COUNT(*), COALESCE(SUM(prompt_tokens), 0), COALESCE(SUM(completion_tokens), 0) FROM llm_calls"
            " WHERE ? IS NULL OR operator = ?",
            (operator, operator),
        ).fetchone()
        return {"calls": calls, "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}

    def edit_counts(self) -> dict[str, int]:
        """Diff answers by kind: "applied" (patched the parent), "failed" (did not apply, or broke the
        code), "fallback" (whole rewrites after a request's diffs all failed); all 0 without diffs."""
        rows = self._db.execute("SELECT edit, COUNT(*) FROM llm_calls WHERE edit IS NOT NULL GROUP BY edit")
        return {kind: 0 for kind in EDIT_KINDS} | dict(rows.fetchall())

    def model_usage(self) -> dict[str, dict[str, int]]:
        """Calls and tokens by the model of an ensemble that answered them; empty for a run of one model."""
        rows = self._db.execute(
            "SELECT model, COUNT(*), COALESCE(SUM(prompt_tokens), 0), COALESCE(SUM(completion_tokens), 0)"
            " FROM llm_calls WHERE model IS NOT NULL GROUP BY model ORDER BY MIN(id)"
        )
        return {
            model: {"calls": calls, "prompt_tokens": prompt, "completion_tokens": completion}
            for model, calls, prompt, completion in rows
        }

    def model_children(self) -> list[ModelChild]:
        """Each candidate a model of an ensemble wrote, with the model and its call's tokens, in call order."""
        rows = self._db.execute(
            "SELECT l.model, l.prompt_tokens, l.completion_tokens, c.data FROM llm_calls l"
            " JOIN candidates c ON c.llm_call = l.id WHERE l.model IS NOT NULL ORDER BY l.id"
        ).fetchall()
        return [
            ModelChild(model, prompt or 0, completion or 0, Candidate.from_dict(json.loads(data)))
            for model, prompt, completion, data in rows
        ]

    def embeddings(self) -> dict[str, np.ndarray]:
        """Candidate key -> its code's embedding, as the novelty check computed it."""
        rows = self._db.execute("SELECT key, vector FROM embeddings").fetchall()
        return {key: np.frombuffer(vector, dtype=np.float32) for key, vector in rows}

    def novelty_checks(self) -> list[dict[str, Any]]:
        """Every judged child in order: its key, nearest member, cosine, the judge's verdict, the outcome,
        and the judge's call."""
        cursor = self._db.cursor()
        cursor.row_factory = sqlite3.Row
        return [dict(row) for row in cursor.execute("SELECT * FROM novelty_checks ORDER BY id")]

    def novelty_counts(self) -> dict[str, int]:
        """Judged children by outcome: "novel" (the judge said so), "resampled" (asked again), "rejected"
        (still not novel on the last try: recorded, never evaluated); all 0 without the check."""
        rows = self._db.execute("SELECT outcome, COUNT(*) FROM novelty_checks GROUP BY outcome")
        return {outcome: 0 for outcome in NOVELTY_OUTCOMES} | dict(rows.fetchall())

    def llm_call_count(self) -> int:
        """Every LLM call of the run: those recorded one by one (proposals, reflections), and an agent's
        turns, counted in the step state (`policy_calls`) and in each held-out figure (`llm_calls`)."""
        played = (self.last_state() or {}).get("policy_calls", 0)
        measured = sum(figure.get("llm_calls", 0) for figure in self.heldout_figures().values())
        return self.llm_totals()["calls"] + played + measured

    def llm_calls(self) -> list[dict[str, Any]]:
        """Every LLM call as a dict; the row factory is set on this query's own cursor, since the
        connection is shared across threads."""
        cursor = self._db.cursor()
        cursor.row_factory = sqlite3.Row
        return [dict(row) for row in cursor.execute("SELECT * FROM llm_calls ORDER BY id")]

    def prompts(self) -> list[dict[str, Any]]:
        rows = self._db.execute("SELECT step, data FROM prompts ORDER BY step, id").fetchall()
        return [{**json.loads(data), "step": step} for step, data in rows]


@dataclass(frozen=True)
class StoredTrajectory:
    """An episode as the store keeps it: which generation and candidate (by key) it was scored for."""

    generation: int
    candidate: str
    trajectory: Trajectory


@dataclass(frozen=True)
class ModelChild:
    """A candidate as an ensemble's bandit weighs it: which model wrote it, for how many tokens."""

    model: str
    prompt_tokens: int
    completion_tokens: int
    candidate: Candidate


class StoreHistory:
    """The ES engine's history, kept in the store so updates commit with the step that made them."""

    def __init__(self, store: RunStore, run_step: int) -> None:
        self.store = store
        self.run_step = run_step

    def append(self, record: UpdateRecord) -> None:
        self.store.add_es_update(self.run_step, record)

    def load(self) -> list[UpdateRecord]:
        return self.store.es_records()


def _start_ticks(pid: int) -> str | None:
    """When process `pid` started (Linux: clock ticks since boot), so a reused pid is not taken for the
    run's; None where /proc does not say."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _this_process() -> dict[str, Any]:
    return {"host": socket.gethostname(), "pid": os.getpid(), "started": _start_ticks(os.getpid())}


def _is_alive(owner: dict[str, Any]) -> bool:
    try:
        os.kill(owner["pid"], 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process holds the pid: it exists
        pass
    return owner["started"] is None or _start_ticks(owner["pid"]) == owner["started"]


def _columns(db: sqlite3.Connection) -> dict[str, list[str]]:
    tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    return {table: [row[1] for row in db.execute(f"PRAGMA table_info({table})")] for table in tables}


def _schema_damage(db: sqlite3.Connection) -> str | None:
    """What the database lacks of the tables and columns `SCHEMA` makes, in words; None when nothing."""
    expected = sqlite3.connect(":memory:")
    expected.executescript(SCHEMA)
    wanted, present = _columns(expected), _columns(db)
    expected.close()
    missing_tables = [table for table in wanted if table not in present]
    if missing_tables:
        return f"missing table{'s' * (len(missing_tables) > 1)} {', '.join(missing_tables)}"
    missing_columns = [
        f"{table}.{column}" for table, columns in wanted.items() for column in columns if column not in present[table]
    ]
    if missing_columns:
        return f"missing column{'s' * (len(missing_columns) > 1)} {', '.join(missing_columns)}"
    return None


def _connect(path: Path) -> sqlite3.Connection:
    connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=FULL")
    return connection
