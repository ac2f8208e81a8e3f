"""The README quotes output; these tests run what it quotes, so it cannot drift from the code.

A checked block is compared with the output as a terminal shows it, line by line and in order
(the rules are in readme_blocks.py): stdout and stderr go to one pipe, the way a terminal
interleaves them, and PYTHONUNBUFFERED=1 makes each write reach it when it is made, as a
terminal's line buffering would (a pipe would hold stdout back until the program exits).
"""

import json
import re
import subprocess
import sys

import pytest

from conftest import ROOT, clean_env
from harness.stand_in_api import StandInAPI, reply, text, tool
from readme_blocks import assert_matches, checked_block, mismatch, runs, terminal_view

README = (ROOT / "README.md").read_text(encoding="utf-8")
PROMPT = "s07 >> "          # what the s07 REPL prints before it reads a line
LESSON_COMMAND = re.compile(r"python (s0\d_\w+)\.py ?(.*)")


@pytest.fixture
def terminal(workdir):
    """terminal("s07_task_system", "--demo", inputs=[...]) -> (exit code, what a terminal shows)."""
    def run(lesson, *args, script=(), summary=None, inputs=None, key="test-key"):
        with StandInAPI(script, summary=summary) as api:
            extra = {"ANTHROPIC_BASE_URL": api.url, "PYTHONUNBUFFERED": "1"}
            if key:
                extra["ANTHROPIC_API_KEY"] = key
            typed = None if inputs is None else "".join(f"{line}\n" for line in inputs)
            proc = subprocess.run([sys.executable, str(ROOT / f"{lesson}.py"), *args], cwd=workdir,
                                  env=clean_env(workdir.parent / "home", **extra), input=typed,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True, encoding="utf-8", timeout=60)
        assert api.violations == [], api.violations
        return proc.returncode, terminal_view(proc.stdout, PROMPT, inputs or [])
    return run


def lesson_of(command):
    """`python s07_task_system.py --demo` -> ("s07_task_system", ["--demo"])."""
    found = LESSON_COMMAND.fullmatch(command)
    assert found, f"the README runs {command!r}, which is not a lesson"
    return found[1], found[2].split()


# ---------------------------------------------------------------- the matcher itself

BOARD = ["> task_update task_id=1 status=\"completed\"",
         "  = Updated [x] #1: Design the data model (owner: demo)",
         "    Unblocked: #2 Implement the API, #3 Write the docs",
         "[compacted: 1,763 → 169 tokens · transcript .transcripts/transcript_20261203-141659.jsonl]",
         "Order: #1 → #2 → #3 → #4"]
QUOTED = BOARD[:3] + ["[compacted: 1,763 → 169 tokens · transcript .transcripts/transcript_….jsonl]",
                      BOARD[4]]


def test_the_matcher_accepts_the_output_it_quotes_with_wildcards_for_what_varies():
    assert mismatch(QUOTED, BOARD) is None
    assert mismatch(["…", BOARD[1], "  …"], BOARD) is None          # a `…` line skips any lines
    assert mismatch(["…", *QUOTED, "…"], BOARD) is None             # ... none included
    assert mismatch([line + "   " for line in QUOTED], BOARD) is None  # trailing spaces do not count


def test_the_matcher_catches_a_changed_number():
    for wrong in ("1,800 → 169", "1,763 → 85", "1,763 → 16"):
        changed = QUOTED[:3] + [QUOTED[3].replace("1,763 → 169", wrong), QUOTED[4]]
        assert "block line 4" in mismatch(changed, BOARD)
    assert mismatch(["[compacted: …763 → 169 tokens …]"], [BOARD[3].replace("1,763", "21,763")])
    assert mismatch(["…", "[compacted: 1,763 → …]"], ["[compacted: 11,763 → 2]"])  # whole numbers


def test_the_matcher_catches_a_line_moved():
    moved = [QUOTED[4]] + QUOTED[:4]
    assert "block line 1 'Order: #1 → #2 → #3 → #4' was expected" in mismatch(moved, BOARD)
    assert mismatch(["…", QUOTED[4], "…", QUOTED[0], "…"], BOARD)   # in order, even across skips


def test_the_matcher_catches_a_line_rewritten_shorter():
    shorter = QUOTED[:2] + ["    Unblocked: #2"] + QUOTED[3:]
    assert mismatch(shorter, BOARD) == ("block line 3 '    Unblocked: #2' was expected, the program printed "
                                        "'    Unblocked: #2 Implement the API, #3 Write the docs' (line 3)")
    assert mismatch(["Unblocked: #2 Implement the API, #3 Write the docs"], [BOARD[2]])  # indentation counts


def test_the_matcher_catches_an_extra_line_where_none_is_allowed():
    extra = BOARD[:2] + ["  [tokens: 0 in · 1,096 from cache · 115 to cache · 68 out]"] + BOARD[2:]
    assert "block line 3" in mismatch(QUOTED, extra)
    assert mismatch(QUOTED, BOARD + ["one more"]) == ("the output goes on after the block's last line: "
                                                      "'one more'")
    assert "printed nothing more" in mismatch(QUOTED + ["gone"], BOARD)


def test_a_block_splits_into_runs_and_typed_lines_come_back_after_each_prompt():
    block = ["$ python s07_task_system.py", "s07 >> /tasks", "No tasks yet.", "s07 >> q",
             "$ cat .tasks/task_1.json", "{"]
    first, second = runs(block, (PROMPT,))
    assert (first.command, first.inputs, first.lines) == ("python s07_task_system.py", ["/tasks", "q"],
                                                          ["s07 >> /tasks", "No tasks yet.", "s07 >> q"])
    assert (second.command, second.inputs, second.lines) == ("cat .tasks/task_1.json", [], ["{"])
    piped = "banner\ns07 >> No tasks yet.\ns07 >> "          # a pipe: prompts, no echo
    assert terminal_view(piped, PROMPT, ["/tasks", "q"]) == "banner\ns07 >> /tasks\nNo tasks yet.\ns07 >> q\n"
    assert terminal_view("s07 >> ", PROMPT, []) == "s07 >> "     # end of input: the prompt stays bare


# ---------------------------------------------------------------- the blocks

def test_the_readme_shows_the_two_setup_commands_first():
    first_block = re.search(r"```sh\n(.*?)```", README, re.S)[1].strip().splitlines()
    assert first_block == ["pip install -r requirements.txt && python s07_task_system.py --demo",
                           "python -m pytest -q"]


def test_the_s07_demo_matches_the_readme_and_a_second_run_continues_the_board(terminal, workdir):
    code, shown = terminal("s07_task_system", "--demo", key=None)
    assert code == 0, shown
    assert_matches("s07-demo", checked_block(README, "s07-demo"), shown)
    assert sorted(p.name for p in (workdir / ".tasks").glob("task_*.json")) == [f"task_{n}.json"
                                                                                for n in range(1, 5)]
    assert len(list((workdir / ".transcripts").glob("transcript_*.jsonl"))) == 1

    code, shown = terminal("s07_task_system", "--demo", key=None)
    assert code == 0, shown
    board_first = shown.split("> task_list", 1)[1].split("Planning four tasks.")[0]
    assert "[x] #1: Design the data model (owner: demo)" in board_first
    assert "Ready to start: #2 Implement the API, #3 Write the docs" in board_first
    assert "Created task #5: Design the data model" in shown
    assert len(list((workdir / ".tasks").glob("task_*.json"))) == 8


@pytest.mark.parametrize("lesson, block, writes", [("s03_todo", "s03-demo", [".transcripts", "demo"]),
                                                   ("s06_compact", "s06-demo", [".transcripts", "demo"])])
def test_the_other_demos_match_the_readme(terminal, workdir, lesson, block, writes):
    code, shown = terminal(lesson, "--demo", key=None)
    assert code == 0, shown
    assert_matches(block, checked_block(README, block), shown)
    assert sorted(p.name for p in workdir.iterdir()) == writes


WALKTHROUGH_PLAN = [("Design the data model", "tables and fields"), ("Implement the API", ""),
                    ("Write the docs", ""), ("Write the API tests", "")]
WALKTHROUGH_MODEL = [reply(text("I'll put the plan on the board."),
                           *[tool("task_create", {"subject": s, "description": d})
                             for s, d in WALKTHROUGH_PLAN]),
                     reply(tool("task_update", {"task_id": 2, "addBlockedBy": [1]}),
                           tool("task_update", {"task_id": 3, "addBlockedBy": [1]}),
                           tool("task_update", {"task_id": 4, "addBlockedBy": [2]})),
                     reply(text("The board has four tasks; #1 can start now."))]


def test_the_persistence_walkthrough_and_the_task_file_match_the_readme(terminal, workdir):
    """Each `$` run of the block is run as written, fed the lines typed at its prompts."""
    first, second = runs(checked_block(README, "walkthrough"), (PROMPT,))
    for run, model in zip((first, second), (WALKTHROUGH_MODEL, [])):  # the restart calls no model
        lesson, args = lesson_of(run.command)
        code, shown = terminal(lesson, *args, script=model, summary="Summary: four tasks planned.",
                               inputs=run.inputs)
        assert code == 0, shown
        assert_matches(f"walkthrough, {run.command}", run.lines, shown)
    assert any(line.startswith("[ ] #4:") for line in second.lines)   # the restart shows the board

    (cat,) = runs(checked_block(README, "task-file"))
    assert cat.command == "cat .tasks/task_1.json"
    task_file = (workdir / ".tasks" / "task_1.json").read_text(encoding="utf-8")
    assert_matches("task-file", cat.lines, task_file)
    assert set(json.loads(task_file)) == {"id", "subject", "description", "status", "blockedBy", "owner",
                                          "created_at", "updated_at"}


# ---------------------------------------------------------------- the constants the README quotes
# (The token table and its figures moved to docs/cost.md: tests/test_bench_tokens.py checks them.)

def test_the_constants_the_readme_quotes_are_the_codes():
    import s03_todo
    import s06_compact
    import s07_task_system
    from harness import bash, cli, config, layer1, spill, terminal
    phrases = [f"{s03_todo.NAG_AFTER} rounds without todo -> <reminder>",
               f"it had dropped the {len(s07_task_system.TOOLS)} tool definitions",f"gives up after\n{s03_todo.MAX_STEPS} model calls in a turn",
               "at least `CLEAR_AT_LEAST` tokens at once, never the newest "
               + ("result," if s06_compact.KEEP_RECENT == 1 else f"{s06_compact.KEEP_RECENT} results,"),
               f"batches of at least {s06_compact.CLEAR_AT_LEAST:,}\ntokens (`CLEAR_AT_LEAST`)",
               f"`COMPACT_THRESHOLD` (default {s06_compact.DEFAULT_THRESHOLD:,} tokens)",
               f"compact above this many tokens (default {s06_compact.DEFAULT_THRESHOLD:,})",
               f"between two pieces of a reply (default {config.DEFAULT_TIMEOUT})",
               f"`bash` keeps the first {s03_todo.KEEP_UP_TO:,} characters of a command's output (the "
               f"model sees {s03_todo.OUTPUT_CAP:,} of them",
               f"stops a command that writes more than {bash.FLOOD_BYTES // 1_000_000} MB beyond them",
               f"A tool result longer than the cap ({s03_todo.OUTPUT_CAP:,} characters)",
               f"last {int(s03_todo.OUTPUT_CAP * spill.SHOWN_SHARE):,} characters",
               f"until `.transcripts/results/` passes **{spill.MAX_TOTAL_BYTES // 1_000_000} MB or "
               f"{spill.MAX_FILES:,} files**",
               f"a result of {spill.SAVE_WHEN_CLEARED:,} characters or more",
               f"The default is {s06_compact.MAX_STEPS} in s06 and s07",
               f"s03 keeps {s03_todo.MAX_STEPS}",
               f"exits with **status {cli.STEPS_RAN_OUT}**",
               f"a shell command is shown whole up to {terminal.COMMAND_CHARS:,}",
               f"at most {layer1.THRESHOLD_SHARE} of it",
               f"| `MODEL_ID` | the model (default `{config.DEFAULT_MODEL}`) |"]
    flat = " ".join(README.split())             # a phrase may wrap anywhere in the README
    assert [p for p in phrases if " ".join(p.split()) not in flat] == []


# ---------------------------------------------------------------- the other tables and the loop diff

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
