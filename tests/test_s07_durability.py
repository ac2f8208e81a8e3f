"""s07 under pressure: processes racing on one board, and kill -9 mid-write."""

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time

from conftest import ROOT
from s07_task_system import TaskManager

PROCESSES = 8
FORK = multiprocessing.get_context("fork")


def _create_many(tasks_dir, barrier, count):
    barrier.wait()
    tasks = TaskManager(tasks_dir)
    for n in range(count):
        tasks.create(f"from {os.getpid()} #{n}")


def _complete(tasks_dir, barrier, task_id):
    barrier.wait()
    TaskManager(tasks_dir).update(task_id, status="completed")


def _run_all(target, args_list):
    procs = [FORK.Process(target=target, args=args) for args in args_list]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0] * len(procs)


def test_many_processes_creating_at_once_keep_every_task_with_unique_ids(tmp_path):
    tasks_dir, per_process = tmp_path / ".tasks", 25
    barrier = FORK.Barrier(PROCESSES)
    _run_all(_create_many, [(tasks_dir, barrier, per_process)] * PROCESSES)
    files = sorted(tasks_dir.glob("task_*.json"))
    tasks = [json.loads(p.read_text()) for p in files]
    assert sorted(t["id"] for t in tasks) == list(range(1, PROCESSES * per_process + 1))
    assert len({t["subject"] for t in tasks}) == PROCESSES * per_process  # nobody overwrote anybody
    assert not [p for p in tasks_dir.iterdir() if p.name.startswith(".tmp")]


def test_many_processes_completing_blockers_at_once_leave_none_blocked(tmp_path):
    tasks_dir = tmp_path / ".tasks"
    for round_ in range(3):  # a few rounds, to give a lost update every chance to show
        tasks = TaskManager(tasks_dir)
        blockers = [int(tasks.create(f"blocker {n}").split("#")[1].split(":")[0]) for n in range(PROCESSES)]
        target = int(tasks.create("the blocked one").split("#")[1].split(":")[0])
        tasks.update(target, add_blocked_by=blockers)
        barrier = FORK.Barrier(PROCESSES)
        _run_all(_complete, [(tasks_dir, barrier, b) for b in blockers])
        task = json.loads((tasks_dir / f"task_{target}.json").read_text())
        assert task["blockedBy"] == [], f"round {round_}: still blocked by {task['blockedBy']}"
        assert all(json.loads((tasks_dir / f"task_{b}.json").read_text())["status"] == "completed" for b in blockers)
        assert f"#{target} the blocked one" in tasks.list_all().splitlines()[-1]  # it is ready


WRITER = """
import sys
sys.path.insert(0, {root!r})
import harness.board_files, harness.task_record
harness.task_record.DESCRIPTION_MAX = harness.board_files.TASK_FILE_MAX = 10 ** 7  # big, slow writes
from s07_task_system import TaskManager
tasks = TaskManager({dir!r})
big = "x" * 2_000_000
print("ready", flush=True)
while True:
    out = tasks.create("big", big)
    task_id = int(out.split("#")[1].split(":")[0])
    tasks.update(task_id, status="in_progress")
    tasks.update(task_id, status="pending", owner="w")
"""


def test_kill_9_at_any_moment_leaves_every_task_file_valid_json(tmp_path):
    tasks_dir = tmp_path / ".tasks"
    for delay in (0.05, 0.11, 0.17, 0.23, 0.31, 0.43):
        proc = subprocess.Popen([sys.executable, "-c", WRITER.format(root=str(ROOT), dir=str(tasks_dir))],
                                stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(delay)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        files = list(tasks_dir.glob("task_*.json"))
        for path in files:
            task = json.loads(path.read_text(encoding="utf-8"))  # raises if any file is half-written
            assert len(task["description"]) == 2_000_000
    assert len(files) >= 3
    # The board still works after all those kills, and ids stayed unique.
    import harness.board_files
    harness.board_files.TASK_FILE_MAX = 10 ** 7
    board = TaskManager(tasks_dir)
    assert "unreadable" not in board.list_all()
    assert board.create("after the crashes") == f"Created task #{len(files) + 1}: after the crashes"
