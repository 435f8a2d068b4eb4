"""The command line every peer script shares, and the hop into the peer's own venv."""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import urllib.request
from collections.abc import Mapping
from pathlib import Path

from venvs import install, python_of

LOG_NAME = "evaluations.jsonl"


def peer_arguments(doc: str | None, flags: Mapping[str, str] | None = None) -> argparse.Namespace:
    """Parse --task --seed --evaluations --base-url --model --out (and the knobs with defaults), plus
    the peer's own on/off `flags` (option: help); points the scoring log at OUT/evaluations.jsonl."""
    parser = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    for option, help_text in (flags or {}).items():
        parser.add_argument(option, action="store_true", help=help_text)
    parser.add_argument("--task", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--evaluations", type=int, default=64, help="candidate evaluations (the fixed budget)")
    parser.add_argument("--base-url", required=True, help="the OpenAI-compatible endpoint (coevo serve)")
    parser.add_argument("--model", required=True, help="the model id the server serves")
    parser.add_argument("--out", required=True, help="directory for the peer's files and the evaluation log")
    parser.add_argument("--concurrency", type=int, default=8, help="requests in flight at once, where the peer can")
    parser.add_argument("--max-tokens", type=int, default=384)
    parser.add_argument("--llm-timeout", type=int, default=1800, help="seconds per LLM request (CPU is slow)")
    parser.add_argument(
        "--max-llm-calls", type=int, default=0, help="stop after this many requests (0: 4 x evaluations)"
    )
    args = parser.parse_args()
    if args.evaluations < 2:
        parser.error("--evaluations must be at least 2")
    Path(args.out).mkdir(parents=True, exist_ok=True)
    os.environ["COEVO_PEER_LOG"] = str(Path(args.out).resolve() / LOG_NAME)
    return args


def in_peer_venv(peer: str, script: str) -> None:
    """Re-execute `script` with the peer's venv interpreter unless already in it (installing it first)."""
    python = python_of(peer)
    if Path(sys.prefix).resolve() != python.parent.parent.resolve():
        python = install(peer)
        os.execv(str(python), [str(python), script, *sys.argv[1:]])


def served_requests(base_url: str) -> int:
    """Requests `coevo serve` has answered so far (its /v1/ledger)."""
    with urllib.request.urlopen(f"{base_url.rstrip('/')}/ledger", timeout=30) as reply:
        return int(json.load(reply)["requests"])


def enforce_budget(args: argparse.Namespace, poll_s: float = 2.0) -> threading.Thread:
    """Stop this process once the evaluation log holds `evaluations` lines, or once the server has
    answered `max_llm_calls` requests since the start, and say which in OUT/stopped.json.

    The peers' own budgets count different things (iterations, evaluated samples, generations) and
    some never stop while the model writes nothing parseable; this makes the budget one number of
    candidate evaluations for everyone, with a bound on LLM calls as the backstop.
    """
    log = Path(os.environ["COEVO_PEER_LOG"])
    first = served_requests(args.base_url)
    call_cap = args.max_llm_calls or 4 * args.evaluations

    def watch() -> None:
        while True:
            time.sleep(poll_s)
            done = sum(1 for _ in log.open()) if log.exists() else 0
            calls = served_requests(args.base_url) - first
            if done >= args.evaluations or calls >= call_cap:
                reason = "evaluations" if done >= args.evaluations else "llm_calls"
                stop = {"reason": reason, "evaluations": done, "llm_calls": calls}
                (log.parent / "stopped.json").write_text(json.dumps(stop) + "\n")
                print(f"budget: stopped on {reason} ({done} evaluations, {calls} LLM calls)", flush=True)
                os._exit(0)  # the peers' worker pools would otherwise keep sampling

    thread = threading.Thread(target=watch, name="coevo-budget", daemon=True)
    thread.start()
    return thread
