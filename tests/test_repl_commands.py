"""The REPL's commands that need no model call, as a user meets them: /tasks, /task, /cost,
/context, the live board, and the demo's session page."""

import io
import json
import re

import s06_compact
import s07_task_system
from harness.board import graph
from harness.session import recorder
from harness.stand_in.script import reply, text, tool
from helpers import Elements, messages, words
from s07_task_system import TaskManager


class Typed(io.StringIO):
    """A REPL's stdin whose second line is read only after `between()` ran (another agent acts)."""

    def __init__(self, lines, between):
        super().__init__(lines)
        self.between, self.reads = between, 0

    def readline(self, *args):
        self.reads += 1
        if self.reads == 2:
            self.between()
        return super().readline(*args)


def test_the_repl_shows_what_another_agent_did_before_the_next_prompt(run_main, workdir):
    TaskManager(workdir / ".tasks", agent="bob").create("Write the docs")
    bob = TaskManager(workdir / ".tasks", agent="bob")
    stdin = Typed("/tasks\n/tasks\nq\n", lambda: bob.update(1, status="in_progress"))
    code, out, err, api = run_main(s07_task_system, stdin=stdin, env={"AGENT_NAME": "alice"})
    assert code == 0 and api.requests == []
    assert "[board: bob started #1]" in err                      # said once, before the next prompt
    assert err.count("[board:") == 1                             # alice's own reads are not news


def test_task_import_reads_a_path_as_a_shell_would_home_and_quotes(run_main, workdir):
    """TASK_BOARD expands ~, /task import did not ("no file ~/p.md"), and took quotes around a
    name with spaces for part of it ('no file "my plan.md"')."""
    (workdir.parent / "home" / "p.md").write_text("- [ ] From home\n")
    (workdir / "my plan.md").write_text("- [ ] From quotes\n")
    typed = '/task import ~/p.md\n/task import "my plan.md"\n/tasks\nq\n'
    code, out, err, api = run_main(s07_task_system, stdin=typed)
    assert code == 0 and "error" not in err, err
    assert "[ ] #1: From home" in out and "[ ] #2: From quotes" in out


def test_task_import_puts_a_checklist_on_the_board_in_order(run_main, workdir):
    (workdir / "plan.md").write_text(
        "# Plan\n- [x] Sketch the API\n- [ ] Build it\n- [ ] Test it\n")
    code, out, err, api = run_main(s07_task_system, stdin="/task import plan.md\n/tasks\nq\n")
    assert code == 0 and api.requests == [] and "error" not in err
    assert "[x] #1: Sketch the API" in out and "[ ] #3: Test it" in out
    (workdir / "bad.md").write_text("- [ ] fine\n- [?] not a box\n")
    code, out, err, api = run_main(s07_task_system, stdin="/task import bad.md\n/tasks\nq\n")
    assert "line 2" in err and out.count("#4") == 0           # nothing of a file with a bad line


def test_task_import_numbers_lines_as_an_editor_does(run_main, workdir):
    """Only a newline ends a line, as in an editor: a form feed or a vertical tab between
    sections does not shift the number of a bad line below them, and a subject holding U+0085
    (UTF-8 c2 85, a stray byte pair from a Latin-1 text) stays one item; a CRLF file, or one
    whose lines end in \r alone, imports."""
    (workdir / "plan.md").write_bytes(b"- [ ] caf\xc2\x85 au lait\r\n- [x] Pay\r\n")
    code, out, err, api = run_main(s07_task_system, stdin="/task import plan.md\nq\n")
    assert code == 0 and "error" not in err and "Imported 2 tasks" in out, err
    assert r"#1 [ ] caf\x85 au lait" in out          # shown escaped, never as a raw C1 code
    board = TaskManager(workdir / ".tasks").store.scan()[0]
    assert [(t["subject"], t["status"]) for t in board.values()] == [
        ("caf\x85 au lait", "pending"), ("Pay", "completed")]
    (workdir / "bad.md").write_text("- [ ] one\n\f\n\v\n- [?] two\n", encoding="utf-8")
    code, out, err, api = run_main(s07_task_system, stdin="/task import bad.md\nq\n")
    assert "nothing imported: 1 bad line: line 4: not a checklist item" in words(err)
    # An old Mac's file, each line ended by \r alone: three items, as an editor shows them.
    (workdir / "mac.md").write_bytes(b"- [ ] design the schema\r- [ ] write the API\r- [ ] test\r")
    code, out, err, api = run_main(s07_task_system, stdin="/task import mac.md\nq\n")
    assert "Imported 3 tasks" in out, err


def test_a_local_command_that_fails_oddly_is_one_line_and_the_repl_goes_on(run_main, workdir,
                                                                           monkeypatch):
    def broken(*_):
        raise TypeError("'int' object is not iterable")     # as a hand-edited field once caused
    monkeypatch.setattr(graph, "order_line", broken)
    stdin = "/task order\n/task show " + "9" * 300 + "\n/task add still here\nq\n"
    code, out, err, api = run_main(s07_task_system, stdin=stdin)
    assert code == 0 and "Traceback" not in words(err)
    assert "error: /task failed: TypeError: 'int' object is not iterable" in words(err)
    assert "error: a task id is a positive number like 3, '3' or '#3'; got '9999" in words(err)
    assert "Created task #1: still here" in out


def test_every_demo_writes_one_session_page_with_one_bar_per_model_call(run_main, workdir):
    code, out, err, api = run_main(s06_compact, "--demo", key=None)
    assert code == 0
    calls = len(re.findall(r"\[(?:summary call|tokens): ", err))
    assert not (workdir / ".transcripts").exists()           # the demo writes only under demo/
    (page,) = (workdir / "demo" / ".transcripts").glob("session_*.html")
    assert f"[session page: demo/.transcripts/{page.name} (open it in a browser)]" in words(err)
    bars = re.findall(r'<g class="call[^"]*" data-call="(\d+)"', page.read_text(encoding="utf-8"))
    # in order, none missing
    assert bars == [str(n) for n in range(1, calls + 1)] and calls >= 10


def test_cost_and_context_answer_in_the_repl_without_a_model_call(run_main):
    script = [reply(tool("bash", {"command": "echo hi"})), reply(text("done"))]
    code, out, err, api = run_main(s06_compact, stdin="go\n/cost\n/context\nq\n", script=script)
    assert code == 0 and len(api.requests) == 2 and api.violations == []   # the two turn calls only
    billed = api.billing()
    assert "2 calls" in out + err and f"{billed['cache_write']:,}" in out + err
    threshold = f"COMPACT_THRESHOLD {s06_compact.DEFAULT_THRESHOLD:,}"
    assert "context now:" in out + err and threshold in out + err


def test_the_s07_demos_page_draws_the_board_and_the_s06_demos_the_threshold(run_main, workdir):
    code, out, err, api = run_main(s07_task_system, "--demo", key=None)
    assert code == 0
    (page,) = (workdir / "demo" / ".transcripts").glob("session_s07_*.html")
    html = page.read_text(encoding="utf-8")
    assert '<svg class="board"' in html and 'data-task="4"' in html
    code, out, err, api = run_main(s06_compact, "--demo", key=None)
    (page,) = (workdir / "demo" / ".transcripts").glob("session_s06_*.html")
    assert '<g class="threshold">' in page.read_text(encoding="utf-8")


def test_context_after_compact_gives_the_size_the_compaction_line_and_the_page_gave(run_lesson,
                                                                                      workdir):
    script = [reply(tool("task_create", {"subject": "Design the data model"})),
              reply(text("Created #1."))]
    proc, api = run_lesson("s07_task_system", stdin="plan it\n/compact\n/context\nq\n",
                           script=script, summary="SUMMARY: one task created, #1.",
                           in_process=True)
    assert proc.returncode == 0 and api.violations == [], proc.stderr
    compacted = re.search(r"\[compacted: [\d,]+ → ~([\d,]+) tokens", proc.stderr)
    context = re.search(r"context now: ~([\d,]+) tokens \(estimated", proc.stdout)
    assert compacted and context, proc.stdout + proc.stderr
    assert context[1] == compacted[1]                      # one estimate, one moment, one number
    (page,) = (workdir / ".transcripts").glob("session_s07_*.html")
    assert f"→ ~{compacted[1]} tokens" in page.read_text(encoding="utf-8")


def test_the_pages_board_says_which_task_files_it_could_not_draw(run_lesson, workdir):
    (workdir / ".tasks").mkdir()
    for n in range(2, 9):                                           # seven broken files
        (workdir / ".tasks" / f"task_{n}.json").write_text("{not json", encoding="utf-8")
    script = [reply(tool("task_create", {"subject": "Design the data model"})),
              reply(text("Created #1."))]
    proc, api = run_lesson("s07_task_system", "plan it", script=script, in_process=True)
    assert proc.returncode == 0 and api.violations == [], proc.stderr
    (page,) = (workdir / ".transcripts").glob("session_s07_*.html")
    shown = " ".join(Elements(page.read_text(encoding="utf-8")).text)
    assert 'data-task="9"' in page.read_text(encoding="utf-8")     # #2 to #8 are broken
    named = [n for n in range(2, 9) if f"task_{n}.json is unreadable" in shown]
    assert len(named) == recorder.UNREADABLE_SHOWN
    assert "not drawn on the board: 2 more task files that could not be read" in shown


def test_a_later_s07_demo_says_first_which_task_it_picks_up_and_plans_nothing(run_main):
    """Runs 2 to 5 continue the first run's plan: each says so before anything else, with the
    task it takes, and asks the model to go on, not to plan."""
    code, out, err, api = run_main(s07_task_system, "--demo", key=None)
    assert code == 0 and ">> plan a small project on the task board" in out
    assert messages(err)[1].startswith("[demo] its board is demo/.tasks, empty: it plans")
    for task in ("#2 Implement the API", "#3 Write the docs", "#4 Write the API tests"):
        code, out, err, api = run_main(s07_task_system, "--demo", key=None)
        assert code == 0 and "Created task" not in err
        first, said = messages(err)[:2]
        assert first == "[demo] it runs in demo/: everything it writes goes there"
        assert said == ("[demo] it continues the plan an earlier --demo left on demo/.tasks: it "
                        f"picks up {task}, the next ready task, and plans nothing (the plan is "
                        "on disk, not in a conversation)")
        assert ">> continue the plan on the task board" in out and "plan a small" not in out
        assert f"Updated [x] {task.replace(' ', ': ', 1)} (owner: demo)" in err
    code, out, err, api = run_main(s07_task_system, "--demo", key=None)
    assert messages(err)[1].endswith("every task of it is done (delete demo/ to start over)")
    assert "Everything on the board is done" in out + err


def test_an_s07_demo_cut_off_mid_task_is_picked_up_by_the_next_run_not_left_stuck(run_main,
                                                                                  workdir):
    """A demo stopped midway (Ctrl-C, a closed pipe) leaves its task in progress, in its own
    name: the next run takes that task on and finishes it, and the plan goes on."""
    code, out, err, api = run_main(s07_task_system, "--demo", key=None)
    assert code == 0
    TaskManager(workdir / "demo" / ".tasks", agent="demo").update(2, status="in_progress")
    code, out, err, api = run_main(s07_task_system, "--demo", key=None)
    assert code == 0, err
    assert messages(err)[1].endswith("it picks up #2 Implement the API, which an earlier run "
                                     "left in progress, and plans nothing (the plan is on "
                                     "disk, not in a conversation)")
    assert "Updated [x] #2: Implement the API (owner: demo)" in err
    code, out, err, api = run_main(s07_task_system, "--demo", key=None)
    assert "it picks up #3 Write the docs, the next ready task" in messages(err)[1]


def test_an_s07_demo_that_finds_only_anothers_tasks_in_progress_says_how_to_finish_one(
        run_main, workdir):
    code, out, err, api = run_main(s07_task_system, "--demo", key=None)
    bob = TaskManager(workdir / "demo" / ".tasks", agent="bob")
    for task in (2, 3):
        bob.update(task, status="in_progress")
    code, out, err, api = run_main(s07_task_system, "--demo", key=None)
    assert code == 0 and "Updated" not in err
    assert ("Nothing can start: #2 is in progress, not in the demo's name. To finish it: python "
            "s07_task_system.py --board demo/.tasks, then /task done 2") in words(out + err)


def test_every_path_a_demo_notes_is_relative_to_the_folder_it_was_run_from(run_main, workdir):
    """The run works in demo/; what it writes is named as you find it from where you are."""
    for lesson in (s06_compact, s07_task_system):
        code, out, err, api = run_main(lesson, "--demo", key=None)
        assert code == 0
        # The s06 demo's model quotes the placeholder it was sent: a path from demo/, where
        # the model works, in the model's words; every note of the harness is checked.
        notes = re.sub(r"\[Previous: [^\]]*\]", "", words(err))
        named = re.findall(r"(\S*)\.transcripts/(\S+?)[\])\s]", notes)
        assert len(named) >= 2 and {before for before, _ in named} == {"demo/"}, named
        for _, name in named:                        # a page, a transcript, results/
            assert (workdir / "demo" / ".transcripts" / name.rstrip(".")).exists(), name


def test_a_persons_task_done_takes_over_a_task_another_agent_has_in_progress(run_main, workdir):
    """/task help says a person may take a task over; a refusal ("in progress by bob") left the
    person to edit the file by hand. bob's s07 started #1 and left it so (its file as bob's
    TaskManager wrote it); pat, at the REPL, completes it: taken over, done, #2 unblocked."""
    bob = TaskManager(workdir / ".tasks", agent="bob")
    bob.create("Design the data model")
    bob.create("Implement the API", blocked_by=[1])
    assert "(owner: bob)" in bob.update(1, status="in_progress")
    code, out, err, api = run_main(s07_task_system, "--name", "pat", stdin="/task done 1\nq\n")
    assert code == 0 and api.requests == [] and "error:" not in err, err
    assert "took #1 over from bob" in out and "Updated [x] #1: Design the data model" in out
    assert "Unblocked: #2 Implement the API" in out
    done = json.loads((workdir / ".tasks" / "task_1.json").read_text(encoding="utf-8"))
    assert (done["status"], done["owner"]) == ("completed", "pat")


def test_a_task_command_given_several_ids_does_nothing_and_says_one_at_a_time(run_main,
                                                                              workdir):
    """`/task done 1 2` completed #1 and said nothing of #2."""
    code, out, err, api = run_main(s07_task_system,
                                   stdin="/task add a\n/task add b\n/task done 1 2\nq\n")
    assert code == 0, err
    assert "error: /task done takes one task id (given: 1 2); give each its own /task done" \
        in words(err)
    board = TaskManager(workdir / ".tasks")
    assert [board.store.load(n)["status"] for n in (1, 2)] == ["pending", "pending"]
