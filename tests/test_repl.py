"""The REPL as a user meets it: without a key, line editing and history on a terminal, /clear,
a budget read before anything is written, and a turn that fails after a compaction."""

import json
import os
import re
import sys

import pytest

import s06_compact
import s07_task_system
from helpers import lesson_command, clean_env, messages, on_a_terminal, widest, words
from harness.stand_in.script import error, reply, text, tool

S07 = lesson_command("s07_task_system")   # its REPL, as a user starts it


# ---------------------------------------------------------------- without a key

def test_without_a_key_the_repl_opens_and_its_commands_work(run_main, workdir):
    stdin = "/task add Design the model\n/task add Build it\n/task block 2 1\n/tasks\n" \
            "/context\nplan the work\n/cost\nq\n"
    code, out, err, api = run_main(s07_task_system, stdin=stdin, key=None)
    assert code == 0 and api.requests == []
    assert "[ ] #2: Build it blocked by #1" in out and "Ready to start: #1 Design the model" in out
    assert "context now: ~" in out and "window" in out and "free" in out
    refusal = [line for line in err.splitlines() if line.startswith("error: no model")]
    assert len(refusal) == 1                  # the typed prompt: one error, and the REPL goes on
    said = words(err)[words(err).index("error: no model"):]
    assert all(word in said for word in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "--demo"))
    assert "session so far: 0 model calls" in out
    assert json.loads((workdir / ".tasks" / "task_2.json").read_text())["blockedBy"] == [1]


def test_a_one_shot_run_without_a_key_exits_non_zero_with_that_line(run_main):
    code, out, err, api = run_main(s07_task_system, "plan the work", key=None)
    assert code == 1 and api.requests == [] and err.startswith("error: no model to talk to")
    assert err.count("error") == 1 and widest(err) <= 80      # one message, fitted to the width
    assert "ANTHROPIC_API_KEY" in err and "ANTHROPIC_BASE_URL" in err and "--demo" in err


# ---------------------------------------------------------------- a shell's manners

def test_clear_starts_a_fresh_conversation_and_the_board_stays(run_main, workdir):
    script = [reply(tool("task_create", {"subject": "Keep me"})), reply(text("made")),
              reply(text("fresh"))]
    code, out, err, api = run_main(s07_task_system, stdin="make a task\n/clear\nhello\nq\n",
                                   script=script)
    assert code == 0 and api.violations == []
    assert api.requests[-1]["messages"] == [{"role": "user", "content": "hello"}]
    assert "a fresh conversation" in err and "task board (s07) are as they were" in err
    assert (workdir / ".tasks" / "task_1.json").exists()


def test_a_bad_max_steps_is_refused_before_anything_is_written(run_main, workdir):
    code, out, err, api = run_main(s06_compact, "go", env={"MAX_STEPS": "many"})
    assert code == 1 and api.requests == [] and len(messages(err)) == 1
    assert "MAX_STEPS must be a positive whole number of model calls" in err
    assert list(workdir.iterdir()) == []            # no session log was started


@pytest.mark.skipif(sys.platform == "win32", reason="no pseudo-terminals on Windows")
def test_on_a_terminal_the_up_arrow_brings_back_the_last_prompt_and_history_is_kept(workdir):
    """readline: arrow keys edit and recall, not print ^[[A; the history goes in .transcripts/."""
    env = clean_env(workdir.parent / "home", TERM="xterm")
    with on_a_terminal(S07, workdir, env) as (proc, terminal):
        terminal.read_until(b"s07 >> ")
        terminal.type(b"/task add First\r")
        terminal.read_until(b"s07 >> ")
        terminal.type(b"\x1b[A\r")                  # up: the same command again
        shown = terminal.read_until(b"s07 >> ")
        terminal.type(b"q\r")
        proc.wait(timeout=60)
    assert b"Created task #2: First" in shown and b"^[[A" not in shown
    assert "/task add First" in (workdir / ".transcripts" / "repl_history").read_text()


def type_at_the_prompt(workdir, *lines: bytes, seconds: float = 60) -> bytes:
    """s07's REPL on a pseudo-terminal: each line typed once its prompt is shown; what the
    terminal showed. Fails if a prompt does not come within `seconds`."""
    env = clean_env(workdir.parent / "home", TERM="xterm")
    shown = b""
    with on_a_terminal(S07, workdir, env) as (proc, terminal):
        for line in lines:
            seen = terminal.read_until(b"s07 >> ", seconds)
            shown += seen
            assert b"s07 >> " in seen, f"no prompt within {seconds} s: {shown[-300:]!r}"
            terminal.type(line)
        shown += terminal.read_until(b"session so far", seconds)
        proc.wait(timeout=seconds)
    return shown


@pytest.mark.skipif(sys.platform == "win32", reason="no pseudo-terminals on Windows")
def test_a_link_at_the_history_file_is_not_followed_and_its_target_is_kept(workdir):
    """QA linked .transcripts/repl_history to a file of theirs: the REPL truncated it and wrote
    its prompts there."""
    victim = workdir.parent / "bashrc"
    victim.write_text("export EDITOR=vi\n")
    (workdir / ".transcripts").mkdir()
    (workdir / ".transcripts" / "repl_history").symlink_to(victim)
    shown = type_at_the_prompt(workdir, b"/task add First\r", b"q\r")
    assert victim.read_text() == "export EDITOR=vi\n"
    assert b"Created task #1: First" in shown and b"Traceback" not in shown
    assert shown.count(b"repl_history is a symbolic link") == 1     # said once, at the start
    history = workdir / ".transcripts" / "repl_history"
    assert not history.is_symlink() and history.read_text() == "/task add First\n"


@pytest.mark.skipif(sys.platform == "win32", reason="no pseudo-terminals on Windows")
def test_a_fifo_at_the_history_file_does_not_hang_the_repl(workdir):
    (workdir / ".transcripts").mkdir()
    os.mkfifo(workdir / ".transcripts" / "repl_history")
    shown = type_at_the_prompt(workdir, b"/task add First\r", b"q\r")
    assert b"Created task #1: First" in shown and b"repl_history is a FIFO" in shown
    assert (workdir / ".transcripts" / "repl_history").read_text() == "/task add First\n"


@pytest.mark.skipif(sys.platform == "win32", reason="no pseudo-terminals on Windows")
def test_control_codes_in_the_history_file_never_reach_the_terminal(workdir):
    """A history file is text anyone who can write the folder may have put there: a line with
    an escape sequence (here, an OSC 52 clipboard write) is not brought back by the up key."""
    (workdir / ".transcripts").mkdir()
    (workdir / ".transcripts" / "repl_history").write_text(
        "/task add Safe\n/task add \x1b]52;c;ZWNobyBoaQ==\x07Evil\n")
    shown = type_at_the_prompt(workdir, b"\x1b[A\r", b"\x1b[A\x1b[A\r", b"q\r")
    assert b"\x1b]52" not in shown and b"Evil" not in shown
    assert shown.count(b"Created task #") == 2 and b"Created task #2: Safe" in shown


# ---------------------------------------------------------------- a turn that fails late

@pytest.mark.parametrize("failure", ["an API error", "Ctrl-C in a tool"])
def test_a_turn_that_fails_after_a_compaction_leaves_a_history_the_api_accepts(
        run_main, monkeypatch, failure):
    """The compaction replaced the history in the middle of the turn: the turn cannot be undone,
    but what is kept must be valid, so the next prompt works."""
    if failure == "an API error":
        script = [error(400, "refused after the summary"), reply(text("second answer"))]
    else:
        def interrupted(command):
            raise KeyboardInterrupt
        monkeypatch.setitem(s06_compact.TOOL_HANDLERS, "bash", interrupted)
        script = [reply(tool("bash", {"command": "sleep 5"})), reply(text("second answer"))]
    # A first prompt of about 1,500 tokens, over the threshold with the system prompt: layer 2
    # summarises it in the first turn, before the call that fails.
    code, out, err, api = run_main(s06_compact, stdin=f"first {'x' * 6000}\nsecond\nq\n",
                                   script=script, summary="Summary: the first turn",
                                   env={"COMPACT_THRESHOLD": "1400"})
    assert code == 0 and api.violations == [], err
    assert "second answer" in out
    assert "after a compaction; the conversation goes on from its summary" in err
    last = api.requests[-1]["messages"]
    assert "Summary: the first turn" in json.dumps(last[0]) and last[-1]["content"] == "second"


def test_a_summary_holding_half_an_emoji_is_stored_clean(run_main):
    script = [reply(tool("compact", {})), reply(text("after")), reply(text("again"))]
    code, out, err, api = run_main(s06_compact, stdin="go\nmore\nq\n", script=script,
                                   summary="Summary: done \ud83d")
    assert code == 0 and api.violations == [], err
    assert "again" in out
    summary = api.requests[-1]["messages"][0]["content"]
    assert "Summary: done \ufffd" in summary


def test_a_continue_that_never_asked_the_model_leaves_no_copy_of_the_session(run_main, workdir):
    """--continue copies the session into a new log; a REPL quit before any prompt left that
    copy, the whole history again on disk, once per such run."""
    code, out, err, api = run_main(s06_compact, "hello", script=[reply(text("first answer"))])
    assert code == 0
    (first,) = (workdir / ".transcripts").glob("session_*.jsonl")
    code, out, err, api = run_main(s06_compact, "--continue", stdin="/context\nq\n", key=None)
    assert code == 0 and "[continuing " in err, err
    assert list((workdir / ".transcripts").glob("session_*.jsonl")) == [first]
    code, out, err, api = run_main(s06_compact, "--continue", "go on",
                                   script=[reply(text("went on"))])
    assert code == 0 and "went on" in out
    assert len(list((workdir / ".transcripts").glob("session_*.jsonl"))) == 2


def test_a_session_that_ended_cleared_is_continued_as_a_new_conversation(run_main, workdir):
    """/clear, then q: the latest session holds no message. Every later --continue was refused
    ("holds no message to continue from"): a dead end. It goes on from the cleared history."""
    code, out, err, api = run_main(s06_compact, "hello", script=[reply(text("first answer"))])
    assert code == 0
    code, out, err, api = run_main(s06_compact, "--continue", stdin="/clear\nq\n", key=None)
    assert code == 0, err
    code, out, err, api = run_main(s06_compact, "--continue", "go on",
                                   script=[reply(text("went on"))])
    assert code == 0 and "went on" in out, err
    assert ("0 messages (it ended with /clear, or its first turn failed, so a new "
            "conversation starts)") in words(err)
    assert api.requests[0]["messages"] == [{"role": "user", "content": "go on"}]


def test_a_repl_that_never_asked_the_model_leaves_no_session_for_continue(run_main, workdir):
    script = [reply(text("first answer"))]
    code, out, err, api = run_main(s06_compact, "hello", script=script)
    assert code == 0
    code, out, err, api = run_main(s06_compact, stdin="/context\nq\n", key=None)
    assert code == 0
    assert len(list((workdir / ".transcripts").glob("session_*.jsonl"))) == 1
    code, out, err, api = run_main(s06_compact, "--continue", "go on",
                                   script=[reply(text("went on"))])
    assert code == 0 and "went on" in out
    assert api.requests[0]["messages"][0]["content"] == "hello"


def test_a_repl_without_a_model_call_leaves_the_folder_as_it_found_it(run_main, workdir):
    """A newcomer's REPL with no key, quit at once: no empty .transcripts/ left behind."""
    code, out, err, api = run_main(s07_task_system, stdin="/tasks\nq\n", key=None)
    assert code == 0 and "No tasks yet" in out
    assert sorted(p.name for p in workdir.iterdir()) == []


# ---------------------------------------------------------------- /compact and the one estimate

def test_compact_on_a_history_resumed_without_a_key_is_one_message_and_keeps_it(run_main,
                                                                              workdir):
    code, out, err, api = run_main(s06_compact, "hello", script=[reply(text("first answer"))])
    assert code == 0
    code, out, err, api = run_main(s06_compact, "--continue", stdin="/compact\n/cost\nq\n",
                                   key=None)
    assert code == 0 and api.requests == [] and "Traceback" not in err, err
    refusal = [m for m in messages(err) if m.startswith("error:")]
    assert refusal == ["error: /compact asks the model for the summary, and there is no model "
                       "to talk to: set ANTHROPIC_API_KEY (docs/real-use.md), or see a "
                       "compaction with no key in --demo; the conversation is as it was"]
    assert "session so far: 0 model calls" in out               # the REPL went on
    code, out, err, api = run_main(s06_compact, "--continue", "go on",
                                   script=[reply(text("went on"))])
    sent = api.requests[0]["messages"]
    assert [m["content"] for m in sent[::2]] == ["hello", "go on"]     # the history as it was


def test_the_compaction_line_context_and_the_page_give_one_size_for_one_moment(run_main,
                                                                              workdir):
    """Right after /compact: `[compacted: A → ~B]`, /context's total and the page's entry for
    that compaction are one number, the estimate layer 2 compares with its threshold."""
    script = [reply(tool("task_create", {"subject": "Design the data model"})),
              reply(text("Planned."))]
    code, out, err, api = run_main(s07_task_system, stdin="plan it\n/compact\n/context\nq\n",
                                   script=script, summary="Summary: one task planned.")
    assert code == 0 and api.violations == [], err
    after = re.search(r"\[compacted: [\d,]+ → ~([\d,]+) tokens", words(err))[1]
    context = re.search(r"context now: ~([\d,]+) tokens \(estimated", out)[1]
    (page,) = (workdir / ".transcripts").glob("session_s07_*.html")
    listed = re.search(r"Compaction 1</b>, made by call \d+: [\d,]+ → ~([\d,]+) tokens",
                       page.read_text(encoding="utf-8"))[1]
    assert after == context == listed and int(after.replace(",", "")) > 500



@pytest.mark.skipif(sys.platform == "win32", reason="no pseudo-terminals on Windows")
def test_a_typed_line_that_fits_the_terminal_is_not_wrapped_early_by_the_prompts_colour(workdir):
    """readline must be told that the prompt's colour codes take no columns: counted, they
    made it wrap a typed line 9 columns early, the rest overwrote its start, and Ctrl-A
    sent the cursor up into the line above."""
    env = clean_env(workdir.parent / "home", TERM="xterm")
    typed = b"x" * 30                   # after "s07 >> ", 37 columns of the terminal's 40
    with on_a_terminal(S07, workdir, env, columns=40) as (proc, terminal):
        prompt = terminal.read_until(b"s07 >> ")
        terminal.type(typed)
        terminal.read_until(typed, 10)
        terminal.type(b"\x01M")              # Ctrl-A: to the start of the line, and type M
        moved = terminal.read_until(b"M", 10)
        terminal.type(b"\x01\x0bq\r")        # Ctrl-A Ctrl-K: the line cleared; q quits
        proc.wait(timeout=60)
    assert b"\x1b[36m" in prompt            # the prompt is coloured on a terminal
    assert b"\x1b[A" not in moved, moved
