"""s07's board against hostile files, forged claims, hand edits and clashing names.

Each test works a board in a tmp folder through TaskManager, as the task_* tools do, and
checks what a user relies on: the board stays usable, a refused call changes nothing, and
nothing hangs. A call that could hang runs in a thread (or a process) with a deadline.
"""

import errno
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import within, call_tool

import s07_task_system as s07
from harness.board import open_store
from harness.board.record import DESCRIPTION_MAX, SUBJECT_MAX, Task, agent_name, default_agent_name

ROOT = Path(__file__).resolve().parent.parent
DEADLINE = 5          # seconds: a board call that takes longer is hanging
FAST = 1.0            # seconds: a listing of a few files


@pytest.fixture
def board(tmp_path) -> Path:
    return tmp_path / ".tasks"


def manager(board: Path, agent: str = "alice") -> s07.TaskManager:
    return s07.TaskManager(board, agent=agent)


def task_file(board: Path, n: int) -> dict:
    return json.loads((board / f"task_{n}.json").read_text())


def hand_edit(board: Path, n: int, **fields) -> None:
    """What a person with an editor does: change fields, write the file (no lock, no stamp)."""
    path = board / f"task_{n}.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **fields}, indent=2))


# ---------------------------------------------------------------- the cycle check and its words

def test_a_cycle_closed_by_a_hand_edit_is_refused_by_a_manager_with_a_warm_cache(board):
    tasks = manager(board)
    tasks.create("Design the data model")
    tasks.create("Implement the API")
    tasks.create("Write the docs")
    tasks.update(3, status="completed")   # a completion scans the board: the cache is warm
    hand_edit(board, 2, blockedBy=[1])    # a person makes #2 wait for #1
    with pytest.raises(ValueError, match="cycle"):
        tasks.update(1, add_blocked_by=[2])
    assert task_file(board, 1)["blockedBy"] == []


def test_a_finished_blocker_of_a_new_task_is_named_in_words(board):
    tasks = manager(board)
    tasks.create("Design the data model")
    tasks.update(1, status="completed")
    out = tasks.create("Implement the API", blocked_by=[1])
    assert "#1 is already completed, so it does not block the new task" in out
    assert "#the new task" not in out
    assert task_file(board, 2)["blockedBy"] == []


# ---------------------------------------------------------------- claims

@pytest.fixture
def agents(board) -> dict:
    """alice, bob and a person (dana), on one board: #1 pending; #2, #3 in progress by alice."""
    people = {name: manager(board, name) for name in ("alice", "bob", "dana")}
    for subject in ("Design the data model", "Implement the API", "Write the docs"):
        people["alice"].create(subject)
    people["alice"].update(2, status="in_progress")
    people["alice"].update(3, status="in_progress")
    return people


def test_an_agent_cannot_start_a_task_in_another_agents_name(agents, board):
    with pytest.raises(ValueError, match="own name"):
        agents["bob"].update(1, status="in_progress", owner="carol")
    assert task_file(board, 1)["owner"] is None and task_file(board, 1)["status"] == "pending"


def test_an_agent_cannot_add_a_blocker_to_another_agents_task_in_progress(agents, board):
    with pytest.raises(ValueError, match="in progress by alice"):
        agents["bob"].update(2, add_blocked_by=[1])
    assert task_file(board, 2)["blockedBy"] == []
    agents["alice"].update(2, status="completed")      # alice can still finish her task
    assert task_file(board, 2)["status"] == "completed"


def test_an_agent_cannot_remove_a_blocker_from_another_agents_task_in_progress(agents, board):
    # A task in progress takes no open blocker through the tools: this one came by hand.
    hand_edit(board, 3, blockedBy=[1])
    with pytest.raises(ValueError, match="in progress by alice"):
        agents["bob"].update(3, remove_blocked_by=[1])
    assert task_file(board, 3)["blockedBy"] == [1]


def test_an_agent_cannot_rename_the_owner_of_another_agents_task_in_progress(agents, board):
    with pytest.raises(ValueError, match="in progress by alice"):
        agents["bob"].update(2, owner="bob")
    assert task_file(board, 2)["owner"] == "alice"


def test_a_persons_forced_takeover_still_works_and_records_the_taker(agents, board):
    out = agents["dana"].update(2, status="in_progress", force=True)
    assert "took #2 over from alice" in out
    assert task_file(board, 2)["owner"] == "dana"


# ---------------------------------------------------------------- subjects and descriptions

@pytest.mark.parametrize("field, limit", [("subject", SUBJECT_MAX),
                                          ("description", DESCRIPTION_MAX)])
def test_a_subject_or_description_over_its_cap_is_refused_and_nothing_is_written(
        board, field, limit, monkeypatch):
    monkeypatch.setattr(s07, "TASKS", manager(board))   # the board the tools use
    args = {"subject": "Write the docs", field: "x" * (limit + 1)}
    out, is_error = call_tool("task_create", args, s07.TOOLS, s07.TOOL_HANDLERS)
    assert is_error and field in out and f"{limit:,}" in out, out
    assert not list(board.glob("task_*.json"))
    args[field] = "x" * limit                          # at the cap: accepted
    assert call_tool("task_create", args, s07.TOOLS, s07.TOOL_HANDLERS)[1] is False


# ---------------------------------------------------------------- stray and hostile files

@pytest.mark.parametrize("stray", ["task_1000000000000000.json", "task_" + "9" * 245 + ".json"])
def test_a_stray_huge_id_does_not_break_the_board(board, stray):
    manager(board).create("Design the data model")
    (board / stray).write_text('{"id": 1, "subject": "stray", "status": "pending"}')
    tasks = manager(board)                             # a new run: its first id is a max-scan
    out = tasks.create("Implement the API")
    assert out.startswith("Created task #2:"), out
    tasks.update(2, status="in_progress")              # the tools accept the new id
    assert task_file(board, 2)["status"] == "in_progress"
    assert json.loads(tasks.get("#2"))["id"] == 2
    flagged = [line for line in tasks.list_all().splitlines() if line.startswith("!")]
    assert len(flagged) == 1 and stray in flagged[0]


def test_a_fifo_named_like_a_task_does_not_hang_the_board_and_is_flagged(board):
    manager(board).create("Design the data model")
    os.mkfifo(board / "task_2.json")

    def writer():   # the other end: lets a reader that opened the FIFO see its end
        os.close(os.open(board / "task_2.json", os.O_WRONLY | os.O_NONBLOCK))
    listing = within(DEADLINE, manager(board).list_all, unblock=writer)
    assert "#1: Design the data model" in listing
    flagged = [line for line in listing.splitlines() if line.startswith("!")]
    assert len(flagged) == 1 and "task_2.json" in flagged[0] and "FIFO" in flagged[0]


def test_a_symlink_to_dev_zero_is_flagged_without_reading_it(board):
    manager(board).create("Design the data model")
    (board / "task_2.json").symlink_to("/dev/zero")
    start = time.monotonic()
    listing = within(DEADLINE, manager(board).list_all)
    assert time.monotonic() - start < FAST
    flagged = [line for line in listing.splitlines() if line.startswith("!")]
    assert len(flagged) == 1 and "task_2.json" in flagged[0]
    assert "#1: Design the data model" in listing


def test_a_link_named_like_a_task_is_flagged_and_what_it_points_to_is_not_read(board, tmp_path):
    other = manager(tmp_path / "another_board")
    other.create("Plans")
    other.create("Secret plans")
    manager(board).create("Design the data model")
    (board / "task_2.json").symlink_to(tmp_path / "another_board" / "task_2.json")
    listing = manager(board).list_all()
    assert "Secret plans" not in listing and "#1: Design the data model" in listing
    flagged = [line for line in listing.splitlines() if line.startswith("!")]
    assert len(flagged) == 1 and "task_2.json" in flagged[0] and "symbolic link" in flagged[0]


KEYS = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKx user@laptop\n"


def test_a_link_at_the_boards_lock_is_refused_and_nothing_is_written_through_it(board, tmp_path,
                                                                             monkeypatch):
    """QA linked .tasks/.lock to an SSH authorized_keys: creating a task wrote the lock's
    stamp into it, and the task went on as if the board were locked."""
    keys = tmp_path / "authorized_keys"
    keys.write_text(KEYS)
    board.mkdir()
    (board / ".lock").symlink_to(keys)
    with pytest.raises(ValueError, match=r"\.lock is a symbolic link"):
        manager(board).create("Design the data model")
    assert keys.read_text() == KEYS
    assert [p.name for p in board.iterdir()] == [".lock"]           # no task was written
    monkeypatch.setattr(s07.TASKS, "store", open_store(board))   # the model's task_create
    message, is_error = call_tool("task_create", {"subject": "Design"}, s07.TOOLS,
                                  s07.TOOL_HANDLERS)
    assert is_error and ".lock is a symbolic link" in message
    assert keys.read_text() == KEYS


def test_a_fifo_at_the_boards_lock_is_refused_without_hanging(board):
    board.mkdir()
    os.mkfifo(board / ".lock")
    with pytest.raises(ValueError, match=r"\.lock is a FIFO"):
        within(DEADLINE, lambda: manager(board).create("Design the data model"))
    assert [p.name for p in board.iterdir()] == [".lock"]


def test_a_hand_edited_unblocked_that_is_not_a_list_is_flagged_not_a_type_error(board):
    tasks = manager(board)
    tasks.create("Design the data model")
    tasks.update(1, status="completed")
    hand_edit(board, 1, unblocked=5)
    flagged = [line for line in tasks.list_all().splitlines() if line.startswith("!")]
    assert len(flagged) == 1 and "task_1.json" in flagged[0] and "unblocked" in flagged[0]
    with pytest.raises(ValueError, match="unblocked"):   # reopening it: an error, not a TypeError
        tasks.update(1, status="pending")


# ---------------------------------------------------------------- the lock on a full disk

OTHER_PROCESS = """import sys
from s07_task_system import TaskManager
print(TaskManager(sys.argv[1], agent="bob").create("Written by another process"))
"""


@pytest.fixture
def next_stamp_fails(monkeypatch):
    """fail() makes the next os.pwrite (which stamps .lock after a write) fail as a full disk
    does, once; failed() says whether it did."""
    real, state = os.pwrite, {"armed": False, "failed": False}

    def pwrite(fd, data, offset):
        if state["armed"]:
            state.update(armed=False, failed=True)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, data, offset)
    monkeypatch.setattr(os, "pwrite", pwrite)
    return lambda: state.update(armed=True), lambda: state["failed"]


def test_a_failed_stamp_releases_the_lock_for_this_process_and_others(board, next_stamp_fails):
    fail, failed = next_stamp_fails
    tasks = manager(board)
    tasks.create("Design the data model")
    fail()
    with pytest.raises((OSError, ValueError)):        # one error, and the call returns
        tasks.update(1, status="in_progress")
    assert failed()
    within(DEADLINE, lambda: tasks.update(1, status="pending"))
    assert task_file(board, 1)["status"] == "pending"
    proc = subprocess.run([sys.executable, "-c", OTHER_PROCESS, str(board)], cwd=ROOT,
                          capture_output=True, text=True, timeout=DEADLINE * 4)
    assert proc.stdout.startswith("Created task #2"), proc.stderr


def test_a_failed_stamp_is_told_in_words(board, next_stamp_fails, monkeypatch):
    fail, failed = next_stamp_fails
    monkeypatch.setattr(s07, "TASKS", manager(board))
    s07.TASKS.create("Design the data model")
    fail()
    out, is_error = call_tool("task_update", {"task_id": 1, "status": "in_progress"},
                              s07.TOOLS, s07.TOOL_HANDLERS)
    assert failed()
    assert is_error and "disk is full" in out and "[Errno" not in out


# ---------------------------------------------------------------- the record's schema and names

def test_every_field_written_to_a_task_file_is_in_the_schema(board):
    tasks = manager(board)
    tasks.create("Design the data model")
    tasks.create("Implement the API", blocked_by=[1])
    tasks.create("Write the docs", blocked_by=[1])
    tasks.create("Write the API tests", blocked_by=[2])
    tasks.update(1, status="in_progress")
    tasks.update(1, status="completed")                # frees #2 and #3: writes `unblocked`
    tasks.update(2, status="deleted")                  # a deletion frees #4
    fields = Task.__required_keys__ | Task.__optional_keys__
    written = [task_file(board, n) for n in (1, 2, 3, 4)]
    assert "unblocked" in written[0]                   # the optional field was really written
    for record in written:
        assert set(record) <= fields, set(record) - fields
        assert Task.__required_keys__ <= set(record)


FULL_WIDTH_ALICE = "\uff41\uff4c\uff49\uff43\uff45"   # ａｌｉｃｅ: looks like alice, is not


@pytest.mark.parametrize("args, env", [(["--name", FULL_WIDTH_ALICE], {}),
                                       ([], {"AGENT_NAME": FULL_WIDTH_ALICE})])
def test_a_full_width_agent_name_becomes_plain_ascii(run_main, args, env):
    code, out, err, _ = run_main(s07, *args, stdin="/task add Write the docs\n/task start 1\n",
                                 env=env)
    assert code == 0, err
    assert "(agent alice)" in err
    assert json.loads(Path(".tasks/task_1.json").read_text())["owner"] == "alice"
    assert agent_name(FULL_WIDTH_ALICE) == "alice"


def test_a_user_name_with_escape_characters_gives_a_safe_default_name(monkeypatch):
    monkeypatch.setenv("USER", "\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2Jroot")
    name = default_agent_name()
    assert name.isprintable() and "\x1b" not in name and "\x07" not in name, repr(name)
    assert all(c.isalnum() or c in "._@-" for c in name), repr(name)


def test_default_agent_names_differ_between_two_hosts_and_are_valid_names(monkeypatch):
    monkeypatch.setenv("USER", "root")
    names = []
    for host in ("build1.example.com", "build2.example.com"):   # one terminal name on each
        monkeypatch.setattr(socket, "gethostname", lambda host=host: host)
        names.append(default_agent_name())
    assert names[0] != names[1] and "build1" in names[0] and "build2" in names[1]
    monkeypatch.setenv("USER", "u" * 100)
    monkeypatch.setattr(socket, "gethostname", lambda: "h" * 100 + "\x1b[2J")
    names.append(default_agent_name())
    for name in names:
        assert agent_name(name) == name, name                   # --name would accept it


@pytest.mark.parametrize("field, value, problem", [
    ("subject", "Design\u0000", "field 'subject' contains a NUL character"),
    ("owner", "", "field 'owner' must be null or a non-empty string"),
    ("blockedBy", [1], "field 'blockedBy' holds the task's own id"),
    ("description", None, "field 'description' must be a string"),
], ids=["a NUL in the subject", "an empty owner", "blocked by itself", "no description"])
def test_a_hand_edited_file_postgresql_would_refuse_is_flagged_and_left_as_it_is(
        board, field, value, problem):
    tasks = manager(board)
    tasks.create("Design the data model")
    tasks.create("Implement the API")
    hand_edit(board, 1, **{field: value})
    before = (board / "task_1.json").read_bytes()
    listing = tasks.list_all()
    flagged = [line for line in listing.splitlines() if line.startswith("!")]
    assert len(flagged) == 1 and "task_1.json" in flagged[0] and problem in flagged[0], listing
    assert "#2: Implement the API" in listing
    with pytest.raises(ValueError, match="unreadable"):
        tasks.update(1, status="in_progress")
    assert (board / "task_1.json").read_bytes() == before

