"""The folder board (harness/board/folder.py): what only a folder of task files has.

The rules of the board are tested once, on both stores, in test_board_contract.py. Here: the
task file a person can read and edit, corrupt and hostile files beside the tasks (a FIFO, a
link, a stray name), the lock file and its stamp, a crash at any byte of a write, and the
cache that must never hide a file changed by hand. Each test works a board in a tmp folder
(`board_dir`) through TaskManager, as the task_* tools do; a call that could hang runs in a
thread with a deadline.
"""

import errno
import io
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

import s07_task_system as s07
from harness.run import Run
from harness.stand_in.script import reply, text, tool
from helpers import (ROOT, call_tool, crash_at_byte, crash_inside_target, edit_by_hand,
                     messages, tool_results, within)
from s07_task_system import TaskManager

# Seconds after which a board call counts as hanging: only a bound, far above what a loaded
# machine takes (a call takes milliseconds); how fast the board is, bench/bench_tasks.py says.
DEADLINE = 60


def task_file(board_dir, n: int) -> dict:
    return json.loads((board_dir / f"task_{n}.json").read_text(encoding="utf-8"))


def flagged(listing: str) -> list:
    """The `!` lines of a listing: what could not be used, and why."""
    return [line for line in listing.splitlines() if line.startswith("!")]


# ---------------------------------------------------------------- the task file

def test_a_task_file_is_readable_utf8_json_with_the_documented_fields(board_dir):
    tasks = TaskManager(board_dir)
    assert tasks.create("Écrire la doc ✓", "für alle") == "Created task #1: Écrire la doc ✓"
    raw = (board_dir / "task_1.json").read_text(encoding="utf-8")
    assert "Écrire la doc ✓" in raw and "\\u" not in raw and raw.startswith('{\n  "id": 1,')
    task = json.loads(raw)
    fields = ("id", "subject", "description", "status", "blockedBy", "owner")
    assert {k: task[k] for k in fields} == {
        "id": 1, "subject": "Écrire la doc ✓", "description": "für alle", "status": "pending",
        "blockedBy": [], "owner": None}
    assert task["created_at"] and task["updated_at"]


def test_every_field_written_to_a_task_file_is_in_the_schema(board_dir):
    tasks = TaskManager(board_dir, agent="alice")
    tasks.create("Design the data model")
    tasks.create("Implement the API", blocked_by=[1])
    tasks.create("Write the docs", blocked_by=[1])
    tasks.create("Write the API tests", blocked_by=[2])
    tasks.update(1, status="in_progress")
    tasks.update(1, status="completed")                # frees #2 and #3: writes `unblocked`
    tasks.update(2, status="deleted")                  # a deletion frees #4
    required = set(s07.new_task(1, "a", "", []))       # the fields s07 shows
    fields = required | {"unblocked"}
    written = [task_file(board_dir, n) for n in (1, 2, 3, 4)]
    assert "unblocked" in written[0]                   # the optional field was really written
    for record in written:
        assert set(record) <= fields, set(record) - fields
        assert required <= set(record)


def test_constructing_a_manager_touches_no_file(board_dir):
    tasks = TaskManager(board_dir)
    assert not board_dir.exists()
    assert tasks.create("Design") == "Created task #1: Design"     # the first write makes it
    assert [p.name for p in board_dir.glob("task_*.json")] == ["task_1.json"]


def test_an_empty_subject_is_refused_before_the_folder_is_made(board_dir):
    with pytest.raises(ValueError, match="subject must be a non-empty string"):
        TaskManager(board_dir).create("  ")
    assert not board_dir.exists()


def test_a_relative_board_follows_the_current_folder(tmp_path, monkeypatch):
    board = TaskManager(".tasks")
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
    monkeypatch.chdir(tmp_path / "one")
    board.create("a")
    board.create("b")
    monkeypatch.chdir(tmp_path / "two")
    assert board.create("c") == "Created task #1: c"  # a fresh folder starts at #1


def test_a_board_in_the_home_folder_written_with_a_tilde_in_dotenv_is_there(run_main, workdir):
    """TASK_BOARD=~/shared-board in .env (which no shell expands) made a folder named ~ in the
    working folder: agents elsewhere never shared it, and `rm -rf ~` would clean it up."""
    (workdir / ".env").write_text("TASK_BOARD=~/shared-board\n")
    code, out, err, _ = run_main(s07, stdin="/task add Write the docs\nq\n")
    assert code == 0 and "Created task #1: Write the docs" in out, err
    home = workdir.parent / "home"                  # the HOME every lesson run gets here
    assert (home / "shared-board" / "task_1.json").is_file()
    assert not (workdir / "~").exists()


def test_a_board_named_with_spaces_around_it_is_the_folder_without_them(run_main, workdir):
    """TASK_BOARD=" .tasks " (quoted in a .env, or a stray space) made a folder named " .tasks "
    beside .tasks: the next run, spelt plainly, found an empty board, the tasks seemingly lost."""
    code, out, err, _ = run_main(s07, stdin="/task add Write the docs\nq\n",
                                 env={"TASK_BOARD": " .tasks "})
    assert code == 0 and "Created task #1: Write the docs" in out, err
    assert (workdir / ".tasks" / "task_1.json").is_file() and not (workdir / " .tasks ").exists()


def test_creating_many_tasks_lists_the_folder_once(board_dir, monkeypatch):
    tasks = TaskManager(board_dir)
    store = tasks.store
    listed, real = [], os.listdir

    def listdir(path):
        listed.append(path)
        return real(path)
    monkeypatch.setattr(os, "listdir", listdir)
    for n in range(1, 51):
        with store.locked():                        # as s07 creates: next_id(), reserved
            assert tasks.add(f"task {n}", "", [])["id"] == n
    assert len(listed) <= 2
    with store.locked():
        assert tasks.next_id() == 51


def test_the_lessons_task_folder_works_alone_without_what_the_harness_puts_in_front(board_dir):
    store = s07.TaskFolder(board_dir)                 # as a learner may use it: no Remembering
    with store.locked():
        assert store.high_water() == 0 and store.ids() == set()
        assert store.reserve(s07.new_task(1, "Design", "", []))
        assert store.reserve(s07.new_task(2, "Build", "", [1]))
        assert not store.reserve(s07.new_task(2, "taken", "", []))
        assert store.high_water() == 2
    (board_dir / "task_2.json").unlink()              # by hand: its id stays given
    with store.locked():
        assert store.ids() == {1} and store.high_water() == 2
        task = store.load(1)
        task["status"] = "completed"
        store.write(task)
    assert store.scan()[0][1]["status"] == "completed"
    assert json.loads((board_dir / "task_1.json").read_text())["status"] == "completed"
    with pytest.raises(ValueError, match="^no task #7; existing tasks: #1$"):
        store.load(7)
    assert store.try_load(7) is None
    assert TaskManager(board_dir).create("Docs") == "Created task #3: Docs"


def test_the_mark_read_outside_the_lock_is_a_clear_error_a_learner_can_act_on(board_dir):
    store = s07.TaskFolder(board_dir)                 # as a learner tries it in a Python REPL
    with pytest.raises(RuntimeError, match="inside locked()"):
        store.high_water()
    with store.locked():
        assert store.high_water() == 0


def test_a_full_disk_when_the_mark_is_written_leaves_no_task_and_says_so(board_dir,
                                                                          monkeypatch):
    """The high-water mark is written before the new task's file is linked: a disk that is
    full then (the first task of a board makes .lock longer) writes no task, leaves no
    temporary file, and the call says why in one line; once there is room, the board works."""
    real = os.pwrite

    def full_at_the_mark(fd, data, offset):
        if offset == s07.HIGH_WATER_AT:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, data, offset)
    monkeypatch.setattr(os, "pwrite", full_at_the_mark)
    with pytest.raises(ValueError) as refused:
        TaskManager(board_dir).create("Design")
    assert str(refused.value) == (f"could not save task #1 in {board_dir}: "
                                  "the disk is full")
    assert sorted(p.name for p in board_dir.iterdir()) == [".lock"]
    monkeypatch.setattr(os, "pwrite", real)
    assert TaskManager(board_dir).create("Design") == "Created task #1: Design"


# ---------------------------------------------------------------- corrupt and stray files

def test_a_corrupt_file_never_takes_the_board_down(board_dir):
    tasks = TaskManager(board_dir)
    for subject in ["Design data model", "Implement API", "Write docs", "Write tests"]:
        tasks.create(subject)
    bad = board_dir / "task_5.json"
    bad.write_text('{"id": 5, "subject": "half wri')
    (board_dir / "task_6.json").write_bytes(b"\xff\xfe not utf-8")
    (board_dir / "task_7.json").write_text(
        '{"id": 99, "subject": "wrong id", "status": "pending", "blockedBy": []}')
    board = tasks.list_all()
    assert "#1: Design data model" in board and "#4: Write tests" in board
    for name in ("task_5.json", "task_6.json", "task_7.json"):
        assert f"! {board_dir / name} is unreadable" in board
    assert TaskManager(board_dir).create("new") == "Created task #8: new"
    with pytest.raises(ValueError, match=r"task_5\.json is unreadable"):
        tasks.get(5)
    with pytest.raises(ValueError, match=r"task_5\.json is unreadable"):
        tasks.update(5, status="completed")
    with pytest.raises(ValueError, match=r"task_5\.json is unreadable"):
        tasks.update(1, add_blocked_by=[5])
    tasks.update(1, status="completed")  # clearing skips the bad files ...
    assert bad.read_text() == '{"id": 5, "subject": "half wri'  # ... and never touches them
    assert (board_dir / "task_6.json").read_bytes() == b"\xff\xfe not utf-8"


def test_a_scan_remembered_under_the_lock_still_names_the_broken_files(board_dir):
    """The cache changes speed, not results (s07's use() says so): a second scan under the
    lock, answered from memory, dropped the line for each unreadable file."""
    tasks = TaskManager(board_dir)
    tasks.create("Design the data model")
    (board_dir / "task_2.json").write_text('{"id": 2, "subject": "half wri')
    with tasks.store.locked():
        first = tasks.store.scan()
        again = tasks.store.scan()
    assert list(first[0]) == [1] and len(first[1]) == 1 and "task_2.json" in first[1][0]
    assert again == first


def test_a_board_of_only_unreadable_files_does_not_say_it_is_empty(board_dir):
    tasks = TaskManager(board_dir)
    tasks.create("only one")
    (board_dir / "task_1.json").write_text('{"id": 1, "subject": "hand edited", '
                                           '"status": "pending", "blockedBy": ["1", 1.5]}')
    board = tasks.list_all()
    assert "No tasks yet." not in board
    assert board.splitlines()[-1] == ("No readable tasks: 1 file above could not be used; "
                                      "fix or remove it, then list again")


@pytest.mark.parametrize("name, content, problem", [
    ("task_5.json", {"id": True}, "field 'id' is True"),
    ("task_5.json", {"id": 5.0}, "field 'id' is 5.0"),
    ("task_05.json", {"id": 5}, "not a task file name"),
    ("task_٥.json", {"id": 5}, "not a task file name"),
])
def test_only_canonical_files_with_integer_ids_are_tasks(board_dir, name, content, problem):
    tasks = TaskManager(board_dir)
    tasks.create("real")
    record = {"subject": "x", "status": "pending", "blockedBy": [], **content}
    (board_dir / name).write_text(json.dumps(record), encoding="utf-8")
    listing = tasks.list_all()
    assert problem in listing and listing.count("[ ]") == 1


@pytest.mark.parametrize("stray", ["task_1000000000000000.json", "task_" + "9" * 245 + ".json"])
def test_a_stray_huge_id_does_not_break_the_board(board_dir, stray):
    TaskManager(board_dir).create("Design the data model")
    (board_dir / stray).write_text('{"id": 1, "subject": "stray", "status": "pending"}')
    tasks = TaskManager(board_dir)                     # a new run: its first id is a max-scan
    out = tasks.create("Implement the API")
    assert out.startswith("Created task #2:"), out
    tasks.update(2, status="in_progress")              # the tools accept the new id
    assert task_file(board_dir, 2)["status"] == "in_progress"
    assert json.loads(tasks.get("#2"))["id"] == 2
    found = flagged(tasks.list_all())
    assert len(found) == 1 and stray in found[0]


@pytest.mark.parametrize("field, value, problem", [
    ("subject", "Design\u0000", "field 'subject' contains a NUL character"),
    ("owner", "", "field 'owner' must be null or a non-empty string"),
    ("blockedBy", [1], "field 'blockedBy' holds the task's own id"),
    ("description", None, "field 'description' must be a string"),
], ids=["a NUL in the subject", "an empty owner", "blocked by itself", "no description"])
def test_a_hand_edited_file_postgresql_would_refuse_is_flagged_and_left_as_it_is(
        board_dir, field, value, problem):
    tasks = TaskManager(board_dir)
    tasks.create("Design the data model")
    tasks.create("Implement the API")
    edit_by_hand(board_dir, 1, **{field: value})
    before = (board_dir / "task_1.json").read_bytes()
    listing = tasks.list_all()
    found = flagged(listing)
    assert len(found) == 1 and "task_1.json" in found[0] and problem in found[0], listing
    assert "#2: Implement the API" in listing
    with pytest.raises(ValueError, match="unreadable"):
        tasks.update(1, status="in_progress")
    assert (board_dir / "task_1.json").read_bytes() == before


def test_a_task_file_made_by_hand_without_blockedby_is_flagged_not_a_key_error(board_dir):
    tasks = TaskManager(board_dir)
    tasks.create("Design the data model")
    tasks.create("Implement the API", blocked_by=[1])
    # A person writes a task from memory: the fields they think of, no blockedBy.
    made = {"id": 3, "subject": "Write the docs", "description": "", "status": "pending"}
    (board_dir / "task_3.json").write_text(json.dumps(made), encoding="utf-8")
    listing = tasks.list_all()
    found = flagged(listing)
    assert len(found) == 1 and "task_3.json" in found[0] and "blockedBy" in found[0], listing
    assert "#2: Implement the API" in listing
    # Completing #1 scans every task for what it frees: #2 is freed, #3 is left as it is.
    assert tasks.update(1, status="completed").splitlines()[-1] == "Unblocked: #2 Implement the API"
    assert json.loads((board_dir / "task_3.json").read_text(encoding="utf-8")) == made


def test_a_hand_edited_unblocked_that_is_not_a_list_is_flagged_not_a_type_error(board_dir):
    tasks = TaskManager(board_dir)
    tasks.create("Design the data model")
    tasks.update(1, status="completed")
    edit_by_hand(board_dir, 1, unblocked=5)
    found = flagged(tasks.list_all())
    assert len(found) == 1 and "task_1.json" in found[0] and "unblocked" in found[0]
    with pytest.raises(ValueError, match="unblocked"):   # reopening it: an error, not a TypeError
        tasks.update(1, status="pending")


def test_a_board_next_to_3000_unreadable_files_is_bounded_in_characters(board_dir, monkeypatch):
    # The board s07 re-attaches after a compaction.
    monkeypatch.setattr(s07.TASKS, "store", TaskManager(board_dir).store)
    for n in range(1, 4):
        s07.TASKS.create(f"Step {n}")
    for n in range(4, 3004):
        (board_dir / f"task_{n}.json").write_text("{ not json")
    message = s07.board_message(Run())
    assert len(message) <= s07.BOARD_CHARS + 200, len(message)
    assert "#1: Step 1" in message and "Ready to start: #1 Step 1, #2 Step 2, #3 Step 3" in message


@pytest.mark.parametrize("kind, listed", [
    ("a FIFO (named pipe)", "it is a FIFO (named pipe), not a folder"),
    # Listed as "No tasks yet." while a write said a link was in the way.
    ("a symbolic link", "it is a symbolic link to nothing"),
])
def test_a_fifo_or_a_dangling_link_at_the_boards_name_is_named_as_what_it_is(tmp_path, kind,
                                                                                listed):
    board = tmp_path / ".tasks"
    if kind.startswith("a FIFO"):
        os.mkfifo(board)
    else:
        board.symlink_to(tmp_path / "gone")
    tasks = TaskManager(board)
    with pytest.raises(ValueError, match=f"{re.escape(kind)} of that name is in the way"):
        tasks.create("a")
    with pytest.raises(ValueError, match=re.escape(f"the board {board} cannot be read: {listed}")):
        tasks.list_all()


def test_unreadable_boards_say_so_and_nothing_is_left_behind(tmp_path):
    (tmp_path / ".tasks").write_text("not a folder")
    tasks = TaskManager(tmp_path / ".tasks")
    with pytest.raises(ValueError, match="it is a file, not a folder"):
        tasks.list_all()
    with pytest.raises(ValueError, match="a file of that name is in the way"):
        tasks.create("a")
    good = TaskManager(tmp_path / "ok")
    good.create("a")
    (tmp_path / "ok" / ".task_1.json.0123456789abcdef.tmp").write_text("from a killed writer")
    (tmp_path / "ok" / ".tmp_1_999_1").write_text("from a killed writer, before writer.py")
    with pytest.raises(ValueError, match="lone surrogate"):
        TaskManager(tmp_path / "ok").create("bad \ud800")
    TaskManager(tmp_path / "ok").create("b")          # under the lock, a stray temp file is swept
    assert sorted(p.name for p in (tmp_path / "ok").iterdir()) == [".lock", "task_1.json",
                                                                   "task_2.json"]


# ---------------------------------------------------------------- hostile files

def test_a_fifo_named_like_a_task_does_not_hang_the_board_and_is_flagged(board_dir):
    TaskManager(board_dir).create("Design the data model")
    os.mkfifo(board_dir / "task_2.json")

    def writer():   # the other end: lets a reader that opened the FIFO see its end
        os.close(os.open(board_dir / "task_2.json", os.O_WRONLY | os.O_NONBLOCK))
    listing = within(DEADLINE, TaskManager(board_dir).list_all, unblock=writer)
    assert "#1: Design the data model" in listing
    found = flagged(listing)
    assert len(found) == 1 and "task_2.json" in found[0] and "FIFO" in found[0]


def test_a_symlink_to_dev_zero_is_flagged_without_reading_it(board_dir):
    TaskManager(board_dir).create("Design the data model")
    (board_dir / "task_2.json").symlink_to("/dev/zero")
    listing = within(DEADLINE, TaskManager(board_dir).list_all)
    found = flagged(listing)
    assert len(found) == 1 and "task_2.json" in found[0]
    assert "it is a symbolic link, not a regular file" in found[0]      # refused, unopened
    assert "#1: Design the data model" in listing


def test_a_link_named_like_a_task_is_flagged_and_what_it_points_to_is_not_read(board_dir,
                                                                              tmp_path):
    other = TaskManager(tmp_path / "another_board")
    other.create("Plans")
    other.create("Secret plans")
    TaskManager(board_dir).create("Design the data model")
    (board_dir / "task_2.json").symlink_to(tmp_path / "another_board" / "task_2.json")
    listing = TaskManager(board_dir).list_all()
    assert "Secret plans" not in listing and "#1: Design the data model" in listing
    found = flagged(listing)
    assert len(found) == 1 and "task_2.json" in found[0] and "symbolic link" in found[0]


KEYS = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKx user@laptop\n"


def test_a_link_at_the_boards_lock_is_refused_and_nothing_is_written_through_it(board_dir,
                                                                             tmp_path,
                                                                             monkeypatch):
    """QA linked .tasks/.lock to an SSH authorized_keys: creating a task wrote the lock's
    stamp into it, and the task went on as if the board were locked."""
    keys = tmp_path / "authorized_keys"
    keys.write_text(KEYS)
    board_dir.mkdir()
    (board_dir / ".lock").symlink_to(keys)
    with pytest.raises(ValueError, match=r"\.lock is a symbolic link"):
        TaskManager(board_dir).create("Design the data model")
    assert keys.read_text() == KEYS
    assert [p.name for p in board_dir.iterdir()] == [".lock"]           # no task was written
    # The board the model's task_create uses.
    monkeypatch.setattr(s07.TASKS, "store", TaskManager(board_dir).store)
    message, is_error = call_tool("task_create", {"subject": "Design"}, s07.TOOLS,
                                  s07.TOOL_HANDLERS)
    assert is_error and ".lock is a symbolic link" in message
    assert keys.read_text() == KEYS


def test_a_hard_link_at_the_boards_lock_is_refused_and_nothing_is_written_through_it(
        board_dir, tmp_path):
    """The same, by a hard link: the file at .lock is regular, but it is also the keys file."""
    keys = tmp_path / "authorized_keys"
    keys.write_text(KEYS)
    board_dir.mkdir()
    os.link(keys, board_dir / ".lock")
    with pytest.raises(ValueError, match=r"\.lock has another name \(a hard link\)"):
        TaskManager(board_dir).create("Design the data model")
    assert keys.read_text() == KEYS
    assert [p.name for p in board_dir.iterdir()] == [".lock"]


def test_a_fifo_at_the_boards_lock_is_refused_without_hanging(board_dir):
    board_dir.mkdir()
    os.mkfifo(board_dir / ".lock")
    with pytest.raises(ValueError, match=r"\.lock is a FIFO"):
        within(DEADLINE, lambda: TaskManager(board_dir).create("Design the data model"))
    assert [p.name for p in board_dir.iterdir()] == [".lock"]


# ---------------------------------------------------------------- the lock on a full disk

OTHER_PROCESS = """import sys
from s07_task_system import TaskManager
print(TaskManager(sys.argv[1], agent="bob").create("Written by another process"))
"""


def test_a_failed_stamp_releases_the_lock_for_this_process_and_others(board_dir,
                                                                      next_stamp_fails):
    fail, failed = next_stamp_fails
    tasks = TaskManager(board_dir, agent="alice")
    tasks.create("Design the data model")
    fail()
    with pytest.raises(ValueError, match="the change was saved, but the board"):
        tasks.update(1, status="in_progress")         # one error, and the call returns
    assert failed()
    within(DEADLINE, lambda: tasks.update(1, status="pending"))
    assert task_file(board_dir, 1)["status"] == "pending"
    proc = subprocess.run([sys.executable, "-c", OTHER_PROCESS, str(board_dir)], cwd=ROOT,
                          capture_output=True, text=True, timeout=DEADLINE)
    assert proc.stdout.startswith("Created task #2"), proc.stderr


def test_a_failed_stamp_keeps_the_largest_id_given_so_no_id_is_given_twice(board_dir,
                                                                           next_stamp_fails):
    fail, failed = next_stamp_fails
    tasks = TaskManager(board_dir)
    for subject in ("a", "b", "c"):
        tasks.create(subject)
    (board_dir / "task_3.json").unlink()               # a person deletes the newest by hand
    fail()
    with pytest.raises(ValueError, match="the change was saved, but the board"):
        tasks.update(1, status="in_progress")
    assert failed()
    # #3 was given once: the high-water mark in .lock outlived the failed stamp.
    assert TaskManager(board_dir).create("d") == "Created task #4: d"


def test_a_failed_stamp_is_told_in_words(board_dir, next_stamp_fails, monkeypatch):
    fail, failed = next_stamp_fails
    # The board the tools use.
    monkeypatch.setattr(s07.TASKS, "store", TaskManager(board_dir).store)
    s07.TASKS.create("Design the data model")
    fail()
    out, is_error = call_tool("task_update", {"task_id": 1, "status": "in_progress"},
                              s07.TOOLS, s07.TOOL_HANDLERS)
    assert failed()
    assert is_error and "disk is full" in out and "[Errno" not in out


# ---------------------------------------------------------------- the cache never hides the files

def test_a_hand_edit_of_the_same_size_is_seen_by_the_next_list_all(board_dir):
    tasks = TaskManager(board_dir)
    tasks.create("aaaa")
    assert "#1: aaaa" in tasks.list_all()                 # now cached
    path = board_dir / "task_1.json"
    before = path.stat()
    path.write_text(path.read_text().replace('"subject": "aaaa"', '"subject": "bbbb"'))
    # An editor saves seconds later; the test sets the clock forward instead of sleeping.
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 10_000_000))
    assert path.stat().st_size == before.st_size and path.stat().st_ino == before.st_ino
    assert "#1: bbbb" in tasks.list_all()


def test_a_listing_in_another_thread_never_becomes_what_the_lock_holder_remembers(board_dir,
                                                                                monkeypatch):
    """One TaskManager, two threads (folder.py says they may share it): a listing takes no lock,
    so what it read before the lock holder wrote must not be kept as the board the holder then
    reads from memory (a completion then missed its Unblocked line)."""
    import threading
    tasks = TaskManager(board_dir)
    tasks.create("Design")
    read, written = threading.Event(), threading.Event()
    scan = s07.TaskFolder.scan

    def listing_that_reads_before_the_write(self, recheck=False):
        found = scan(self, recheck)
        if threading.current_thread() is not threading.main_thread():
            read.set()
            written.wait(DEADLINE)              # the holder writes now, between read and kept
        return found
    monkeypatch.setattr(s07.TaskFolder, "scan", listing_that_reads_before_the_write)
    with tasks.store.locked():
        tasks.store.scan()                      # the holder remembers the board
        lister = threading.Thread(target=tasks.list_all)
        lister.start()
        assert read.wait(DEADLINE)
        task = tasks.store.load(1)
        task["status"] = "completed"
        tasks.store.write(task)
        written.set()
        lister.join(DEADLINE)
        assert tasks.store.scan()[0][1]["status"] == "completed"


def test_a_long_wait_for_the_boards_lock_is_said_once(board_dir, monkeypatch, capsys):
    """An agent stopped with Ctrl-Z while it held the lock kept every other agent waiting, in
    silence, with a bare prompt. The wait is not bounded (that agent may be mid-change), but
    after WAIT_NOTE_AFTER seconds it is said, once, with how to stop waiting."""
    import threading
    import time
    from harness.board import folder
    monkeypatch.setattr(folder, "WAIT_NOTE_AFTER", 0.2)
    alice, bob = TaskManager(board_dir, agent="alice"), TaskManager(board_dir, agent="bob")
    alice.create("Design")
    held, release, made = threading.Event(), threading.Event(), []

    def hold():
        with alice.store.locked():
            held.set()
            release.wait(DEADLINE)
    holder = threading.Thread(target=hold)
    holder.start()
    assert held.wait(DEADLINE)
    creator = threading.Thread(target=lambda: made.append(bob.create("Build")))
    creator.start()
    said, deadline = "", time.monotonic() + DEADLINE
    while "waiting for the board's lock" not in said and time.monotonic() < deadline:
        time.sleep(0.05)
        said += capsys.readouterr().err
    release.set()
    holder.join(DEADLINE)
    creator.join(DEADLINE)
    said += capsys.readouterr().err
    assert made == ["Created task #2: Build"]
    assert said.count("waiting for the board's lock") == 1
    assert "another agent holds it; Ctrl-C stops waiting" in " ".join(said.split())


def test_a_hand_edit_that_keeps_size_time_and_inode_survives_its_blocker_completing(board_dir):
    """An edit saved within one tick of the file's time, at the same size, in place: the
    remembered copy looks current. The dependent a completion writes back is read from its
    file, so the edit is kept."""
    tasks = TaskManager(board_dir)
    tasks.create("Design")
    tasks.create("Build", "aaaa", blocked_by=[1])
    tasks.create("Warm up")
    tasks.update(3, status="completed")       # a completion reads the board: it is remembered
    path = board_dir / "task_2.json"
    before = path.stat()
    with open(path, "r+", encoding="utf-8") as file:      # in place: the same inode
        edited = file.read().replace('"aaaa"', '"bbbb"')
        file.seek(0)
        file.write(edited)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (path.stat().st_size, path.stat().st_ino) == (before.st_size, before.st_ino)
    assert "Unblocked: #2 Build" in tasks.update(1, status="completed")
    build = task_file(board_dir, 2)
    assert (build["description"], build["blockedBy"]) == ("bbbb", [])


def test_a_board_replaced_under_a_manager_is_a_new_board(board_dir):
    tasks = TaskManager(board_dir)
    tasks.create("a")
    tasks.create("b")
    # the folder goes, another process starts afresh
    shutil.rmtree(board_dir)
    TaskManager(board_dir).create("fresh")
    # The next id comes from the board as it is now (a rescan), not from what this manager saw.
    assert tasks.create("next") == "Created task #2: next"
    assert tasks.list_all().splitlines()[:2] == ["[ ] #1: fresh", "[ ] #2: next"]  # nothing old


# ---------------------------------------------------------------- a crash at any byte

BOARD = "from s07_task_system import TaskManager\ntasks = TaskManager('.tasks', agent='crash')"


def task_files(board_dir, limit):
    """Every task file, parsed; AssertionError naming a half-written one."""
    found = {}
    for path in sorted(board_dir.glob("task_*.json")):
        try:
            found[path.name] = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            raise AssertionError(f"{path.name} is half-written after a crash at byte {limit}: "
                                 f"{path.read_bytes()[:60]!r}") from None
    return found


def without_time(task):
    return {k: v for k, v in task.items() if k != "updated_at"}


@pytest.mark.parametrize("cut", ["first-byte", "second-byte", "byte-100", "half", "all-but-one"])
def test_a_crash_at_any_byte_of_an_update_leaves_the_old_task_or_the_new(tmp_path, board_dir,
                                                                         cut):
    tasks = TaskManager(board_dir, agent="crash")
    tasks.create("big", "x" * 3_000)
    tasks.create("waits", blocked_by=[1])
    old = {name: without_time(t) for name, t in task_files(board_dir, 0).items()}
    size = (board_dir / "task_1.json").stat().st_size
    limit = {"first-byte": 1, "second-byte": 2, "byte-100": 100, "half": size // 2,
             "all-but-one": size - 1}[cut]
    crash_at_byte(limit, BOARD, "tasks.update(1, status='in_progress')", tmp_path)
    now = task_files(board_dir, limit)
    started = {**old["task_1.json"], "status": "in_progress", "owner": "crash"}
    assert without_time(now["task_1.json"]) in (old["task_1.json"], started)
    assert without_time(now["task_2.json"]) == old["task_2.json"]
    fresh = TaskManager(board_dir)
    listing = fresh.list_all()
    assert flagged(listing) == [] and "#1: big" in listing and "#2: waits" in listing
    assert fresh.create("after the crash") == "Created task #3: after the crash"
    left = [p.name for p in board_dir.iterdir() if p.name.startswith(".tmp")]
    assert not left                                   # swept under the lock


def test_a_crash_at_any_byte_of_a_create_leaves_no_half_task(tmp_path, board_dir):
    tasks = TaskManager(board_dir, agent="crash")
    tasks.create("first")
    for limit in (1, 50, 400):
        crash_at_byte(limit, BOARD, "tasks.create('second', 'y' * 1_000)", tmp_path)
        now = task_files(board_dir, limit)
        assert list(now) in (["task_1.json"], ["task_1.json", "task_2.json"]), limit
        assert all(t["description"] == "y" * 1_000 for n, t in now.items() if n != "task_1.json")
    made = TaskManager(board_dir).create("next")
    assert made in ("Created task #2: next", "Created task #3: next")


@pytest.mark.parametrize("limit", [1, 600])
def test_a_crash_while_a_task_file_is_put_in_place_leaves_the_old_task_or_the_new(tmp_path,
                                                                                  board_dir,
                                                                                  limit):
    tasks = TaskManager(board_dir, agent="crash")
    tasks.create("big", "x" * 3_000)
    old = without_time(tasks.store.load(1))
    crash_inside_target("task_1.json", limit, BOARD, "tasks.update(1, status='in_progress')",
                        tmp_path)
    now = without_time(task_files(board_dir, limit)["task_1.json"])
    assert now in (old, {**old, "status": "in_progress", "owner": "crash"})


class Typed(io.StringIO):
    """A person at the REPL: each line typed after what is done before it (what happens between
    two prompts: the board fixed, another agent at work)."""

    def __init__(self, *lines):
        super().__init__()
        self.lines = list(lines)

    def readline(self, size=-1):
        if not self.lines:
            return ""
        line, meanwhile = self.lines.pop(0)
        if meanwhile is not None:
            meanwhile()
        return line + "\n"


def test_a_board_that_cannot_be_read_at_the_first_prompt_is_tried_again_not_left_broken(
        run_main, workdir):
    """The REPL's board news: a board it cannot watch says why before each prompt, and once it
    is fixed (here between the second prompt and the third), its news comes: it must not fail
    on a watcher that was never made, nor give up after the first try."""
    board = workdir / "not-a-folder"
    board.write_text("a file", encoding="utf-8")

    def fix():
        board.unlink()
        TaskManager(board, agent="bob").create("Design the data model")

    def bob_starts():
        TaskManager(board, agent="bob").update(1, status="in_progress")

    typed = Typed(("/help", None), ("/help", fix), ("/help", bob_starts), ("q", None))
    code, out, err, api = run_main(s07, "--board", "not-a-folder", stdin=typed)
    assert code == 0 and api.requests == []
    said = "error: the board not-a-folder cannot be read: it is a file, not a folder"
    notes = [line for line in messages(err) if line.startswith(("error", "[board"))]
    # Before the first two prompts, the line; before the third, nothing (the news starts
    # from the board as it is then); before the fourth, bob's start.
    assert notes == [said, said, "[board: bob started #1]"]
    assert out.count("commands: /help") == 3        # and each /help was answered


def test_a_deeply_nested_task_file_is_flagged_and_the_rest_of_the_board_works(run_lesson,
                                                                                workdir):
    """`[` a hundred thousand times is JSON too deep for Python's parser (RecursionError): it
    must be one flagged file, not a board that no listing, news or completion can read."""
    tasks = TaskManager(workdir / ".tasks", agent="me")
    tasks.create("Design the data model")
    tasks.create("Implement the API", blocked_by=[1])
    (workdir / ".tasks" / "task_3.json").write_text("[" * 100_000)
    script = [reply(tool("task_list", {})), reply(text("listed"))]
    proc, api = run_lesson("s07_task_system", "--name", "me", script=script,
                           stdin="/tasks\n/task done 1\nlist the board\nq\n", in_process=True)
    assert proc.returncode == 0 and "RecursionError" not in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "Unblocked: #2 Implement the API" in proc.stdout
    listed = tool_results(api.requests[1])[0]["content"]
    assert "#2: Implement the API" in listed and "task_3.json is unreadable" in listed
    assert TaskManager(workdir / ".tasks").store.load(2)["blockedBy"] == []


def test_a_lock_file_removed_during_a_change_refuses_the_write_so_no_task_is_claimed_twice(
        board_dir):
    """A person removes .tasks/.lock (a "stale" lock, they think) while alice's change holds it:
    bob then locks a new .lock and claims #1. Alice's write must not follow: her lock no longer
    orders anything. It is refused with what happened, and bob's claim stands."""
    TaskManager(board_dir, agent="alice").create("the one task")
    alice = TaskManager(board_dir, agent="alice")
    with alice.store.locked():
        task = alice.store.load(1)
        (board_dir / ".lock").unlink()
        assert "(owner: bob)" in TaskManager(board_dir, agent="bob").update(1, "in_progress")
        task.update(status="in_progress", owner="alice")
        with pytest.raises(ValueError, match=r"\.lock was removed during this change"):
            alice.store.write(task)
    assert task_file(board_dir, 1)["owner"] == "bob"
    assert "bob" in alice.list_all()
