"""lineage.html: the run's lineage as a tree, built from a hand-made store, checked as data and in headless chromium."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from coevo.candidate import Candidate, WeightsRef
from coevo.llm.base import Completion
from coevo.operators.records import Proposal
from coevo.run.lineage_page import LINEAGE_NAME, island_homes, lineage_nodes, render_lineage_page
from coevo.run.report import write_report
from coevo.run.store import RunStore

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
INJECTION = "</script><script>document.title='pwned'</script><img src=x onerror=\"document.title='pwned'\">"
ROOT_CODE = "def select_next_node(current, destination, unvisited, distances):\n    return min(unvisited)\n"


def _code(body: str, comment: str = "") -> str:
    return ROOT_CODE.replace("    return min(unvisited)", (f"    # {comment}\n" if comment else "") + f"    {body}")


def made(
    code: str, operator: str, *parents: Candidate, objective: float | None = 1.0, thought: str = "", reason=None
) -> Candidate:
    return Candidate(
        code=code,
        thought=thought,
        operator=operator,
        generation=len(parents),
        parents=tuple(p.key for p in parents),
        fitness=None if objective is None else -objective,
        objective=objective,
        reason=reason,
    )


# The tree the store below holds (tsp_construct minimises, so F is the answer):
#   A ─ C ─ E ─ F        E is a crossover of C and B; D is invalid
#   │       └ G ─ L      L sits deeper than the page opens and off the answer's path
#   └ D
#   B
A = made(ROOT_CODE, "i1", objective=3.0)
B = made(_code("return max(unvisited)"), "i1", objective=4.0)
C = made(_code("return sorted(unvisited)[0]", INJECTION), "m1", A, objective=2.5, thought=f"Sort first. {INJECTION}")
D = made(_code("return unvisited["), "e1", A, objective=None, reason=f"SyntaxError {INJECTION}")
E = made(_code("return sorted(unvisited)[-1]"), "e2", C, B, objective=2.0)
F = made(_code("return sorted(unvisited)[1]"), "m2", E, objective=1.5)
G = made(_code("return sorted(unvisited)[2]"), "m1", E, objective=2.2)
L = made(_code("return sorted(unvisited)[3]"), "m1", G, objective=2.4)
MODELS = {A.key: "model-a", C.key: "model-b", D.key: "model-a", E.key: "model-b", F.key: "model-a"}
STEPS = (
    ((A, B), ((A,), (B,))),
    ((C, D, E), ((C, A), (E, B))),
    ((F, G, L), ((C, A, E), (F, G, L, E, B))),  # E migrated to island 0: its home stays island 1
)
CONFIG = {"method": "eoh", "task": "tsp_construct", "model": "m", "budget": 8, "seed": 0}


def _build_store(run_dir: Path, models: bool = True) -> Path:
    """The run above through the store's own API, with the models an ensemble run records if `models`."""
    store = RunStore.create(run_dir, CONFIG)
    calls = {}
    for step, (candidates, islands) in enumerate(STEPS, start=1):
        store.begin_step()
        for candidate in candidates:
            completion = Completion(
                text=candidate.code, prompt_tokens=1, completion_tokens=1, seconds=0.0, finish_reason="stop"
            )
            proposal = Proposal(
                candidate.thought, candidate.code, candidate.operator, candidate.parents, [], completion
            )
            model = MODELS.get(candidate.key) if models else None
            calls[candidate.key] = store.add_llm_call(step, proposal, None, None, model) if candidate is not B else None
            store.add_candidate(step, candidate, calls[candidate.key], None)
        layout = [{"members": [m.to_dict() for m in members]} for members in islands]
        state = {"best": F.to_dict() if step == 3 else C.to_dict(), "prompts": [], "evaluations": step * 3}
        store.commit_step(step, step - 1, "generation", {**state, "islands": {"islands": layout}})
    store.close()
    return run_dir


def test_each_heuristic_hangs_under_its_first_stored_parent_with_its_diff() -> None:
    stray = made(_code("return 7"), "m1", made("never stored", "i1"))
    again = made(D.code, "e1", A, objective=2.8)  # D's code again, now valid: the one the population kept
    candidates = [A, B, C, D, E, stray, again]
    nodes = lineage_nodes(candidates, ["a", None, "c", "d", "e", "s", "d2"], {A.key: 0, E.key: 1}, E.key)
    by_key = {node.candidate.key: node for node in nodes}
    assert [node.candidate.key for node in nodes] == [A.key, B.key, C.key, D.key, E.key, stray.key]
    assert by_key[D.key].candidate is again and by_key[D.key].model == "d2"
    assert [by_key[k].parent for k in (A.key, B.key, C.key, D.key, E.key, stray.key)] == [None, None, 0, 0, 2, None]
    assert [by_key[k].island for k in (A.key, B.key, E.key)] == [0, None, 1]
    assert {k for k, node in by_key.items() if node.ancestor} == {A.key, B.key, C.key, E.key}
    diff = by_key[E.key].diff.splitlines()
    assert diff[:2] == [f"--- {C.key}", f"+++ {E.key}"]
    assert f"-    # {INJECTION}" in diff and "-    return sorted(unvisited)[0]" in diff
    assert "+    return sorted(unvisited)[-1]" in diff
    root = by_key[A.key].diff.splitlines()
    assert root[0] == "--- (no parent)" and root[3:] == ["+" + line for line in ROOT_CODE.splitlines()]


def test_without_an_ensemble_a_node_names_the_base_model_of_its_weights() -> None:
    written = replace(C, weights=WeightsRef("qwen-coder-0.5b", step=3))
    nodes = lineage_nodes([A, written], [None, None], {}, None)
    assert [node.model for node in nodes] == [None, "qwen-coder-0.5b"]


def test_a_parent_listed_after_its_child_does_not_make_a_cycle() -> None:
    first, second = made("x = 1", "m1", made("x = 2", "i1")), made("x = 2", "m1", made("x = 1", "i1"))
    nodes = lineage_nodes([first, second], [None, None], {}, None)
    assert [node.parent for node in nodes] == [None, 0]


def test_each_heuristic_keeps_the_first_island_that_kept_it() -> None:
    states = [
        {"islands": {"islands": [{"members": [{"key": k} for k in keys]} for keys in layout]}}
        for layout in (
            (("a",), ("b",)),
            (("a", "c"), ("b", "a")),
        )
    ]
    assert island_homes(states) == {"a": 0, "b": 1, "c": 0}
    assert island_homes([{"islands": {"islands": [{"members": [{"key": "a"}]}]}}]) == {}


def test_models_come_from_the_llm_calls_where_they_record_one(tmp_path: Path) -> None:
    for models, expected in ((False, [None] * 8), (True, [MODELS.get(c.key) for step in STEPS for c in step[0]])):
        store = RunStore.open(_build_store(tmp_path / str(models), models=models))
        try:
            assert store.candidate_models() == expected
        finally:
            store.close()


def _data(page: str) -> dict:
    block = re.search(r'<script type="application/json" id="lineage-data">(.*?)</script>', page, re.S)
    return json.loads(block.group(1))


def test_candidate_text_cannot_leave_the_data_block(tmp_path: Path) -> None:
    store = RunStore.open(_build_store(tmp_path))
    try:
        page = render_lineage_page(store)
    finally:
        store.close()
    assert len(re.findall("<script", page, re.I)) == 2 and len(re.findall("</script", page, re.I)) == 2
    assert "<img" not in page and "http://" not in page and "https://" not in page
    nodes = {node["key"]: node for node in _data(page)["nodes"]}
    assert nodes[C.key]["thought"] == C.thought and nodes[D.key]["reason"] == D.reason
    assert (nodes[B.key]["model"], nodes[F.key]["model"], nodes[E.key]["island"]) == ("-", "model-a", "1")


def test_the_report_links_the_lineage_page_written_beside_it(tmp_path: Path) -> None:
    report = write_report(_build_store(tmp_path)).read_text(encoding="utf-8")
    assert f'<a href="{LINEAGE_NAME}">' in report and "<script" not in report
    assert _data((tmp_path / LINEAGE_NAME).read_text(encoding="utf-8"))["answer"] == 5  # F, sixth made


@pytest.fixture
def browser(tmp_path: Path):
    """Headless chromium through the system's chromedriver: no driver download, no network, a fresh profile."""
    missing = [str(path) for path in (CHROMIUM, CHROMEDRIVER) if not path.is_file()]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (Debian: apt-get install chromium chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    yield driver
    driver.quit()


@pytest.mark.browser
def test_clicking_a_heuristic_shows_its_fields_and_diff_and_markup_stays_text(browser, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    run_dir = _build_store(tmp_path / "run")
    write_report(run_dir)
    browser.get((run_dir / LINEAGE_NAME).as_uri())

    def node(candidate: Candidate):
        return browser.find_element(By.CSS_SELECTOR, f'li[data-key="{candidate.key}"]')

    def shown(candidate: Candidate) -> bool:
        return bool(browser.find_elements(By.CSS_SELECTOR, f'li[data-key="{candidate.key}"]'))

    assert browser.title == "coevo lineage: eoh on tsp_construct"
    assert browser.find_elements(By.TAG_NAME, "img") == []
    assert len(browser.find_elements(By.TAG_NAME, "script")) == 2
    # Open: two levels, and the path to the answer F; L, deeper and off that path, is not built yet.
    assert all(shown(c) for c in (A, B, C, D, E, F, G)) and not shown(L)
    assert "ancestor" in node(B).get_attribute("class") and "ancestor" not in node(G).get_attribute("class")

    node(C).find_element(By.CSS_SELECTOR, ":scope > .row > .label").click()
    detail = node(C).find_element(By.CSS_SELECTOR, ":scope > .detail")
    fields = dict(
        (row.find_element(By.TAG_NAME, "th").text, row.find_element(By.TAG_NAME, "td").text)
        for row in detail.find_elements(By.CSS_SELECTOR, "tr")
    )
    assert fields["score (search objective)"] == "2.5" and fields["operator"] == "m1"
    assert fields["model"] == "model-b" and fields["island"] == "0" and fields["parents"] == A.key
    added = [span.text for span in detail.find_elements(By.CSS_SELECTOR, "pre.diff span.add")]
    removed = [span.text for span in detail.find_elements(By.CSS_SELECTOR, "pre.diff span.del")]
    assert added == [f"+    # {INJECTION}", "+    return sorted(unvisited)[0]"]
    assert removed == ["-    return min(unvisited)"]
    assert detail.find_element(By.CSS_SELECTOR, "pre.thought").text == C.thought

    node(D).find_element(By.CSS_SELECTOR, ":scope > .row > .label").click()
    assert node(D).find_element(By.CSS_SELECTOR, "pre.reason").text == D.reason
    assert node(D).find_element(By.CSS_SELECTOR, ".field.model .field-value").text == "model-a"
    assert node(B).find_element(By.CSS_SELECTOR, ".field.model .field-value").text == "-"

    node(G).find_element(By.CSS_SELECTOR, ":scope > .row > .toggle").click()
    assert shown(L)
    browser.find_element(By.ID, "show-answer").click()
    answer = node(F).find_element(By.CSS_SELECTOR, ":scope > .detail")
    assert (
        answer.is_displayed()
        and "+    return sorted(unvisited)[1]" in answer.find_element(By.CSS_SELECTOR, "pre.diff").text
    )
    assert not node(E).find_elements(By.CSS_SELECTOR, ":scope > .detail")  # built when first opened
    node(E).find_element(By.CSS_SELECTOR, ":scope > .row > .label").click()
    links = node(E).find_elements(By.CSS_SELECTOR, ":scope > .detail .parent-link")
    assert [link.text for link in links] == [C.key, B.key]
    links[1].click()
    assert node(B).find_element(By.CSS_SELECTOR, ":scope > .detail").is_displayed()
    # The injected markup stayed text: no image, no extra script ran or was added.
    assert browser.find_elements(By.TAG_NAME, "img") == [] and browser.title != "pwned"
    assert len(browser.find_elements(By.TAG_NAME, "script")) == 2
