"""s07 under pressure: processes racing on one board, and a crash inside a write, at a chosen
byte."""

import json
import multiprocessing
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT
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
        made = [tasks.create(f"blocker {n}") for n in range(PROCESSES)]
        blockers = [int(line.split("#")[1].split(":")[0]) for line in made]
        target = int(tasks.create("the blocked one").split("#")[1].split(":")[0])
        tasks.update(target, add_blocked_by=blockers)
        barrier = FORK.Barrier(PROCESSES)
        _run_all(_complete, [(tasks_dir, barrier, b) for b in blockers])
        task = json.loads((tasks_dir / f"task_{target}.json").read_text())
        assert task["blockedBy"] == [], f"round {round_}: still blocked by {task['blockedBy']}"
        finished = [json.loads((tasks_dir / f"task_{b}.json").read_text()) for b in blockers]
        assert all(task["status"] == "completed" for task in finished)
        assert f"#{target} the blocked one" in tasks.list_all().splitlines()[-1]  # it is ready


# The kernel ends the child the moment it writes byte `limit` of any file (RLIMIT_FSIZE, and
# SIGXFSZ set back to its default action, which Python ignores): a crash inside the write, at a
# chosen byte, whatever function the code writes with (open().write, Path.write_bytes, os.write).
# No finally block runs, as with kill -9. Nothing is guessed: every run dies at its byte.
CRASH_AT_BYTE = """
import resource, signal, sys
sys.dont_write_bytecode = True                 # a .pyc written mid-action would take the kill
sys.path.insert(0, {root!r})
{setup}
signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))
resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
{action}
print("finished without reaching byte {limit}")
"""


def crash_at_byte(limit: int, setup: str, action: str, cwd: Path) -> None:
    """Run `action` in a child that dies writing byte `limit`; fail if it did not die so."""
    script = CRASH_AT_BYTE.format(root=str(ROOT), setup=setup, action=action, limit=limit)
    proc = subprocess.run([sys.executable, "-c", script], cwd=cwd, capture_output=True, text=True,
                          timeout=30)
    assert proc.returncode == -signal.SIGXFSZ, (limit, proc.returncode, proc.stdout, proc.stderr)
    sizes = [p.stat().st_size for p in cwd.rglob("*") if p.is_file()]
    assert limit in sizes, (f"no file of {limit} bytes: the child did not die inside a write of "
                            "this folder")


# A crash inside the final step. A temp file and then os.replace never writes into the target
# itself; a copy over it (shutil.copyfile) or a write in place does. Here an audit hook arms the
# byte limit the moment a file of the target's name is opened for writing, so the child dies at
# byte `limit` of the target, inside that final step; where nothing writes into the target, the
# child finishes. Either way the target must then hold the old version or the new, whole.
CRASH_IN_TARGET = """
import os, resource, signal, sys
sys.dont_write_bytecode = True
sys.path.insert(0, {root!r})
{setup}
signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))
HARD = resource.getrlimit(resource.RLIMIT_FSIZE)[1]

def arm(event, args):
    if event != "open" or not isinstance(args[0], (str, bytes, os.PathLike)):
        return
    writes = args[2] & (os.O_WRONLY | os.O_RDWR)
    if writes and os.path.basename(os.fsdecode(args[0])) == {target!r}:
        resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, HARD))

sys.addaudithook(arm)
{action}
"""


def crash_inside_target(target: str, limit: int, setup: str, action: str, cwd: Path) -> None:
    """Run `action` in a child that dies at byte `limit` of any write into a file named
    `target`, and finishes if nothing writes into it."""
    script = CRASH_IN_TARGET.format(root=str(ROOT), setup=setup, action=action, limit=limit,
                                    target=target)
    proc = subprocess.run([sys.executable, "-c", script], cwd=cwd, capture_output=True, text=True,
                          timeout=30)
    assert proc.returncode in (0, -signal.SIGXFSZ), (limit, proc.returncode, proc.stderr)


def task_files(tasks_dir, limit):
    """Every task file, parsed; AssertionError naming a half-written one."""
    found = {}
    for path in sorted(tasks_dir.glob("task_*.json")):
        try:
            found[path.name] = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            raise AssertionError(f"{path.name} is half-written after a crash at byte {limit}: "
                                 f"{path.read_bytes()[:60]!r}") from None
    return found


def without_time(task):
    return {k: v for k, v in task.items() if k != "updated_at"}


BOARD = "from s07_task_system import TaskManager\ntasks = TaskManager('.tasks', agent='crash')"


@pytest.mark.parametrize("cut", ["first-byte", "second-byte", "byte-100", "half", "all-but-one"])
def test_a_crash_at_any_byte_of_an_update_leaves_the_old_task_or_the_new(tmp_path, cut):
    tasks = TaskManager(tmp_path / ".tasks", agent="crash")
    tasks.create("big", "x" * 3_000)
    tasks.create("waits", blocked_by=[1])
    old = {name: without_time(t) for name, t in task_files(tasks.store.dir, 0).items()}
    size = (tasks.store.dir / "task_1.json").stat().st_size
    limit = {"first-byte": 1, "second-byte": 2, "byte-100": 100, "half": size // 2,
             "all-but-one": size - 1}[cut]
    crash_at_byte(limit, BOARD, "tasks.update(1, status='in_progress')", tmp_path)
    now = task_files(tasks.store.dir, limit)
    started = {**old["task_1.json"], "status": "in_progress", "owner": "crash"}
    assert without_time(now["task_1.json"]) in (old["task_1.json"], started)
    assert without_time(now["task_2.json"]) == old["task_2.json"]
    fresh = TaskManager(tasks.store.dir)
    assert "unreadable" not in fresh.list_all()
    assert fresh.create("after the crash") == "Created task #3: after the crash"
    left = [p.name for p in tasks.store.dir.iterdir() if p.name.startswith(".tmp")]
    assert not left                                   # swept under the lock


def test_a_crash_at_any_byte_of_a_create_leaves_no_half_task(tmp_path):
    tasks = TaskManager(tmp_path / ".tasks", agent="crash")
    tasks.create("first")
    for limit in (1, 50, 400):
        crash_at_byte(limit, BOARD, "tasks.create('second', 'y' * 1_000)", tmp_path)
        now = task_files(tasks.store.dir, limit)
        assert list(now) in (["task_1.json"], ["task_1.json", "task_2.json"]), limit
        assert all(t["description"] == "y" * 1_000 for n, t in now.items() if n != "task_1.json")
    made = TaskManager(tasks.store.dir).create("next")
    assert made in ("Created task #2: next", "Created task #3: next")


@pytest.mark.parametrize("limit", [1, 600])
def test_a_crash_while_a_task_file_is_put_in_place_leaves_the_old_task_or_the_new(tmp_path, limit):
    tasks = TaskManager(tmp_path / ".tasks", agent="crash")
    tasks.create("big", "x" * 3_000)
    old = without_time(tasks.store.load(1))
    crash_inside_target("task_1.json", limit, BOARD, "tasks.update(1, status='in_progress')",
                        tmp_path)
    now = without_time(task_files(tasks.store.dir, limit)["task_1.json"])
    assert now in (old, {**old, "status": "in_progress", "owner": "crash"})
