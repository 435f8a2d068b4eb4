"""TRL's `GRPOTrainer` on an agent environment: the gradient baseline `es` is compared with.

Multi-turn as the reference trains it (Agentic ESOpt's released agent code): each training prompt stands for one
episode, its `num_generations` completions are whole episodes played by the current policy, and every
turn of every episode becomes a training example (the prompt rebuilt that turn, the tokens sampled that
turn) carrying its episode's group-normalised advantage. TRL's `environment_factory` drives environments
through tool calls, which a 135M chat model does not write, and its `rollout_func` concatenates turns
into one growing sequence, which the rebuilt-every-turn prompt is not; so `EpisodeGRPOTrainer` replaces
only TRL's generation step and keeps its loss, KL reference, clipping and optimizer.

Each call to `GRPOStepper.step` is one optimizer step over `len(seeds)` episodes x `num_generations`
rollouts; the trainer (and its AdamW state and reference model) lives across steps.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from datasets import Dataset
from transformers import PrinterCallback
from trl import GRPOConfig, GRPOTrainer

from coevo.llm.base import AGENT_SAMPLING
from tasks.agents import make_env, rollout
from tasks.agents.rollout import Prompt, turn_request

if TYPE_CHECKING:
    from coevo.llm.hf import HFBackend
    from tasks.agents.rollout import Episode


@dataclass(frozen=True)
class GRPOSettings:
    """The reference baseline's settings (Agentic ESOpt's released agent code)."""

    learning_rate: float = 1e-6
    beta: float = 1e-3
    epsilon: float = 0.2
    num_generations: int = 8
    max_completion_length: int = AGENT_SAMPLING.max_new_tokens
    temperature: float = AGENT_SAMPLING.temperature
    top_p: float = AGENT_SAMPLING.top_p


@dataclass(frozen=True)
class TurnSample:
    """One turn as a training example: the prompt the policy saw and the tokens it sampled."""

    prompt_ids: list[int]
    completion_ids: list[int]


class GRPOStepper:
    """One GRPO optimizer step at a time on `llm`'s model, in place, over the episodes of given seeds."""

    def __init__(
        self,
        llm: HFBackend,
        env: str,
        horizon: int,
        prompts_per_step: int,
        output_dir: Path,
        settings: GRPOSettings = GRPOSettings(),
        seed: int = 0,
    ) -> None:
        self.llm, self.env, self.horizon, self.seed = llm, env, horizon, seed
        self.settings = settings
        self.steps = 0
        self.turns = 0
        """Turns played by every rollout so far, one LLM call each."""
        _give_a_reference_path(llm.model, output_dir / "reference")
        args = GRPOConfig(
            output_dir=str(output_dir),
            learning_rate=settings.learning_rate,
            lr_scheduler_type="constant",
            beta=settings.beta,
            epsilon=settings.epsilon,
            loss_type="dapo",  # token sums over the batch's token count: what `compute_loss`'s chunks add up to
            num_generations=settings.num_generations,
            per_device_train_batch_size=settings.num_generations,
            gradient_accumulation_steps=prompts_per_step,
            max_completion_length=settings.max_completion_length,
            temperature=settings.temperature,
            top_p=settings.top_p,
            max_steps=1,
            bf16=False,
            activation_checkpointing=False,  # its deprecated alias `gradient_checkpointing` warns every run
            use_cpu=not torch.cuda.is_available(),
            report_to="none",
            save_strategy="no",
            logging_steps=1,
            disable_tqdm=True,
            seed=seed,
        )
        self.trainer = EpisodeGRPOTrainer(
            stepper=self,
            model=llm.model,
            reward_funcs=episode_reward,
            args=args,
            train_dataset=self._dataset([0] * prompts_per_step),
            processing_class=llm.tokenizer,
        )
        self.trainer.remove_callback(PrinterCallback)  # each step's metrics go to the run's grpo_history.jsonl

    def step(self, seeds: Sequence[int]) -> dict[str, float]:
        """One optimizer step on every turn of `seeds`' episodes; the trainer's logged metrics of that step."""
        self.trainer.train_dataset = self._dataset(seeds)
        self.trainer.train()
        self.llm.model.eval()
        self.steps += 1
        logged = [entry for entry in self.trainer.state.log_history if "loss" in entry]
        return {k: float(v) for k, v in (logged[-1] if logged else {}).items() if isinstance(v, (int, float))}

    def play(self, seeds: Sequence[int]) -> tuple[list[Episode], list[list[TurnSample]]]:
        """One episode per row, under the current weights; rollout k of a group samples from its own
        seed (run seed, step, k), so a group's rollouts differ and a step replays the same anywhere."""
        group = self.settings.num_generations
        samples: dict[tuple[int, int], TurnSample] = {}

        def policy(prompts: list[Prompt]):
            requests = [
                turn_request(p, AGENT_SAMPLING, _rollout_seed(self.seed, self.steps, p.episode % group)) for p in prompts
            ]
            completions = self.llm.generate_each(requests)
            for p, (messages, _), completion in zip(prompts, requests, completions, strict=True):
                prompt_ids = self.llm.tokenizer(self.llm.render(messages), add_special_tokens=False)["input_ids"]
                samples[p.episode, p.turn] = TurnSample(prompt_ids, list(completion.token_ids))
            return completions

        was_training = self.llm.model.training
        self.llm.model.eval()
        try:
            played = rollout(self.env, list(seeds), policy, horizon=self.horizon)
        finally:
            self.llm.model.train(was_training)
        turns = [[samples[row, turn] for turn in range(1, len(episode.turns) + 1)] for row, episode in enumerate(played)]
        self.turns += sum(len(episode.turns) for episode in played)
        return played, turns

    def _dataset(self, seeds: Sequence[int]) -> Dataset:
        return Dataset.from_list([{"prompt": self._prompt(s), "seed": s} for s in seeds])

    def _prompt(self, seed: int) -> str:
        """The first turn's prompt text exactly as coevo's own rollouts render it (chat template or not)."""
        observation = str(make_env(self.env, self.horizon).reset(seed))
        return self.llm.render([{"role": "user", "content": observation}])


def episode_reward(completions: list[Any], episode_reward: list[float], **_: Any) -> list[float]:
    """Each row's reward: the outcome of the whole episode it stands for (played in `EpisodeGRPOTrainer`)."""
    return list(episode_reward)


class EpisodeGRPOTrainer(GRPOTrainer):
    """`GRPOTrainer` whose generation step plays whole episodes and trains on every turn of them."""

    def __init__(self, *, stepper: GRPOStepper, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.stepper = stepper

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        """TRL's generation batch (each episode seed repeated `num_generations` times, consecutively)
        in; one row per played turn out, with its episode's advantage, padded to whole accumulation
        chunks with rows that carry no tokens."""
        played, turns = self.stepper.play([row["seed"] for row in inputs])
        for row, episode in zip(inputs, played, strict=True):
            row["episode_reward"] = episode.reward
        completions = [episode.turns[0].action if episode.turns else "" for episode in played]
        rewards = self._calculate_rewards(inputs, [row["prompt"] for row in inputs], completions, None)[:, 0]
        advantages = group_advantages(rewards, self.num_generations)
        rows = [(sample, advantage) for episode_turns, advantage in zip(turns, advantages.tolist(), strict=True)
                for sample in episode_turns]
        rows += [(TurnSample([], []), 0.0)] * (-len(rows) % self.args.steps_per_generation)
        batch = self._pad([sample for sample, _ in rows])
        batch["advantages"] = torch.tensor([a for _, a in rows], dtype=torch.float32, device=self.accelerator.device)
        batch["num_items_in_batch"] = batch["completion_mask"].sum()
        if self.beta != 0.0:
            with torch.no_grad():
                batch["ref_per_token_logps"] = self._get_per_token_logps_and_entropies(
                    self.ref_model,
                    torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1),
                    torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1),
                    batch["completion_ids"].size(1),
                    batch_size=self.args.per_device_train_batch_size,
                )[0]
        metrics = self._metrics["train"]
        metrics["reward"].append(rewards.mean().item())
        metrics["reward_std"].append(rewards.std().item() if len(rewards) > 1 else 0.0)
        metrics["turns_trained"].append(float(sum(len(t) for t in turns)))
        return batch

    def compute_loss(self, model: Any, inputs: dict[str, Any], return_outputs: bool = False, num_items_in_batch: Any = None):
        """TRL's loss over rows of at most `per_device_train_batch_size` turns at a time, each backpropagated
        as it is computed, so memory holds one chunk's activations however many turns the episodes took.
        Exact for the `dapo` loss: each chunk's token sum is divided by the whole batch's token count."""
        size = self.args.per_device_train_batch_size
        mask = inputs["completion_mask"]
        chunks = [slice(i, i + size) for i in range(0, mask.size(0), size) if mask[i : i + size].any()] or [slice(0, size)]
        earlier = torch.zeros((), device=mask.device)
        for chunk in chunks[:-1]:
            loss = super().compute_loss(model, _rows(inputs, chunk), return_outputs, num_items_in_batch)
            self.accelerator.backward(loss)
            earlier += loss.detach()
        return super().compute_loss(model, _rows(inputs, chunks[-1]), return_outputs, num_items_in_batch) + earlier

    def _pad(self, samples: list[TurnSample]) -> dict[str, torch.Tensor]:
        """Prompts left-padded, completions right-padded, as TRL's loss expects them."""
        pad = self.processing_class.pad_token_id
        prompt_width = max(1, max(len(s.prompt_ids) for s in samples))
        completion_width = max(1, max(len(s.completion_ids) for s in samples))

        def tensor(rows: list[list[int]]) -> torch.Tensor:
            return torch.tensor(rows, dtype=torch.long, device=self.accelerator.device)

        return {
            "prompt_ids": tensor([[pad] * (prompt_width - len(s.prompt_ids)) + s.prompt_ids for s in samples]),
            "prompt_mask": tensor([[0] * (prompt_width - len(s.prompt_ids)) + [1] * len(s.prompt_ids) for s in samples]),
            "completion_ids": tensor([s.completion_ids + [pad] * (completion_width - len(s.completion_ids)) for s in samples]),
            "completion_mask": tensor(
                [[1] * len(s.completion_ids) + [0] * (completion_width - len(s.completion_ids)) for s in samples]
            ),
        }


def _rows(batch: dict[str, Any], rows: slice) -> dict[str, Any]:
    """The batch restricted to `rows`; scalars (the batch's token count) kept whole."""
    return {k: v[rows] if isinstance(v, torch.Tensor) and v.ndim > 0 else v for k, v in batch.items()}


def group_advantages(rewards: torch.Tensor, group: int) -> torch.Tensor:
    """(reward - group mean) / (group std + 1e-4) over each run of `group` consecutive rows, as TRL
    normalises (`scale_rewards="group"`)."""
    grouped = rewards.view(-1, group)
    std = grouped.std(dim=1, keepdim=True) if group > 1 else torch.zeros_like(grouped[:, :1])
    return ((grouped - grouped.mean(dim=1, keepdim=True)) / (std + 1e-4)).flatten()


def _rollout_seed(seed: int, step: int, rollout_index: int) -> int:
    digest = hashlib.blake2b(f"grpo:{seed}:{step}:{rollout_index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


def _give_a_reference_path(model: Any, directory: Path) -> None:
    """TRL builds its KL reference model from `model.config`'s path; a model built in memory (the
    tests' tiny one) has none, so its current weights are saved to `directory` to load it from."""
    if Path(model.config._name_or_path or "/nonexistent").is_dir():
        return
    model.save_pretrained(directory)
    model.config._name_or_path = str(directory)
