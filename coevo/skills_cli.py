"""`coevo skills import | export | list`: move skill libraries in and out of coevo.

A library on disk is a directory of skill folders in the SKILL.md layout, so skills written elsewhere
can be imported and coevo's can be used elsewhere. Every check runs before anything is written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from coevo.shown import shown


def register(app: typer.Typer, fail) -> None:
    """Add `coevo skills ...` to the app; `fail(message)` raises the CLI's one-line usage error."""
    skills_app = typer.Typer(no_args_is_help=True, help="Import, export and list skill libraries (SKILL.md folders).")
    app.add_typer(skills_app, name="skills")

    def loaded(directory: Path):
        from coevo.skills import SkillFormatError, load_library

        try:
            return load_library(library_dir_of(directory))
        except SkillFormatError as exc:
            fail(str(exc))

    @skills_app.command("import")
    def import_(
        source: Annotated[Path, typer.Argument(metavar="SRC", help="A skill folder or a directory of them.")],
        into: Annotated[Path, typer.Option("--into", metavar="LIB", help="The library to add them to.")],
    ) -> None:
        """Validate every SKILL.md under SRC, then copy the skill folders into LIB."""
        from coevo.skills import Library, save_library

        incoming = loaded(source)
        if not incoming:
            fail(f"{source}: no skill folders (no SKILL.md) found")
        library = loaded(into) if into.exists() else Library()
        clashes = [name for name, skill in incoming.items() if name in library and library[name].id != skill.id]
        if clashes:
            fail(f"{into} already has a different skill named {clashes[0]!r}")
        save_library(library.replacing({**library, **incoming}.values()), into)
        print(f"imported {len(incoming)} skills into {into} ({len(library) + len(set(incoming) - set(library))} in all)")

    @skills_app.command("export")
    def export(
        library_dir: Annotated[Path, typer.Argument(metavar="LIB", help="A skill library, or a run directory (its final library).")],
        out: Annotated[Path, typer.Argument(metavar="OUT", help="Where to write its skill folders.")],
    ) -> None:
        """Write LIB's skill folders to OUT; each SKILL.md is byte for byte the one in LIB."""
        from coevo.skills import save_library

        library = loaded(library_dir)
        save_library(library, out)
        print(f"exported {len(library)} skills to {out}")

    @skills_app.command("list")
    def list_(
        library_dir: Annotated[Path, typer.Argument(metavar="LIB", help="A skill library, or a run directory (its final library).")],
        as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    ) -> None:
        """One row per skill: id, kind, credit (its estimated effect against absence), uses, generation added."""
        rows = [
            {
                "name": name,
                "id": skill.id,
                "kind": str(skill.kind),
                "credit": skill.meta.credit,
                "uses": skill.meta.uses,
                "generation": skill.meta.generation,
            }
            for name, skill in loaded(library_dir).items()
        ]
        if as_json:
            print(json.dumps(rows, indent=2))
            return
        table = Table("name", "id", "kind", "credit", "uses", "added in", title=f"skills in {library_dir}")
        for row in rows:
            credit = "-" if row["credit"] is None else f"{row['credit']:.4g}"
            name = Text(shown(row["name"]))  # written by an LLM: plain text, not markup or terminal control
            table.add_row(name, row["id"][:12], row["kind"], credit, str(row["uses"]), str(row["generation"]))
        Console().print(table)


def library_dir_of(path: Path) -> Path:
    """A run directory's exported library, or `path` itself when it is a library."""
    from coevo.run.store import DB_NAME
    from coevo.skills.pinning import RUN_LIBRARY_DIR

    exported = path / RUN_LIBRARY_DIR
    return exported if (path / DB_NAME).exists() and exported.is_dir() else path
