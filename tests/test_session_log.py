"""The session log: saved as it goes, survives kill -9, rebuilt valid for the API."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from harness.session import log as session_log
from harness.errors import SetupError
from harness.session.log import SessionLog, latest, load, read_session, repair
from harness.stand_in_api import check_request

from conftest import ROOT


def valid(messages):
    """None if the real API would accept this history, else the rule it breaks."""
    return check_request({"model": "m", "max_tokens": 1, "messages": messages}, context_window=10 ** 9)


def call(id, name="bash", **input):
    return {"type": "tool_use", "id": id, "name": name, "input": input or {"command": "ls"}}


def result(id, content="ok"):
    return {"type": "tool_result", "tool_use_id": id, "content": content}


def session(n_calls):
    """A history as the loop builds it: a prompt, then a call and its result, n times, an answer."""
    history = [{"role": "user", "content": "fix the tests"}]
    for n in range(n_calls):
        history += [{"role": "assistant", "content": [call(f"t{n}")]},
                    {"role": "user", "content": [result(f"t{n}", f"output {n}")]}]
    return history + [{"role": "assistant", "content": [{"type": "text", "text": "Done."}]}]


@pytest.fixture(autouse=True)
def no_active_log():
    yield
    session_log.close_session()


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


def test_a_call_without_its_result_is_dropped_and_the_calls_that_ran_are_kept():
    history = session(2)[:-1] + [{"role": "assistant", "content": [
        {"type": "text", "text": "Running two more."}, call("a"), call("b")]}]
    repaired, dropped = repair(history)
    assert dropped == 2 and valid(repaired) is None
    assert repaired[:-1] == history[:-1]                       # t0 and t1 ran: kept with results
    assert repaired[-1]["content"] == [{"type": "text", "text": "Running two more."}]


def test_of_two_calls_in_one_message_only_the_answered_one_stays():
    history = [{"role": "user", "content": "go"},
               {"role": "assistant", "content": [call("a"), call("b")]},
               {"role": "user", "content": [result("a"), result("a", "again")]},  # b lost, a twice
               {"role": "user", "content": [result("zzz"), {"type": "text", "text": "more"}]}]
    repaired, dropped = repair(history)
    assert dropped == 1 and valid(repaired) is None
    assert repaired[1]["content"] == [call("a")]
    assert repaired[2]["content"] == [result("a")]             # one result per id
    assert repaired[3]["content"] == [{"type": "text", "text": "more"}]   # an orphan result goes


def test_the_first_message_is_the_users_and_empty_text_is_left_out():
    history = [{"role": "assistant", "content": [call("x")]}, {"role": "user", "content": [result("x")]},
               {"role": "user", "content": "  "}, {"role": "user", "content": "start here"},
               {"role": "assistant", "content": [{"type": "text", "text": ""}, call("y")]},
               {"role": "user", "content": [result("y")]}]
    repaired, _ = repair(history)
    assert valid(repaired) is None
    assert repaired[0] == {"role": "user", "content": "start here"}
    assert repaired[1]["content"] == [call("y")]


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


def test_sync_records_new_messages_a_compaction_and_a_rolled_back_turn(tmp_path):
    log = SessionLog.start(tmp_path)
    history = []
    for message in session(2)[:-1]:                # the loop appends, then sync
        history.append(message)
        log.sync(history)
    assert load(log.path) == history
    history.append({"role": "user", "content": "a turn that fails"})
    history.append({"role": "assistant", "content": [call("lost")]})
    log.sync(history)
    del history[5:]                                # the cli undoes the failed turn
    log.sync(history)
    assert load(log.path) == history
    history[:] = [{"role": "user", "content": "Summary so far."}]   # auto_compact's replacement
    history += session(1)[1:]
    log.sync(history)
    assert load(log.path) == history
    assert len(log.path.read_text(encoding="utf-8").splitlines()) == 5 + 2 + 1 + 1 + 3


def test_latest_is_the_session_written_last_and_none_when_there_is_none(tmp_path):
    assert latest(tmp_path / "missing") is None
    (tmp_path / "transcript_20260101-000000.jsonl").write_text("{}\n")   # s06's, not a session
    assert latest(tmp_path) is None
    first, second = SessionLog.start(tmp_path), SessionLog.start(tmp_path)
    second.append({"role": "user", "content": "b"})
    first.append({"role": "user", "content": "a"})
    os.utime(second.path, ns=(1, 1))
    assert latest(tmp_path) == first.path


def test_continue_starts_a_new_log_with_the_repaired_history_and_keeps_the_old_file(tmp_path, capsys):
    old = SessionLog.start(tmp_path)
    for message in session(2)[:-1] + [{"role": "assistant", "content": [call("cut")]}]:
        old.append(message)
    old.close()
    before = old.path.read_bytes()
    history = session_log.open_session(continue_latest=True, folder=tmp_path)
    assert history == session(2)[:-1] and valid(history) is None
    note = capsys.readouterr().err
    assert f"continuing {old.path}: 5 messages (1 tool call without a result left out)" in note
    history.append({"role": "user", "content": "go on"})
    session_log.record(history)
    new = latest(tmp_path)
    assert new != old.path and old.path.read_bytes() == before
    assert load(new) == history


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
    proc.wait()
    proc.stdout.close()
    found = read_session(tmp_path / os.path.basename(path))
    assert found.torn_lines <= 1
    assert valid(found.messages) is None
    pairs = (len(found.messages) - 1) // 2
    assert pairs >= acknowledged + 1             # every acknowledged pair survived
    assert found.messages[0] == {"role": "user", "content": "go"}
