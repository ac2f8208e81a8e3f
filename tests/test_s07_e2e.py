"""s07 run as a user runs it: plan, compact, list, complete, restart."""

import json
import subprocess
import sys

import pytest

import s07_task_system
from helpers import clean_env, tool_results, words
from harness import compaction
from harness.stand_in.script import reply, text, tool

PLAN = ["Design data model", "Implement API", "Write docs", "Write API tests"]


@pytest.mark.slow
def test_the_board_survives_compaction_and_a_restart(run_lesson, workdir):
    script = [
        reply(*[tool("task_create", {"subject": s}) for s in PLAN]),
        reply(tool("task_update", {"task_id": 2, "addBlockedBy": [1]}),
              tool("task_update", {"task_id": "#3", "addBlockedBy": ["1"]}),
              tool("task_update", {"task_id": "4", "addBlockedBy": ["#2"]})),
        reply(tool("task_update", {"task_id": 4, "status": "in_progress"})),     # refused: blocked
        reply(tool("task_list", {})),
        reply(tool("compact", {"focus": "the board"})),
        reply(text("SUMMARY: planned four tasks")),                              # the summary call
        reply(tool("task_list", {})),
        reply(tool("task_update", {"task_id": 1, "status": "completed"})),
        reply(text("data model done")),
    ]
    proc, api = run_lesson("s07_task_system", "plan a refactor", script=script, in_process=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "data model done" and api.violations == []
    reqs = api.requests
    names = [t["name"] for t in reqs[0]["tools"]]
    assert names == ["bash", "read_file", "write_file", "edit_file", "compact",
                     "task_create", "task_update", "task_list", "task_get"]
    refused = tool_results(reqs[3])[0]
    assert refused["is_error"] is True and "#4 is blocked by #2 Implement API" in refused["content"]
    board_before = tool_results(reqs[4])[0]["content"]
    assert board_before.splitlines()[-1] == "Ready to start: #1 Design data model"
    # After the compaction the first message is the summary plus the board, fresh from disk ...
    assert "<summary-request>" in json.dumps(reqs[5]["messages"][-1])
    first = reqs[6]["messages"][0]["content"]
    assert len(reqs[6]["messages"]) == 1
    assert "SUMMARY: planned four tasks" in first and board_before in first
    # ... and task_list gives the same board as before.
    assert tool_results(reqs[7])[0]["content"] == board_before
    done = tool_results(reqs[8])[0]["content"]
    assert "Unblocked: #2 Implement API, #3 Write docs" in done
    on_disk = {p.name: json.loads(p.read_text()) for p in (workdir / ".tasks").glob("task_*.json")}
    assert on_disk["task_1.json"]["status"] == "completed"
    assert on_disk["task_2.json"]["blockedBy"] == [] and on_disk["task_3.json"]["blockedBy"] == []
    assert on_disk["task_4.json"]["blockedBy"] == [2]
    assert "> task_create subject=\"Design data model\"" in proc.stderr
    assert "[compacted: " in proc.stderr

    # A second process in the same folder continues the board: a real one, which has only
    # what the first left on disk.
    again = [reply(tool("task_list", {}), tool("task_create", {"subject": "Release"})),
             reply(text("ok"))]
    proc, api = run_lesson("s07_task_system", "what is left?", script=again)
    assert proc.returncode == 0 and api.violations == []
    board, created = (r["content"] for r in tool_results(api.requests[1]))
    assert board.splitlines()[-1] == "Ready to start: #2 Implement API, #3 Write docs"
    assert created == "Created task #5: Release"


def test_the_repl_prints_the_board_and_compacts_on_command(run_main, workdir):
    script = [reply(tool("task_create", {"subject": "Only task"})), reply(text("created")),
              reply(text("SUMMARY: one task"))]
    code, out, err, api = run_main(s07_task_system,
                                   stdin="make a task\n/tasks\n/compact\n/tasks\nq\n",
                                   script=script)
    assert code == 0 and api.violations == [], err
    assert len(api.requests) == 3                          # /tasks made no model call
    assert out.count("[ ] #1: Only task") == 2 and out.count("Ready to start: #1 Only task") == 2
    assert "[compacted: " in err and "the board, read from .tasks/, was added" in err


def test_importing_a_lesson_does_nothing(workdir):
    env = clean_env(workdir.parent / "home")
    code = ("import sys, s03_todo, s06_compact, s07_task_system, harness.cli, "
            "harness.stand_in\n"
            "assert 'anthropic._client' not in sys.modules, "
            "'the SDK loads on first use, not on import'")
    proc = subprocess.run([sys.executable, "-c", code], cwd=workdir, env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout == "" and proc.stderr == "", proc.stderr
    assert list(workdir.iterdir()) == []  # no .tasks/, no .transcripts/, nothing


# What must not load when a lesson is imported: the command line and the .env files it reads
# (with python-dotenv), the session's record, log and page, --api-context, the stand-in,
# PostgreSQL, and the REPL's /task machinery.
LOADED_WHEN_USED = ("harness.cli", "harness.env_file", "dotenv", "harness.run", "harness.session",
                    "harness.api_context", "harness.stand_in", "harness.demos",
                    "harness.board.postgres", "harness.board.commands", "harness.board.live",
                    "harness.board.checklist", "harness.board.message")


@pytest.mark.parametrize("lesson, most", [("s03_todo", 4_000), ("s07_task_system", 6_000)])
def test_importing_a_lesson_loads_its_mechanism_not_the_command_line(workdir, lesson, most):
    """The issue's bound on what a lesson pulls in (s07's count includes s03's and s06's)."""
    code = ("import os, sys\n"
            f"import {lesson} as lesson\n"
            "root = os.path.dirname(os.path.abspath(lesson.__file__)) + os.sep\n"
            # The project's modules only (a venv may live inside the project's folder).
            "ours = [m.__file__ for n, m in list(sys.modules.items())\n"
            "        if n == 'harness' or n.startswith(('harness.', 's0'))]\n"
            "assert all(f.startswith(root) for f in ours), ours\n"
            "print(sum(len(open(f, encoding='utf-8').readlines()) for f in ours))\n"
            "print(' '.join(n for n in sys.modules if n.startswith(('harness', 'dotenv'))))\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=workdir,
                          env=clean_env(workdir.parent / "home"),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines, modules = proc.stdout.splitlines()
    loaded = [m for m in modules.split() if m.startswith(LOADED_WHEN_USED)]
    assert loaded == [], f"{lesson} loads on import what it needs only when run: {loaded}"
    assert 1_000 < int(lines) <= most, f"import {lesson} loads {int(lines):,} lines"


def test_a_resumed_session_sees_the_board_as_it_is_now_not_as_at_its_compaction(run_main):
    """--continue sent the board from the summary message as "just read", though a person had
    since finished #1 and deleted #2: the model would have done #1 again."""
    code, out, err, _ = run_main(s07_task_system, stdin="/task add Alpha\n/task add Beta\nq\n")
    assert code == 0, err
    code, out, err, _ = run_main(s07_task_system, "tidy", script=[reply(tool("compact", {})),
                                                                  reply(text("ok"))],
                                 summary="Summary: two tasks to do.")
    assert code == 0, err
    code, out, err, _ = run_main(s07_task_system, stdin="/task done 1\n/task delete 2\nq\n")
    assert code == 0, err
    code, out, err, api = run_main(s07_task_system, "--continue", "go on",
                                   script=[reply(text("on it"))])
    assert code == 0 and api.violations == [], err
    assert "[the board in the resumed conversation was read again" in words(err)
    assert "was added after the summary" not in words(err)
    first = api.requests[0]["messages"][0]["content"]
    assert "Summary: two tasks to do." in first and "[x] #1: Alpha" in first
    assert "#2: Beta" not in first and "[ ] #1: Alpha" not in first


PROMPTS_WITH_A_BOARD = {
    "the tag named": "What is the <task-board> tag for? Keep my notes: step A, step B, step C.",
    "a board pasted": ("Yesterday's board was:\n<task-board>\nThe task board (.tasks/), just "
                       "read:\n[ ] #1: Ship the release on FRIDAY\n</task-board>\nRemember "
                       "it said FRIDAY."),
}


@pytest.mark.parametrize("prompt", PROMPTS_WITH_A_BOARD.values(), ids=PROMPTS_WITH_A_BOARD.keys())
def test_a_prompt_that_holds_a_board_is_resumed_as_the_user_wrote_it(run_main, prompt):
    """A prompt asking what <task-board> is for, or quoting a board copied from the session
    page, was taken for the board s07 adds after a summary: --continue replaced the user's
    words with the board read now, and kept it so in every later session."""
    code, out, err, _ = run_main(s07_task_system, prompt, script=[reply(text("A marker."))])
    assert code == 0, err
    code, out, err, api = run_main(s07_task_system, "--continue", "and then?",
                                   script=[reply(text("on it"))])
    assert code == 0 and api.violations == [], err
    assert api.requests[0]["messages"][0]["content"] == prompt
    assert "read again" not in words(err)


def test_a_summary_that_quotes_an_older_board_has_the_board_at_its_end_read_again():
    """A model's summary may copy the board it was shown; --continue replaced that copy with
    the board read now, and left the board s07 added at the end as it was, 'just read'."""
    from harness.board import message
    old = "<task-board>\nThe task board (.tasks/), just read:\n[ ] #1: Alpha\n</task-board>"
    opening = f"{compaction.SUMMARY_OPENING} The full transcript is in t.jsonl.]"
    summary = f"{opening}\n\nSummary: we had {old} and did #1.\n\n{old}"
    now = "<task-board>\nThe task board (.tasks/), now\n</task-board>"
    resumed = message.refreshed([{"role": "user", "content": summary}], lambda: now)
    text = resumed[0]["content"]
    assert text.startswith(f"{opening}\n\nSummary: we had {old} and did #1.")
    assert text.endswith("The task board (.tasks/), now\n</task-board>")


def test_an_automatic_compaction_also_brings_the_board_back(run_main, workdir):
    (workdir / "big.txt").write_text("word " * 1500)
    script = [reply(tool("task_create", {"subject": "Read the big file"})),
              reply(tool("read_file", {"path": "big.txt"})),
              reply(tool("read_file", {"path": "big.txt"})),
              reply(tool("task_list", {})),
              reply(text("done"))]
    code, out, err, api = run_main(s07_task_system, "go", script=script,
                                   summary="SUMMARY: read it twice",
                                   env={"COMPACT_THRESHOLD": "2500"})
    assert code == 0 and api.violations == [], err
    summary_at = next(i for i, r in enumerate(api.requests)
                      if "<summary-request>" in json.dumps(r["messages"][-1]))
    first = api.requests[summary_at + 1]["messages"][0]["content"]
    assert "SUMMARY: read it twice" in first and "[ ] #1: Read the big file" in first
    assert tool_results(api.requests[-1])[0]["content"].startswith("[ ] #1: Read the big file")


def test_slash_compact_with_nothing_to_compact_says_so(run_main):
    code, out, err, api = run_main(s07_task_system, stdin="/compact\nq\n")
    assert code == 0 and api.requests == [] and "[nothing to compact yet]" in err


def test_slash_compact_of_a_history_that_is_one_summary_asks_for_no_second(run_main):
    """A second /compact right after the first paid for a summary of the summary: it can only
    lose what the first kept. The history stays as the first compaction left it."""
    code, out, err, api = run_main(s07_task_system, stdin="plan it\n/compact\n/compact\nq\n",
                                   script=[reply(text("Planned."))],
                                   summary="SUMMARY: a plan was asked for.")
    assert code == 0 and api.violations == [], err
    summaries = [r for r in api.requests if "<summary-request>" in json.dumps(r["messages"][-1])]
    assert len(summaries) == 1 and len(api.requests) == 2, api.requests
    assert words(err).count("[compacted:") == 1
    assert ("[nothing to compact: the conversation is one summary already; it grows again "
            "with your next prompt]") in words(err)


def test_the_demo_says_it_ignores_a_threshold_of_yours_and_runs_as_written(run_main):
    code, out, err, api = run_main(s07_task_system, "--demo", key=None,
                                   env={"COMPACT_THRESHOLD": "500"})
    assert code == 0 and api.violations == [], err
    # 500 is under what layer 2 needs, which s06's start says first: the demo says it is moot.
    assert "[demo] your COMPACT_THRESHOLD=500 is ignored, and any note on it above" in words(err)
    assert "came back whole" in out + err


def test_the_demo_with_api_context_sends_it_and_says_the_api_never_acts_in_it(run_main):
    """--demo --api-context compact ran the demo as without the flag, in silence: a learner
    waited for the API's compaction, which a demo this small never reaches."""
    code, out, err, api = run_main(s07_task_system, "--demo", "--api-context", "compact",
                                   key=None)
    assert code == 0 and api.violations == [], err
    assert all("context_management" in request for request in api.requests)
    said = words(err)
    assert ("[demo] --api-context compact: every request asks the API to act past 50,000 "
            "tokens, which this demo never reaches; its compaction is the model's compact "
            "call (s06's --demo shows the API's)") in said
    assert "shows the API's)]" not in said


def test_continue_says_whose_session_it_resumes_when_it_was_another_agents(run_main):
    """Two agents in one folder: alice's --continue resumed bob's newer session, and only said
    "continuing ...jsonl: 2 messages": alice was handed bob's conversation without a word."""
    for name, plan in (("alice", "plan A"), ("bob", "plan B")):
        code, out, err, api = run_main(s07_task_system, "--name", name, plan,
                                       script=[reply(text(f"{name} noted"))])
        assert code == 0, err
    code, out, err, api = run_main(s07_task_system, "--continue", "--name", "alice", "go on",
                                   script=[reply(text("on"))])
    assert code == 0, err
    said = words(err)
    assert ("2 messages, written by s07_task_system for agent bob, not you (alice): "
            "--continue resumes the newest session in this folder") in said
    code, out, err, api = run_main(s07_task_system, "--continue", "--name", "alice", "more",
                                   script=[reply(text("more"))])
    assert code == 0 and "[continuing " in err and "written by" not in words(err)


def test_continue_with_no_name_says_it_resumes_a_named_agents_session(run_main):
    """bob named his run; a --continue with no --name resumed it and said nothing, though the
    conversation was bob's."""
    code, out, err, api = run_main(s07_task_system, "--name", "bob", "plan B",
                                   script=[reply(text("bob noted"))])
    assert code == 0, err
    code, out, err, api = run_main(s07_task_system, "--continue", "go on",
                                   script=[reply(text("on"))])
    assert code == 0, err
    assert ("2 messages, written by s07_task_system for agent bob, not you (a run with no "
            "--name): --continue resumes the newest session in this folder") in words(err)


def test_the_demo_leaves_a_board_of_yours_alone_even_one_it_cannot_reach(run_main, workdir):
    """TASK_BOARD naming a PostgreSQL server stopped the keyless demo: "cannot reach the
    PostgreSQL server of the board", though the demo says it leaves that board alone."""
    code, out, err, api = run_main(s07_task_system, "--demo", key=None,
                                   env={"TASK_BOARD": "postgresql://me@127.0.0.1:9/board"})
    assert code == 0 and api.violations == [], err
    assert "(any --board or TASK_BOARD is left alone)" in words(err)
    assert (workdir / "demo" / ".tasks" / "task_1.json").is_file()


def test_every_task_command_works_in_the_repl_as_a_user_runs_it(run_lesson, workdir):
    stdin = ("/task add Design\n/task add Build\n/task add Docs\n"
             "/task block 2 1 3\n/task unblock 2 3\n/task order\n/task ready\n"
             "/task start 1\n/task show 1\n/task done 1\n/task delete 3\n"
             "/task\n/tasks\n/task help\n/task show 99\n/task block 2\nq\n")
    proc, api = run_lesson("s07_task_system", stdin=stdin, env={"AGENT_NAME": "dora"},
                           in_process=True)
    out, err = proc.stdout, proc.stderr
    assert proc.returncode == 0 and api.requests == [], err       # no model call for any of them
    assert "(agent dora)" in err
    assert "Created task #3: Docs" in out
    assert ("Updated [ ] #2: Build blocked by #1, #3\n"
            "s07 >> Updated [ ] #2: Build blocked by #1\n") in out
    assert "Order: #1 → #2 → #3" in out and "Ready to start: #1 Design, #3 Docs" in out
    assert "Updated [>] #1: Design (owner: dora)" in out
    assert json.loads(out[out.index("{"):out.index("}") + 1])["blocks"] == [2]     # /task show 1
    assert "Unblocked: #2 Build" in out and "Updated [-] #3: Docs" in out       # done 1, delete 3
    assert json.loads((workdir / ".tasks" / "task_3.json").read_text())["status"] == "deleted"
    board = "[x] #1: Design (owner: dora)\n[ ] #2: Build\nReady to start: #2 Build\n"
    assert out.count(board) == 2                   # /task and /tasks show the same board
    assert "/task unblock N BY..." in out                          # /task help
    assert "error: no task #99; existing tasks: #1, #2, #3" in err
    assert "error: /task block needs a task id and its blockers" in err
    assert "Traceback" not in err


def test_an_agent_is_named_owns_what_it_starts_and_a_person_can_take_it_over(
        run_lesson, run_main, workdir):
    start = [reply(tool("task_create", {"subject": "Ship it"}),
                   tool("task_update", {"task_id": 1, "status": "in_progress"})),
             reply(text("started"))]
    first, _ = run_lesson("s07_task_system", "start shipping", script=start)
    owner = json.loads((workdir / ".tasks" / "task_1.json").read_text())["owner"]
    assert first.returncode == 0 and owner       # no --name: a default, recorded as owner
    run_main(s07_task_system, "--name", owner, stdin="q\n")      # a named run before does not stick
    # another process: this one
    code, out, err, api = run_main(s07_task_system, "finish shipping", script=[
        reply(tool("task_update", {"task_id": 1, "status": "completed"})),
        reply(text("it is taken"))])
    refused = tool_results(api.requests[1])[0]
    assert refused["is_error"] is True and f"#1 is in progress by {owner}" in refused["content"]
    code, out, err, api = run_main(s07_task_system, "--name", "pat", stdin="/task start 1\nq\n")
    assert f"took #1 over from {owner}" in out and api.requests == []
    assert json.loads((workdir / ".tasks" / "task_1.json").read_text())["owner"] == "pat"


def test_continue_on_another_board_than_the_session_ran_on_says_so(run_main, workdir):
    """A session on --board team (or a PostgreSQL board through TASK_BOARD), continued in a
    new shell without it: it went on, in silence, on ./.tasks, where its tasks are not, and
    the model, told "no task #1", planned the work again."""
    code, out, err, _ = run_main(s07_task_system, "--board", "team", "plan it",
                                 script=[reply(tool("task_create", {"subject": "Ship it"})),
                                         reply(text("planned"))])
    assert code == 0, err
    code, out, err, _ = run_main(s07_task_system, "--board", "team", "--continue", "go on",
                                 script=[reply(text("on it"))])
    assert code == 0 and "it ran on the board" not in words(err), err
    code, out, err, _ = run_main(s07_task_system, "--continue", "go on",
                                 script=[reply(text("on it"))])
    assert code == 0, err
    assert ("it ran on the board team, and this run is on .tasks: its tasks are not here "
            "(give --board team)") in words(err)
