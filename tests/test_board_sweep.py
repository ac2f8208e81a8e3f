"""The folder board's sweep: what a killed writer of a task file left goes; nothing else does.

A board may be a folder that holds other files too (--board .): the user's own, and the
temporary files of the harness's other writers (write_file, the session log), which do not
hold the board's lock while they write."""

import os
import time

import s07_task_system
from s07_task_system import TaskManager

HOUR = 3600


def aged(path, seconds):
    """path, its times set back by seconds: a file nobody has written for that long."""
    then = time.time() - seconds
    os.utime(path, (then, then))
    return path


def test_a_users_tmp_files_in_a_folder_used_as_a_board_are_kept(run_main, workdir):
    """The tester's run: a person's .tmp_notes.md in the folder they give as --board."""
    (workdir / ".tmp_notes.md").write_text("notes\n")
    (workdir / ".tmp_plan.txt").write_text("an old plan\n")
    aged(workdir / ".tmp_plan.txt", 30 * 24 * HOUR)
    code, out, err, api = run_main(s07_task_system, "--board", ".", "--name", "alice",
                                   stdin="/task add first\nq\n", key=None)
    assert code == 0 and "Created task #1: first" in out, err
    assert (workdir / ".tmp_notes.md").read_text() == "notes\n"
    assert (workdir / ".tmp_plan.txt").read_text() == "an old plan\n"


def test_another_writers_temporary_file_being_written_is_kept(tmp_path):
    """writer.py names every temporary file .tmp_<16 hex>.tmp; in a folder shared with a
    board, one written now (by write_file, say, which holds no board lock) is not litter."""
    in_flight = tmp_path / ".tmp_0123456789abcdef.tmp"
    in_flight.write_text("half of a file write_file is writing")
    TaskManager(tmp_path).create("a")
    assert in_flight.read_text() == "half of a file write_file is writing"


def test_what_a_killed_writer_left_long_ago_is_swept(tmp_path):
    TaskManager(tmp_path).create("a")
    stale = tmp_path / ".tmp_fedcba9876543210.tmp"
    stale.write_text('{"id": 2, "subj')                 # a task writer killed mid-write
    aged(stale, 2 * HOUR)
    not_ours = tmp_path / ".tmp_fedcba9876543210.tmp.bak"
    not_ours.write_text("a name of that shape, and more")
    aged(not_ours, 2 * HOUR)
    TaskManager(tmp_path).create("b")                   # a new process: sweeps once
    assert not stale.exists() and not_ours.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".lock", ".tmp_fedcba9876543210.tmp.bak", "task_1.json", "task_2.json"]


def test_a_folder_named_like_litter_is_left_and_the_board_still_works(tmp_path):
    (tmp_path / ".tmp_1_999_1").mkdir()
    aged(tmp_path / ".tmp_1_999_1", 2 * HOUR)
    assert TaskManager(tmp_path).create("a") == "Created task #1: a"
    assert (tmp_path / ".tmp_1_999_1").is_dir()


def test_a_task_writers_temporary_file_is_swept_at_once_and_only_it(tmp_path):
    """Under the lock no task file is being written: a task's temporary file (its own name,
    .tmp_task_<hex>.tmp) is what a killed task writer left, however new. Any other writer's,
    whatever it holds (a JSON record of write_file's that starts as a task file does), may be
    being written now, and stays."""
    TaskManager(tmp_path).create("a")
    for name, data in ((".tmp_task_00000000000000a1.tmp", '{\n  "id": 2,\n  "subj'),
                       (".tmp_task_00000000000000a2.tmp", ""),
                       (".tmp_00000000000000b1.tmp", '{\n  "id": 7,\n  "name": "a record"'),
                       (".tmp_00000000000000b2.tmp", "")):
        (tmp_path / name).write_text(data)
    TaskManager(tmp_path).create("b")
    left = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".tmp_"))
    assert left == [".tmp_00000000000000b1.tmp", ".tmp_00000000000000b2.tmp"]


def test_a_task_is_written_through_a_temporary_file_of_a_tasks_name(tmp_path, monkeypatch):
    """The name the sweep knows a task writer's file by is the one the writer gives it."""
    from harness import writer
    made = []
    real = writer.temporary_beside

    def spy(path, data):
        made.append(real(path, data))
        return made[-1]
    monkeypatch.setattr(writer, "temporary_beside", spy)
    TaskManager(tmp_path).create("a")
    assert made and all(writer.TASK_TEMPORARY.fullmatch(p.name) for p in made)


def test_a_task_file_begins_with_its_id_whatever_order_a_hand_edit_left(tmp_path):
    TaskManager(tmp_path).create("a")
    (tmp_path / "task_1.json").write_text('{"subject": "a", "description": "", "id": 1, '
                                          '"status": "pending", "blockedBy": []}')
    TaskManager(tmp_path).update(1, status="in_progress")
    assert (tmp_path / "task_1.json").read_text().startswith('{\n  "id": 1,')
