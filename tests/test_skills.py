"""The skill library: format, edits, gates, dedupe, pruning and rendering."""

from __future__ import annotations

import pytest

from coevo.skills import (
    AcceptanceGate,
    AddSkill,
    CodeTestGate,
    DeleteSkill,
    EditError,
    Library,
    MergeSkills,
    RecurrenceGate,
    RefusedBuffer,
    ReplaceSection,
    Skill,
    SkillFormatError,
    SkillKind,
    SkillMeta,
    CodeTestResult,
    admit,
    apply_edit,
    by_credit,
    load_library,
    merge_duplicates,
    prune_unused,
    render_prompt,
    save_library,
    whitespace_tokens,
)
from coevo.skills.render import HEADER, render_skill


def skill_md(name: str, body: str = "# Steps\nCompare x to the goal.\n", description: str = "How to step.") -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\n{body}"


def text_skill(name: str, body: str = "# Steps\nCompare x to the goal.\n", **meta) -> Skill:
    return Skill(skill_md(name, body), meta=SkillMeta(**meta))


HELPER = "def nearest(points, here):\n    return min(points, key=lambda p: abs(p - here))\n"
RENAMED = (
    'def closest(candidates, origin):\n    """Renamed, documented."""\n'
    "    return min(candidates, key=lambda c: abs(c - origin))  # same logic\n"
)
HELPER_TESTS = "from skill import nearest\n\ndef test_nearest():\n    assert nearest([1, 5], 4) == 5\n"


def code_skill(name: str, code: str = HELPER, **meta) -> Skill:
    return Skill.code_skill(skill_md(name, "# Use\nCall it.\n"), code, HELPER_TESTS, SkillMeta(**meta))


# --- format -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("no front matter\n", "'---'"),
        ("---\nname: a\ndescription: d\n", "closing"),
        ("---\ndescription: d\n---\n", "'name'"),
        ("---\nname: Bad_Name\ndescription: d\n---\n", "[a-z0-9-]"),
        (f"---\nname: {'a' * 65}\ndescription: d\n---\n", "64"),
        ("---\nname: a\n---\n", "'description'"),
        (f"---\nname: a\ndescription: {'d' * 1025}\n---\n", "1024"),
        ("---\nname: [a\n---\n", "not YAML"),
    ],
)
def test_invalid_front_matter_is_refused(text, needle):
    with pytest.raises(SkillFormatError, match=None) as caught:
        Skill(text)
    assert needle in str(caught.value) and "\n" not in str(caught.value)


def test_front_matter_allows_quotes_extra_keys_and_crlf():
    skill = Skill('---\r\nname: "my-skill"\r\ndescription: >\r\n  Folded text.\r\nlicense: MIT\r\n---\r\nBody\r\n')
    assert (skill.name, skill.description.strip(), skill.body) == ("my-skill", "Folded text.", "Body\r\n")


def test_kind_follows_the_code_file():
    assert text_skill("t").kind is SkillKind.TEXT and code_skill("c").kind is SkillKind.CODE
    assert code_skill("c").code == HELPER
    with pytest.raises(ValueError, match="both"):
        Skill(skill_md("c"), {"skill.py": HELPER.encode()})


def test_id_is_a_content_hash_independent_of_bookkeeping():
    assert text_skill("a").id == text_skill("a", uses=9, credit=0.5).id
    assert text_skill("a").id != text_skill("a", body="# Steps\nOther.\n").id
    assert code_skill("c").id != code_skill("c", RENAMED).id


def test_round_trip_keeps_every_file_byte_for_byte(tmp_path):
    source = tmp_path / "src"
    odd = "---\r\nname: odd\r\ndescription: 'Quoted: yes'\r\nextra: [1, 2]\r\n---\r\n# Ünïcode  \r\n\ttabs\n\n\n"
    files = {
        "odd/SKILL.md": odd.encode(),
        "helper/SKILL.md": skill_md("helper").encode(),
        "helper/skill.py": HELPER.encode(),
        "helper/test_skill.py": HELPER_TESTS.encode(),
        "helper/docs/notes.txt": b"\x00binary\xff",
    }
    for relative, data in files.items():
        (source / relative).parent.mkdir(parents=True, exist_ok=True)
        (source / relative).write_bytes(data)
    out = tmp_path / "out"
    save_library(load_library(source), out)
    for relative, data in files.items():
        assert (out / relative).read_bytes() == data
    assert load_library(out).hash == load_library(source).hash


def test_load_names_the_bad_file(tmp_path):
    (tmp_path / "good").mkdir()
    (tmp_path / "good" / "SKILL.md").write_text(skill_md("good"))
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "SKILL.md").write_text("no front matter\n")
    with pytest.raises(SkillFormatError, match=r"bad/SKILL.md: "):
        load_library(tmp_path)


def test_save_removes_skills_the_library_no_longer_holds(tmp_path):
    library = Library([text_skill("a"), text_skill("b", body="# Steps\nB.\n")])
    save_library(library, tmp_path)
    (tmp_path / "notes.txt").write_text("kept")
    save_library(apply_edit(library, DeleteSkill("b")), tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "edits.jsonl", "notes.txt"]
    assert [r.op for r in load_library(tmp_path).log] == ["delete"]


# --- edits --------------------------------------------------------------------------------------


def test_edits_return_new_libraries_and_are_logged():
    empty = Library()
    one = apply_edit(empty, AddSkill(text_skill("a", sources=("t1", "t2"))), generation=3)
    assert len(empty) == 0 and one["a"].meta.generation == 3
    body = "# Steps\nold\n## Detail\nd\n# Notes\nkeep\n"
    two = apply_edit(one, AddSkill(text_skill("b", body=body)))
    edited = apply_edit(two, ReplaceSection("b", "Steps", "new\n", sources=("t3",)), generation=4)
    assert edited["b"].body == "# Steps\nnew\n# Notes\nkeep\n" and two["b"].body == body
    assert edited["b"].meta.sources == ("t3",)
    assert [(r.op, r.generation) for r in edited.log] == [("add", 3), ("add", 0), ("replace-section", 4)]
    assert edited.log[-1].before == two.hash and edited.log[-1].after == edited.hash


def test_merge_keeps_content_and_combines_bookkeeping():
    library = Library(
        [
            text_skill("a", sources=("t1",), uses=5, credit=1.0, estimates=3, generation=2, last_used=5),
            text_skill("b", body="# X\ny\n", sources=("t2", "t1"), uses=1, credit=-1.0, estimates=1, generation=1, last_used=7),
        ]
    )
    merged = apply_edit(library, MergeSkills("a", "b"))["a"]
    assert list(apply_edit(library, MergeSkills("a", "b"))) == ["a"]
    assert merged.skill_md == library["a"].skill_md
    assert merged.meta == SkillMeta(("t1", "t2"), None, 1, 6, 7, 0.5, 4)  # credit weighted by estimates


@pytest.mark.parametrize(
    "edit",
    [
        AddSkill(text_skill("a")),
        ReplaceSection("a", "Missing", "x"),
        ReplaceSection("zz", "Steps", "x"),
        MergeSkills("a", "a"),
        MergeSkills("a", "zz"),
        DeleteSkill("zz"),
    ],
)
def test_edits_that_do_not_apply_raise(edit):
    with pytest.raises(EditError):
        apply_edit(Library([text_skill("a")]), edit)


# --- gates --------------------------------------------------------------------------------------


def run_in_process(code: str, tests: str) -> CodeTestResult:
    """A stand-in runner for trusted test code: the real one isolates the code."""
    namespace: dict = {}
    exec(code, namespace)
    try:
        exec(tests.replace("from skill import nearest\n", ""), namespace)
        for name, test in list(namespace.items()):
            if name.startswith("test_"):
                test()
    except AssertionError as exc:
        return CodeTestResult(False, f"assertion failed {exc}")
    return CodeTestResult(True)


def test_recurrence_gate_refuses_a_lesson_seen_once():
    gate, buffer = RecurrenceGate(), RefusedBuffer()
    once = AddSkill(text_skill("once", sources=("t1", "t1")))
    twice = AddSkill(text_skill("twice", body="# Y\nz\n", sources=("t1", "t2")))
    library = admit(Library(), [once, twice], [gate], buffer)
    assert list(library) == ["twice"]
    assert [r.gate for r in buffer.refusals] == ["recurrence"]
    assert gate.check(library, DeleteSkill("twice")) is None
    assert gate.check(library, ReplaceSection("twice", "Y", "w", sources=("t9",))) is not None


def test_code_gate_refuses_a_helper_whose_tests_fail():
    broken = "def nearest(points, here):\n    return min(points)\n"
    buffer = RefusedBuffer()
    library = admit(
        Library(),
        [AddSkill(code_skill("broken", broken)), AddSkill(code_skill("works"))],
        [CodeTestGate(run_in_process)],
        buffer,
    )
    assert list(library) == ["works"]
    assert buffer.refusals[0].gate == "tests" and "assertion failed" in buffer.refusals[0].reason


def test_acceptance_gate_needs_strict_held_out_improvement():
    scores = {"a": 1.0, "b": 0.5, "c": 0.0}
    calls = []

    def held_out(library: Library) -> float:
        calls.append(library.hash)
        return sum(scores[name] for name in library)

    buffer = RefusedBuffer()
    edits = [AddSkill(text_skill("a")), AddSkill(text_skill("c", body="# C\nc\n")), AddSkill(text_skill("b", body="# B\nb\n"))]
    library = admit(Library(), edits, [AcceptanceGate(held_out)], buffer, generation=1)
    assert sorted(library) == ["a", "b"]
    assert [(r.gate, r.generation) for r in buffer.refusals] == [("held-out", 1)]
    assert len(calls) == len(set(calls)), "a library already scored is not scored again"
    prompt = buffer.render()
    assert "add text skill 'c'" in prompt and "does not beat" in prompt
    assert RefusedBuffer().render() == ""


def test_admit_buffers_edits_that_do_not_apply():
    buffer = RefusedBuffer()
    assert len(admit(Library(), [DeleteSkill("ghost")], [], buffer)) == 0
    assert buffer.refusals[0].gate == "apply"


# --- dedupe and pruning -------------------------------------------------------------------------


def test_near_duplicate_texts_merge_into_the_most_used():
    library = Library(
        [
            text_skill("first", body="# Steps\nCompare x to the goal.\n", uses=1, sources=("t1",)),
            text_skill("second", body="## steps\n\ncompare X  to the GOAL!\n", uses=4, sources=("t2",)),
            text_skill("other", body="# Steps\nCompare y to the goal.\n"),
        ]
    )
    merged = merge_duplicates(library, generation=2)
    assert sorted(merged) == ["other", "second"]
    assert merged["second"].meta.uses == 5 and merged["second"].meta.sources == ("t2", "t1")
    assert [(r.op, r.generation) for r in merged.log] == [("merge", 2)]


def test_code_that_differs_only_in_names_is_a_duplicate():
    different = "def nearest(points, here):\n    return max(points, key=lambda p: abs(p - here))\n"
    library = Library([code_skill("a"), code_skill("b", RENAMED), code_skill("c", different)])
    assert sorted(merge_duplicates(library)) == ["a", "c"]


def test_prune_removes_skills_unused_for_k_generations():
    library = Library(
        [
            text_skill("old", generation=0),
            text_skill("used", body="# U\nu\n", generation=0, last_used=4),
            text_skill("new", body="# N\nn\n", generation=4),
        ]
    )
    assert sorted(prune_unused(library, generation=5, unused_for=2)) == ["new", "used"]
    assert sorted(prune_unused(library, generation=5, unused_for=6)) == ["new", "old", "used"]
    shown = library.with_uses(["old"], generation=5)
    assert shown["old"].meta.uses == 1 and "old" in prune_unused(shown, generation=6, unused_for=2)


# --- rendering ----------------------------------------------------------------------------------


def test_rendering_never_exceeds_the_budget():
    library = Library(
        [text_skill(f"s{i}", body=f"# Steps\n{'word ' * (i * 7 % 40 + 1)}\n", credit=float(i)) for i in range(12)]
        + [code_skill("helper", credit=100.0)]
    )
    for tokenizer in (whitespace_tokens, len):
        for budget in range(0, 600, 7):
            text, shown = render_prompt(by_credit(library), budget, tokenizer)
            assert tokenizer(text) <= budget
            for left_out in set(library) - set(shown):  # every skill left out would not have fitted
                assert tokenizer((text or HEADER) + render_skill(library[left_out]) + "\n") > budget
    text, shown = render_prompt(by_credit(library), 10**6)
    assert shown[0] == "helper" and shown[1] == "s11" and "def nearest" in text and len(shown) == 13
    assert render_prompt(by_credit(library), 3) == ("", [])
