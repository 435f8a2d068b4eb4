"""LLM mutation operators: prompts as evolvable templates, EoH operators, reflections, robust parsing.

Operators turn a task's description and parents into prompts and parse answers back; they know nothing
of evaluation. `dspy_rewriter` is imported on its own so that this package does not import DSPy.
"""

from coevo.llm.ledger import BudgetLedger, Usage
from coevo.operators.eoh_operators import EoHOperators, ProposalRequest
from coevo.operators.fingerprint import code_fingerprint
from coevo.operators.metering import metered_generate
from coevo.operators.parsing import FunctionSpec, ParsedCode, ParseFailure, parse_heuristic
from coevo.operators.records import Parent, Proposal, Rejection, TaskSpec, TextProposal
from coevo.operators.reflection import ComponentRewriter, Reflector
from coevo.operators.templates import EOH_OPERATORS, PromptTemplates, default_templates

__all__ = [
    "EOH_OPERATORS",
    "BudgetLedger",
    "ComponentRewriter",
    "EoHOperators",
    "FunctionSpec",
    "Parent",
    "ParseFailure",
    "ParsedCode",
    "PromptTemplates",
    "Proposal",
    "ProposalRequest",
    "Reflector",
    "Rejection",
    "TaskSpec",
    "TextProposal",
    "Usage",
    "code_fingerprint",
    "default_templates",
    "metered_generate",
    "parse_heuristic",
]
