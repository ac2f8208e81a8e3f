"""Unit tests of s03's base tools, the dispatcher and TodoManager."""

import contextlib
import os
import re
import select
import signal
import subprocess
import sys
import time

import pytest

from helpers import (ROOT, call_tool, command_ended, end_group, group_ends,
                     popen_taking_ctrl_c, process_ends, within)

import s03_todo as s03
from harness import bash
from s03_todo import TodoManager, run_bash, run_edit, run_read, run_write, safe_path


pytestmark = pytest.mark.usefixtures("in_tmp")     # each test runs in a workspace of its own


# ---------------------------------------------------------------- confinement

def test_paths_inside_the_workspace_are_allowed(in_tmp):
    assert safe_path("a/b.txt") == in_tmp.resolve() / "a" / "b.txt"
    assert safe_path(str(in_tmp / "c.txt")) == in_tmp.resolve() / "c.txt"


@pytest.mark.parametrize("path", ["../outside.txt", "a/../../outside.txt", "/etc/passwd"])
def test_paths_leaving_the_workspace_are_refused(path):
    with pytest.raises(ValueError, match="outside the workspace"):
        safe_path(path)


# Paths a shell would have changed, or that a model's JSON carried by mistake: write_file made
# ./~/notes.txt (a folder named ~, which invites `rm -rf ~`), "hello.py\n" beside hello.py,
# and said "Wrote 1 byte to ~/notes.txt", so the model took its file as written.
NOT_WHAT_THE_MODEL_MEANT = {
    "~/notes.txt": "a shell expands ~; the tools do not",
    "~": "a shell expands ~; the tools do not",
    "$HOME/notes.txt": "a shell expands $HOME; the tools do not",
    "${HOME}/notes.txt": "a shell expands ${HOME}; the tools do not",
    "~root/notes.txt": "a shell expands ~root; the tools do not",
    "$(pwd)/notes.txt": "a shell expands $(pwd); the tools do not",
    "build/$TARGET/notes.txt": "a shell expands $TARGET; the tools do not",
    "hello.py\n": "or holds a control character",
    "notes\t1.txt": "or holds a control character",
    " notes.txt": "begins or ends with a space",
    "notes.txt ": "begins or ends with a space",
}


@pytest.mark.parametrize("path, said", NOT_WHAT_THE_MODEL_MEANT.items(),
                         ids=[repr(p) for p in NOT_WHAT_THE_MODEL_MEANT])
def test_a_path_a_shell_would_have_changed_is_refused_and_nothing_is_made(in_tmp, path, said):
    for name, args in [("write_file", {"path": path, "content": "x"}),
                       ("read_file", {"path": path})]:
        output, is_error = call_tool(name, args, s03.TOOLS, s03.TOOL_HANDLERS)
        assert is_error and said in output, output
    assert list(in_tmp.iterdir()) == []


def test_a_file_named_with_a_slash_after_it_is_not_read_as_the_file(in_tmp):
    """pathlib drops a trailing /, so read_file "a.txt/" read a.txt, where cat a.txt/ says
    "Not a directory": the model would take a.txt for a folder that holds it."""
    (in_tmp / "a.txt").write_text("one\n")
    for name, args in [("read_file", {"path": "a.txt/"}), ("read_file", {"path": "a.txt/."}),
                       ("edit_file", {"path": "a.txt/", "old_text": "one", "new_text": "two"})]:
        output, is_error = call_tool(name, args, s03.TOOLS, s03.TOOL_HANDLERS)
        assert is_error and "ends in /, so it names a folder; a.txt is a file" in output
    assert (in_tmp / "a.txt").read_text() == "one\n"


@pytest.mark.parametrize("path", ["~$report.docx", "$RECYCLE.BIN.txt", "a~/b.txt", "my notes.txt",
                                  "price$5.txt", "notes~", "a/~backup.txt"])
def test_names_that_only_look_like_it_are_written(in_tmp, path):
    output, is_error = call_tool("write_file", {"path": path, "content": "x"}, s03.TOOLS,
                                 s03.TOOL_HANDLERS)
    assert not is_error, output
    assert (in_tmp / path).read_text() == "x"


def test_a_symlink_pointing_outside_is_refused(in_tmp):
    (in_tmp.parent / "outside.txt").write_text("TOP SECRET CONTENT")
    (in_tmp / "link.txt").symlink_to(in_tmp.parent / "outside.txt")
    for name, args in [("read_file", {"path": "link.txt"}),
                       ("write_file", {"path": "link.txt", "content": "overwritten"})]:
        output, is_error = call_tool(name, args, s03.TOOLS, s03.TOOL_HANDLERS)
        assert is_error and "outside the workspace" in output and "TOP SECRET" not in output
    assert (in_tmp.parent / "outside.txt").read_text() == "TOP SECRET CONTENT"


def test_a_workspace_deleted_while_the_session_runs_is_named_in_each_tools_error(in_tmp):
    """rm -rf of the folder the session runs in (by the model, or in another terminal): every
    tool fails, and the model must be told why, not a bare "No such file or directory"."""
    os.rmdir(in_tmp)
    for name, args in [("write_file", {"path": "a.txt", "content": "x"}),
                       ("read_file", {"path": "a.txt"}),
                       ("edit_file", {"path": "a.txt", "old_text": "x", "new_text": "y"}),
                       ("bash", {"command": "ls"})]:
        output, is_error = call_tool(name, args, s03.TOOLS, s03.TOOL_HANDLERS)
        assert is_error and "the folder this session works in was deleted" in output, name
        assert "start the session again in a folder that exists" in output, name


# ---------------------------------------------------------------- bash

SIGNAL_AS_IT_STARTS = """
import os, signal, subprocess, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from harness import bash
real = subprocess.Popen
def popen(*args, **kwargs):
    proc = real(*args, **kwargs)
    while not Path("shell.pid").exists():     # the command is running
        pass
    os.kill(os.getpid(), int(sys.argv[2]))    # and the signal comes before run() goes on
    return proc
subprocess.Popen = popen
bash.run("echo $$ > shell.pid.tmp; mv shell.pid.tmp shell.pid; sleep 600", Path.cwd(), 60)
"""


@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 128 + signal.SIGTERM),
                                          (signal.SIGINT, -signal.SIGINT)],
                         ids=["SIGTERM", "Ctrl-C"])
def test_a_signal_as_the_command_starts_still_kills_the_command(tmp_path, signum, code):
    """The signal handlers are in place before the command starts: a SIGTERM in between used
    to kill Python at once, and a Ctrl-C (a KeyboardInterrupt inside Popen, on a busy machine)
    lost the command's pid; either left the command running with no one to stop it."""
    proc = popen_taking_ctrl_c([sys.executable, "-c", SIGNAL_AS_IT_STARTS, str(ROOT),
                                str(int(signum))], cwd=tmp_path, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=60)
    group = int((tmp_path / "shell.pid").read_text())
    command_ended(group)
    assert proc.returncode == code, err
    if signum == signal.SIGINT:
        assert "KeyboardInterrupt" in err        # Ctrl-C is still Ctrl-C, once the pid is kept


SECOND_SIGNAL_AS_IT_IS_KILLED = SIGNAL_AS_IT_STARTS.replace("subprocess.Popen = popen", """
subprocess.Popen = popen
real_killpg, sent = os.killpg, []
def killpg(group, signum):
    if not sent:                              # a second signal, just as the kill begins
        sent.append(signal.SIGHUP)
        os.kill(os.getpid(), signal.SIGHUP)
    return real_killpg(group, signum)
os.killpg = killpg""")


def test_a_second_signal_while_the_command_is_killed_still_kills_it(tmp_path):
    """A SIGTERM, then a SIGHUP as the command is being killed (systemd sends both; a closed
    terminal may send two): the second raised inside the kill, and the command ran on."""
    proc = subprocess.run([sys.executable, "-c", SECOND_SIGNAL_AS_IT_IS_KILLED, str(ROOT),
                           str(int(signal.SIGTERM))], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    group = int((tmp_path / "shell.pid").read_text())
    command_ended(group)
    assert proc.returncode == 128 + signal.SIGTERM, proc.stderr


# The same inside a run's own block, as cli holds one: the first signal a Ctrl-C, the second a
# closed terminal's SIGHUP.
SIGHUP_AS_CTRL_C_KILLS_IT = SECOND_SIGNAL_AS_IT_IS_KILLED.replace(
    'bash.run("echo', 'with bash.signals_raise() as armed:\n    armed()\n    bash.run("echo')


def test_a_closed_terminal_as_a_ctrl_c_kills_the_command_still_ends_the_run(tmp_path):
    """The SIGHUP was noted by the run's block, which never raised it: the Ctrl-C abandoned
    the turn and the run went on, with no terminal, until a SIGKILL lost its page."""
    proc = popen_taking_ctrl_c([sys.executable, "-c", SIGHUP_AS_CTRL_C_KILLS_IT, str(ROOT),
                                str(int(signal.SIGINT))], cwd=tmp_path, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=60)
    group = int((tmp_path / "shell.pid").read_text())
    command_ended(group)
    assert proc.returncode == 128 + signal.SIGHUP, err


# A SIGHUP just as a command's block closes (its handler still in, its list gone), inside a
# run's block: noted by the run's block alone, which had raised nothing.
SIGHUP_AS_THE_BLOCK_CLOSES = """
import os, signal, sys
sys.path.insert(0, sys.argv[1])
from harness import bash
class Blocks(list):
    def pop(self):
        block = super().pop()
        if len(self) == 1:
            os.kill(os.getpid(), signal.SIGHUP)
        return block
bash._BLOCKS = Blocks()
with bash.signals_raise() as armed:
    armed()
    with bash.signals_raise(ctrl_c=True) as command_armed:
        command_armed()
    print("the run went on")
"""


def test_a_closed_terminal_as_a_commands_block_closes_still_ends_the_run(tmp_path):
    proc = subprocess.run([sys.executable, "-c", SIGHUP_AS_THE_BLOCK_CLOSES, str(ROOT)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 128 + signal.SIGHUP and "the run went on" not in proc.stdout, \
        proc.stderr


def test_a_flood_is_killed_before_the_signal_guard_is_left(in_tmp, monkeypatch):
    """A flood's command (and a job it started) is killed while signals are still deferred: a
    Ctrl-C in the gap after (the output decoded, 8 MB) left the job running."""
    read, left, groups = bash._read_output, [], []

    def watched(proc, timeout, cap):
        groups.append(proc.pid)
        found = read(proc, timeout, cap)
        left.append(not group_ends(proc.pid, seconds=5))
        return found
    monkeypatch.setattr(bash, "_read_output", watched)
    try:
        out = bash.run("sleep 600 & yes", in_tmp, timeout=60)
    finally:
        for group in groups:            # a failing run leaves no `sleep 600` behind
            end_group(group)
    assert "[stopped: the command wrote more than" in out
    assert left == [False], "the group still ran when the guarded part ended"


def test_bash_returns_stdout_and_stderr_and_the_exit_status(in_tmp):
    out = run_bash("echo out; echo err >&2; exit 3")
    assert "out" in out and "err" in out and "[exit status 3]" in out


def test_bash_runs_in_the_workspace_and_is_not_a_blocklist(in_tmp):
    assert run_bash("pwd").strip() == str(in_tmp.resolve())
    assert "(no output)" == run_bash("ls 2>/dev/null")  # a substring blocklist would refuse this


def test_bash_timeout_kills_the_whole_process_group(in_tmp, monkeypatch):
    monkeypatch.setattr(s03, "BASH_TIMEOUT", 1)
    with pytest.raises(TimeoutError, match="timed out after 1s"):
        run_bash("sleep 600 & echo $! > child.pid; wait")
    child = int((in_tmp / "child.pid").read_text())
    assert process_ends(child), f"child {child} of a timed-out command is still running"


def test_a_timeout_says_a_job_started_with_setsid_may_still_run(in_tmp, monkeypatch):
    """The model was told the command was killed "with its children"; one started with
    setsid (or set -m) has a group of its own, ran on, and held its port or lock."""
    monkeypatch.setattr(s03, "BASH_TIMEOUT", 1)
    with pytest.raises(TimeoutError) as said:
        run_bash("setsid sleep 600 & echo $! > child.pid; sleep 30")
    child = int((in_tmp / "child.pid").read_text())
    try:
        assert not process_ends(child, seconds=0.5)
        assert "not one started with setsid or set -m, which may still run" in str(said.value)
    finally:
        os.kill(child, signal.SIGKILL)


def test_bash_output_over_the_cap_is_saved_whole_and_the_model_sees_head_tail_and_path(
        in_tmp, monkeypatch):
    monkeypatch.setattr(s03, "OUTPUT_CAP", 1000)
    out, is_error = call_tool("bash", {"command": "seq 1 3000"}, s03.TOOLS, s03.TOOL_HANDLERS)
    assert not is_error and out.startswith("1\n2\n") and "\n3000\n" in out and len(out) < 1500
    saved = re.search(r"is saved in (\S+\.txt);", out)[1]
    assert (in_tmp / saved).read_text() == "\n".join(str(n) for n in range(1, 3001))  # all of it


def test_bash_keeps_its_own_amount_of_output_unless_told_otherwise(in_tmp):
    out = bash.run("seq 1 600000", cwd=in_tmp, timeout=30)      # 3,488,895 characters
    assert out.startswith("1\n2\n")
    kept = out[:out.index("\n... [output cut:")]
    assert len(kept) == bash.KEEP_UP_TO
    assert bash.run("seq 1 100", cwd=in_tmp, timeout=30, cap=10).startswith("1\n2\n3\n4\n5\n")


# ---------------------------------------------------------------- file tools

def test_read_with_limit_and_errors(in_tmp):
    (in_tmp / "f.txt").write_text("1\n2\n3\n", encoding="utf-8")
    assert run_read("f.txt") == "1\n2\n3"
    assert run_read("f.txt", limit=2) == "1\n2\n... (1 more line; read on with offset=3)"
    assert run_read("f.txt", offset=3) == "3"
    (in_tmp / "latin1").write_bytes(b"caf\xe9\n")
    for args, message in [({"path": "nope.txt"}, "no such file"), ({"path": "latin1"}, "not UTF-8"),
                          ({"path": "."}, "is a folder, not a regular file"),
                          ({"path": "f.txt", "limit": 0}, "positive"),
                          ({"path": "f.txt", "offset": 0}, "positive")]:
        output, is_error = call_tool("read_file", args, s03.TOOLS, s03.TOOL_HANDLERS)
        assert is_error and message in output


def test_write_creates_folders_and_reports_what_it_wrote(in_tmp):
    said = run_write("d/e/g.txt", "héllo\nworld\n")
    assert said.startswith("Wrote 13 bytes") and said.endswith(" to d/e/g.txt")  # 12 characters
    assert (in_tmp / "d/e/g.txt").read_text(encoding="utf-8") == "héllo\nworld\n"


def test_edit_replaces_exactly_one_unique_occurrence(in_tmp):
    (in_tmp / "f.py").write_text("a = 1\nb = 1\n", encoding="utf-8")
    assert run_edit("f.py", "a = 1", "a = 2") == "Edited f.py: replaced 1 occurrence"
    assert (in_tmp / "f.py").read_text() == "a = 2\nb = 1\n"
    for old, message in [("= ", "occurs 2 times"), ("zzz", "not found"), ("", "empty")]:
        with pytest.raises(ValueError) as err:
            run_edit("f.py", old, "x")
        assert message in str(err.value)
    assert (in_tmp / "f.py").read_text() == "a = 2\nb = 1\n"  # refused edits change nothing


# ---------------------------------------------------------------- the dispatcher

@pytest.mark.parametrize("name, args, message", [
    ("nuke", {}, "unknown tool 'nuke'; use one of ['bash'"),
    ("bash", {}, "missing required argument 'command'"),
    # Types named as JSON names them, as the model wrote them: not Python's int or NoneType.
    ("bash", {"command": 5}, "'command' must be string, got integer"),
    ("bash", {"command": None}, "'command' must be string, got null"),
    ("read_file", {"path": "f", "limit": "ten"}, "'limit' must be integer, got string"),
    ("read_file", {"path": "f", "limit": True}, "'limit' must be integer, got boolean"),
    ("read_file", {"path": "f", "limit": 2.5}, "'limit' must be integer, got number"),
    ("write_file", {"path": "f", "content": "x", "mode": "w"}, "unexpected argument 'mode'"),
    ("todo", {"items": "buy milk"}, "'items' must be array, got string"),
    # What the model sent, named by its own type: "ls" was reported as NoneType.
    ("bash", "ls", 'arguments must be a JSON object such as {"path": "a.txt"}, got string'),
    ("bash", "[1, 2]", "arguments must be a JSON object such as {\"path\": \"a.txt\"}, got string"),
    ("bash", [1, 2], "arguments must be a JSON object such as {\"path\": \"a.txt\"}, got array"),
])
def test_bad_tool_calls_become_error_results(name, args, message):
    output, is_error = call_tool(name, args, s03.TOOLS, s03.TOOL_HANDLERS)
    assert is_error and message in output


def test_a_null_optional_argument_is_not_given_and_a_whole_float_is_an_integer(in_tmp):
    """Weak models send {"offset": null} for "no offset", and 2.0 for 2 (JSON Schema counts
    2.0 as an integer): both were refused, "must be integer, got NoneType"."""
    (in_tmp / "f.txt").write_text("one\ntwo\nthree\n")
    output, is_error = call_tool("read_file", {"path": "f.txt", "offset": None, "limit": 2.0},
                                 s03.TOOLS, s03.TOOL_HANDLERS)
    assert (output, is_error) == ("one\ntwo\n... (1 more line; read on with offset=3)", False)
    # An unknown argument's null is still unknown; a string's is refused, not dropped.
    output, is_error = call_tool("read_file", {"path": "f.txt", "bogus": None}, s03.TOOLS,
                                 s03.TOOL_HANDLERS)
    assert is_error and "unexpected argument 'bogus'" in output


# ---------------------------------------------------------------- TodoManager

def items(*statuses):
    return [{"id": str(n), "text": f"step {n}", "status": s} for n, s in enumerate(statuses, 1)]


def test_todo_renders_markers_and_progress():
    assert TodoManager().update(items("completed", "in_progress", "pending")) == (
        "[x] #1: step 1\n[>] #2: step 2\n[ ] #3: step 3\n(1/3 completed)")


TODO_RULES_BROKEN = [
    (items("in_progress", "in_progress"), "only one may be in_progress"),
    (items(*["pending"] * 21), "20 or fewer"),
    ([{"id": "1", "text": "  ", "status": "pending"}], "text must be some words"),
    # A weak model's null or number: it was a todo named "None", or "123".
    ([{"id": "1", "text": None, "status": "pending"}], "text must be some words, got None"),
    ([{"id": "1", "text": 123, "status": "pending"}], "text must be some words, got 123"),
    ([{"id": "1", "text": "x", "status": "done"}], "not one of pending, in_progress, completed"),
    ([{"id": "1", "text": "x", "status": ["done"]}], "not one of pending, in_progress, completed"),
    (["just text"], "must be an object"),
]


def test_an_item_with_a_null_id_takes_its_number_as_one_with_none_does():
    assert TodoManager().update([{"id": None, "text": "plan", "status": "pending"},
                                 {"id": 0, "text": "test", "status": "pending"}]) == (
        "[ ] #1: plan\n[ ] #0: test\n(0/2 completed)")


@pytest.mark.parametrize("bad, message", TODO_RULES_BROKEN)
def test_a_call_that_breaks_a_rule_is_refused_and_keeps_the_old_list(bad, message):
    todos = TodoManager()
    before = todos.update(items("in_progress"))
    with pytest.raises(ValueError, match=message):
        todos.update(bad)
    assert todos.render() == before


# ---------------------------------------------------------------- hostile commands and inputs

def test_a_command_that_floods_is_stopped_and_memory_stays_bounded(monkeypatch):
    monkeypatch.setattr("harness.bash.FLOOD_BYTES", 2_000_000)
    out, is_error = call_tool("bash", {"command": "yes"}, s03.TOOLS, s03.TOOL_HANDLERS)
    assert out.startswith("y\ny\n") and len(out) < s03.OUTPUT_CAP + 800      # what the model sees
    assert len(run_bash("yes")) < bash.KEEP_UP_TO + 500                        # what is kept at all
    assert "[output cut:" in out and "was killed; send big output to a file" in out
    # What it wrote before it was stopped: the bytes held for the kept characters, and the
    # flood beyond them (it said 2 MB of the 10 it wrote).
    said = int(re.search(r"wrote more than ([\d,]+) MB", out)[1].replace(",", ""))
    assert said == (4 * bash.KEEP_UP_TO + 2_000_000) // 1_000_000


@pytest.mark.parametrize("job, said", [("sleep 600 &", bash.HELD_NOTE),
                                       ("sleep 600 > job.log 2>&1 &", "(no output)")],
                         ids=["holding the pipe", "output to a file"])
def test_a_background_job_does_not_block(in_tmp, job, said):
    """The command returns while its background job still runs: bash does not wait for the
    job, even one that keeps the output pipe open. A bound, not a clock: waiting for the job
    would take 600 s, ten times the 60 s allowed."""
    pid_file = in_tmp / "job.pid"

    def end_job():
        if pid_file.exists():
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
    try:
        out = within(60, lambda: run_bash(f"{job} echo $! > job.pid"), unblock=end_job)
        assert out == said
        os.kill(int(pid_file.read_text()), 0)           # the job is still running
    finally:
        end_job()


# A background job's first step: wait until the test says bash has returned.
WAIT_FOR_GO = "until [ -e go ]; do sleep 0.05; done"


def test_a_background_job_that_prints_after_bash_returns_keeps_running(in_tmp):
    """`python -m http.server &`, with no redirect: the harness closed the output pipe once
    the shell ended, and the server died of SIGPIPE at its first log line. What such a job
    prints later is dropped, and the model is told so. The job waits for `go`, made once
    bash has returned, however busy the machine. (30 s is a bound against hanging.)"""
    out = run_bash(f"({WAIT_FOR_GO}; echo late; sleep 0.3; touch alive) & echo started")
    (in_tmp / "go").touch()
    assert out == "started\n" + bash.HELD_NOTE
    deadline = time.monotonic() + 30
    while not (in_tmp / "alive").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (in_tmp / "alive").exists(), "the job was killed when it wrote after bash returned"


def test_a_background_job_that_prints_all_the_time_does_not_hold_bash_until_its_timeout(
        in_tmp, monkeypatch):
    """`npm run dev &`, logging every 50 ms: the shell was seen to be done only in a pause of
    0.2 s in the output, so bash waited out BASH_TIMEOUT (120 s). Now EXIT_GRACE (1 s here, for
    a quick suite); 30 s is a bound against the hang, not a speed."""
    monkeypatch.setattr(bash, "EXIT_GRACE", 1)
    pid_file = in_tmp / "job.pid"

    def end_job():
        if pid_file.exists():
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
    job = "(while true; do echo tick; sleep 0.05; done) & echo $! > job.pid; echo started"
    try:
        out = within(30, lambda: run_bash(job), unblock=end_job)
        assert "started" in out.splitlines() and out.endswith(bash.HELD_NOTE), out
    finally:
        end_job()


def test_what_a_filter_prints_after_the_shell_exits_is_all_kept(in_tmp):
    """`exec > >(filter)`: the filter (here about 0.5 s behind) still prints the command's own
    output after the shell exited. A bound of 0.5 s after the exit cut it, and dropped the
    rest as a background job's."""
    out = run_bash("exec > >(while IFS= read -r l; do sleep 0.005; echo \"> $l\"; done) 2>&1; "
                   "seq 1 100; echo END")
    assert out.splitlines() == [f"> {n}" for n in range(1, 101)] + ["> END"], out[-300:]


def test_a_filter_that_pauses_after_the_shell_exits_still_shows_the_output(in_tmp):
    """`exec > >(sleep 0.6; cat)`: the filter is quiet for a moment, then prints the command's
    own output. A pipe quiet for 0.2 s after the shell exited was taken for a held job, and
    the output dropped with the job's."""
    assert run_bash("exec > >(sleep 0.6; cat); echo KEEPME") == "KEEPME"


def test_the_shells_last_words_are_kept_when_it_exits_just_as_a_wait_ends(in_tmp, monkeypatch):
    """The race, made certain: the wait for output ends with nothing, and the shell writes
    and exits before the next look. That look took the shell's exit for a job holding the
    pipe, and its last line was dropped with the job's."""
    started, real_select = [], select.select

    class Recorded(subprocess.Popen):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            started.append(self)

    def late(readable, writable, errors, timeout):
        if len(started) == 1:
            (in_tmp / "go").touch()              # the shell waits for this wait to begin
            real_select(readable, [], [], 30)   # the shell has written
            started[0].wait(timeout=30)         # and exited
            started.append(None)
            return [], [], []                   # but this wait saw nothing
        return real_select(readable, writable, errors, timeout)
    monkeypatch.setattr(bash.subprocess, "Popen", Recorded)
    monkeypatch.setattr(bash.select, "select", late)
    assert run_bash(f"{WAIT_FOR_GO}; echo done") == "done"


def test_a_background_job_that_floods_after_bash_returns_is_stopped_as_a_command_is(in_tmp,
                                                                                  monkeypatch):
    """`(sleep 0.3; yes) &`: its output is read and dropped after bash returned, and it ran
    on at full speed, burning a core, for the rest of the session. Past FLOOD_BYTES within
    FLOOD_SECONDS the pipe is closed, and its next write ends it. (30 s: a hang's bound.)"""
    monkeypatch.setattr(bash, "FLOOD_BYTES", 1_000_000)
    out = run_bash(f"({WAIT_FOR_GO}; exec yes) & echo $! > job.pid; echo started")
    (in_tmp / "go").touch()
    assert out == "started\n" + bash.HELD_NOTE
    pid = int((in_tmp / "job.pid").read_text())
    try:
        assert process_ends(pid, seconds=30), "the flooding job still runs"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def test_the_bash_tool_runs_bash_where_sh_is_another_shell(in_tmp):
    """The tool is named bash, and models write bash: on Debian and Ubuntu, /bin/sh is dash,
    which knows no [[ ]], no {1..3} and no `source`, and every such command failed."""
    out = run_bash('[[ -n "$BASH_VERSION" ]] && echo {1..3} && source /dev/null && echo sourced')
    assert out == "1 2 3\nsourced"


def test_the_timeout_advice_says_how_to_run_a_job_in_the_background(in_tmp, monkeypatch):
    monkeypatch.setattr(s03, "BASH_TIMEOUT", 1)
    with pytest.raises(TimeoutError, match=r"cmd > job.log 2>&1 &"):
        run_bash("sleep 10")


def test_a_command_that_times_out_gives_the_model_what_it_printed_until_then(in_tmp,
                                                                            monkeypatch):
    """A test run that hangs on one test: the model got only "timed out", not which test."""
    monkeypatch.setattr(s03, "BASH_TIMEOUT", 1)
    out, is_error = call_tool("bash", {"command": "echo test_a PASSED; echo test_b ...; "
                                                  "sleep 30"}, s03.TOOLS, s03.TOOL_HANDLERS)
    assert is_error and out.startswith("TimeoutError: command timed out after 1s")
    # The output on lines of its own: "2>&1 &; its output" read as shell code, a syntax error.
    assert out.endswith("2>&1 &\n[its output until then:]\ntest_a PASSED\ntest_b ...")


def test_a_command_whose_output_went_to_a_file_times_out_in_the_harnesss_words(in_tmp,
                                                                              monkeypatch):
    """The pipe closed early (exec > build.log), and the wait for the shell raised
    subprocess's own TimeoutExpired, the whole command quoted, no advice."""
    monkeypatch.setattr(s03, "BASH_TIMEOUT", 1)
    with pytest.raises(TimeoutError, match=r"timed out after 1s .*cmd > job.log 2>&1 &"):
        run_bash("exec >build.log 2>&1; echo building; sleep 30")
    assert (in_tmp / "build.log").read_text() == "building\n"


@pytest.mark.parametrize("command, said", [
    # git status --short: " M" is a change not staged, "M " a staged one.
    ("printf ' M a.py\\n?? b.py\\n\\n'", " M a.py\n?? b.py"),
    ("exit 1", "[exit status 1]"),                              # not "\n[exit status 1]"
    # Not "[exit status -9]"; a real-time signal (40) has no name, and raised a ValueError.
    ("kill -9 $$", f"[killed by signal 9 ({signal.strsignal(9)})]"),
    ("kill -40 $$", f"[killed by signal 40 ({signal.strsignal(40)})]"),
])
def test_bash_output_keeps_its_first_lines_indent_and_says_how_it_ended(in_tmp, command, said):
    assert run_bash(command) == said


def test_every_tool_result_is_capped_not_only_bash_and_read():
    tools = [{"name": "big", "input_schema": s03.schema([])}]
    output, is_error = call_tool("big", {}, tools, {"big": lambda: "x" * (s03.OUTPUT_CAP * 3)})
    assert not is_error and len(output) < s03.OUTPUT_CAP + 400 and "characters not shown" in output


def test_arguments_sent_as_json_text_are_decoded_as_if_sent_properly(in_tmp):
    output, is_error = call_tool("bash", '{"command": "echo hi"}', s03.TOOLS, s03.TOOL_HANDLERS)
    assert (output, is_error) == ("hi", False)
    items = '[{"id": "1", "text": "plan", "status": "in_progress"}]'   # an array sent as a string
    output, is_error = call_tool("todo", {"items": items}, s03.TOOLS, s03.TOOL_HANDLERS)
    assert not is_error and "[>] #1: plan" in output
    for bad in (["ls"], "ls", 3):
        output, is_error = call_tool("bash", bad, s03.TOOLS, s03.TOOL_HANDLERS)
        assert is_error and "must be a JSON object" in output
    # null is no arguments (a tool that takes none runs): bash's is missing.
    output, is_error = call_tool("bash", None, s03.TOOLS, s03.TOOL_HANDLERS)
    assert is_error and output == "ValueError: missing required argument 'command'"


def test_a_lone_surrogate_is_refused_and_leaves_no_file(in_tmp):
    output, is_error = call_tool("write_file", {"path": "a.txt", "content": "bad \ud800"},
                                 s03.TOOLS, s03.TOOL_HANDLERS)
    assert is_error and "lone surrogate" in output and not (in_tmp / "a.txt").exists()
    (in_tmp / "b.txt").write_text("keep me")
    edit = {"path": "b.txt", "old_text": "keep", "new_text": "\udfff"}
    output, is_error = call_tool("edit_file", edit, s03.TOOLS, s03.TOOL_HANDLERS)
    assert is_error and (in_tmp / "b.txt").read_text() == "keep me"
