"""TRL's `GRPOTrainer` on an agent environment: the gradient baseline `es` is compared with.

Multi-turn, the simple honest way: a training prompt is the observation the environment rebuilds at
the start of an episode (the reference rebuilds the prompt each turn with no chat history), the
completion is the first action, and its reward is the outcome of the whole episode rolled out from that
action with the current policy playing the later turns. TRL's `environment_factory` was not used: it
drives environments through tool calls, which a 135M chat model does not write, and `rollout_func` is
marked experimental and bypasses TRL's own generation. Later turns are played but not trained on.

Each call to `GRPOStepper.step` is one optimizer step over `len(seeds)` prompts x `num_generations`
completions; the trainer (and its AdamW state and reference model) lives across steps.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from datasets import Dataset
from transformers import PrinterCallback
from trl import GRPOConfig, GRPOTrainer

from coevo.llm.base import AGENT_SAMPLING
from tasks.agents import llm_policy, make_env, rollout

if TYPE_CHECKING:
    from coevo.llm.hf import HFBackend


@dataclass(frozen=True)
class GRPOSettings:
    """The reference baseline's settings (REFERENCES section 7)."""

    learning_rate: float = 1e-6
    beta: float = 1e-3
    epsilon: float = 0.2
    num_generations: int = 8
    max_completion_length: int = AGENT_SAMPLING.max_new_tokens
    temperature: float = AGENT_SAMPLING.temperature
    top_p: float = AGENT_SAMPLING.top_p


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
        self.episodes_played = 0
        _give_a_reference_path(llm.model, output_dir / "reference")
        args = GRPOConfig(
            output_dir=str(output_dir),
            learning_rate=settings.learning_rate,
            lr_scheduler_type="constant",
            beta=settings.beta,
            epsilon=settings.epsilon,
            num_generations=settings.num_generations,
            per_device_train_batch_size=settings.num_generations,
            gradient_accumulation_steps=prompts_per_step,
            max_completion_length=settings.max_completion_length,
            temperature=settings.temperature,
            top_p=settings.top_p,
            max_steps=1,
            bf16=False,
            gradient_checkpointing=False,
            use_cpu=not _has_cuda(),
            report_to="none",
            save_strategy="no",
            logging_steps=1,
            disable_tqdm=True,
            seed=seed,
        )
        self.trainer = GRPOTrainer(
            model=llm.model,
            reward_funcs=self.episode_rewards,
            args=args,
            train_dataset=self._dataset([0] * prompts_per_step),
            processing_class=llm.tokenizer,
        )
        self.trainer.remove_callback(PrinterCallback)  # each step's metrics go to the run's grpo_history.jsonl

    def step(self, seeds: Sequence[int]) -> dict[str, float]:
        """One optimizer step on the first turns of `seeds`; the trainer's logged metrics of that step."""
        self.trainer.train_dataset = self._dataset(seeds)
        self.trainer.train()
        self.llm.model.eval()
        logged = [entry for entry in self.trainer.state.log_history if "loss" in entry]
        return {k: float(v) for k, v in (logged[-1] if logged else {}).items() if isinstance(v, (int, float))}

    def episode_rewards(self, prompts: list[Any], completions: list[Any], seed: list[int], **_: Any) -> list[float]:
        """Each completion played as the first action of its episode; the episode's reward."""
        first_actions = [_text(c) for c in completions]

        def policy(turn_prompts: list[str]):
            if all(p.turn == 1 for p in turn_prompts):
                return first_actions
            return later_turns(turn_prompts)

        later_turns = llm_policy(self.llm, AGENT_SAMPLING, self.seed)
        was_training = self.llm.model.training
        self.llm.model.eval()
        try:
            played = rollout(self.env, list(seed), policy, horizon=self.horizon)
        finally:
            self.llm.model.train(was_training)
        self.episodes_played += len(played)
        return [episode.reward for episode in played]

    def _dataset(self, seeds: Sequence[int]) -> Dataset:
        rows = [{"prompt": self._prompt(s), "seed": s} for s in seeds]
        return Dataset.from_list(rows)

    def _prompt(self, seed: int) -> str:
        """The first turn's prompt text exactly as coevo's own rollouts render it (chat template or not)."""
        observation = str(make_env(self.env, self.horizon).reset(seed))
        return self.llm.render([{"role": "user", "content": observation}])


def _text(completion: Any) -> str:
    """A completion's text, conversational (a list of messages) or plain."""
    if isinstance(completion, list):
        return completion[-1]["content"] if completion else ""
    return str(completion)


def _give_a_reference_path(model: Any, directory: Path) -> None:
    """TRL builds its KL reference model from `model.config`'s path; a model built in memory (the
    tests' tiny one) has none, so its current weights are saved to `directory` to load it from."""
    if Path(model.config._name_or_path or "/nonexistent").is_dir():
        return
    model.save_pretrained(directory)
    model.config._name_or_path = str(directory)


def _has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()

