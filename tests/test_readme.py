"""The README quotes output; these tests run what it quotes, so it cannot drift from the code.

A checked block is compared with the output as a terminal shows it, line by line and in order
(the rules are in readme_blocks.py): stdout and stderr go to one pipe, the way a terminal
interleaves them, and PYTHONUNBUFFERED=1 makes each write reach it when it is made, as a
terminal's line buffering would (a pipe would hold stdout back until the program exits).
Each `$` line of a block is run as written (a VAR=value before it is set for that run), fed
the lines typed at its prompts. The model, where a block needs one, is the loopback stand-in
with a script; no test needs a key.
"""

import json
import re
import subprocess
import sys

import pytest

from helpers import (NAME, PROMPT, README, ROOT, WALK_MODEL, WALK_SUMMARY, clean_env, command_of,
                     plan_by_hand, shown_by)
from readme_blocks import assert_matches, checked_block, mismatch, runs, terminal_view

sys.path.insert(0, str(ROOT / "tools"))
import session_screenshot  # noqa: E402

NO_MODEL = "[no model to talk to: "   # the REPL's first line without a key


def files_in(folder):
    """Every file under folder, relative, with its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


# ---------------------------------------------------------------- the matcher itself

COMPACTED = "[compacted: 1,763 → 169 tokens · transcript .transcripts/transcript_{}.jsonl]"
BOARD = ["> task_update task_id=1 status=\"completed\"",
         "  = Updated [x] #1: Design the data model (owner: demo)",
         "    Unblocked: #2 Implement the API, #3 Write the docs",
         COMPACTED.format("20261203-141659"),
         "Order: #1 → #2 → #3 → #4"]
QUOTED = BOARD[:3] + [COMPACTED.format("…"), BOARD[4]]


def test_the_matcher_accepts_the_output_it_quotes_with_wildcards_for_what_varies():
    assert mismatch(QUOTED, BOARD) is None
    # a `…` line skips any lines
    assert mismatch(["…", BOARD[1], "  …"], BOARD) is None
    assert mismatch(["…", *QUOTED, "…"], BOARD) is None             # ... none included
    assert mismatch([line + "   " for line in QUOTED], BOARD) is None  # trailing spaces: ignored


def test_the_matcher_catches_a_changed_number():
    for wrong in ("1,800 → 169", "1,763 → 85", "1,763 → 16"):
        changed = QUOTED[:3] + [QUOTED[3].replace("1,763 → 169", wrong), QUOTED[4]]
        assert "block line 4" in mismatch(changed, BOARD)
    assert mismatch(["[compacted: …763 → 169 tokens …]"],
                    [BOARD[3].replace("1,763", "21,763")])
    # whole numbers
    assert mismatch(["…", "[compacted: 1,763 → …]"], ["[compacted: 11,763 → 2]"])


def test_the_matcher_catches_a_line_moved():
    moved = [QUOTED[4]] + QUOTED[:4]
    assert "block line 1 'Order: #1 → #2 → #3 → #4' was expected" in mismatch(moved, BOARD)
    # in order, even across skips
    assert mismatch(["…", QUOTED[4], "…", QUOTED[0], "…"], BOARD)


def test_the_matcher_catches_a_line_rewritten_shorter():
    shorter = QUOTED[:2] + ["    Unblocked: #2"] + QUOTED[3:]
    assert mismatch(shorter, BOARD) == (
        "block line 3 '    Unblocked: #2' was expected, the program printed "
        "'    Unblocked: #2 Implement the API, #3 Write the docs' (line 3)")
    assert mismatch(["Unblocked: #2 Implement the API, #3 Write the docs"], [BOARD[2]])  # indent


def test_the_matcher_catches_an_extra_line_where_none_is_allowed():
    tokens_line = "  [tokens: 0 in · 1,096 from cache · 115 to cache · 68 out]"
    extra = BOARD[:2] + [tokens_line] + BOARD[2:]
    assert "block line 3" in mismatch(QUOTED, extra)
    assert mismatch(QUOTED, BOARD + ["one more"]) == ("the output goes on after the block's last "
                                                      "line: 'one more'")
    assert "printed nothing more" in mismatch(QUOTED + ["gone"], BOARD)


def test_a_block_splits_into_runs_and_typed_lines_come_back_after_each_prompt():
    block = ["$ python s07_task_system.py", "s07 >> /tasks", "No tasks yet.", "s07 >> q",
             "$ cat .tasks/task_1.json", "{"]
    first, second = runs(block, (PROMPT,))
    assert (first.command, first.inputs) == ("python s07_task_system.py", ["/tasks", "q"])
    assert first.lines == ["s07 >> /tasks", "No tasks yet.", "s07 >> q"]
    assert (second.command, second.inputs, second.lines) == ("cat .tasks/task_1.json", [], ["{"])
    piped = "banner\ns07 >> No tasks yet.\ns07 >> "          # a pipe: prompts, no echo
    assert terminal_view(piped, PROMPT, ["/tasks", "q"]) == ("banner\ns07 >> /tasks\n"
                                                             "No tasks yet.\ns07 >> q\n")
    assert terminal_view("s07 >> ", PROMPT, []) == "s07 >> "     # end of input: the prompt stays


def test_a_command_in_a_block_is_read_with_its_settings():
    assert command_of('PRICE_PER_MTOK=3 python s07_task_system.py --max-steps 3 "count to 3"') \
        == ("s07_task_system", ["--max-steps", "3", "count to 3"], {"PRICE_PER_MTOK": "3"})
    with pytest.raises(AssertionError, match="not a lesson"):
        command_of("cat .tasks/task_1.json")


# ---------------------------------------------------------------- start here

def test_the_readme_stays_short_enough_to_read_in_ten_minutes():
    """Issue 28: at most 250 lines; everything else has its page in docs/."""
    assert len(README.splitlines()) <= 250


def sh_blocks():
    return [block.strip().splitlines() for block in re.findall(r"```sh\n(.*?)```", README, re.S)]


def test_the_readme_advises_a_virtual_environment_before_the_two_commands():
    venv, commands = sh_blocks()[:2]
    assert venv == ["python3 -m venv .venv && . .venv/bin/activate"]
    assert commands == ["pip install -r requirements.txt && python s07_task_system.py --demo",
                        "python -m pytest -q"]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")     # CI runs the same two
    assert "-r requirements.txt && python s07_task_system.py --demo\n" in ci
    assert "\n  python -m pytest -q\n" in ci
    # and first of all, the README's blocks as a newcomer runs them: before anything else is
    # installed, and without CI=true
    newcomer = ci.index('bash -euo pipefail -c "$readme_commands"')
    assert newcomer < ci.index("apt-get install") and newcomer < ci.index("export CI=true")


def test_the_packages_and_pythons_the_readme_names_are_the_projects():
    named = re.search(r"the four packages \((.*?)\)", README)[1]
    required = [line.split(">=")[0] for line in
                (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines()
                if line and not line.startswith("#")]
    assert named == ", ".join(f"`{name}`" for name in required)
    ruff = (ROOT / "ruff.toml").read_text(encoding="utf-8")
    assert "Python 3.10 or newer" in README and 'target-version = "py310"' in ruff
    assert "for version in 3.10 3.13; do" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "on Python 3.10 and 3.13" in README


# ---------------------------------------------------------------- the demos

@pytest.mark.slow
def test_two_s07_demos_continue_one_board_and_leave_your_own_files_alone(workdir):
    """The user's own board and files are where the demo would write if it ran here."""
    (workdir / ".tasks").mkdir()
    (workdir / ".tasks" / "task_1.json").write_text('{"mine": true}\n', encoding="utf-8")
    (workdir / "notes.md").write_text("my notes\n", encoding="utf-8")
    mine = files_in(workdir)
    first, second = runs(checked_block(README, "s07-demo"))
    for run in (first, second):
        assert run.command == "python s07_task_system.py --demo"
        code, shown = shown_by(run.command, workdir, key=None)
        assert code == 0, shown
        assert_matches(f"s07-demo, {run.command}", run.lines, shown)
    assert "Created task" not in shown                              # the second run planned nothing
    assert {name: data for name, data in files_in(workdir).items()
            if not name.startswith("demo/")} == mine
    assert sorted(p.name for p in (workdir / "demo" / ".tasks").glob("task_*.json")) == \
        [f"task_{n}.json" for n in range(1, 5)]


@pytest.mark.slow
def test_the_s03_demo_matches_the_readme_and_writes_only_under_demo(workdir):
    code, shown = shown_by("python s03_todo.py --demo", workdir, key=None)
    assert code == 0, shown
    assert_matches("s03-demo", checked_block(README, "s03-demo"), shown)
    assert [p.name for p in workdir.iterdir()] == ["demo"]
    assert "after 3 rounds without `todo`" in README
    import s03_todo
    assert s03_todo.NAG_AFTER == 3


def call_inputs(page):
    """{call number: input tokens} from the bars' tooltips of a session page."""
    found = re.findall(r"<title>call (\d+) \([^)]*\): ([\d,]+) input", page)
    return {int(number): int(tokens.replace(",", "")) for number, tokens in found}


@pytest.mark.slow
def test_the_s06_demo_matches_the_readme_and_its_page_marks_the_batch_where_it_says(workdir):
    code, shown = shown_by("python s06_compact.py --demo", workdir, key=None)
    assert code == 0, shown
    assert_matches("s06-demo", checked_block(README, "s06-demo"), shown)
    assert [p.name for p in workdir.iterdir()] == ["demo"]
    (page,) = (workdir / "demo" / ".transcripts").glob("session_s06_*.html")
    html = page.read_text(encoding="utf-8")
    (marked,) = re.findall(r'<g class="cleared" data-call="(\d+)"', html)    # one batch: one ▲
    said = re.search(r"the ▲ under call (\d+) marks layer 1's batch: that call sends about a "
                     r"tenth of what call (\d+) sent", " ".join(README.split()))
    assert said and said[1] == marked and int(said[2]) == int(marked) - 1
    inputs = call_inputs(html)
    assert 0.05 < inputs[int(marked)] / inputs[int(marked) - 1] < 0.15, inputs


CAPTION = re.compile(r"!\[The session page of python s07_task_system\.py --demo \((\d+) model "
                     r"calls\), with call (\d+), the first after the compaction, open\]"
                     r"\(docs/session_page\.png\)")


def test_the_readmes_picture_is_the_demos_page_as_the_demo_is_today(workdir):
    """docs/session_page.png is made by tools/session_screenshot.py, which notes in it what it
    shows: that note, the README's caption and the demo run now agree (a picture of 11 calls
    stayed in the README after the demo made 10). Run the script again when this fails."""
    env = clean_env(workdir.parent / "home")
    page, calls, opened = session_screenshot.demo_page(workdir, env)
    caption = CAPTION.search(README)
    assert caption and (int(caption[1]), int(caption[2])) == (calls, opened), (calls, opened)
    picture = ROOT / "docs" / "session_page.png"
    assert session_screenshot.read_note(picture) == session_screenshot.note(calls, opened)
    assert f'data-call="{opened}"' in page.read_text(encoding="utf-8")


# ---------------------------------------------------------------- watch the task state persist

def test_the_board_planned_by_hand_outlives_the_process_without_a_key(workdir):
    block, shown = plan_by_hand(workdir, key=None)
    for run, out in zip(block, shown, strict=True):
        assert_matches(f"walkthrough, {run.command}", run.lines, out)
    assert [line for line in block[1].lines if line.startswith("[ ] #2:")]   # the board came back
    (cat,) = runs(checked_block(README, "task-file"))
    name = cat.command.removeprefix("cat ")
    assert cat.command.startswith("cat .tasks/task_")
    task_file = (workdir / name).read_text(encoding="utf-8")
    assert_matches("task-file", cat.lines, task_file)
    assert set(json.loads(task_file)) == {"id", "subject", "description", "status", "blockedBy",
                                          "owner", "created_at", "updated_at"}


def test_with_a_key_the_same_steps_print_the_same_lines_but_the_first(workdir):
    """The README says so: with a key, the no-model line is not there and the rest is the same.
    (The first run is enough: with a key, each run loads the SDK, which takes seconds.)"""
    run = runs(checked_block(README, "walkthrough"), (PROMPT,))[0]
    code, shown = shown_by(run.command, workdir, inputs=run.inputs, env=NAME)
    assert code == 0, shown
    first = run.lines.index(next(line for line in run.lines if line.startswith(NO_MODEL)))
    banner = next(n for n, line in enumerate(run.lines) if line.startswith("s07_task_system"))
    keyed = run.lines[:first] + run.lines[banner:]             # the note, with its wrapped lines
    assert first == 0 and banner == 4
    assert_matches(f"walkthrough with a key, {run.command}", keyed, shown)


@pytest.mark.slow
def test_the_steps_that_need_a_model_match_the_readme_with_a_scripted_model(workdir):
    plan_by_hand(workdir, key=None)
    (run,) = runs(checked_block(README, "walkthrough-model"), (PROMPT,))
    code, shown = shown_by(run.command, workdir, script=WALK_MODEL, summary=WALK_SUMMARY,
                           inputs=run.inputs, env=NAME)
    assert code == 0, shown
    assert_matches("walkthrough-model", run.lines, shown)


def test_without_a_model_those_steps_are_refused_with_one_message_each(workdir):
    plan_by_hand(workdir, key=None)
    (with_model,) = runs(checked_block(README, "walkthrough-model"), (PROMPT,))
    real_use = (ROOT / "docs" / "real-use.md").read_text(encoding="utf-8")
    (without,) = runs(checked_block(real_use, "walkthrough-no-model"), (PROMPT,))
    # The block types what needs a model, as the steps above typed it.
    assert without.inputs == [line for line in with_model.inputs if line in
                              ("start the next ready task, then mark it done", "/compact")]
    assert without.inputs == [with_model.inputs[0], "/compact"]
    code, shown = shown_by(with_model.command, workdir, inputs=without.inputs, key=None,
                           env=NAME)
    assert code == 0, shown
    assert_matches("walkthrough-no-model", ["…", *without.lines, "…"], shown)
    assert len(list((workdir / ".tasks").glob("task_*.json"))) == 2     # nothing else changed


# ---------------------------------------------------------------- what the README says of the code

def test_the_settings_the_readme_lists_are_the_ones_the_docs_and_env_example_have():
    listed = re.search(r"Settings come from the environment, from `./.env` where you run, or "
                       r"from the repository's `.env` \(the environment wins, then `./.env`\): "
                       r"(.*?); `.env.example` has the common ones\.", README)[1]
    names = re.findall(r"`([A-Z_]+)`", listed)
    example = re.findall(r"^#? ?([A-Z_]+)=", (ROOT / ".env.example").read_text(encoding="utf-8"),
                         re.M)
    assert set(example) <= set(names), set(example) - set(names)
    documented = re.findall(r"^\| `([A-Z_]+)` \|",
                            (ROOT / "docs" / "real-use.md").read_text(encoding="utf-8"), re.M)
    assert [name for name in names if name not in documented] == []


def guide_entries(table: str) -> dict:
    """{name: what the guide says of it}: a name in the table's second column (a module, or a
    folder/), with the words after it, continued on the lines below until the next name."""
    entries, name = {}, None
    for line in table.splitlines():
        named = line[12:27].strip()
        if named:
            name = named
            entries[name] = ""
        if name is not None:
            entries[name] += " " + line[27:]
    return entries


def test_the_reading_guide_names_every_module_and_the_readme_links_it():
    """A module the guide leaves out (or names as it was once called) is one a learner cannot
    find from a lesson: each top-level module in the names' column, each of a folder's in the
    words of that folder's entry."""
    assert "[`harness/README.md`](harness/README.md)" in README
    guide = (ROOT / "harness" / "README.md").read_text(encoding="utf-8")
    entries = guide_entries(guide.split("```")[1])
    named = {part.strip() for name in entries for part in name.split(",")}
    harness = ROOT / "harness"
    top = {p.stem for p in harness.glob("*.py") if p.stem != "__init__"}
    assert sorted(top - named) == []
    for folder in (p.parent for p in harness.glob("*/__init__.py")):
        said = set(re.findall(r"[a-z_]+", entries.get(folder.name + "/", "")))
        modules = {p.stem for p in folder.glob("*.py") if p.stem != "__init__"}
        assert sorted(modules - said) == [], folder.name
    assert "| `harness/" not in README            # the guide exists once, beside the code


def test_under_q_the_summary_says_why_each_test_was_skipped(tmp_path):
    """`python -m pytest -q` reads pytest.ini: a skipped test (no Chromium here, say) is named
    with its reason in the summary, not only counted as an "s"."""
    (tmp_path / "test_one.py").write_text(
        "import pytest\n\n\ndef test_the_page_in_a_browser():\n"
        "    pytest.skip('Chromium is not installed (apt-get install -y chromium)')\n")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-c", str(ROOT / "pytest.ini"), "--rootdir", str(tmp_path),
                           str(tmp_path / "test_one.py")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"SKIPPED \[1\] .*test_one\.py:\d+: Chromium is not installed", proc.stdout)
