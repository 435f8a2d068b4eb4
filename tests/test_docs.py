"""docs/ and the results pages agree with the code: every CLI command and option is documented in
docs/cli.md, every command documented there exists, every relative link resolves, and the Python
example of docs/architecture.md runs as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from coevo.cli import app

ROOT = Path(__file__).resolve().parent.parent
CLI_DOC = ROOT / "docs" / "cli.md"
PAGES = sorted(
    [*ROOT.glob("docs/*.md"), *ROOT.glob("experiments/*/RESULTS.md"), ROOT / "experiments" / "peers" / "FINDINGS.md"]
)
"""The reference and results pages; the README's links are checked with them."""
HEADING = re.compile(r"^## `coevo ([a-z][a-z0-9 -]*)`$", flags=re.M)


def cli_commands() -> dict:
    """Every leaf command of the `coevo` CLI by its path ("tasks eval"); typer's click may be vendored,
    so groups are told apart by their `commands`, not by class."""
    found = {}

    def walk(command, path: tuple[str, ...]) -> None:
        if hasattr(command, "commands"):
            for name, sub in command.commands.items():
                walk(sub, (*path, name))
        else:
            found[" ".join(path)] = command

    walk(typer.main.get_command(app), ())
    return found


def documented_sections() -> dict[str, str]:
    """Command path -> the text of its `## coevo ...` section in docs/cli.md."""
    text = CLI_DOC.read_text(encoding="utf-8")
    marks = list(HEADING.finditer(text))
    ends = [mark.start() for mark in marks[1:]] + [len(text)]
    return {mark.group(1): text[mark.end() : end] for mark, end in zip(marks, ends, strict=True)}


def test_every_command_and_option_of_the_cli_is_documented():
    sections = documented_sections()
    for path, command in cli_commands().items():
        assert path in sections, f"docs/cli.md has no '## `coevo {path}`' section"
        for option in (opt for param in command.params for opt in param.opts if opt.startswith("--")):
            if option != "--help":
                assert option in sections[path], f"docs/cli.md: `coevo {path}` does not mention {option}"


def test_every_documented_command_exists():
    commands = cli_commands()
    missing = [path for path in documented_sections() if path not in commands]
    assert not missing, f"docs/cli.md documents commands the CLI lacks: {missing}"


def slug(heading: str) -> str:
    """GitHub's anchor for a markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    return {slug(line.lstrip("#")) for line in page.read_text(encoding="utf-8").splitlines() if line.startswith("#")}


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_pages_cite_sources_inside_the_repository_or_by_name(page):
    text = page.read_text(encoding="utf-8")
    assert "REFERENCES" not in text, "cite the paper or repository, not a file the repository does not hold"


@pytest.mark.parametrize("page", [*PAGES, ROOT / "README.md"], ids=lambda page: str(page.relative_to(ROOT)))
def test_relative_links_resolve(page):
    for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):
            continue
        where, _, anchor = target.partition("#")
        linked = (page.parent / where).resolve() if where else page
        assert linked.exists(), f"{page.relative_to(ROOT)} links to a missing {target}"
        if anchor and linked.suffix == ".md":
            where_shown = where or page.name
            assert anchor in anchors(linked), f"{page.relative_to(ROOT)}: no heading for #{anchor} in {where_shown}"


def test_slug_follows_github():
    assert slug(" The `[tune]` table") == "the-tune-table"
    assert slug("Scale-out with Ray (`--executor ray`)") == "scale-out-with-ray---executor-ray"


def test_the_report_section_example_declares_a_section_on_a_method():
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    sections = page[page.index("Report sections") : page.index("\n## Python API\n")]
    (example,) = re.findall(r"```python\n(.*?)```", sections, flags=re.S)
    namespace: dict = {}
    exec(compile(example, "architecture.md", "exec"), namespace)
    declared = namespace["MyMethod"].report_sections
    assert [s.title for s in declared][-1] == "Operators used" and len(declared) == 2


def test_the_python_api_example_runs_on_the_embedded_model():
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    api = page[page.index("\n## Python API\n") :]
    blocks = re.findall(r"```python\n(.*?)```", api, flags=re.S)
    assert len(blocks) == 1, "the Python API section of docs/architecture.md should hold exactly one example"
    completed = subprocess.run([sys.executable, "-c", blocks[0]], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert completed.returncode == 0, completed.stderr[-2000:]
    first, second = completed.stdout.splitlines()[:2]
    assert first.startswith("True ")  # the seed KP heuristic is valid in the sandbox
    assert "n_valid=4" in second and "update=Update(" in second


@pytest.mark.parametrize(
    ("page", "extra"),
    [("docs/runs.md", "ray"), ("docs/agents.md", "rl"), ("docs/runs.md", "tune"), ("docs/cli.md", "tune"),
     ("docs/tasks.md", "references")],
)
def test_the_docs_install_an_extra_as_the_error_without_it_says(page: str, extra: str):
    from coevo.extras import install_hint

    text = " ".join((ROOT / page).read_text(encoding="utf-8").replace("`", "").split())
    assert install_hint(extra) in text, f"{page} should say how to install {extra!r} as the errors do"


@pytest.mark.parametrize("extra", ["ray", "rl"])
def test_constraints_pin_each_extra_at_the_version_pyproject_names(extra: str):
    import tomllib

    (requirement,) = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"][extra]
    pins = [line.strip() for line in (ROOT / "constraints.txt").read_text().splitlines()]
    assert "==" in requirement and requirement in pins, f"constraints.txt does not pin {requirement}"


def test_the_gap_examples_of_tasks_md_are_what_coevo_prints():
    from tasks.references import gap_pct

    text = " ".join((ROOT / "docs" / "tasks.md").read_text(encoding="utf-8").split())
    examples = re.findall(r"of ([\d.]+) against (?:a mean reference|an optimum) of ([\d.]+) prints `gap ([\d.]+)%`", text)
    assert len(examples) == 2, "one example per sense"
    for (objective, reference, printed), sense in zip(examples, ("min", "max"), strict=True):
        assert f"{gap_pct([float(objective)], [float(reference)], sense):.3f}" == printed


def test_the_task_guide_names_every_member_a_task_has():
    from tasks.base import Task
    from tasks.checked import REQUIRED_ATTRIBUTES, REQUIRED_METHODS

    guide = (ROOT / "docs" / "tasks.md").read_text(encoding="utf-8").split("## Write your own task", 1)[-1]
    trusted_only = {"construct", "reference_objective"}  # in-process helpers of coevo's own scripts
    members = {name for name in vars(Task) if not name.startswith("_")} - trusted_only
    assert set(REQUIRED_ATTRIBUTES) | set(REQUIRED_METHODS) <= members | set(Task.__annotations__)
    for member in members | set(Task.__annotations__):
        assert f"`{member}" in guide, f"docs/tasks.md's guide does not say what {member} is"
    for name in ("InstanceGroup(label, instances)", "Heuristic", "Instance", "InvalidSolution", "SplitName"):
        assert name in guide


def test_the_task_of_the_guide_runs_as_written(tmp_path: Path):
    from coevo.evaluate import Evaluator
    from tasks import SPLITS
    from tasks.checked import checked_task

    guide = (ROOT / "docs" / "tasks.md").read_text(encoding="utf-8").split("## Write your own task", 1)[-1]
    problem = tmp_path / "problem.py"
    problem.write_text(re.search(r"```python\n# problem.py\n(.*?)```", guide, flags=re.S).group(1))
    task = checked_task(f"{problem}:LoadBalance", SPLITS)
    with Evaluator(task, "val", limit=2, workers=1) as evaluator:
        seed = evaluator.evaluate(task.seed_code())
        bad = evaluator.evaluate("def choose_machine(job, loads):\n    return 99\n")
    assert seed.valid and seed.n_instances == 2 and seed.gap_pct is None, seed.reason
    assert not bad.valid and "not a machine" in bad.reason
