#!/usr/bin/env python3
"""Time s07's TaskManager on boards of 1,000 and 10,000 tasks, with every safety on.

    python bench/bench_tasks.py            # 1,000 and 10,000
    python bench/bench_tasks.py 500        # other sizes

Each operation runs on a real board in a temporary folder: atomic writes,
the folder lock, full scans where the design needs them.
"""

import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from s07_task_system import TaskManager  # noqa: E402

DEPENDENTS = 10   # tasks each completed task unblocks
REPEATS = 20      # timed runs of each single operation


def timed(fn, repeats=REPEATS):
    """Median milliseconds of fn() over `repeats` runs."""
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def bench(size):
    with tempfile.TemporaryDirectory() as tmp:
        tasks = TaskManager(Path(tmp) / ".tasks")
        start = time.perf_counter()
        for n in range(size):
            tasks.create(f"task {n}", "a description of ordinary length for a task on the board")
        create_all = time.perf_counter() - start
        # Creates near the end cost the same as the first ones: amortized O(1).
        late_create = timed(lambda: tasks.create("late", "x"))
        update = timed(lambda: tasks.update(size // 2, owner="bench"))
        list_all = timed(tasks.list_all)
        rounds = min(REPEATS, size // (DEPENDENTS + 1))  # each round needs a blocker and its dependents
        blockers = []
        for r in range(rounds):
            blocker = 1 + r * (DEPENDENTS + 1)
            for d in range(blocker + 1, blocker + 1 + DEPENDENTS):
                tasks.update(d, add_blocked_by=[blocker])
            blockers.append(blocker)
        it = iter(blockers)
        complete = timed(lambda: tasks.update(next(it), status="completed"), rounds)
        return {"create (mean over all N)": create_all / size * 1000, "create (late, median)": late_create,
                "update owner": update, "list_all": list_all,
                f"complete + clear {DEPENDENTS} dependents": complete}


def main():
    sizes = [int(a) for a in sys.argv[1:]] or [1000, 10000]
    if min(sizes) <= DEPENDENTS:
        sys.exit(f"bench_tasks.py: sizes must be above {DEPENDENTS} tasks")
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"{platform.system()} {platform.release()}")
    results = {size: bench(size) for size in sizes}
    ops = list(results[sizes[0]])
    print(f"{'operation (ms per op)':<34}" + "".join(f"{s:>12,}" for s in sizes))
    for op in ops:
        print(f"{op:<34}" + "".join(f"{results[s][op]:>12.2f}" for s in sizes))


if __name__ == "__main__":
    main()
