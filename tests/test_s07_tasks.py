"""s07's TaskManager: every rule of the board, on real files."""

import json
import os
import shutil

import pytest

from conftest import call_tool

import s07_task_system as s07
from harness.board import graph, open_store
from harness.board.record import parse_task_id
from s07_task_system import TaskManager


@pytest.fixture
def tasks(tmp_path):
    return TaskManager(tmp_path / ".tasks")


def on_disk(tasks, task_id):
    return json.loads((tasks.store.dir / f"task_{task_id}.json").read_text(encoding="utf-8"))


def snapshot(tasks):
    return {p.name: p.read_bytes() for p in sorted(tasks.store.dir.glob("task_*.json"))}


def plan(tasks):
    """#1 design; #2 API and #3 docs after #1; #4 tests after #2."""
    for subject in ["Design data model", "Implement API", "Write docs", "Write tests"]:
        tasks.create(subject)
    tasks.update(2, add_blocked_by=[1])
    tasks.update(3, add_blocked_by=[1])
    tasks.update(4, add_blocked_by=[2])


# ---------------------------------------------------------------- files and ids

def test_a_task_file_is_readable_utf8_json_with_the_documented_fields(tasks):
    assert tasks.create("Écrire la doc ✓", "für alle") == "Created task #1: Écrire la doc ✓"
    raw = (tasks.store.dir / "task_1.json").read_text(encoding="utf-8")
    assert "Écrire la doc ✓" in raw and "\\u" not in raw and raw.startswith('{\n  "id": 1,')
    task = json.loads(raw)
    fields = ("id", "subject", "description", "status", "blockedBy", "owner")
    assert {k: task[k] for k in fields} == {
        "id": 1, "subject": "Écrire la doc ✓", "description": "für alle", "status": "pending",
        "blockedBy": [], "owner": None}
    assert task["created_at"] and task["updated_at"]


def test_ids_continue_from_the_largest_file_in_a_new_manager(tasks):
    tasks.create("a")
    tasks.create("b")
    (tasks.store.dir / "task_9.json").write_text(json.dumps({"id": 9, "subject": "x",
                                                            "status": "pending",
                                                            "blockedBy": []}))
    assert TaskManager(tasks.store.dir).create("next") == "Created task #10: next"


def test_ids_are_never_reused_after_a_delete(tasks):
    tasks.create("a")
    tasks.create("b")
    tasks.update(2, status="deleted")
    assert on_disk(tasks, 2)["status"] == "deleted"       # a tombstone stays
    assert "#2" not in tasks.list_all()                    # hidden from the board
    assert TaskManager(tasks.store.dir).create("c") == "Created task #3: c"
    with pytest.raises(ValueError, match="#2 was deleted"):
        tasks.update(2, status="pending")


def test_a_stale_manager_skips_ids_another_process_took(tasks):
    other = TaskManager(tasks.store.dir)
    tasks.create("mine")              # tasks now believes the last id is 1
    other.create("theirs 2")
    other.create("theirs 3")
    assert tasks.create("mine again") == "Created task #4: mine again"
    assert on_disk(tasks, 2)["subject"] == "theirs 2"


def test_constructing_a_manager_touches_no_file(tmp_path):
    TaskManager(tmp_path / ".tasks")
    assert not (tmp_path / ".tasks").exists()


@pytest.mark.parametrize("value, expected", [(3, 3), ("3", 3), ("#3", 3), (" #12 ", 12)])
def test_ids_from_a_model_are_accepted_in_three_spellings(value, expected):
    assert parse_task_id(value) == expected


@pytest.mark.parametrize("value", ["three", "#", "3.0", 0, -1, True, None, 2.5, "٣", [3]])
def test_anything_else_is_refused_clearly(value):
    with pytest.raises(ValueError, match="a task id is a positive number like 3, '3' or '#3'"):
        parse_task_id(value)


# ---------------------------------------------------------------- statuses and blocking

def test_completing_a_task_unblocks_its_dependents_and_says_so(tasks):
    plan(tasks)
    out = tasks.update(1, status="completed")
    assert "Unblocked: #2 Implement API, #3 Write docs" in out
    assert on_disk(tasks, 2)["blockedBy"] == [] and on_disk(tasks, 3)["blockedBy"] == []
    assert on_disk(tasks, 4)["blockedBy"] == [2]


def test_deleting_a_blocker_clears_it_and_says_it_was_not_done(tasks):
    plan(tasks)
    out = tasks.update(2, status="deleted")
    assert "#4 Write tests no longer waits for #2 (it was deleted, not done)" in out
    assert "Unblocked" not in out
    assert on_disk(tasks, 4)["blockedBy"] == []


def test_completing_one_of_several_blockers_removes_exactly_that_blocker(tasks):
    """_clear_dependency drops the finished id, wherever it stands in blockedBy: not the last,
    not all."""
    for subject in ["first", "second", "third", "waits for all three", "waits for the third"]:
        tasks.create(subject)
    tasks.update(4, add_blocked_by=[1, 2, 3])
    tasks.update(5, add_blocked_by=[3])
    # the middle one: #4 still waits
    assert "Unblocked" not in tasks.update(2, status="completed")
    assert on_disk(tasks, 4)["blockedBy"] == [1, 3] and on_disk(tasks, 5)["blockedBy"] == [3]
    last = tasks.update(3, status="completed").splitlines()[-1]
    assert last == "Unblocked: #5 waits for the third"
    assert on_disk(tasks, 4)["blockedBy"] == [1] and on_disk(tasks, 5)["blockedBy"] == []
    last = tasks.update(1, status="completed").splitlines()[-1]
    assert last == "Unblocked: #4 waits for all three"
    assert on_disk(tasks, 4)["blockedBy"] == []


def test_reopening_a_finished_task_restores_no_blocker_and_says_so(tasks):
    plan(tasks)
    tasks.update(1, status="completed")                        # frees #2 and #3
    assert on_disk(tasks, 1)["unblocked"] == [2, 3]            # remembered for a reopen
    out = tasks.update(1, status="pending")
    assert out.splitlines() == ["Updated [ ] #1: Design data model",
                                "Reopened #1: #2, #3 stopped waiting for it when it finished and "
                                "do not wait again; to make one wait, task_update it with "
                                "addBlockedBy [1]"]
    # nothing restored
    assert on_disk(tasks, 2)["blockedBy"] == [] and on_disk(tasks, 3)["blockedBy"] == []
    assert "unblocked" not in on_disk(tasks, 1)                # said once
    assert "Unblocked" not in tasks.update(1, status="completed")   # nothing waits for it now
    assert tasks.update(1, status="pending") == "Updated [ ] #1: Design data model"  # and no note


def test_deleting_a_blocker_frees_its_dependents_without_saying_unblocked(tasks):
    plan(tasks)
    tasks.create("Review")                                     # #5 waits for #1 and #4
    tasks.update(5, add_blocked_by=[1, 4])
    out = tasks.update(1, status="deleted")
    assert out.splitlines()[1:] == ["#2 Implement API, #3 Write docs, #5 Review no longer wait "
                                    "for #1 (it was deleted, not done)"]
    assert [on_disk(tasks, n)["blockedBy"] for n in (2, 3, 4, 5)] == [[], [], [2], [4]]
    assert "unblocked" not in on_disk(tasks, 1)                # a deleted task is never reopened
    assert tasks.list_all().splitlines()[-1] == "Ready to start: #2 Implement API, #3 Write docs"


@pytest.mark.parametrize("status", ["in_progress", "completed"])
def test_a_blocked_task_cannot_start_or_complete_and_the_refusal_names_blockers(tasks, status):
    plan(tasks)
    before = snapshot(tasks)
    with pytest.raises(ValueError, match=r"#4 is blocked by #2 Implement API"):
        tasks.update(4, status=status)
    assert snapshot(tasks) == before


def test_status_owner_and_nothing_to_update(tasks):
    tasks.create("a")
    with pytest.raises(ValueError, match="start #1 in your own name"):  # a claim is never forged
        tasks.update("#1", status="in_progress", owner="alice")
    tasks.agent = "alice"
    started = tasks.update("#1", status="in_progress", owner="alice")
    assert started == "Updated [>] #1: a (owner: alice)"
    assert on_disk(tasks, 1)["owner"] == "alice"
    tasks.agent = "bob"
    for change in ({"owner": ""}, {"add_blocked_by": [1]}, {"status": "completed"}):
        # alice's until she hands it on
        with pytest.raises(ValueError, match="in progress by alice"):
            tasks.update(1, **change)
    tasks.agent = "alice"
    tasks.update(1, owner="")
    assert on_disk(tasks, 1)["owner"] is None
    for kwargs, message in [({}, "nothing to update"), ({"status": "done"}, "not one of pending"),
                            ({"owner": 5}, "owner must be a string")]:
        with pytest.raises(ValueError, match=message):
            tasks.update(1, **kwargs)


def test_create_refuses_an_empty_subject(tasks):
    with pytest.raises(ValueError, match="subject must be a non-empty string"):
        tasks.create("  ")
    assert not tasks.store.dir.exists()  # refused before anything was written


# ---------------------------------------------------------------- dependencies

def test_unknown_ids_are_refused_with_what_exists(tasks):
    plan(tasks)
    with pytest.raises(ValueError, match="no task #9; existing tasks: #1, #2, #3, #4"):
        tasks.update(1, add_blocked_by=[9])
    with pytest.raises(ValueError, match="no task #9"):
        tasks.update(9, status="completed")


def test_a_task_cannot_block_itself(tasks):
    tasks.create("a")
    with pytest.raises(ValueError, match="#1 cannot block itself"):
        tasks.update(1, add_blocked_by=["#1"])


def test_an_edge_that_closes_a_cycle_is_refused_and_named(tasks):
    plan(tasks)
    with pytest.raises(ValueError, match="that would make a cycle: #1 → #2 → #1"):
        tasks.update(1, add_blocked_by=[2])
    with pytest.raises(ValueError, match="that would make a cycle: #1 → #4 → #2 → #1"):
        tasks.update(1, add_blocked_by=[4])
    with pytest.raises(ValueError, match="that would make a cycle: #1 → #3 → #1"):
        tasks.update(1, add_blocked_by=[3])
    tasks.update(4, add_blocked_by=[3])  # a diamond is not a cycle
    assert on_disk(tasks, 4)["blockedBy"] == [2, 3]


def test_a_refused_call_changes_nothing_on_disk(tasks):
    plan(tasks)
    before = snapshot(tasks)
    for kwargs in [{"add_blocked_by": [3, 99]}, {"add_blocked_by": [3, "x"]},
                   {"remove_blocked_by": [3]}, {"add_blocked_by": [3], "status": "completed"}]:
        with pytest.raises(ValueError):
            tasks.update(4, **kwargs)
    assert snapshot(tasks) == before


def test_a_dependency_on_a_completed_task_is_satisfied_and_not_stored(tasks):
    tasks.create("done")
    tasks.create("later")
    tasks.update(1, status="completed")
    out = tasks.update(2, add_blocked_by=[1])
    assert "#1 is already completed, so it does not block #2" in out
    assert on_disk(tasks, 2)["blockedBy"] == []


def test_remove_blocked_by(tasks):
    plan(tasks)
    tasks.update(4, remove_blocked_by=["2"])
    assert on_disk(tasks, 4)["blockedBy"] == []
    with pytest.raises(ValueError, match="#4 is not blocked by #3"):
        tasks.update(4, remove_blocked_by=[3])


# ---------------------------------------------------------------- the board

def test_list_all_orders_numerically_and_names_what_can_start(tasks):
    for n in range(1, 12):
        tasks.create(f"task {n}")
    tasks.update(11, add_blocked_by=[9, 10])
    TaskManager(tasks.store.dir, agent="bob").update(10, status="in_progress")
    tasks.update(1, status="completed")
    lines = tasks.list_all().splitlines()
    assert lines[0] == "[x] #1: task 1" and lines[8] == "[ ] #9: task 9"
    assert lines[9] == "[>] #10: task 10 (owner: bob)"
    assert lines[10] == "[ ] #11: task 11 blocked by #9, #10"
    assert lines[-1] == "Ready to start: " + ", ".join(f"#{n} task {n}" for n in range(2, 10))


def test_list_all_when_empty_and_when_all_done(tasks):
    assert tasks.list_all() == "No tasks yet."
    tasks.create("a")
    tasks.update(1, status="completed")
    assert tasks.list_all().splitlines()[-1] == "Ready to start: none (all done)"


def test_get_returns_the_task_and_the_tasks_it_blocks(tasks):
    plan(tasks)
    task = json.loads(tasks.get("#1"))
    assert task["subject"] == "Design data model" and task["blocks"] == [2, 3]
    assert "blocks" not in on_disk(tasks, 1)  # computed, not stored


# ---------------------------------------------------------------- corrupt files

def test_a_corrupt_file_never_takes_the_board_down(tasks):
    plan(tasks)
    bad = tasks.store.dir / "task_5.json"
    bad.write_text('{"id": 5, "subject": "half wri')
    (tasks.store.dir / "task_6.json").write_bytes(b"\xff\xfe not utf-8")
    (tasks.store.dir / "task_7.json").write_text(
        '{"id": 99, "subject": "wrong id", "status": "pending", "blockedBy": []}')
    board = tasks.list_all()
    assert "#1: Design data model" in board and "#4: Write tests" in board
    for name in ("task_5.json", "task_6.json", "task_7.json"):
        assert f"! {tasks.store.dir / name} is unreadable" in board
    assert TaskManager(tasks.store.dir).create("new") == "Created task #8: new"
    with pytest.raises(ValueError, match=r"task_5\.json is unreadable"):
        tasks.get(5)
    with pytest.raises(ValueError, match=r"task_5\.json is unreadable"):
        tasks.update(5, status="completed")
    with pytest.raises(ValueError, match=r"task_5\.json is unreadable"):
        tasks.update(1, add_blocked_by=[5])
    tasks.update(1, status="completed")  # clearing skips the bad files ...
    assert bad.read_text() == '{"id": 5, "subject": "half wri'  # ... and never touches them
    assert (tasks.store.dir / "task_6.json").read_bytes() == b"\xff\xfe not utf-8"


def test_a_board_of_only_unreadable_files_does_not_say_it_is_empty(tasks):
    tasks.create("only one")
    (tasks.store.dir / "task_1.json").write_text('{"id": 1, "subject": "hand edited", '
                                                 '"status": "pending", "blockedBy": ["1", 1.5]}')
    board = tasks.list_all()
    assert "No tasks yet." not in board
    assert board.splitlines()[-1] == ("No readable tasks: 1 file above could not be used; "
                                      "fix or remove it, then list again")


# ---------------------------------------------------------------- through the tool dispatcher

def test_task_tools_turn_refusals_into_error_results(tmp_path, monkeypatch):
    monkeypatch.setattr(s07.TASKS, "store", open_store(tmp_path / ".tasks"))

    def call(name, args):
        return call_tool(name, args, s07.TOOLS, s07.TOOL_HANDLERS)
    assert call("task_create", {"subject": "a"}) == ("Created task #1: a", False)
    assert call("task_create", {"subject": "b"}) == ("Created task #2: b", False)
    assert call("task_update", {"task_id": "#2", "addBlockedBy": ["1"]})[1] is False
    output, is_error = call("task_update", {"task_id": 1, "addBlockedBy": [2]})
    assert is_error and "cycle: #1 → #2 → #1" in output
    output, is_error = call("task_update", {"task_id": "two", "status": "completed"})
    assert is_error and "a task id is a positive number" in output
    output, is_error = call("task_get", {})
    assert is_error and "missing required argument 'task_id'" in output
    assert call("task_list", {})[0].splitlines()[-1] == "Ready to start: #1 a"


def test_a_relative_board_follows_the_current_folder(tmp_path, monkeypatch):
    board = TaskManager(".tasks")
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
    monkeypatch.chdir(tmp_path / "one")
    board.create("a")
    board.create("b")
    monkeypatch.chdir(tmp_path / "two")
    assert board.create("c") == "Created task #1: c"  # a fresh folder starts at #1


# ---------------------------------------------------------------- the cache never hides the files

def test_a_hand_edit_of_the_same_size_is_seen_by_the_next_list_all(tasks):
    tasks.create("aaaa")
    assert "#1: aaaa" in tasks.list_all()                 # now cached
    path = tasks.store.dir / "task_1.json"
    before = path.stat()
    path.write_text(path.read_text().replace('"subject": "aaaa"', '"subject": "bbbb"'))
    # An editor saves seconds later; the test sets the clock forward instead of sleeping.
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 10_000_000))
    assert path.stat().st_size == before.st_size and path.stat().st_ino == before.st_ino
    assert "#1: bbbb" in tasks.list_all()


def test_another_managers_writes_are_seen_by_the_next_get_and_update(tasks):
    theirs = TaskManager(tasks.store.dir)
    plan(tasks)                                           # mine holds a complete cache of #1-#4
    theirs.create("Deploy", blocked_by=[4])               # #5, a file mine has never seen
    assert json.loads(tasks.get(4))["blocks"] == [5]
    theirs.update(3, add_blocked_by=[4])
    with pytest.raises(ValueError, match="cycle: #4 → #3 → #4"):
        tasks.update(4, add_blocked_by=[3])               # the edge theirs added is not hidden
    theirs.update(1, status="completed")
    assert "[>] #2" in tasks.update(2, status="in_progress")  # its blocker is done: mine sees it


def test_completing_a_blocker_keeps_a_hand_edit_of_the_task_it_frees(tasks):
    plan(tasks)
    tasks.list_all()
    path = tasks.store.dir / "task_2.json"
    path.write_text(path.read_text().replace('"description": ""', '"description": "added by hand"'))
    assert "Unblocked: #2 Implement API" in tasks.update(1, status="completed")
    assert on_disk(tasks, 2)["description"] == "added by hand"
    assert on_disk(tasks, 2)["blockedBy"] == []


def test_a_board_replaced_under_a_manager_is_a_new_board(tasks):
    tasks.create("a")
    tasks.create("b")
    # the folder goes, another process starts afresh
    shutil.rmtree(tasks.store.dir)
    TaskManager(tasks.store.dir).create("fresh")
    # The next id comes from the board as it is now (a rescan), not from what this manager saw.
    assert tasks.create("next") == "Created task #2: next"
    assert tasks.list_all().splitlines()[:2] == ["[ ] #1: fresh", "[ ] #2: next"]  # nothing old


def test_a_long_chain_is_ordered_blockers_first(tasks):
    size = 400                  # task n waits for n+1: the order runs backwards
    for n in range(1, size + 1):
        tasks.create(f"step {n}")
    for n in range(1, size):
        tasks.update(n, add_blocked_by=[n + 1])
    order = graph.order_line(tasks.store.scan(validate=True)[0])
    assert order == "Order: " + " → ".join(f"#{n}" for n in range(size, 0, -1))
    cycle = f"cycle: #{size} → #1 → #2 → .* → #{size - 1} → #{size}$"
    with pytest.raises(ValueError, match=cycle):
        tasks.update(size, add_blocked_by=[1])
