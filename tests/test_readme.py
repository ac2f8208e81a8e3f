"""The README quotes output; these tests run what it quotes, so it cannot drift from the code."""

import json
import re
import sys

import pytest

from conftest import ROOT
from harness.stand_in_api import reply, text, tool

README = (ROOT / "README.md").read_text(encoding="utf-8")


def quoted(name):
    """The lines of the README block marked <!-- checked: name -->, less commands, input and elisions."""
    block = re.search(rf"<!-- checked: {name} -->\s*```text\n(.*?)```", README, re.S)
    assert block, f"README has no checked block {name!r}"
    return [line for line in block[1].splitlines()
            if line.strip() and not line.startswith(("$ ", "s07 >> ")) and "…" not in line]


def assert_quoted_lines_appear(name, output):
    missing = [line for line in quoted(name) if line.strip() not in output]
    assert not missing, f"README block {name!r} quotes lines the program no longer prints: {missing}"


def test_the_readme_shows_the_two_setup_commands_first():
    first_block = re.search(r"```sh\n(.*?)```", README, re.S)[1].strip().splitlines()
    assert first_block == ["pip install -r requirements.txt && python s07_task_system.py --demo",
                           "python -m pytest -q"]


def test_the_s07_demo_matches_the_readme_and_a_second_run_continues_the_board(run_lesson, workdir):
    proc, _ = run_lesson("s07_task_system", "--demo", key=None)
    assert proc.returncode == 0, proc.stderr
    output = proc.stdout + proc.stderr
    assert_quoted_lines_appear("s07-demo", output)
    assert sorted(p.name for p in (workdir / ".tasks").glob("task_*.json")) == [f"task_{n}.json" for n in range(1, 5)]
    assert len(list((workdir / ".transcripts").glob("transcript_*.jsonl"))) == 1

    proc, _ = run_lesson("s07_task_system", "--demo", key=None)
    assert proc.returncode == 0, proc.stderr
    board_first = proc.stderr.split("> task_list", 1)[1].split("Planning four tasks.")[0]
    assert "[x] #1: Design the data model (owner: demo)" in board_first
    assert "Ready to start: #2 Implement the API, #3 Write the docs" in board_first
    assert "Created task #5: Design the data model" in proc.stderr
    assert len(list((workdir / ".tasks").glob("task_*.json"))) == 8


@pytest.mark.parametrize("lesson, block, writes", [("s03_todo", "s03-demo", [".transcripts", "demo"]),
                                                   ("s06_compact", "s06-demo", [".transcripts", "demo"])])
def test_the_other_demos_match_the_readme(run_lesson, workdir, lesson, block, writes):
    proc, _ = run_lesson(lesson, "--demo", key=None)
    assert proc.returncode == 0, proc.stderr
    assert_quoted_lines_appear(block, proc.stdout + proc.stderr)
    assert sorted(p.name for p in workdir.iterdir()) == writes


def test_the_persistence_walkthrough_matches_the_readme(run_lesson, workdir):
    plan = [("Design the data model", "tables and fields"), ("Implement the API", ""),
            ("Write the docs", ""), ("Write the API tests", "")]
    script = [reply(text("I'll put the plan on the board."),
                    *[tool("task_create", {"subject": s, "description": d}) for s, d in plan]),
              reply(tool("task_update", {"task_id": 2, "addBlockedBy": [1]}),
                    tool("task_update", {"task_id": 3, "addBlockedBy": [1]}),
                    tool("task_update", {"task_id": 4, "addBlockedBy": [2]})),
              reply(text("The board has four tasks; #1 can start now."))]
    prompt = "plan a refactor: design the data model, then the API and the docs, tests after the API"
    first, _ = run_lesson("s07_task_system", script=script, summary="Summary: four tasks planned.",
                          stdin=f"{prompt}\n/compact\n/tasks\nq\n")
    second, api = run_lesson("s07_task_system", stdin="/tasks\nq\n")
    assert first.returncode == second.returncode == 0 and api.requests == []
    assert_quoted_lines_appear("walkthrough", first.stdout + first.stderr)
    board = [line for line in quoted("walkthrough") if line.startswith(("[ ]", "Ready"))]
    assert all(line in second.stdout for line in board)  # the restart sees the same board

    task_file = (workdir / ".tasks" / "task_1.json").read_text(encoding="utf-8")
    assert_quoted_lines_appear("task-file", task_file)
    assert set(json.loads(task_file)) == {"id", "subject", "description", "status", "blockedBy", "owner",
                                          "created_at", "updated_at"}


def test_the_readme_benchmark_table_names_what_the_benchmark_measures():
    sys.path.insert(0, str(ROOT / "bench"))
    import bench_tasks
    measured = bench_tasks.bench(40)  # a small board: this checks the script runs, not its speed
    table = re.search(r"\| operation \| 1,000 tasks \| 10,000 tasks \|\n\|[-|]+\|\n(.*?)\n\n", README, re.S)[1]
    rows = {line.split("|")[1].strip(): line for line in table.splitlines()}
    assert list(rows) == list(measured)
    assert all(value >= 0 for value in measured.values())
    assert "2-core AMD EPYC" in README  # the machine the figures came from


def test_the_readme_comparison_table_names_what_the_benchmark_compares(tmp_path):
    sys.path.insert(0, str(ROOT / "bench"))
    import bench_tasks
    measured = bench_tasks.compare(60, tmp_path)  # a small board: the script runs, not its speed
    table = re.search(r"\| operation \| 1,000: s07 \| unsafe \| ratio \|.*?\n\|[-|]+\|\n(.*?)\n\n", README, re.S)[1]
    assert [line.split("|")[1].strip() for line in table.splitlines()] == list(measured)
    assert all(set(row) == {"s07", "unsafe"} for row in measured.values())


def test_s07s_loop_is_s06s_with_the_board_lines_only():
    """The README's diff: the loop is repeated on purpose, and s07 changes only the compaction lines."""
    import difflib

    def loop(name):
        text = (ROOT / name).read_text(encoding="utf-8")
        return text[text.index("def agent_loop"):text.index("    return step_limit(steps)", text.index("def agent_loop"))]
    s06, s07 = loop("s06_compact.py").splitlines(), loop("s07_task_system.py").splitlines()
    changed = [line for line in difflib.ndiff(s06, s07) if line[:1] in "+-"]
    assert len(changed) == 6, changed        # the docstring and the two compactions, each side
    assert all("compact_with_board" in c or '"""' in c or c.strip("+ ").startswith("#")
               for c in changed if c.startswith("+"))
    assert "three changed\nlines from s06 to s07" in README
