"""The skill library: skills in the SKILL.md layout, bounded edits, gates, dedupe and prompt rendering."""

from coevo.skills.edits import AddSkill, DeleteSkill, Edit, EditError, MergeSkills, ReplaceSection, apply_edit
from coevo.skills.gates import (
    AcceptanceGate,
    CodeTestGate,
    CodeTestResult,
    CodeTestRunner,
    RecurrenceGate,
    Refusal,
    RefusedBuffer,
    admit,
)
from coevo.skills.library import EditRecord, Library, load_library, save_library
from coevo.skills.pruning import duplicate_key, merge_duplicates, prune_unused, stale_skills
from coevo.skills.render import by_credit, render_prompt, whitespace_tokens
from coevo.skills.skill import Skill, SkillKind, SkillMeta
from coevo.skills.skill_md import SkillFormatError

__all__ = [
    "AcceptanceGate",
    "AddSkill",
    "CodeTestGate",
    "CodeTestRunner",
    "DeleteSkill",
    "Edit",
    "EditError",
    "EditRecord",
    "Library",
    "MergeSkills",
    "RecurrenceGate",
    "Refusal",
    "RefusedBuffer",
    "ReplaceSection",
    "Skill",
    "SkillFormatError",
    "SkillKind",
    "SkillMeta",
    "CodeTestResult",
    "admit",
    "apply_edit",
    "by_credit",
    "duplicate_key",
    "load_library",
    "merge_duplicates",
    "prune_unused",
    "render_prompt",
    "save_library",
    "stale_skills",
    "whitespace_tokens",
]
