"""The pages in docs/: what they quote is run again, and what they say of the code is the code's.

Every block marked `<!-- checked: NAME -->`, in README.md or in docs/*.md, has tests here or
elsewhere that compare it with what a program prints (CHECKED says which; a marker without a
test fails). Links between the pages resolve, and every page is linked from the README. The
settings, defaults and bounds the pages quote are read from the code, so each phrase can fail.
"""

import io
import os
import re
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest

import pg_server
from helpers import (NAME, PROMPT, ROOT, WALK_MODEL, WALK_SUMMARY, gather, missing_test,
                     plan_by_hand, shown_by)
from harness.stand_in.script import reply, text, tool
from helpers import forks_alone, words
from readme_blocks import assert_matches, checked_block, markers, quoting_files, runs

DOCS = ROOT / "docs"


def page(name):
    return (DOCS / name).read_text(encoding="utf-8")


# ---------------------------------------------------------------- the blocks of docs/

def test_context_and_cost_match_the_session_page_after_the_walkthroughs_plan(workdir):
    plan_by_hand(workdir, key=None)
    (run,) = runs(checked_block(page("session.md"), "context-and-cost"), (PROMPT,))
    code, shown = shown_by(run.command, workdir, script=WALK_MODEL, summary=WALK_SUMMARY,
                           inputs=run.inputs, env=NAME)
    assert code == 0, shown
    assert_matches("context-and-cost", run.lines, shown)
    from harness import terminal
    from harness.session import views
    bar = re.search(r"what fills it  \[(.*)\]", "\n".join(run.lines))[1]
    assert len(bar) == terminal.PLAIN_WIDTH - views.LABEL - 2 == 61
    assert "61 columns in the 80 of a pipe" in words(page("session.md"))


COUNTING = [reply(text(f"Counting: {n}."), tool("bash", {"command": f"echo {n}"}))
            for n in (1, 2, 3)]


@pytest.mark.slow
def test_a_turn_out_of_budget_exits_3_and_continue_goes_on(workdir):
    stopped, resumed = runs(checked_block(page("long-sessions.md"), "budget"))
    code, shown = shown_by(stopped.command, workdir, script=COUNTING)
    assert code == 3, shown
    assert_matches(f"budget, {stopped.command}", stopped.lines, shown)
    code, shown = shown_by(resumed.command, workdir, script=[reply(text("Three. Done."))])
    assert code == 0, shown
    assert_matches(f"budget, {resumed.command}", resumed.lines, shown)
    import harness.cli
    assert harness.cli.STEPS_RAN_OUT == 3 and "exits with **status 3**" in page("long-sessions.md")


def test_what_bob_sees_of_alices_work_on_a_postgresql_board(pg_board, tmp_path):
    """In process, as bob's REPL does it: a watcher made before alice acts, read after."""
    from harness.board.checklist import import_checklist
    from harness.board.live import BoardWatcher
    from s07_task_system import TaskManager
    plan = tmp_path / "plan.md"
    plan.write_text("# Plan\n- [ ] Design the data model\n- [ ] Implement the API\n"
                    "- [ ] Write the docs\n", encoding="utf-8")
    bob = TaskManager(pg_board, agent="bob")
    watcher = BoardWatcher(bob.store, "bob")
    try:
        assert watcher.changes() == []
        alice = TaskManager(pg_board, agent="alice")
        import_checklist(alice, str(plan))
        alice.update(2, add_blocked_by=[1])
        alice.update(3, add_blocked_by=[1])
        alice.update(1, status="in_progress")
        seen = gather(watcher, 6)
        with pytest.raises(ValueError) as refused:
            bob.update(1, status="completed")
        alice.update(1, status="completed")
        seen += gather(watcher, 3)
    finally:
        watcher.close()
    doc = page("many-machines.md")
    assert_matches("live-board", checked_block(doc, "live-board"), "\n".join(seen))
    assert f"was refused: `{refused.value}`" in words(doc)


def test_a_board_server_that_is_down_is_one_line_without_its_password(workdir):
    if pg_server.psycopg_missing():      # without it, the line says to install it instead
        pg_server.skip_or_fail(pg_server.NO_PSYCOPG)
    (run,) = runs(checked_block(page("many-machines.md"), "board-unreachable"))
    assert "PASSWORD@" in run.command and all("PASSWORD" not in line for line in run.lines)
    code, shown = shown_by(run.command, workdir, key=None)
    assert code == 1, shown
    assert_matches("board-unreachable", run.lines, shown)


def test_a_password_given_with_the_board_flag_is_one_warning_line(workdir):
    (run,) = runs(checked_block(page("many-machines.md"), "board-password-warning"))
    assert "--board postgresql://agents:PASSWORD@" in run.command
    code, shown = shown_by(run.command, workdir, key=None)
    assert code == 1, shown
    assert_matches("board-password-warning", run.lines, shown)


def masked(lines):
    """Lines with every number as # and spaces as one: a timing differs on every run, and the
    columns' widths with it; the rows, the columns and their order do not."""
    return "\n".join(" ".join(re.sub(r"\d[\d,.]*", "#", line).split()) for line in lines)


def bench_prints(bench_tasks, argv, monkeypatch):
    monkeypatch.setattr(sys, "argv", argv)
    out = io.StringIO()
    # Its claimers are forked processes.
    with redirect_stdout(out), forks_alone():
        bench_tasks.main()
    return out.getvalue()


@pytest.mark.slow
def test_the_quoted_benchmark_runs_print_what_the_benchmark_prints_today(
        pg_url, monkeypatch):
    """The figures are one run's, on the machine its first line names; the rows, columns and
    sections are the bench's own, printed here by a run on a small board (timings not compared)."""
    sys.path.insert(0, str(ROOT / "bench"))
    import bench_tasks
    monkeypatch.setattr(bench_tasks, "postgres_server", lambda: (pg_url, lambda: None))
    stores = bench_prints(bench_tasks, ["bench_tasks.py", "--stores", "60", "80"], monkeypatch)
    monkeypatch.setattr(bench_tasks, "compare_stores", lambda sizes: None)   # run above
    full = bench_prints(bench_tasks, ["bench_tasks.py", "60", "80"], monkeypatch)
    doc = page("performance.md")
    for name, command, output in (("bench-tasks", "python bench/bench_tasks.py", full),
                                  ("bench-stores", "python bench/bench_tasks.py --stores", stores)):
        (run,) = runs(checked_block(doc, name))
        assert run.command == command
        assert_matches(name, masked(run.lines).splitlines(), masked(output.splitlines()))
    assert "[1, 1, 1, 1, 1]" in stores                  # one winner in every round, on both


def test_the_quoted_continue_benchmark_prints_what_the_benchmark_prints_today():
    """The rows and columns of bench_continue's quoted run, printed here by a run on small logs
    (timings not compared: the linear cost is checked in test_session_log.py)."""
    sys.path.insert(0, str(ROOT / "bench"))
    import bench_continue
    out = io.StringIO()
    with redirect_stdout(out):
        assert bench_continue.main(["600", "2400"]) == 0
    (run,) = runs(checked_block(page("performance.md"), "bench-continue"))
    assert run.command == "python bench/bench_continue.py"
    assert_matches("bench-continue", masked(run.lines).splitlines(),
                   masked(out.getvalue().splitlines()))


# ---------------------------------------------------------------- every quote has a test

# Each block's tests, as file::name (named, not imported: a test file imports no other).
R, T, D = "test_readme.py::", "test_bench_tokens.py::", "test_docs.py::"
CHECKED = {
    ("README.md", "s07-demo"):
        [R + "test_two_s07_demos_continue_one_board_and_leave_your_own_files_alone"],
    ("README.md", "s03-demo"):
        [R + "test_the_s03_demo_matches_the_readme_and_writes_only_under_demo"],
    ("README.md", "s06-demo"):
        [R + "test_the_s06_demo_matches_the_readme_and_its_page_marks_the_batch_where_it_says"],
    ("README.md", "walkthrough"):
        [R + "test_the_board_planned_by_hand_outlives_the_process_without_a_key",
         R + "test_with_a_key_the_same_steps_print_the_same_lines_but_the_first"],
    ("README.md", "task-file"):
        [R + "test_the_board_planned_by_hand_outlives_the_process_without_a_key"],
    ("README.md", "walkthrough-model"):
        [R + "test_the_steps_that_need_a_model_match_the_readme_with_a_scripted_model"],
    ("docs/real-use.md", "walkthrough-no-model"):
        [R + "test_without_a_model_those_steps_are_refused_with_one_message_each"],
    ("docs/cost.md", "cost-table"):
        [T + "test_the_docs_describe_the_constants_s06_has",
         T + "test_a_made_up_shapes_row_in_the_docs_is_what_the_bench_prints_for_it",
         T + "test_a_real_sessions_s06_figures_in_the_docs_are_what_the_bench_measures",
         T + "test_the_docs_worst_and_median_lines_follow_from_its_rows"],
    ("docs/cost.md", "cost-api"):
        [T + "test_the_api_tables_header_and_a_made_up_row_are_what_the_bench_prints",
         T + "test_on_a_real_session_s06s_layers_bill_less_than_the_apis_best_as_quoted",
         T + "test_the_api_tables_worst_lines_follow_from_its_rows",
         T + "test_the_docs_sweep_covers_the_grid_and_agrees_with_the_table"],
    ("docs/cost.md", "cost-sweep"):
        [T + "test_a_tiny_sweep_runs_and_its_line_for_the_table_constants_agrees_with_the_table",
         T + "test_the_docs_sweep_covers_the_grid_and_agrees_with_the_table"],
    ("docs/session.md", "context-and-cost"):
        [D + "test_context_and_cost_match_the_session_page_after_the_walkthroughs_plan"],
    ("docs/long-sessions.md", "budget"):
        [D + "test_a_turn_out_of_budget_exits_3_and_continue_goes_on"],
    ("docs/many-machines.md", "live-board"):
        [D + "test_what_bob_sees_of_alices_work_on_a_postgresql_board"],
    ("docs/many-machines.md", "board-unreachable"):
        [D + "test_a_board_server_that_is_down_is_one_line_without_its_password"],
    ("docs/many-machines.md", "board-password-warning"):
        [D + "test_a_password_given_with_the_board_flag_is_one_warning_line"],
    ("docs/performance.md", "bench-tasks"):
        [D + "test_the_quoted_benchmark_runs_print_what_the_benchmark_prints_today"],
    ("docs/performance.md", "bench-stores"):
        [D + "test_the_quoted_benchmark_runs_print_what_the_benchmark_prints_today"],
    ("docs/performance.md", "bench-continue"):
        [D + "test_the_quoted_continue_benchmark_prints_what_the_benchmark_prints_today"],
}


def quoted_blocks():
    """(file, name) of every checked block, and every ```text block that has no marker."""
    found, unmarked = [], []
    for path in quoting_files():
        source = path.read_text(encoding="utf-8")
        name = str(path.relative_to(ROOT))
        found += [(name, marker) for marker in markers(source)]
        for before, _ in re.findall(r"(.*)\n```text\n(.*?)```", source):
            if not re.fullmatch(r"<!-- checked: [\w-]+ -->", before):
                unmarked.append((name, before))
    return found, unmarked


def test_every_quoted_output_block_is_checked_by_a_test_and_every_test_has_its_block():
    found, unmarked = quoted_blocks()
    assert len(found) >= 10, found                    # the markers were found and read
    assert unmarked == [], "an output block without a checked marker"
    assert [block for block in found if block not in CHECKED] == [], "a block has no test"
    assert [block for block in CHECKED if block not in found] == [], "a test names no block"
    assert len(set(found)) == len(found), "two blocks with one name"
    named = [test for tests in CHECKED.values() for test in tests]
    assert [missing_test(test) for test in named if missing_test(test)] == []


# ---------------------------------------------------------------- links and pages

def test_every_link_between_the_pages_resolves_and_every_page_is_linked_from_the_readme():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    link = re.compile(r"\]\(([^)#]+)(?:#[^)]*)?\)")
    local = [(path, target) for path in quoting_files()
             for target in link.findall(path.read_text(encoding="utf-8"))
             if not target.startswith(("http://", "https://"))]
    assert len(local) > 20                      # the pages do link each other
    for path, target in local:
        assert (path.parent / target).exists(), f"{path.name} links to {target}"
    linked = set(re.findall(r"\]\(docs/([\w.-]+\.md)\)", readme))
    assert linked == {p.name for p in DOCS.glob("*.md")}


# ---------------------------------------------------------------- what the pages say of the code

def settings_read_by_the_code():
    """The environment variables the lessons and the harness read, from their source."""
    names = set()
    for path in [*ROOT.glob("s0*.py"), *(ROOT / "harness").rglob("*.py")]:
        if "stand_in" in path.parts:
            continue
        source = path.read_text(encoding="utf-8")
        names |= set(re.findall(r'environ\.get\("([A-Z_]+)"', source))
        names |= set(re.findall(r'(?:positive_int|secret)\(\s*"([A-Z_]+)"', source))
        names |= set(re.findall(r'\("(PRICE_PER_MTOK\w*)", "(?:input|output)"\)', source))
    return names - {"USER"}      # the default agent name's part, not a setting


def test_the_settings_table_lists_every_setting_the_code_reads():
    table = re.findall(r"^\| `([A-Z_]+)` \|", page("real-use.md"), re.M)
    read = settings_read_by_the_code()
    assert {"ANTHROPIC_API_KEY", "MAX_STEPS", "PRICE_PER_MTOK_OUT", "NO_COLOR"} <= read
    assert sorted(read - set(table)) == [] and sorted(set(table) - read) == []


def test_the_defaults_and_bounds_the_pages_quote_are_the_codes():
    import s03_todo
    import s06_compact
    from harness import bash, config, excerpt, spill, terminal
    from harness.session import page as session_page
    real_use, long_sessions, limits = page("real-use.md"), page("long-sessions.md"), page(
        "limits.md")
    quoted = {
        page("session.md"): [f"The chart draws at most {session_page.MAX_BARS} bars",
                             f"whole up to {excerpt.WHOLE_LINES} lines, as the terminal shows "
                             "them, indentation kept"],
        real_use: [f"the model (default `{config.DEFAULT_MODEL}`)",
                   f"next piece of a reply (default {config.DEFAULT_TIMEOUT}, at most "
                   f"{config.MAX_TIMEOUT:,}, a day;",
                   f"above this many tokens (default {s06_compact.DEFAULT_THRESHOLD:,})",
                   f"(default {config.DEFAULT_WINDOW:,}, the default model's)",
                   f"default {s03_todo.MAX_STEPS} in s03, {s06_compact.MAX_STEPS} in s06 and s07",
                   f"({terminal.PLAIN_WIDTH} columns when the output is a pipe or a file"],
        long_sessions: [
            f"The default is {s06_compact.MAX_STEPS} in s06 and s07",
            f"s03 keeps {s03_todo.MAX_STEPS}",
            f"`COMPACT_THRESHOLD` (default {s06_compact.DEFAULT_THRESHOLD:,} tokens)",
            f"longer than the cap ({s03_todo.OUTPUT_CAP:,} characters)",
            f"its first and last {int(s03_todo.OUTPUT_CAP * spill.SHOWN_SHARE):,} characters",
            f"keeps the first {bash.KEEP_UP_TO:,} characters of a command's output, and stops a "
            f"command that writes {bash.FLOOD_BYTES // 1_000_000} MB beyond what it holds for "
            f"them (about {(4 * bash.KEEP_UP_TO + bash.FLOOD_BYTES) // 1_000_000} MB in all)",
            f"passes **{spill.MAX_TOTAL_BYTES // 1_000_000} MB or {spill.MAX_FILES:,} files**",
            f"a result of {spill.SAVE_WHEN_CLEARED:,} characters or more"],
        limits: [f"a shell command is shown whole up to {terminal.COMMAND_CHARS:,} characters",
                 f"keeps the first {bash.KEEP_UP_TO:,} characters",
                 f"writes {bash.FLOOD_BYTES // 1_000_000} MB beyond what it holds for them (up "
                 f"to {4 * bash.KEEP_UP_TO // 1_000_000} MB: about "
                 f"{(4 * bash.KEEP_UP_TO + bash.FLOOD_BYTES) // 1_000_000} MB in all",
                 f"a result over {s03_todo.OUTPUT_CAP:,} characters is saved whole",
                 f"If it was {spill.SAVE_WHEN_CLEARED:,} characters or more",
                 "(the three newest, `KEEP_RECENT` in s06)"],
    }
    missing = [phrase for text, phrases in quoted.items() for phrase in phrases
               if words(phrase) not in words(text)]
    assert missing == []
    assert s06_compact.KEEP_RECENT == 3        # "the three newest" in limits.md


@pytest.mark.parametrize("script", ["bench/bench_continue.py", "bench/bench_layer1.py",
                                    "bench/bench_page.py", "bench/bench_tasks.py",
                                    "bench/bench_tokens.py", "tools/session_screenshot.py"])
def test_every_script_the_pages_name_answers_help_with_what_it_does_and_changes_nothing(script):
    """--help ran the screenshot tool (it rewrote docs/session_page.png), and ended two
    benchmarks in a traceback (int('--help'))."""
    picture = (ROOT / "docs" / "session_page.png").stat().st_mtime_ns
    proc = subprocess.run([sys.executable, script, "--help"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    first = (ROOT / script).read_text(encoding="utf-8").split('"""')[1].splitlines()[0]
    assert proc.returncode == 0 and proc.stderr == ""
    assert proc.stdout.startswith(f"usage: {Path(script).name}") and first in proc.stdout
    assert (ROOT / "docs" / "session_page.png").stat().st_mtime_ns == picture


def test_a_reason_that_skips_many_tests_is_one_line_of_the_summary_with_its_count(tmp_path):
    """README: the summary gives each reason once, with how many tests it skipped (without the
    hook in conftest.py, a fixture's skip is one line per test: 95 alike for psycopg)."""
    (tmp_path / "test_needs_a_server.py").write_text(
        "import pytest\n\n\n@pytest.fixture\ndef server():\n"
        "    pytest.skip('the server is missing')\n\n\n"
        "@pytest.mark.parametrize('n', range(3))\ndef test_it(server, n):\n    pass\n")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "conftest",
                           "-p", "no:cacheprovider", str(tmp_path)], cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": f"{ROOT / 'tests'}:{ROOT}"},
                          capture_output=True, text=True, timeout=120)
    skipped = [line for line in proc.stdout.splitlines() if line.startswith("SKIPPED")]
    assert skipped == ["SKIPPED [3] tests: the server is missing"], proc.stdout
