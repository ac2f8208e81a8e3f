"""s07's board for several agents and a person: claims, blockers at creation, order, /task,
hostile files."""

import json
import multiprocessing

import pytest

import s07_task_system
from harness.board import graph
from s07_task_system import TaskManager
from helpers import words

FORK = multiprocessing.get_context("fork")


@pytest.fixture
def board(tmp_path):
    return tmp_path / ".tasks"



def order_of(tasks) -> str:
    """The order line of the board as task_list shows it (hand edits seen)."""
    return graph.order_line(tasks.store.scan(validate=True)[0])

def test_a_task_in_progress_by_another_agent_cannot_be_started_or_completed(board):
    alice, bob = TaskManager(board, agent="alice"), TaskManager(board, agent="bob")
    alice.create("a")
    assert "(owner: alice)" in alice.update(1, status="in_progress")
    for status in ("in_progress", "completed", "pending"):
        with pytest.raises(ValueError, match="#1 is in progress by alice"):
            bob.update(1, status=status)
    assert "took #1 over from alice" in bob.update(1, status="in_progress", force=True)
    assert json.loads((board / "task_1.json").read_text())["owner"] == "bob"
    bob.update(1, status="pending")                    # back to pending releases it
    assert json.loads((board / "task_1.json").read_text())["owner"] is None


def test_a_held_task_cannot_change_hands_by_owner_and_a_takeover_records_the_taker(board):
    alice, bob = TaskManager(board, agent="alice"), TaskManager(board, agent="bob")
    alice.create("a")
    alice.update(1, status="in_progress")
    for owner in ("bob", ""):                          # renaming the owner is taking it over too
        with pytest.raises(ValueError, match="#1 is in progress by alice"):
            bob.update(1, owner=owner)
    assert "(owner: alice)" in alice.update(1, owner="alice")   # the holder may set it
    result = bob.update(1, status="completed", force=True)     # a person's /task done
    assert "took #1 over from alice" in result and "(owner: bob)" in result
    assert json.loads((board / "task_1.json").read_text())["owner"] == "bob"


def _start(board, barrier, name, results):
    barrier.wait()
    try:
        TaskManager(board, agent=name).update(1, status="in_progress")
        results.put((name, "won"))
    except ValueError as exc:
        results.put((name, str(exc)))


def test_of_eight_concurrent_starters_exactly_one_wins(board):
    TaskManager(board).create("contested")
    barrier, results = FORK.Barrier(8), FORK.Queue()
    procs = [FORK.Process(target=_start, args=(board, barrier, f"agent{n}", results))
             for n in range(8)]
    for p in procs:
        p.start()
    outcomes = dict(results.get(timeout=30) for _ in procs)
    for p in procs:
        p.join(30)
    winners = [n for n, r in outcomes.items() if r == "won"]
    assert len(winners) == 1
    assert all(f"in progress by {winners[0]}" in r for n, r in outcomes.items() if n != winners[0])
    assert json.loads((board / "task_1.json").read_text())["owner"] == winners[0]


def test_create_with_blockers_checks_them_and_writes_nothing_when_refused(board):
    tasks = TaskManager(board)
    tasks.create("design")
    tasks.create("done already")
    tasks.update(2, status="completed")
    out = tasks.create("build", blocked_by=["#1", 2])
    assert out.startswith("Created task #3: build (blocked by #1)")
    assert "#2 is already completed" in out
    before = sorted(p.name for p in board.glob("task_*.json"))
    with pytest.raises(ValueError, match="no task #9; existing tasks: #1, #2, #3"):
        tasks.create("never", blocked_by=[9])
    assert sorted(p.name for p in board.glob("task_*.json")) == before


def test_the_order_is_topological_on_a_diamond_and_survives_a_corrupt_file(board):
    tasks = TaskManager(board)
    for s in ("top", "left", "right", "bottom"):
        tasks.create(s)
    tasks.update(2, add_blocked_by=[1])
    tasks.update(3, add_blocked_by=[1])
    tasks.update(4, add_blocked_by=[2, 3])
    assert order_of(tasks) == "Order: #1 → #2 → #3 → #4"
    assert "Order: #1 → #2 → #3 → #4" in tasks.list_all()
    (board / "task_9.json").write_text("{broken")
    TaskManager(board).create("waits for 9")   # a new manager's max-scan counts the corrupt #9: #10
    path = board / "task_10.json"
    path.write_text(path.read_text().replace('"blockedBy": []', '"blockedBy": [9]'))
    assert order_of(tasks).startswith("Order: #1 → #2 → #3 → #4 (then #10: waiting for tasks "
                                      "that cannot be read)")


def test_reopening_a_completed_task_says_who_no_longer_waits(board):
    tasks = TaskManager(board)
    tasks.create("a")
    tasks.create("b", blocked_by=[1])
    tasks.update(1, status="completed")
    out = tasks.update(1, status="pending")
    assert "Reopened #1: #2 stopped waiting for it" in out and "addBlockedBy [1]" in out


def test_what_another_process_wrote_is_seen_by_the_next_call(board):
    mine, theirs = TaskManager(board), TaskManager(board)
    mine.create("a")
    mine.create("b")
    theirs.update(2, add_blocked_by=[1])              # another manager writes under the lock
    with pytest.raises(ValueError, match="cycle: #1 → #2 → #1"):
        mine.update(1, add_blocked_by=[2])            # mine's cache must not hide that edge
    path = board / "task_1.json"                      # a hand edit is seen by the next listing
    path.write_text(path.read_text().replace('"subject": "a"', '"subject": "edited by hand"'))
    assert "#1: edited by hand" in mine.list_all()


@pytest.mark.parametrize("name, content, problem", [
    ("task_5.json", {"id": True}, "field 'id' is True"),
    ("task_5.json", {"id": 5.0}, "field 'id' is 5.0"),
    ("task_05.json", {"id": 5}, "not a task file name"),
    ("task_٥.json", {"id": 5}, "not a task file name"),
])
def test_only_canonical_files_with_integer_ids_are_tasks(board, name, content, problem):
    tasks = TaskManager(board)
    tasks.create("real")
    record = {"subject": "x", "status": "pending", "blockedBy": [], **content}
    (board / name).write_text(json.dumps(record), encoding="utf-8")
    listing = tasks.list_all()
    assert problem in listing and listing.count("[ ]") == 1


def test_a_dangling_blocker_can_be_removed_and_the_refusal_says_so(board):
    tasks = TaskManager(board)
    tasks.create("a")
    path = board / "task_1.json"
    path.write_text(path.read_text().replace('"blockedBy": []', '"blockedBy": [99]'))
    with pytest.raises(ValueError, match=r"#99 \(missing or unreadable\)"):
        tasks.update(1, status="in_progress")
    tasks.update(1, remove_blocked_by=[99])
    assert "[>] #1" in tasks.update(1, status="in_progress")


def test_subjects_render_on_one_line_and_finished_tasks_take_no_blockers(board):
    tasks = TaskManager(board)
    tasks.create("real\n[x] #9: forged")
    tasks.create("other")
    assert "[ ] #1: real [x] #9: forged" in tasks.list_all().splitlines()
    tasks.update(1, status="completed")
    with pytest.raises(ValueError, match="#1 is completed; set it back to pending"):
        tasks.update(1, add_blocked_by=[2])


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


def test_the_repl_task_commands_work_the_board_without_a_model_call(run_main, workdir):
    stdin = ("/task add Design\n/task add Build\n/task block 2 1\n/task order\n/task start 2\n"
             "/task ready\n"
             "/task done 1\n/task show 2\n/task frobnicate\n/task\n/task help\nq\n")
    code, out, err, api = run_main(s07_task_system, "--name", "carol", stdin=stdin)
    assert code == 0 and api.requests == [], err
    assert "(agent carol)" in err
    assert "Created task #1: Design" in out and "Order: #1 → #2" in out
    assert "error: #2 is blocked by #1 Design" in err   # the same rules as the model's tools
    assert "Ready to start: #1 Design" in out and "Unblocked: #2 Build" in out
    assert "error: unknown /task command 'frobnicate'" in err and "/task add TITLE" in out


def test_a_local_command_that_fails_oddly_is_one_line_and_the_repl_goes_on(run_main, workdir,
                                                                           monkeypatch):
    def broken(*_):
        raise TypeError("'int' object is not iterable")     # as a hand-edited field once caused
    monkeypatch.setattr(graph, "order_line", broken)
    stdin = "/task order\n/task show " + "9" * 300 + "\n/task add still here\nq\n"
    code, out, err, api = run_main(s07_task_system, stdin=stdin)
    assert code == 0 and "Traceback" not in words(err)
    assert "error: /task failed: TypeError: 'int' object is not iterable" in words(err)
    assert "error: a task id is a positive number like 3, '3' or '#3'; got '9999" in words(err)
    assert "Created task #1: still here" in out


def test_a_hand_made_cycle_is_named_as_a_cycle_in_the_order(board):
    tasks = TaskManager(board)
    for name in ("a", "b"):
        tasks.create(name)
    for tid, dep in ((1, 2), (2, 1)):               # a hand edit: the tools would refuse the second
        path = board / f"task_{tid}.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), "blockedBy": [dep]}))
    assert order_of(TaskManager(board)) == ("Order: nothing can start (then #1, #2: waiting for "
                                            "each other in a cycle (hand-edited files?): "
                                            "removeBlockedBy on one breaks it)")
