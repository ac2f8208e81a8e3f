"""The session log: saved as it goes, survives kill -9, read back valid for the API."""

import contextlib
import errno
import json
import os
import signal
import subprocess
import sys
import time

import pytest

import s03_todo
from harness.session import log as session_log
from harness.errors import SetupError
from harness.session.log import SessionLog, latest, load, read_session
from harness.stand_in import StandInAPI
from harness.stand_in.script import reply, text

from helpers import (ROOT, batch_of_three, call, clean_env, end_group, interrupted, messages,
                     popen_taking_ctrl_c, result, running_command, session, valid, words)

sys.path.insert(0, str(ROOT / "bench"))
import bench_continue  # noqa: E402


def test_every_appended_message_is_one_line_and_loads_back_exactly(tmp_path):
    log = SessionLog.start(tmp_path)
    for message in session(3):
        log.append(message)
    log.close()
    lines = log.path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 8 and all(json.loads(line)["role"] for line in lines)
    assert load(log.path) == session(3)


def test_a_new_session_never_reuses_a_file(tmp_path):
    paths = {SessionLog.start(tmp_path).path for _ in range(12)}   # all within a second or two
    assert len(paths) == 12 and all(p.name.startswith("session_") for p in paths)
    assert all(p.read_bytes() == b"" for p in paths)


def test_a_torn_last_line_is_skipped_and_the_rest_is_kept(tmp_path):
    path = tmp_path / "session_20260101-000000_1.jsonl"
    good = "".join(json.dumps(m) + "\n" for m in session(2)[:-1])
    torn = json.dumps({"role": "assistant", "content": [call("t9")]})[:37]   # cut mid-write
    path.write_text(good + torn, encoding="utf-8")
    found = read_session(path)
    assert found.torn_lines == 1
    assert found.messages == session(2)[:-1] and valid(found.messages) is None


def test_a_compacted_session_resumes_from_its_summary(tmp_path):
    log = SessionLog.start(tmp_path)
    for message in session(4)[:-1]:
        log.append(message)
    summary = {"role": "user", "content": "[compacted] Summary: ran ls four times."}
    log.compacted(summary)
    after = session(1)[1:]
    for message in after:
        log.append(message)
    assert load(log.path) == [summary] + after


def test_record_writes_new_messages_a_compaction_and_a_rolled_back_turn(tmp_path):
    log = SessionLog.start(tmp_path)
    history = []
    for message in session(2)[:-1]:                # the loop appends, then records
        history.append(message)
        log.record(history)
    assert load(log.path) == history
    history.append({"role": "user", "content": "a turn that fails"})
    history.append({"role": "assistant", "content": [call("lost")]})
    log.record(history)
    del history[5:]                                # the cli undoes the failed turn
    log.record(history)
    assert load(log.path) == history
    history[:] = [{"role": "user", "content": "Summary so far."}]   # auto_compact's replacement
    history += session(1)[1:]
    log.record(history)
    assert load(log.path) == history
    assert len(log.path.read_text(encoding="utf-8").splitlines()) == 5 + 2 + 1 + 1 + 3


def test_a_copy_killed_midway_is_swept_when_a_later_session_starts(tmp_path):
    """--continue writes its copy of a long session to a temporary file, then names it: a kill
    in between left that copy (the whole conversation) in .transcripts for ever. An hour
    unwritten, it goes when a session starts; one being written now, and a link, stay."""
    folder = tmp_path / ".transcripts"
    folder.mkdir()
    killed, writing = folder / f".tmp_{'a' * 16}.tmp", folder / f".tmp_{'b' * 16}.tmp"
    killed.write_text('{"role": "user", "content": "a whole conversation"}\n')
    writing.write_text("")
    os.utime(killed, (time.time() - 7200, time.time() - 7200))
    planted = folder / f".tmp_{'c' * 16}.tmp"
    planted.symlink_to(tmp_path / "elsewhere")
    os.utime(planted, (1, 1), follow_symlinks=False)
    SessionLog.start(folder).close()
    assert not killed.exists() and writing.exists() and planted.is_symlink()
    # --continue's own copy sweeps too: the next kill's litter goes with the next resume.
    killed.write_text("x")
    os.utime(killed, (time.time() - 7200, time.time() - 7200))
    SessionLog.continued(folder / "session_earlier_1.jsonl", [], folder).close()
    assert not killed.exists() and writing.exists()


def test_latest_is_the_session_written_last_and_none_when_there_is_none(tmp_path):
    assert latest(tmp_path / "missing") is None
    (tmp_path / "transcript_20260101-000000.jsonl").write_text("{}\n")   # s06's, not a session
    assert latest(tmp_path) is None
    first, second = SessionLog.start(tmp_path), SessionLog.start(tmp_path)
    second.append({"role": "user", "content": "b"})
    first.append({"role": "user", "content": "a"})
    os.utime(second.path, ns=(1, 1))
    assert latest(tmp_path) == first.path


def test_continue_never_resumes_from_a_link_planted_among_the_sessions(tmp_path):
    """A link named like the newest session, to a file elsewhere: --continue would send that
    file to the model as the conversation."""
    folder, elsewhere = tmp_path / ".transcripts", tmp_path / "elsewhere"
    elsewhere.mkdir()
    mine = SessionLog.start(folder)
    mine.append({"role": "user", "content": "my own session"})
    planted = SessionLog.start(elsewhere)
    planted.append({"role": "user", "content": "what the link holds"})
    os.utime(mine.path, ns=(1, 1))                       # the link's target is newer
    (folder / "session_20991231-235959_1.jsonl").symlink_to(planted.path)
    assert latest(folder) == mine.path


def test_a_session_removed_while_continue_looks_is_passed_over_not_a_traceback(tmp_path,
                                                                              monkeypatch):
    """Another terminal's session, deleted (or cleaned up) between --continue listing the
    folder and looking at the file: a FileNotFoundError traceback, where the rest resume."""
    kept, gone = SessionLog.start(tmp_path), SessionLog.start(tmp_path)
    kept.append({"role": "user", "content": "kept"})
    gone.append({"role": "user", "content": "gone"})
    real_scandir = os.scandir

    def listed_then_removed(where):
        entries = list(real_scandir(where))
        gone.path.unlink()                              # after the listing, before the look
        return contextlib.nullcontext(entries)
    monkeypatch.setattr(session_log.os, "scandir", listed_then_removed)
    assert latest(tmp_path) == kept.path


def test_a_session_name_with_a_digit_int_cannot_read_is_no_traceback(tmp_path):
    """session_①.jsonl (str.isdigit() is true for ①, int() refuses it): every --continue in
    that folder ended in a ValueError traceback."""
    mine = SessionLog.start(tmp_path)
    mine.append({"role": "user", "content": "mine"})
    (tmp_path / "session_①.jsonl").write_text('{"role": "user", "content": "odd"}\n')
    (tmp_path / "session_x_².jsonl").mkdir()
    os.utime(mine.path, ns=(1, 1))
    assert latest(tmp_path) == tmp_path / "session_①.jsonl"


def test_a_newest_session_of_garbage_names_the_way_to_the_one_before_it(tmp_path):
    """A newest session that holds no line to read (binary, or all NULs): every --continue
    stopped at it, and the line did not say how to reach the good session before it."""
    older = SessionLog.start(tmp_path)
    older.append({"role": "user", "content": "the real work"})
    os.utime(older.path, ns=(1, 1))
    garbage = tmp_path / "session_20990101-000000_1.jsonl"
    garbage.write_bytes(b"\x00" * 64 + b"\n\xff\xfe\n")
    with pytest.raises(SetupError) as exc:
        session_log.open_session(continue_latest=True, folder=tmp_path)
    assert str(exc.value) == (f"the session {garbage} holds no message to continue from: move "
                              "it out of the folder (it is kept as it is) to continue the one "
                              "before it, or run without --continue to start a new session")


def test_a_transcripts_folder_that_is_a_link_or_unreadable_is_one_line_not_no_session(tmp_path,
                                                                                  monkeypatch):
    """.transcripts as a link: the log refuses to write through it, and --continue read
    through it (a session planted elsewhere went to the model). A folder --continue may not
    read said "no saved session", which sends the user looking for a session that is there."""
    elsewhere = tmp_path / "elsewhere"
    SessionLog.start(elsewhere).append({"role": "user", "content": "planted"})
    (tmp_path / ".transcripts").symlink_to(elsewhere)
    with pytest.raises(SetupError) as exc:
        session_log.open_session(continue_latest=True, folder=tmp_path / ".transcripts")
    assert str(exc.value).startswith(f"cannot continue: {tmp_path}/.transcripts is a symbolic "
                                     "link; the harness writes only into a real folder")

    def refused(where):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(session_log.os, "scandir", refused)
    with pytest.raises(SetupError) as exc:
        session_log.open_session(continue_latest=True, folder=elsewhere)
    assert str(exc.value) == f"cannot continue: cannot read {elsewhere}/: permission denied"


def test_continue_starts_a_new_log_with_the_repaired_history_and_keeps_the_old_file(tmp_path,
                                                                                    capsys):
    old = SessionLog.start(tmp_path)
    for message in session(2)[:-1] + [{"role": "assistant", "content": [call("cut")]}]:
        old.append(message)
    old.close()
    before = old.path.read_bytes()
    log, history = session_log.open_session(continue_latest=True, folder=tmp_path)
    assert history == session(2)[:-1] + [{"role": "assistant", "content": [call("cut")]},
                                         {"role": "user", "content": [interrupted("cut")]}]
    assert valid(history) is None
    note = capsys.readouterr().err
    assert (f"continuing {old.path}: 7 messages (1 tool call stopped while it ran: its result "
            "says it may have acted)") in words(note)
    history.append({"role": "user", "content": "go on"})
    log.record(history)
    log.close()
    new = latest(tmp_path)
    assert new == log.path != old.path and old.path.read_bytes() == before
    assert load(new) == history


@pytest.mark.slow
def test_continue_of_a_long_log_costs_time_linear_in_its_lines():
    """4 times the lines, about 4 times the time (bench/bench_continue.py, docs/performance.md):
    a copy of the history for each line read made an 80,000-line log take 19 s or more. The
    ratio is compared, not seconds (each the best of three runs). A ratio between 8 and 12, which
    a loaded machine can make, is measured again, up to three times; a quadratic reading is
    16 times slower at 4 times the lines, or more, every time. CPU time, not wall time: the
    suite's other workers (pytest-xdist) load the machine unevenly, and once made it 12x."""
    ratios = []
    for _ in range(3):
        (small, low, kept), (big, high, _) = bench_continue.best_times((10_000, 40_000),
                                                                       clock=time.process_time)
        ratios.append(high / low)
        if not 2 * big / small <= ratios[-1] <= 3 * big / small:
            break
    assert kept == 6_667                  # every message of the smaller log came back
    assert min(ratios) < 2 * big / small, f"4x the lines took {ratios}x the time"


def test_continue_with_no_saved_session_says_so_in_one_line(tmp_path):
    with pytest.raises(SetupError) as exc:
        session_log.open_session(continue_latest=True, folder=tmp_path)
    assert str(exc.value) == (f"no saved session in {tmp_path}/ to continue; "
                              "run without --continue to start one")


def test_a_failing_write_stops_the_log_with_a_note_and_never_raises(tmp_path, monkeypatch, capsys):
    log = SessionLog.start(tmp_path)
    log.append({"role": "user", "content": "kept"})

    def full(fd, data):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(session_log.os, "write", full)
    log.append({"role": "assistant", "content": [{"type": "text", "text": "lost"}]})
    log.append({"role": "user", "content": "also lost"})
    monkeypatch.undo()
    assert log.failed == "the disk is full"
    assert capsys.readouterr().err.count("the disk is full") == 1
    assert load(log.path) == [{"role": "user", "content": "kept"}]


WRITER = r"""
import sys
from pathlib import Path
from harness.session.log import SessionLog
log = SessionLog.start(Path(sys.argv[1]))
print(log.path, flush=True)
log.append({"role": "user", "content": "go"})
n = 0
while True:   # big messages, so that a kill often lands inside a write
    log.append({"role": "assistant", "content": [{"type": "tool_use", "id": f"t{n}", "name": "bash",
                                                  "input": {"command": "x" * 3_000_000}}]})
    log.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{n}",
                                             "content": "y" * 3_000_000}]})
    print(n, flush=True)
    n += 1
"""


@pytest.mark.parametrize("acknowledged", [0, 2, 5])
def test_a_writer_killed_with_sigkill_loses_at_most_its_last_line(tmp_path, acknowledged):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)], stdout=subprocess.PIPE,
                            text=True, env=env, cwd=tmp_path)
    path = proc.stdout.readline().strip()
    done = -1
    while done < acknowledged:                  # wait until this many pairs are on disk
        done = int(proc.stdout.readline())
    time.sleep(0.003 * acknowledged)            # and land somewhere in the next writes
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    proc.stdout.close()
    found = read_session(tmp_path / os.path.basename(path))
    assert found.torn_lines <= 1
    assert valid(found.messages) is None
    pairs = (len(found.messages) - 1) // 2
    assert pairs >= acknowledged + 1             # every acknowledged pair survived
    assert found.messages[0] == {"role": "user", "content": "go"}


# ---------------------------------------------------------------- work interrupted mid-batch

@pytest.mark.slow
@pytest.mark.parametrize("signum, running", [(signal.SIGKILL, 0), (signal.SIGKILL, 1),
                                             (signal.SIGKILL, 2), (signal.SIGINT, 1),
                                             (signal.SIGHUP, 1)])
def test_a_lesson_stopped_mid_batch_resumes_with_every_call_that_ran(workdir, run_lesson,
                                                                     signum, running):
    """`python s03_todo.py "..."` killed (kill -9), stopped (Ctrl-C) or its terminal closed
    (SIGHUP) while the call number `running` of three runs: --continue sends every call that ran
    with its result, the one that was running marked interrupted (it may have acted), and not
    the one never started, which never ran."""
    script = [batch_of_three(running)]
    with StandInAPI(script) as api:
        env = clean_env(workdir.parent / "home", ANTHROPIC_API_KEY="k", ANTHROPIC_BASE_URL=api.url)
        proc = popen_taking_ctrl_c([sys.executable, str(ROOT / "s03_todo.py"),
                                    "make three files"], cwd=workdir, env=env,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        group = running_command(workdir, proc)
        proc.send_signal(signum)
        err = proc.communicate(timeout=60)[1].decode()
        end_group(group)        # a lesson killed with -9 could not stop its command
    # Ctrl-C exits 130, a closed terminal 128 + SIGHUP, as a shell's own; kill -9 is the kill.
    exits = {signal.SIGINT: 130, signal.SIGHUP: 128 + signal.SIGHUP, signal.SIGKILL: -9}
    assert proc.returncode == exits[signum], err
    for never in ("one", "two", "three")[running + 1:]:
        assert not (workdir / f"{never}.txt").exists()
    proc, api = run_lesson("s03_todo", "--continue", "go on", script=[reply(text("resumed"))],
                           in_process=True)
    assert proc.returncode == 0 and api.violations == [], proc.stderr
    prompt, batch, results, go_on = api.requests[0]["messages"]
    assert prompt == {"role": "user", "content": "make three files"}
    assert go_on == {"role": "user", "content": "go on"}
    sent = script[0]["content"]
    assert batch["content"] == [{k: c[k] for k in ("type", "id", "name", "input")}
                                for c in sent[:running + 1]]
    assert results["content"] == [
        result(call["id"], f"wrote {name}")
        for call, name in zip(sent[:running], ("one", "two"), strict=False)] + [
        interrupted(sent[running]["id"])]
    never = {0: "; 2 tool calls without a result left out",
             1: "; 1 tool call without a result left out", 2: ""}
    left_out = never[running]
    assert ("3 messages (1 tool call stopped while it ran: its result says it may have acted"
            f"{left_out})") in words(proc.stderr)


def test_results_recorded_one_by_one_and_then_as_a_message_load_once(tmp_path):
    log = SessionLog.start(tmp_path)
    messages = session(1)[:-1]
    log.record(messages)
    messages.append({"role": "assistant", "content": [call("a"), call("b")]})
    for id in ("a", "b"):
        log.tool_result(result(id, f"output of {id}"))
    messages.append({"role": "user", "content": [result("a", "output of a"),
                                                 result("b", "output of b")]})
    log.record(messages)
    messages.append({"role": "assistant", "content": [{"type": "text", "text": "Both done."}]})
    log.record(messages)
    log.close()
    assert load(log.path) == messages


def test_a_call_reaches_the_log_before_its_result_even_if_the_loop_did_not_record_it(tmp_path):
    log = SessionLog.start(tmp_path)
    messages = [{"role": "user", "content": "go"}]
    log.record(messages)
    messages.append({"role": "assistant", "content": [call("a")]})   # no record() in between
    log.tool_result(result("a"))
    log.close()
    assert load(log.path) == messages + [{"role": "user", "content": [result("a")]}]


def test_the_log_knows_which_calls_of_the_last_reply_ran_until_the_history_moves_on(tmp_path):
    """What the cli answers a failed turn's calls from (repair.keep_completed)."""
    for log in (SessionLog.start(tmp_path), SessionLog()):      # with a file and without one
        messages = [{"role": "user", "content": "go"}]
        log.record(messages)
        messages.append({"role": "assistant", "content": [call("a"), call("b")]})
        log.tool_result(result("a", "wrote a"))
        assert list(log.ran.values()) == [result("a", "wrote a")]
        messages.append({"role": "user", "content": [result("a", "wrote a"), result("b")]})
        log.record(messages)
        assert log.ran == {}
        log.close()
    assert SessionLog().path is None and list(tmp_path.iterdir()) == [log_path(tmp_path)]


def test_a_log_that_recorded_nothing_yet_is_empty_so_continue_passes_it_over(tmp_path):
    """A REPL waiting for its first prompt (or killed before it) held its first line, whose
    session this is: --continue took it for the newest session, and said it ended cleared."""
    done = SessionLog.start(tmp_path, {"lesson": "s07_task_system", "agent": "alice"})
    done.record(session(1))
    done.close()
    idle = SessionLog.start(tmp_path, {"lesson": "s07_task_system", "agent": "bob"})
    assert idle.path.stat().st_size == 0 and latest(tmp_path) == done.path
    idle.record(session(1)[:1])
    lines = idle.path.read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[0]) == {"session": {"lesson": "s07_task_system", "agent": "bob"}}
    assert read_session(idle.path).torn_lines == 0 and latest(tmp_path) == idle.path
    idle.close()


def log_path(folder):
    """The one session file in folder."""
    (path,) = folder.glob("session_*.jsonl")
    return path


# ---------------------------------------------------------------- hostile session files

def test_garbage_lines_even_deeply_nested_ones_count_as_torn_and_the_rest_loads(tmp_path, capsys):
    deep = "[" * 100_000 + "]" * 100_000       # json itself gives up: RecursionError
    sendable = "[" * 985 + "]" * 985            # json reads it, and fails to write it again
    lines = [json.dumps(m) for m in session(1)[:-1]]
    lines[1:1] = [deep, '{"role": "user", "content": ' + deep + "}", "5", '{"what": "this"}',
                  '{"role": "user", "content": [{"type": "text", "text": "x", "y": ' + sendable
                  + "}]}"]
    (tmp_path / "session_20260101-000000_1.jsonl").write_text("\n".join(lines) + "\n")
    found = read_session(tmp_path / "session_20260101-000000_1.jsonl")
    assert found.messages == session(1)[:-1] and found.torn_lines == 5
    log, _ = session_log.open_session(continue_latest=True, folder=tmp_path)
    log.close()
    assert "(5 torn lines skipped)" in capsys.readouterr().err


def test_odd_blocks_in_well_formed_lines_never_break_loading_or_the_next_request(tmp_path):
    odd = [{"role": "user", "content": "go"},
           {"role": "assistant", "content": [call("a"), {"type": "tool_use", "id": ["x"]},
                                             {"type": "tool_result", "tool_use_id": "a"}]},
           {"role": "user", "content": [result("a"), {"type": "tool_result", "tool_use_id": {}},
                                        {"type": "tool_use", "id": "b", "name": "bash",
                                         "input": {}}]},
           {"role": "assistant", "content": [call("c")]},
           {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c", "content": 5}]},
           {"role": "user", "content": None}, {"role": "assistant", "content": 7},
           {"role": "user", "content": [None, 3, "text", {"type": 1}]},
           {"role": "assistant", "content": [{"type": "text", "text": "Done."}]}]
    path = tmp_path / "session_20260101-000000_1.jsonl"
    path.write_text("".join(json.dumps(m) + "\n" for m in odd))
    found = read_session(path)
    assert valid(found.messages) is None and found.dropped_calls == 2
    assert found.messages == [odd[0], {"role": "assistant", "content": [call("a")]},
                              {"role": "user", "content": [result("a")]}, odd[-1]]


def test_continue_where_no_new_file_can_be_made_resumes_without_a_log(tmp_path, monkeypatch,
                                                                        capsys):
    old = SessionLog.start(tmp_path)
    for message in session(1):
        old.append(message)
    old.close()

    def read_only(*args, **kwargs):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(session_log.writer, "numbered", read_only)   # how the copy is made
    log, history = session_log.open_session(continue_latest=True, folder=tmp_path)
    assert history == session(1)
    note = capsys.readouterr().err
    assert f"continuing {old.path}: 4 messages" in words(note) and len(messages(note)) == 1
    assert "no session log" in words(note) and "permission denied" in words(note)
    history.append({"role": "user", "content": "go on"})
    log.record(history)                                     # no file: nothing to write, no error
    log.close()
    assert list(tmp_path.iterdir()) == [old.path]


def test_a_number_json_cannot_send_in_a_hand_edited_log_is_sent_as_null(run_main, workdir):
    """NaN, Infinity or 1e999 in a log (a hand edit; Python's json writes the first two): every
    request of the resumed session failed, blamed on the endpoint, as JSON has no such number."""
    import s03_todo
    folder = workdir / ".transcripts"
    folder.mkdir()
    log = [{"role": "user", "content": "measure it"},
           {"role": "assistant", "content": [call("a")]},
           {"role": "user", "content": [result("a")]},
           {"role": "assistant", "content": [{"type": "text", "text": "Measured."}]}]
    lines = [json.dumps(m) for m in log]
    lines[1] = lines[1].replace('"input": {', '"input": {"ratio": NaN, "limit": -Infinity, '
                                '"scale": 1e999, "step": 0.5, ', 1)
    (folder / "session_20260101-000000_1.jsonl").write_text("\n".join(lines) + "\n")
    code, out, err, api = run_main(s03_todo, "--continue", "go on",
                                   script=[reply(text("went on"))])
    assert code == 0 and "went on" in out and api.violations == [], err
    sent = api.requests[0]["messages"][1]["content"][0]["input"]
    assert sent["ratio"] is None and sent["limit"] is None and sent["scale"] is None
    assert sent["step"] == 0.5


def test_blocks_a_hand_edit_added_that_the_api_refuses_are_left_out_and_said(run_main,
                                                                             workdir):
    """A block of a kind the harness never writes ({"type": "foo"}; thinking or a tool call
    in a user message, a result in an assistant's; unsigned thinking), a cache_control of a
    hand edit, half an emoji: the API refused every call of the resumed session, and each
    --continue left one more copy."""
    import s03_todo
    folder = workdir / ".transcripts"
    folder.mkdir()
    log = [{"role": "user", "content": [{"type": "text", "text": "measure it \ud83d"},
                                        {"type": "foo", "data": 1}, call("z")]},
           {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm"}, call("a"),
                                             result("q")]},
           {"role": "user", "content": [result("a"), {"type": "thinking", "thinking": "x",
                                                      "signature": "s"}]},
           {"role": "assistant", "content": [{"type": "text", "text": "Measured.",
                                              "cache_control": {"type": "weird"}}]}]
    (folder / "session_20260101-000000_1.jsonl").write_text(
        "\n".join(json.dumps(m) for m in log) + "\n")
    code, out, err, api = run_main(s03_todo, "--continue", "go on",
                                   script=[reply(text("went on"))])
    assert code == 0 and "went on" in out and api.violations == [], err
    sent = api.requests[0]["messages"]
    assert sent[0]["content"] == [{"type": "text", "text": "measure it \ufffd"}]
    assert [b["type"] for b in sent[1]["content"]] == ["tool_use"]
    assert sent[2]["content"] == [result("a")]
    assert "cache_control" not in sent[3]["content"][0]
    assert ("(5 blocks of a kind the harness never writes there left out: the API would "
            "refuse them)") in words(err)


def test_a_continue_stopped_while_it_copies_the_history_leaves_no_cut_copy(tmp_path,
                                                                           monkeypatch):
    """--continue copies the history into a new log. Killed (or a full disk) midway, the copy
    held 3,878 of 200,000 lines, and every later --continue resumed from it, unsaid."""
    earlier = SessionLog.start(tmp_path)
    history = session(200)
    earlier.record(history)
    earlier.close()
    lines = []

    class Stopping:
        """json as log.py uses it, stopping (as a kill would) at the 50th line it writes."""
        loads = staticmethod(json.loads)

        @staticmethod
        def dumps(*args, **kwargs):
            lines.append(1)
            if len(lines) == 50:
                raise KeyboardInterrupt
            return json.dumps(*args, **kwargs)
    monkeypatch.setattr(session_log, "json", Stopping)
    with pytest.raises(KeyboardInterrupt):
        SessionLog.continued(earlier.path, history, tmp_path)
    monkeypatch.undo()
    assert latest(tmp_path) == earlier.path
    assert [p.name for p in tmp_path.iterdir()] == [earlier.path.name]
    whole = SessionLog.continued(earlier.path, history, tmp_path)
    assert latest(tmp_path) == whole.path and load(whole.path) == history
    whole.close()               # nothing added to the copy: it goes, the earlier file stays
    assert [p.name for p in tmp_path.iterdir()] == [earlier.path.name]


def test_a_session_log_too_big_to_read_is_refused_before_it_is_read(run_main, workdir):
    """A 6 GB (sparse) session log was read whole: 12.6 GB of memory, still reading at 60 s."""
    folder = workdir / ".transcripts"
    folder.mkdir()
    huge = folder / "session_20261206-120000_1.jsonl"
    with huge.open("wb") as f:
        f.truncate(session_log.LOG_MAX + 1)
    code, out, err, api = run_main(s03_todo, "--continue", "again")
    assert code == 1 and api.requests == [], err
    assert messages(err) == [f"error: the session {huge.relative_to(workdir)} is "
                             f"{session_log.LOG_MAX + 1:,} bytes, more than --continue reads "
                             f"({session_log.LOG_MAX:,}): run without --continue to start a "
                             "new session (that one is kept as it is)"], err


def test_whose_session_names_a_blank_or_huge_agent_from_a_hand_edited_log_sensibly():
    """A first line edited by hand: a blank agent is no agent ("for agent , not you" was
    printed), and a name of 10,000 characters is cut, not printed whole."""
    blank = session_log._whose({"lesson": "s07_task_system", "agent": "   "},
                               {"lesson": "s07_task_system", "agent": "alice"})
    assert blank == ""
    huge = session_log._whose({"lesson": "s07_task_system", "agent": "b" * 10_000},
                              {"lesson": "s07_task_system"})
    assert huge.startswith(", written by s07_task_system for agent bbb") and len(huge) < 200


def test_a_session_whose_log_a_command_removed_is_still_continued(run_main):
    """`rm -rf .transcripts` or `git clean -fdx` in a bash call: the rest of the session went
    into the removed file, and --continue then found no session at all."""
    from harness.stand_in.script import tool
    code, out, err, _ = run_main(s03_todo, "tidy up", script=[
        reply(tool("bash", {"command": "rm -rf .transcripts"})),
        reply(tool("bash", {"command": "echo after-the-removal"})),
        reply(text("Tidied."))])
    assert code == 0, err
    assert "was removed; the session goes on in .transcripts/session_" in words(err)
    code, out, err, api = run_main(s03_todo, "--continue", "and then?",
                                   script=[reply(text("on it"))])
    assert code == 0 and api.violations == [], err
    sent = json.dumps(api.requests[0]["messages"])
    assert "tidy up" in sent and "after-the-removal" in sent and "Tidied." in sent


def test_a_log_made_anew_mid_batch_holds_the_results_of_the_calls_before(in_tmp):
    """Removed after the batch's first call ran: the new file holds its result too, so a
    session stopped before the batch ends is resumed with the call that ran."""
    log = SessionLog.start(in_tmp / ".transcripts", {"lesson": "s03_todo"})
    history = [{"role": "user", "content": "go"},
               {"role": "assistant", "content": [call("a"), call("b")]}]
    log.record(history)
    log.tool_result(result("a", "first"))
    log.path.unlink()
    log.tool_result(result("b", "second"))
    log.close()
    [path] = (in_tmp / ".transcripts").glob("session_*.jsonl")
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[0] == {"session": {"lesson": "s03_todo"}}
    assert lines[1:3] == history
    assert lines[3:] == [{"tool_result": result("a", "first")},
                         {"tool_result": result("b", "second")}]


def test_a_log_removed_where_no_new_one_can_be_made_stops_and_says_so(in_tmp, capsys,
                                                                       monkeypatch):
    """The new file could not be opened: the old fd was closed already, and close() then
    took the number's next owner (a file opened since) for the log, and removed it."""
    log = SessionLog.start(in_tmp / ".transcripts", {"lesson": "s03_todo"})
    log.record([{"role": "user", "content": "go"}])
    log.path.unlink()

    def refuse(path):
        raise OSError(errno.ENOSPC, "No space left on device")
    with monkeypatch.context() as patched:
        patched.setattr(session_log.writer, "open_appending", refuse)
        log.record([{"role": "user", "content": "go"}, {"role": "assistant", "content": "ok"}])
    other = os.open(in_tmp / "someone_elses.txt", os.O_WRONLY | os.O_CREAT)   # may reuse an fd
    log.close()
    os.close(other)
    assert (in_tmp / "someone_elses.txt").exists()
    assert "was removed, and no new one could be made (the disk is full): --continue will " \
           "not find this session" in words(capsys.readouterr().err)
