"""What a person's hand edit of a board may leave, and how the board then behaves: a task at
the largest id, a high-water mark there, a blocker listed twice."""

import json
import os
from pathlib import Path

import pytest

import s07_task_system
from harness.board import folder, record
from helpers import edit_by_hand, messages, on_postgres, sql
from s07_task_system import TaskManager

LARGEST = record.MAX_ID - 1          # 999,999,999,999,999: the most a file name may hold


def board_files(board) -> list:
    """Every name in a folder board, the lock's bytes too; a PostgreSQL board's rows and mark."""
    if on_postgres(board):
        return sql(board, "SELECT id, updated_at FROM tasks ORDER BY id") + \
            sql(board, "SELECT high_water FROM task_board")
    return sorted((p.name, p.read_bytes()) for p in Path(board).iterdir())


def at_the_largest_id(board, how):
    """A person made the task #999,999,999,999,999 (a file, a row), or wrote that id as the
    board's high-water mark."""
    if how == "task" and on_postgres(board):
        sql(board, "INSERT INTO tasks (id, subject, description, status, blocked_by, created_at, "
                   "updated_at) VALUES (%s, 'by hand', '', 'pending', '{}', now(), now())",
            (LARGEST,))
    elif how == "task":
        task = {"id": LARGEST, "subject": "by hand", "description": "", "status": "pending",
                "blockedBy": []}
        (Path(board) / f"task_{LARGEST}.json").write_text(json.dumps(task))
    elif on_postgres(board):
        sql(board, "UPDATE task_board SET high_water = %s", (LARGEST,))
    else:
        lock = Path(board) / ".lock"
        lock.write_bytes(lock.read_bytes()[:folder.STAMP_BYTES] + str(LARGEST).encode())


@pytest.mark.parametrize("how", ["task", "mark"])
def test_a_board_whose_ids_reached_their_largest_says_so_and_writes_nothing(board, how):
    TaskManager(board).create("first")
    at_the_largest_id(board, how)
    before = board_files(board)
    with pytest.raises(ValueError) as refused:
        TaskManager(board).create("one more")
    message = str(refused.value)
    assert "ids have reached their largest (999,999,999,999,999)" in message, message
    assert "start a new board" in message and "expected" not in message
    assert "\n" not in message
    assert board_files(board) == before                     # nothing written, not even the stamp
    assert "#1: first" in TaskManager(board).list_all()     # the board is still read


def test_the_repl_says_it_in_one_line(run_main, workdir):
    TaskManager(workdir / ".tasks").create("first")
    at_the_largest_id(workdir / ".tasks", "mark")
    code, out, err, api = run_main(s07_task_system, stdin="/task add one more\nq\n")
    assert code == 0 and "Created" not in out and "Traceback" not in err
    (line,) = [x for x in messages(err) if "largest" in x]      # wrapped to 80 columns
    assert line.startswith("error: ") and "start a new board" in line


def test_a_task_file_that_is_a_dangling_link_is_named_unreadable_not_missing(run_main, workdir):
    """The listing said task_3.json was a link; /task show 3 said "no task #3", and /task add
    made no #3 beside it either: a user was told two different things about one file."""
    board = workdir / ".tasks"
    TaskManager(board).create("first")
    (board / "task_3.json").symlink_to(workdir.parent / "gone.json")
    code, out, err, api = run_main(s07_task_system, stdin="/task show 3\n/task done 3\nq\n")
    assert code == 0 and "no task #3" not in err and "Traceback" not in err
    refusals = [line for line in messages(err) if "task_3.json" in line]
    assert len(refusals) == 2, err
    assert all("is unreadable (it is a symbolic link" in line for line in refusals)
    assert (board / "task_3.json").is_symlink()                     # left as it is


def test_an_id_out_of_range_is_named_as_such_not_as_the_number_expected():
    problem = record.task_problem({"id": record.MAX_ID}, record.MAX_ID)
    assert problem.startswith("field 'id' is 1000000000000000, not a task id")
    assert "expected" not in problem
    wrong = record.task_problem({"id": 4, "status": "pending"}, 5)
    assert wrong == "field 'id' is 4, expected 5 (the number in the file name)"


def test_a_blocker_listed_twice_by_hand_is_removed_whole(board):
    tasks = TaskManager(board, agent="alice")
    tasks.create("a")
    tasks.create("b", blocked_by=[1])
    edit_by_hand(board, 2, blockedBy=[1, 1])
    answer = TaskManager(board, agent="alice").update(2, remove_blocked_by=[1])
    assert answer == "Updated [ ] #2: b"                        # not "blocked by #1" still
    assert tasks.store.load(2)["blockedBy"] == []
    assert "(owner: alice)" in tasks.update(2, status="in_progress")


def test_a_hand_edit_that_keeps_the_size_and_the_time_is_not_written_over(tmp_path):
    """A person edits a subject in place, same length, and the file's time is as before (a
    file system with a coarse clock, an editor or a sync tool that keeps it: `touch -r`).
    A listing may still show the old subject (the folder remembers a file by its size and
    time), but a change to that task reads the file again first: the edit is kept."""
    tasks = TaskManager(tmp_path / ".tasks")
    tasks.create("draft the API")
    tasks.list_all()                            # the folder now remembers task_1.json
    path = tmp_path / ".tasks" / "task_1.json"
    before = path.stat()
    path.write_text(path.read_text(encoding="utf-8").replace("draft", "write"),
                    encoding="utf-8")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size
    tasks.update(1, status="in_progress")
    saved = json.loads(path.read_text(encoding="utf-8"))
    assert saved["subject"] == "write the API" and saved["status"] == "in_progress"


def test_an_owner_too_long_for_a_name_is_refused_and_the_task_stays_readable(board):
    tasks = TaskManager(board, agent="alice")
    tasks.create("Important work")
    tasks.create("After it", blocked_by=[1])
    with pytest.raises(ValueError, match="owner is 170,000 characters"):
        tasks.update(1, owner="\x01" * 170_000)
    assert tasks.store.load(1)["owner"] is None
    assert "[ ] #2: After it blocked by #1" in TaskManager(board).list_all()


def test_a_task_whose_file_would_be_too_big_to_read_back_is_not_written(tmp_path):
    """A hand-added field nested deep is a small file as written by hand, and over the read
    limit once written again with an indent: the change is refused, the file left as it was."""
    tasks = TaskManager(tmp_path / ".tasks", agent="alice")
    tasks.create("a")
    path = tmp_path / ".tasks" / "task_1.json"
    task = json.loads(path.read_text(encoding="utf-8"))
    deep = "[" * 800 + "]" * 800
    path.write_text(json.dumps(task)[:-1] + f', "notes": {deep}}}', encoding="utf-8")
    before = path.read_bytes()
    with pytest.raises(ValueError, match="its file would be .* bytes, over 1,000,000"):
        tasks.update(1, status="in_progress")
    assert path.read_bytes() == before and "[ ] #1: a" in tasks.list_all()
