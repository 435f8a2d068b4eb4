"""Diff edits: SEARCH/REPLACE blocks against a parent's code, read from an answer and applied exactly.

The format is OpenEvolve's and ShinkaEvolve's::

    <<<<<<< SEARCH
    lines copied from the parent
    =======
    the lines that take their place
    >>>>>>> REPLACE

Blocks apply in order, each to the code the previous ones left, and each SEARCH text must match one
place of that code as whole lines. Models copy code imperfectly, so matching relaxes in steps, and
stops at the first step that finds anything: the lines exactly; then ignoring trailing whitespace;
then ignoring a consistent shift of indentation at any column (the REPLACE lines are shifted the same
way, so they land at the parent's indentation). A SEARCH text found more than once at that step is
ambiguous and fails, as does one found nowhere; the caller resamples, then falls back to a rewrite.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Callable
from dataclasses import dataclass

from coevo.operators.parsing import ParseFailure

DIFF_OPERATORS: frozenset[str] = frozenset({"m1", "m2"})
"""The operators that change one parent, and so may answer with edits to it. Crossover (e1, e2) and
i1 write a function of their own; which of them runs is the method's choice."""

_BLOCK = re.compile(
    r"^[ \t]*<{7}[ \t]*SEARCH[ \t]*\n(.*?)^[ \t]*={7}[ \t]*\n(.*?)^[ \t]*>{7}[ \t]*REPLACE[ \t]*$",
    re.MULTILINE | re.DOTALL,
)
_OPENER = re.compile(r"^[ \t]*<{7}[ \t]*SEARCH[ \t]*$", re.MULTILINE)

DIFF_FORMAT = """Answer with edits to the heuristic above, not a whole new function. Start with one sentence \
that says the idea of the change, then give one or more blocks of this form:
<<<<<<< SEARCH
lines copied exactly from the code above
=======
the lines that replace them
>>>>>>> REPLACE
Each SEARCH part must copy whole lines of the current code and match only one place in it. The result \
must still define `$signature`, use only numpy and the Python standard library, and import what it uses."""
"""What a diff request asks for instead of the templates' `output_format`. A fixed protocol, not an
evolvable prompt component: `parse_blocks` reads exactly this layout. `$signature` is filled in."""

RESAMPLE_REQUEST = (
    "Your edit could not be applied: {reason}. Answer again with SEARCH/REPLACE blocks whose SEARCH parts "
    "copy lines of the code above exactly."
)


@dataclass(frozen=True)
class EditBlock:
    """One SEARCH/REPLACE pair, as lines without their line ends."""

    search: tuple[str, ...]
    replace: tuple[str, ...]


@dataclass(frozen=True)
class EditPolicy:
    """How the one-parent operators ask for their change: a diff with probability `diff`, else a whole
    function; a diff that fails is asked again up to `resamples` times before a whole rewrite."""

    diff: float = 0.0
    resamples: int = 3

    def __post_init__(self) -> None:
        if not 0.0 <= self.diff <= 1.0:
            raise ValueError(f"the diff probability must lie in [0, 1], got {self.diff}")
        if self.resamples < 0:
            raise ValueError(f"resamples must be at least 0, got {self.resamples}")

    def asks_diff(self, operator: str, key: str) -> bool:
        """Whether the request `key` names (its call's seed and index) asks for a diff: a pure function
        of the key, so a member asks the same however its population was split into calls."""
        if operator not in DIFF_OPERATORS or self.diff == 0.0:
            return False
        return self.diff == 1.0 or random.Random(f"diff:{key}").random() < self.diff


def derived_seed(seed: int | None, tag: str) -> int | None:
    """A seed for a follow-up call (`tag` names it) that differs from `seed`'s and from other tags';
    None stays None. A resample under the same seed would repeat the failed answer."""
    if seed is None:
        return None
    return int.from_bytes(hashlib.blake2b(f"{seed}:{tag}".encode(), digest_size=4).digest(), "little")


def parse_blocks(text: str) -> tuple[list[EditBlock], str] | ParseFailure:
    """The answer's blocks in order, and its prose outside them; or why there are none."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    found = list(_BLOCK.finditer(text + "\n"))
    if not found:
        return ParseFailure("no SEARCH/REPLACE block in the answer")
    if len(_OPENER.findall(text)) > len(found):  # cut off at the token limit, or malformed
        return ParseFailure("a SEARCH block is not closed by ======= and >>>>>>> REPLACE")
    blocks = [EditBlock(_trimmed(match.group(1)), _trimmed(match.group(2))) for match in found]
    prose = _BLOCK.sub("", text + "\n")
    return blocks, prose


def apply_blocks(code: str, blocks: list[EditBlock]) -> str | ParseFailure:
    """`code` with every block applied in order, or the first block that cannot be and why."""
    lines = code.split("\n")
    for number, block in enumerate(blocks, start=1):
        if not block.search:
            return ParseFailure(f"SEARCH block {number} is empty")
        applied = _apply_one(lines, block)
        if isinstance(applied, str):
            return ParseFailure(f"SEARCH block {number} {applied}")
        lines = applied
    patched = "\n".join(lines)
    if patched == code:
        return ParseFailure("the blocks leave the code as it was")
    return patched


def _trimmed(part: str) -> tuple[str, ...]:
    """A block's lines without the blank lines around them."""
    lines = part.split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    return tuple(lines)


def _apply_one(lines: list[str], block: EditBlock) -> list[str] | str:
    """The lines with the block applied, or what went wrong (to follow "SEARCH block N ")."""
    width = len(block.search)
    for matches in (_exact, _trailing_space, _shifted):
        starts = [
            start
            for start in range(len(lines) - width + 1)
            if matches(block.search, lines[start : start + width]) is not None
        ]
        if len(starts) > 1:
            shown = ", ".join(str(start + 1) for start in starts[:5])
            return f"matches {len(starts)} places (lines {shown}); it must match one"
        if starts:
            start = starts[0]
            reindent = matches(block.search, lines[start : start + width])
            assert reindent is not None
            return [*lines[:start], *(reindent(line) for line in block.replace), *lines[start + width :]]
    return "matches no part of the code"


Reindent = Callable[[str], str]
"""How a REPLACE line is placed once its SEARCH text matched: as it is, or shifted."""


def _unchanged(line: str) -> str:
    return line


def _exact(search: tuple[str, ...], window: list[str]) -> Reindent | None:
    return _unchanged if list(search) == window else None


def _trailing_space(search: tuple[str, ...], window: list[str]) -> Reindent | None:
    same = all(a.rstrip() == b.rstrip() for a, b in zip(search, window, strict=True))
    return _unchanged if same else None


def _shifted(search: tuple[str, ...], window: list[str]) -> Reindent | None:
    """A shift of indentation that turns the SEARCH lines into the window's (blank lines aside), and
    the same shift for REPLACE lines; None when no one shift fits every line."""
    searched, found = _indent(search), _indent(window)
    if searched is None or found is None:
        return None
    for a, b in zip(search, window, strict=True):
        if a.strip() != b.strip() or (a.strip() and a.rstrip()[len(searched) :] != b.rstrip()[len(found) :]):
            return None

    def shift(line: str) -> str:
        if not line.strip():
            return ""
        if line.startswith(searched):
            return found + line[len(searched) :]
        own = len(line) - len(line.lstrip())  # less indented than the SEARCH text: keep the distance
        return found[: max(0, len(found) - (len(searched) - own))] + line.lstrip()

    return shift


def _indent(lines: tuple[str, ...] | list[str]) -> str | None:
    """The indentation every non-blank line starts with (the shortest one's), or None when the
    lines are indented with different characters."""
    indents = [line[: len(line) - len(line.lstrip())] for line in lines if line.strip()]
    if not indents:
        return None
    shortest = min(indents, key=len)
    return shortest if all(indent.startswith(shortest) for indent in indents) else None
