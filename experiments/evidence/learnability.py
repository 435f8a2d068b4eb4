"""Can ES sharpen a skill the base model already has? The pre-registered experiment of PROTOCOL.md.

Three commands, each writing JSON lines to stdout (and, with --out, one JSON record to a file):

* ``screen``: per task and model, argmax accuracy of the right option among the task's candidates on
  held-out items (teacher-forced total log-probability of each option), one-sided exact binomial test
  against chance. A task qualifies when p < 0.01 and accuracy < 0.70.
* ``train``: OpenAI-ES with mirrored pairs on a dense deterministic reward: the mean log-softmax of
  the right option among the options, over fresh training items each generation, every member on the
  same items. ``--shuffle`` is the control: rewards permuted within each generation (same step sizes,
  no signal). The run directory keeps the ES history, so the run resumes and its weights replay.
* ``heldout``: base against trained weights (and against the control's) on fixed held-out items:
  argmax of the options (exact McNemar, paired per item) and sampled answers (temperature 0.7, one
  episode per item, success = the right number is the answer), also paired.

Usage (one torch thread, niced, as the protocol runs it):
    OMP_NUM_THREADS=1 nice -n 19 python experiments/evidence/learnability.py screen --model smollm2-135m
    ... train --task T --gens 50 --pop 16 --run-dir runs/learn/es
    ... train --task T --gens 50 --pop 16 --run-dir runs/learn/control --shuffle
    ... heldout --task T --trained runs/learn/es --control runs/learn/control --out runs/learn/heldout.json
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from evidence_file import merge

from coevo.es.engine import ESConfig, ESEngine
from coevo.es.host import TorchWeightsHost
from coevo.es.update_log import HISTORY_FILENAME, ESHistory, replay
from coevo.llm.base import SamplingParams
from coevo.llm.hf import HFBackend
from coevo.stats import binomial_tail, holm, mcnemar_exact


@dataclass(frozen=True)
class Item:
    """One question, its candidate answers and the index of the right one."""

    question: str
    options: tuple[str, ...]
    right: int


def _numeric_item(question: str, answer: int, rng: random.Random, misses: Sequence[int]) -> Item:
    options = {answer}
    while len(options) < 4:
        candidate = answer + rng.choice(misses)
        if candidate >= 0:
            options.add(candidate)
    ordered = sorted(options)
    return Item(question, tuple(str(o) for o in ordered), ordered.index(answer))


def add_small(rng: random.Random) -> Item:
    a, b = rng.randrange(0, 10), rng.randrange(0, 10)
    return _numeric_item(f"What is {a} + {b}? Answer with the number only.", a + b, rng, (-2, -1, 1, 2, 10))


def successor(rng: random.Random) -> Item:
    n = rng.randrange(10, 1000)
    return _numeric_item(f"What number comes after {n}? Answer with the number only.", n + 1, rng, (-2, -1, 1, 9, 10))


def predecessor(rng: random.Random) -> Item:
    n = rng.randrange(10, 1000)
    return _numeric_item(f"What number comes before {n}? Answer with the number only.", n - 1, rng, (-1, 1, 2, -10, 10))


def double(rng: random.Random) -> Item:
    n = rng.randrange(2, 50)
    return _numeric_item(f"What is twice {n}? Answer with the number only.", 2 * n, rng, (-2, -1, 1, 2, -n, 10))


def larger(rng: random.Random) -> Item:
    a, b = rng.sample(range(10, 100), 2)
    return Item(f"Which number is larger, {a} or {b}? Answer with the number only.", (str(a), str(b)), int(b > a))


def multiply_small(rng: random.Random) -> Item:
    a, b = rng.randrange(2, 10), rng.randrange(2, 10)
    return _numeric_item(f"What is {a} * {b}? Answer with the number only.", a * b, rng, (-a, -b, a, b, -1, 1))


def multiply(rng: random.Random) -> Item:
    """Two-digit products whose near misses share the last digit, so only the whole product tells."""
    a, b = rng.randrange(10, 100), rng.randrange(10, 100)
    return _numeric_item(f"What is {a} * {b}? Answer with the number only.", a * b, rng, (-100, -20, -10, 10, 20, 100))


def multiply_mixed(rng: random.Random) -> Item:
    """A two-digit number times a digit: 720 distinct facts, so held-out items are distinct questions."""
    a, b = rng.randrange(10, 100), rng.randrange(2, 10)
    return _numeric_item(f"What is {a} * {b}? Answer with the number only.", a * b, rng, (-b, b, -10, 10, -1, 1))


TASKS: dict[str, Callable[[random.Random], Item]] = {
    "multiply_mixed": multiply_mixed,
    "multiply": multiply,
    "add_small": add_small,
    "successor": successor,
    "predecessor": predecessor,
    "double": double,
    "larger": larger,
    "multiply_small": multiply_small,
}
HELDOUT_SEED = 99
"""Held-out items come from this seed; training items from 1000 + generation."""


PRIMARY = ("argmax:trained_vs_base", "argmax:trained_vs_control")
"""The pre-registered primary tests (PROTOCOL.md), Holm-corrected together at `ALPHA`."""
ALPHA = 0.01

HELDOUT_ITEMS = 400
"""Held-out questions set aside for `heldout`: training never asks one of them."""
SAMPLED_ITEMS = 200
"""Of those, the first ones are also answered by sampling."""


def draw(task: str, seed: int, count: int, excluded: frozenset[str] = frozenset()) -> list[Item]:
    """`count` items with distinct questions, none of them in `excluded` (questions, not items: another
    draw of a held-out question with other near misses is still that question)."""
    rng, out, seen = random.Random(f"{task}:{seed}"), [], set(excluded)
    for _ in range(1000 * count):
        item = TASKS[task](rng)
        if item.question not in seen:
            seen.add(item.question)
            out.append(item)
            if len(out) == count:
                return out
    raise ValueError(f"task {task} has fewer than {count} questions outside the {len(excluded)} excluded")


def heldout_items(task: str) -> list[Item]:
    return draw(task, HELDOUT_SEED, HELDOUT_ITEMS)


def training_items(task: str, generation: int, count: int) -> list[Item]:
    """A generation's fresh items, on questions the held-out set does not ask."""
    return draw(task, 1000 + generation, count, frozenset(i.question for i in heldout_items(task)))


class Scorer:
    """Teacher-forced log-probabilities of each item's options under the model's live weights."""

    def __init__(self, backend: HFBackend, chunk: int = 32) -> None:
        self.backend = backend
        self.chunk = chunk

    def prompt_ids(self, item: Item) -> list[int]:
        text = self.backend.render([{"role": "user", "content": item.question}])
        return self.backend.tokenizer(text, add_special_tokens=False)["input_ids"]

    def option_logprobs(self, batch: Sequence[Item]) -> list[np.ndarray]:
        """Per item, the total log-probability of each option as the whole answer. Each prompt is
        computed once; its keys and values are then shared by its options' rows."""
        out = []
        for start in range(0, len(batch), self.chunk):
            out += self._chunk_logprobs(batch[start : start + self.chunk])
        return out

    def shared_prefix(self, prompts: Sequence[list[int]]) -> int:
        """How many leading tokens every prompt shares (the chat template's system turn)."""
        length = min(map(len, prompts))
        for k in range(length):
            if len({p[k] for p in prompts}) > 1:
                return k
        return length - 1  # keep one token per prompt, whose logits predict the answer

    def _chunk_logprobs(self, batch: Sequence[Item]) -> list[np.ndarray]:
        """The shared prefix once, each prompt's rest once, then every option's tokens on their prompt's
        keys and values. Rows are padded between the prefix and their rest, and positions follow the
        attention mask, so each row computes what it would alone."""
        tokenizer, model = self.backend.tokenizer, self.backend.model
        pad = tokenizer.pad_token_id or 0
        prompts = [self.prompt_ids(item) for item in batch]
        shared = self.shared_prefix(prompts)
        head = model(input_ids=torch.tensor([prompts[0][:shared]]), use_cache=True, logits_to_keep=1)
        cache = head.past_key_values
        cache.batch_repeat_interleave(len(prompts))
        rests = [p[shared:] for p in prompts]
        width = max(map(len, rests))
        ids = torch.full((len(rests), width), pad)
        mask = torch.zeros((len(rests), shared + width), dtype=torch.long)
        mask[:, :shared] = 1
        for j, rest in enumerate(rests):  # padded on the left of the rest: every prompt ends at the last column
            ids[j, width - len(rest) :] = torch.tensor(rest)
            mask[j, shared + width - len(rest) :] = 1
        positions = (mask.cumsum(-1) - 1).clamp(min=0)[:, shared:]
        first = model(input_ids=ids, attention_mask=mask, position_ids=positions, cache=cache, logits_to_keep=1)
        owner = [j for j, item in enumerate(batch) for _ in item.options]
        answers = [tokenizer(o, add_special_tokens=False)["input_ids"] for item in batch for o in item.options]
        cache.reorder_cache(torch.tensor(owner))
        span = max(map(len, answers))
        answer_ids = torch.full((len(answers), span), pad)
        answer_mask = torch.zeros((len(answers), span), dtype=torch.long)
        for j, answer in enumerate(answers):
            answer_ids[j, : len(answer)] = torch.tensor(answer)
            answer_mask[j, : len(answer)] = 1
        lengths = mask.sum(-1)[owner]
        rest = model(
            input_ids=answer_ids,
            attention_mask=torch.cat([mask[owner], answer_mask], dim=1),
            position_ids=lengths[:, None] + torch.arange(span)[None, :],
            cache=cache,
        )
        # token k of an answer is predicted at the prompt's last position (k = 0) or answer position k - 1
        logits = torch.cat([first.logits[owner, -1:], rest.logits[:, :-1]], dim=1).float().log_softmax(-1)
        picked = logits.gather(2, answer_ids[:, :, None])[:, :, 0] * answer_mask
        totals = picked.sum(-1).numpy()
        out, at = [], 0
        for item in batch:
            out.append(totals[at : at + len(item.options)])
            at += len(item.options)
        return out

    def measure(self, batch: Sequence[Item]) -> tuple[float, np.ndarray]:
        """(mean log-softmax of the right option among the options, per-item argmax hits)."""
        scores = self.option_logprobs(batch)
        right = [s[i.right] - np.logaddexp.reduce(s) for s, i in zip(scores, batch, strict=True)]
        hits = np.array([int(np.argmax(s)) == i.right for s, i in zip(scores, batch, strict=True)])
        return float(np.mean(right)), hits


def load(model: str) -> HFBackend:
    """The model computing in bf16 where the CPU has it natively (fp32 elsewhere); ES keeps fp32 masters."""
    torch.set_grad_enabled(False)
    return HFBackend.load(model, dtype="auto")


def screen(args: argparse.Namespace) -> dict:
    backend = load(args.model)
    scorer = Scorer(backend)
    rows = []
    for task in args.tasks:
        try:
            batch = heldout_items(task)[: args.n]
        except ValueError as exc:  # too few distinct questions for a held-out set: cannot qualify
            rows.append({"model": args.model, "task": task, "qualifies": False, "reason": str(exc)})
            print(json.dumps(rows[-1]), flush=True)
            continue
        started = time.time()
        _, hits = scorer.measure(batch)
        chance = float(np.mean([1 / len(i.options) for i in batch]))
        p = binomial_tail(int(hits.sum()), len(batch), chance)
        row = {
            "model": args.model,
            "task": task,
            "n": len(batch),
            "accuracy": float(hits.mean()),
            "chance": chance,
            "p_one_sided": p,
            "qualifies": bool(p < 0.01 and hits.mean() < 0.70 and len(batch) == HELDOUT_ITEMS),
            "seconds": round(time.time() - started, 1),
        }
        print(json.dumps(row), flush=True)
        rows.append(row)
    return {"screen": rows}


def train(args: argparse.Namespace) -> dict:
    """ES on the task's dense reward. The run directory keeps the ES history (the weights are the base
    model plus its replayed updates) and one line per generation, so a stopped run resumes where it
    was: `train` again with the same arguments."""
    run_dir = Path(args.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    settings = {k: v for k, v in vars(args).items() if k not in ("out", "command")}
    settings_file = run_dir / "settings.json"
    if settings_file.exists() and without_gens(json.loads(settings_file.read_text())) != without_gens(settings):
        raise SystemExit(f"{run_dir} holds a run with other settings: {settings_file.read_text()}")
    settings_file.write_text(json.dumps(settings, indent=1))
    backend = load(args.model)
    scorer = Scorer(backend)
    host = TorchWeightsHost(backend.model, scope="full", restore="exact")
    config = ESConfig(
        population_size=args.pop,
        antithetic=True,
        sigma=args.sigma,
        alpha=args.alpha,
        shaping="centered_rank",
        seed=args.seed,
    )
    engine = ESEngine.resume(config, host, ESHistory(run_dir / HISTORY_FILENAME))
    log_file = run_dir / "generations.jsonl"
    log = [json.loads(line) for line in log_file.read_text().splitlines()] if log_file.exists() else []
    log = log[: engine.step]  # a generation logged after its update's record survives; one without does not
    log_file.write_text("".join(json.dumps(row) + "\n" for row in log))
    started = time.time()
    for generation in range(engine.step + 1, args.gens + 1):
        batch = training_items(args.task, generation, args.k)
        members = engine.ask()
        rewards = []
        for member in members:
            with host.perturbed(member):
                rewards.append(scorer.measure(batch)[0])
        shuffled = np.random.default_rng([args.seed, generation]).permutation(rewards)
        told = [float(r) for r in shuffled] if args.shuffle else rewards
        engine.tell(members, told)
        row = {
            "generation": generation,
            "reward_mean": float(np.mean(rewards)),
            "spread": float(np.max(rewards) - np.min(rewards)),
            "rewards": rewards,
            "told": told,
            "seconds": round(time.time() - started),
        }
        print(json.dumps({k: v for k, v in row.items() if k not in ("rewards", "told")}), flush=True)
        with log_file.open("a") as file:
            file.write(json.dumps(row) + "\n")
        log.append(row)
    return {"train": settings | {"generations": log}}


def without_gens(settings: dict) -> dict:
    """A run's settings less its length, which a resumed run may extend."""
    return {k: v for k, v in settings.items() if k != "gens"}


def trained(backend: HFBackend, run_dir: str | None) -> None:
    """Move `backend`'s model (base weights) to a run's: its ES history replayed."""
    if run_dir is not None:
        replay(backend.model, ESHistory(Path(run_dir) / HISTORY_FILENAME))


def answer_of(text: str) -> str | None:
    """The first number in a sampled answer, or None."""
    match = re.search(r"-?\d+", text)
    return None if match is None else match.group()


def sampled_hits(backend: HFBackend, batch: Sequence[Item], seed: int) -> np.ndarray:
    """One sampled answer per item (temperature 0.7, per-item seeds shared by every weights compared)."""
    sampling = SamplingParams(max_new_tokens=8, temperature=0.7, top_p=0.95, seed=seed)
    requests = [[{"role": "user", "content": item.question}] for item in batch]
    answers = backend.generate(requests, sampling)
    return np.array([answer_of(a.text) == i.options[i.right] for a, i in zip(answers, batch, strict=True)])


def heldout(args: argparse.Namespace) -> dict:
    """Each side on the same held-out items: the base weights, then each run's (replayed on a fresh load)."""
    argmax_items = heldout_items(args.task)
    sampled_items = argmax_items[:SAMPLED_ITEMS]
    measured = {}
    for side, run_dir in {"base": None, "trained": args.trained, "control": args.control}.items():
        if side != "base" and run_dir is None or args.only not in (None, side):
            continue
        kept = None if args.cache is None else Path(args.cache) / f"{side}.json"
        if kept is not None and kept.exists():
            measured[side] = json.loads(kept.read_text())
            continue
        backend = load(args.model)
        trained(backend, run_dir)
        logp, hits = Scorer(backend).measure(argmax_items)
        episodes = sampled_hits(backend, sampled_items, args.seed)
        measured[side] = {"logp": logp, "argmax": hits.tolist(), "sampled": episodes.tolist()}
        print(json.dumps({"side": side, "logp": logp, "argmax": float(hits.mean()), "sampled": float(episodes.mean())}))
        if kept is not None:
            kept.parent.mkdir(parents=True, exist_ok=True)
            kept.write_text(json.dumps(measured[side]))
    tests = {}
    for side, against in (("trained", "base"), ("trained", "control"), ("control", "base")):
        if side not in measured or against not in measured:
            continue
        for endpoint in ("argmax", "sampled"):
            after, before = np.array(measured[side][endpoint]), np.array(measured[against][endpoint])
            gained, lost = int((after & ~before).sum()), int((before & ~after).sum())
            tests[f"{endpoint}:{side}_vs_{against}"] = {
                "gained": gained,
                "lost": lost,
                "p_two_sided": mcnemar_exact(gained, lost),
            }
    for family in (PRIMARY, [name for name in tests if name not in PRIMARY]):
        present = {name: tests[name]["p_two_sided"] for name in family if name in tests}
        for name, adjusted in holm(present).items():
            tests[name] |= {"p_holm": adjusted, "family": "primary" if name in PRIMARY else "secondary"}
    for name, test in tests.items():
        print(json.dumps({name: test}), flush=True)
    primary = [tests.get(name) for name in PRIMARY]
    verdict = all(t is not None and t["p_holm"] < ALPHA and t["gained"] > t["lost"] for t in primary)
    record = {
        "task": args.task,
        "model": args.model,
        "questions": [item.question for item in argmax_items],
        "sides": measured,
        "runs": {side: run_dir for side, run_dir in (("trained", args.trained), ("control", args.control))},
        "tests": tests,
        "primary_endpoint_met": verdict,
    }
    if args.results:
        merge("learnability", record, Path(args.results))
    return {"heldout": record}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("screen", "train", "heldout"):
        sub = commands.add_parser(name)
        sub.add_argument("--model", default="smollm2-135m")
        sub.add_argument("--out", help="write the command's record here as JSON")
        sub.add_argument("--seed", type=int, default=0)
        if name == "screen":
            sub.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
            sub.add_argument("--n", type=int, default=HELDOUT_ITEMS, help="held-out items scored (qualifying: all)")
        else:
            sub.add_argument("--task", required=True, choices=list(TASKS))
        if name == "train":
            sub.add_argument("--gens", type=int, default=50)
            sub.add_argument("--pop", type=int, default=16)
            sub.add_argument("--k", type=int, default=16, help="fresh training items per generation")
            sub.add_argument("--sigma", type=float, default=1e-3)
            sub.add_argument("--alpha", type=float, default=1e-3)
            sub.add_argument("--shuffle", action="store_true", help="the control: rewards permuted per generation")
            sub.add_argument("--run-dir", required=True, help="where the ES history and the log are kept")
        if name == "heldout":
            sub.add_argument("--trained", help="the ES run's directory")
            sub.add_argument("--results", help="merge the record into this evidence file under `learnability`")
            sub.add_argument("--cache", help="keep each side's measurement here and reuse it (sides measured apart)")
            sub.add_argument("--only", choices=("base", "trained", "control"), help="measure this side alone")
            sub.add_argument("--control", help="the control run's directory")
    args = parser.parse_args(argv)
    record = {"screen": screen, "train": train, "heldout": heldout}[args.command](args)
    if args.out:
        Path(args.out).write_text(json.dumps(record, indent=1))


if __name__ == "__main__":
    sys.exit(main())
