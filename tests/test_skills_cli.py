"""`coevo skills import | export | list`: exit codes, one-line errors and the byte-exact round trip."""

from __future__ import annotations

import json
from pathlib import Path

from coevo.cli import main

SKILL = "---\nname: {name}\ndescription: 'Step: towards the goal.'\nlicense: MIT\n---\r\n# Steps\n  Compare x.\n\n"


def write_skill(root: Path, folder: str, text: str, **files: str) -> None:
    (root / folder).mkdir(parents=True)
    (root / folder / "SKILL.md").write_bytes(text.encode())
    for name, content in files.items():
        (root / folder / name).write_text(content)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main([str(arg) for arg in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_import_export_round_trip_is_byte_exact(tmp_path, capsys):
    source = tmp_path / "src"
    write_skill(source, "go-east", SKILL.format(name="go-east"))
    write_skill(
        source, "helper-dir", SKILL.format(name="helper"), **{"skill.py": "def f(x):\n    return x\n", "test_skill.py": "t"}
    )
    library, out = tmp_path / "lib", tmp_path / "out"
    assert run(capsys, "skills", "import", source, "--into", library)[0] == 0
    assert run(capsys, "skills", "export", library, out)[0] == 0
    assert (out / "go-east" / "SKILL.md").read_bytes() == (source / "go-east" / "SKILL.md").read_bytes()
    assert (out / "helper" / "SKILL.md").read_bytes() == (source / "helper-dir" / "SKILL.md").read_bytes()
    assert (out / "helper" / "skill.py").read_bytes() == (source / "helper-dir" / "skill.py").read_bytes()

    code, listing, _ = run(capsys, "skills", "list", out, "--json")
    rows = json.loads(listing)
    assert code == 0 and [(r["name"], r["kind"], r["uses"], r["generation"]) for r in rows] == [
        ("go-east", "text", 0, 0),
        ("helper", "code", 0, 0),
    ]
    assert all(len(r["id"]) == 64 and r["credit"] is None for r in rows)
    code, table, _ = run(capsys, "skills", "list", out)
    assert code == 0 and rows[0]["id"][:12] in table


def test_import_is_idempotent_and_refuses_a_different_skill_of_the_same_name(tmp_path, capsys):
    library = tmp_path / "lib"
    write_skill(tmp_path / "a", "s", SKILL.format(name="same"))
    write_skill(tmp_path / "b", "s", SKILL.format(name="same") + "changed\n")
    assert run(capsys, "skills", "import", tmp_path / "a", "--into", library)[0] == 0
    assert run(capsys, "skills", "import", tmp_path / "a" / "s", "--into", library)[0] == 0
    code, _, err = run(capsys, "skills", "import", tmp_path / "b", "--into", library)
    assert code == 2 and "different skill named 'same'" in err and err.count("\n") == 1


def test_import_of_invalid_front_matter_exits_2_naming_the_file_and_copies_nothing(tmp_path, capsys):
    source, library = tmp_path / "src", tmp_path / "lib"
    write_skill(source, "good", SKILL.format(name="good"))
    write_skill(source, "bad", "# no front matter\n")
    code, out, err = run(capsys, "skills", "import", source, "--into", library)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and str(source / "bad" / "SKILL.md") in err
    assert not library.exists()


def test_usage_mistakes_exit_2_in_one_line(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    for argv in (
        ("skills", "list", tmp_path / "missing"),
        ("skills", "export", tmp_path / "missing", tmp_path / "out"),
        ("skills", "import", tmp_path / "empty", "--into", tmp_path / "lib"),
    ):
        code, _, err = run(capsys, *argv)
        assert code == 2 and err.startswith("coevo: error: ") and err.count("\n") == 1


def test_list_of_a_run_directory_lists_the_library_the_run_exported(tmp_path, capsys):
    from coevo.run.store import RunStore
    from coevo.skills.pinning import RUN_LIBRARY_DIR

    run_dir = tmp_path / "run"
    RunStore.create(run_dir, {"method": "skills"}).close()
    write_skill(run_dir / RUN_LIBRARY_DIR, "go-east", SKILL.format(name="go-east"))
    code, listing, _ = run(capsys, "skills", "list", run_dir, "--json")
    assert code == 0 and [r["name"] for r in json.loads(listing)] == ["go-east"]
