"""What a program folder holds: the initial program split at its EVOLVE markers, the evaluator's
path, and what the optional ``config.yaml`` says about the prompt and the time limit.

Only the text between ``# EVOLVE-BLOCK-START`` and ``# EVOLVE-BLOCK-END`` evolves; the text
around it is the task's, kept as it is in every candidate. The block's function that the fixed
text calls is the one the LLM writes (with the helpers it reaches); the names the fixed text
defines are there for it to call.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import yaml

from coevo import pyast

START_MARKER = "# EVOLVE-BLOCK-START"
END_MARKER = "# EVOLVE-BLOCK-END"
PROGRAM_FILE = "initial_program.py"
EVALUATOR_FILE = "evaluator.py"
CONFIG_FILE = "config.yaml"


class LayoutError(ValueError):
    """A folder that is not a program task; the message is one line for the user."""


@dataclass(frozen=True)
class Program:
    """A program split around its one EVOLVE block: ``head`` ends with the start marker's line,
    ``tail`` starts with the end marker's line."""

    head: str
    block: str
    tail: str

    @classmethod
    def parse(cls, text: str, where: str) -> Program:
        """Split ``text`` (named ``where`` in errors); LayoutError unless it holds exactly one block."""
        lines = text.splitlines(keepends=True)
        starts = [i for i, line in enumerate(lines) if line.strip().startswith(START_MARKER)]
        ends = [i for i, line in enumerate(lines) if line.strip().startswith(END_MARKER)]
        if len(starts) != 1 or len(ends) != 1 or ends[0] < starts[0]:
            raise LayoutError(
                f"{where} must hold one {START_MARKER} line and, after it, one {END_MARKER} line "
                f"(found {len(starts)} and {len(ends)})"
            )
        start, end = starts[0], ends[0]
        return cls("".join(lines[: start + 1]), "".join(lines[start + 1 : end]), "".join(lines[end:]))

    def with_block(self, code: str) -> str:
        """The whole program with ``code`` as its block."""
        ending = "" if code.endswith("\n") else "\n"
        return f"{self.head}{code}{ending}{self.tail}"

    @property
    def fixed_text(self) -> str:
        """The program without its block, as prompts show the part that does not change."""
        return f"{self.head}...\n{self.tail}"


def evolved_block(code: str) -> str:
    """The block of ``code`` if it is a whole program with markers, else ``code`` itself."""
    if START_MARKER in code and END_MARKER in code:
        try:
            return Program.parse(code, "the code").block
        except LayoutError:
            return code
    return code


def target_function(program: Program, where: str) -> ast.FunctionDef:
    """The function the LLM writes: the block's first top-level function that the fixed part calls
    (``search_algorithm``, which ``run_search`` calls), else the block's first one."""
    try:
        tree = pyast.parse(program.block)
    except (SyntaxError, ValueError) as error:
        raise LayoutError(f"the EVOLVE block of {where} does not parse on its own: {error}") from None
    functions = [node for node in tree.body if isinstance(node, ast.FunctionDef)]
    if not functions:
        raise LayoutError(f"the EVOLVE block of {where} defines no function for the LLM to write")
    used = _loaded_names(program.head + program.tail)
    return next((function for function in functions if function.name in used), functions[0])


def _loaded_names(source: str) -> frozenset[str]:
    try:
        tree = pyast.parse(source)
    except (SyntaxError, ValueError):
        return frozenset()
    return frozenset(
        node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)
    )


def signature_of(function: ast.FunctionDef) -> str:
    """``name(params) [-> annotation]`` as the prompts show it."""
    returns = f" -> {ast.unparse(function.returns)}" if function.returns else ""
    return f"{function.name}({ast.unparse(function.args)}){returns}"


def defined_names(source: str) -> frozenset[str]:
    """The names the top level of ``source`` binds (functions, classes, assignments, imports)."""
    try:
        tree = pyast.parse(source)
    except (SyntaxError, ValueError):
        return frozenset()
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).partition(".")[0] for alias in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for target in targets for n in ast.walk(target) if isinstance(n, ast.Name))
    return frozenset(names)


@dataclass(frozen=True)
class Folder:
    """A program folder, read once: the program, the evaluator's path and the config's settings."""

    path: Path
    program: Program
    evaluator: Path
    system_message: str | None
    """``prompt.system_message`` of ``config.yaml``: the problem in words, as OpenEvolve shows it."""
    timeout: float | None
    """``evaluator.timeout`` of ``config.yaml``: seconds one evaluation may take."""

    @classmethod
    def read(cls, path: Path) -> Folder:
        """The folder at ``path``; LayoutError (one line) when it is not a program task."""
        program_file, evaluator = path / PROGRAM_FILE, path / EVALUATOR_FILE
        missing = [file.name for file in (program_file, evaluator) if not file.is_file()]
        if missing:
            raise LayoutError(f"{path} is not a program task: it has no {' and no '.join(missing)}")
        try:
            program = Program.parse(program_file.read_text(encoding="utf-8"), str(program_file))
        except (OSError, UnicodeDecodeError) as error:
            raise LayoutError(f"cannot read {program_file}: {error}") from None
        system_message, timeout = _config(path / CONFIG_FILE)
        return cls(path, program, evaluator, system_message, timeout)

    @property
    def files(self) -> tuple[Path, ...]:
        """The files the task is defined by (their bytes key its cached verdicts)."""
        config = self.path / CONFIG_FILE
        return (self.path / PROGRAM_FILE, self.evaluator) + ((config,) if config.is_file() else ())


def _config(path: Path) -> tuple[str | None, float | None]:
    """``prompt.system_message`` and ``evaluator.timeout`` of an OpenEvolve config, where given."""
    if not path.is_file():
        return None, None
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
        raise LayoutError(f"cannot read {path}: {str(error).splitlines()[0]}") from None
    if not isinstance(config, dict):
        raise LayoutError(f"{path} is not a mapping of settings")
    prompt, evaluator = config.get("prompt") or {}, config.get("evaluator") or {}
    message = prompt.get("system_message") if isinstance(prompt, dict) else None
    timeout = evaluator.get("timeout") if isinstance(evaluator, dict) else None
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0):
        raise LayoutError(f"{path}: evaluator.timeout must be a positive number of seconds, got {timeout!r}")
    return (message.strip() if isinstance(message, str) and message.strip() else None), timeout
