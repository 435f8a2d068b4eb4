"""The prompt-component rewriter as a DSPy program, so DSPy optimisers and any `dspy.LM` can drive it
(extra `dspy`).

Same job as `reflection.ComponentRewriter`, expressed as a Signature (the spec) and a Module (the
strategy); which LM runs it is DSPy's configuration (`dspy.context(lm=...)`), e.g. the coevo backend
behind `coevo.llm.dspy_lm` or any OpenAI-compatible server.
"""

from __future__ import annotations

from collections.abc import Sequence

from coevo.extras import require
from coevo.operators.templates import placeholder_problem

dspy = require("dspy", "dspy", "coevo.operators.dspy_rewriter")


class RewriteInstruction(dspy.Signature):
    """Rewrite an instruction given to a language model so that the outputs it leads to avoid the failures
    described in the feedback. Keep every $placeholder of the current instruction exactly as written."""

    current_instruction: str = dspy.InputField(desc="the instruction as it is used now")
    feedback: str = dspy.InputField(desc="what the evaluator said about outputs produced under it")
    new_instruction: str = dspy.OutputField(desc="the improved instruction, text only")


class InstructionRewriter(dspy.Module):
    """current instruction + feedback -> new instruction."""

    def __init__(self) -> None:
        super().__init__()
        self.rewrite = dspy.Predict(RewriteInstruction)

    def forward(self, current_instruction: str, feedback: str | Sequence[str]) -> dspy.Prediction:
        if not isinstance(feedback, str):
            feedback = "\n".join(f"- {item.strip()}" for item in feedback)
        prediction = self.rewrite(current_instruction=current_instruction, feedback=feedback)
        return dspy.Prediction(new_instruction=prediction.new_instruction.strip())


def rewrite_component(component: str, current: str, feedback: Sequence[str]) -> str:
    """Rewrite a `PromptTemplates` component with the configured DSPy LM; ValueError if it breaks placeholders."""
    new_text = InstructionRewriter()(current_instruction=current, feedback=feedback).new_instruction
    if problem := placeholder_problem(component, new_text):
        raise ValueError(f"rewritten text rejected: {problem}")
    return new_text
