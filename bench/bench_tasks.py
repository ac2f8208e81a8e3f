#!/usr/bin/env python3
"""Time s07's TaskManager against the unsafe published algorithm, on boards of 1,000 and 10,000
tasks.

    python bench/bench_tasks.py            # 1,000 and 10,000
    python bench/bench_tasks.py 500        # other sizes
    python bench/bench_tasks.py --stores   # only the file board beside PostgreSQL

Then the PostgreSQL board beside the file board, in the same run, on loopback: the server in
BENCH_DATABASE_URL (or TEST_DATABASE_URL), else a throwaway cluster with fsync on
(tests/pg_server.py). Without psycopg or a server that part is skipped, with one line.

s07 runs with every safety on: atomic writes, the folder lock, validation,
the cycle check, hand edits seen by the next listing. The reference is the
algorithm of the lesson s07 grew from, kept only to compare against: it has
none of those, so it is a floor, not a competitor. Both run on real files in
a temporary folder, the same operations, the same sizes, in the same run.

Creating a board of N tasks the way s07's create does it at the store level (under the lock,
TaskManager.next_id(), then reserve()) is timed by quarter of the run: a cost per create that grows
from the first quarter to the last would make creating a big board quadratic.
"""

import argparse
import json
import multiprocessing
import os
import secrets
import platform
import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from s07_task_system import TaskManager  # noqa: E402

DEPENDENTS = 10   # tasks each completed task unblocks
REPEATS = 20      # timed runs of each single operation
CLAIMERS, CLAIM_ROUNDS = 8, 5   # concurrent starters of one task; how many tasks they fight over
DESCRIPTION = "a description of ordinary length for a task on the board"


class UnsafeReference:
    """UNSAFE, FOR COMPARISON ONLY: never use it on a board anyone shares.

    The TaskManager algorithm of shareAI-lab/learn-claude-code, agents/s07_task_system.py
    (commit 0f691a0), restated minimally: ids from one max-scan, a plain write_text per
    save, every file re-read to list or to clear a completed blocker. No lock, no atomic
    write, no validation, no cycle check; its JSON output and the tools around it are left out.
    """

    def __init__(self, folder):
        self.dir = Path(folder)
        self.dir.mkdir(parents=True, exist_ok=True)
        found = (int(p.stem.split("_")[1]) for p in self.dir.glob("task_*.json"))
        self.next_id = 1 + max(found, default=0)

    def load(self, task_id):
        return json.loads((self.dir / f"task_{task_id}.json").read_text())

    def save(self, task):
        (self.dir / f"task_{task['id']}.json").write_text(json.dumps(task, indent=2))

    def create(self, subject, description="", blocked_by=None):
        self.save({"id": self.next_id, "subject": subject, "description": description,
                   "status": "pending", "blockedBy": list(blocked_by or []), "blocks": [],
                   "owner": ""})
        self.next_id += 1

    def update(self, task_id, status=None, add_blocked_by=None):
        task = self.load(task_id)
        if status:
            task["status"] = status
            if status == "completed":      # clear it from every blockedBy: read every file
                for path in self.dir.glob("task_*.json"):
                    other = json.loads(path.read_text())
                    if task_id in other.get("blockedBy", []):
                        other["blockedBy"].remove(task_id)
                        self.save(other)
        if add_blocked_by:
            task["blockedBy"] = list(set(task["blockedBy"] + add_blocked_by))
        self.save(task)

    def list_all(self):
        marks = {"pending": "[ ]", "in_progress": "[>]", "completed": "[x]"}
        tasks = [json.loads(p.read_text()) for p in sorted(self.dir.glob("task_*.json"))]
        return "\n".join(f"{marks.get(t['status'], '[?]')} #{t['id']}: {t['subject']}"
                         + (f" (blocked by: {t['blockedBy']})" if t.get("blockedBy") else "")
                         for t in tasks)


def timed(fn, repeats=REPEATS):
    """Median milliseconds of fn() over `repeats` runs."""
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


IMPLEMENTATIONS = {"s07": TaskManager, "unsafe": UnsafeReference}


def taking_turns(calls, repeats=REPEATS, mean=False):
    """Median (or mean) ms of each calls[name](), the implementations taking turns call by call.

    Taking turns makes both see the same machine: on a shared disk a slow second
    otherwise lands on one side only and the ratio says more about the neighbours.
    """
    samples = {name: [] for name in calls}
    for _ in range(repeats):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            samples[name].append((time.perf_counter() - start) * 1000)
    average = statistics.mean if mean else statistics.median
    return {name: average(s) for name, s in samples.items()}


def creates(boards):
    """A call per board that creates one ordinary task on it."""
    return {name: partial(b.create, "a task", DESCRIPTION) for name, b in boards.items()}


def compare(size, folder):
    """{operation: {implementation: ms per op}} for s07 and the reference on boards of `size`."""
    boards = {name: make(folder / name / "board") for name, make in IMPLEMENTATIONS.items()}
    create = taking_turns(creates(boards), size, mean=True)
    list_all = taking_turns({name: b.list_all for name, b in boards.items()})
    complete = taking_turns({name: completions(b, size) for name, b in boards.items()},
                            min(REPEATS, size // (DEPENDENTS + 1)))
    # The chained board: task n waits for n-1 (created so, which needs no cycle check). Each timed
    # update gives a task in the middle a second blocker, so a cycle check walks half the chain.
    chains = {name: make(folder / name / "chain") for name, make in IMPLEMENTATIONS.items()}
    for chain in chains.values():
        for n in range(1, size + 1):
            chain.create(f"step {n}", "", [n - 1] if n > 1 else None)
    chained_list = taking_turns({name: c.list_all for name, c in chains.items()})  # s07: + order
    block = taking_turns({name: second_blockers(c, size) for name, c in chains.items()})
    return {"create (mean over all N)": create, "list_all": list_all,
            "list_all (chained board)": chained_list, "add a blocker (chained board)": block,
            f"complete + clear {DEPENDENTS} dependents": complete}


def second_blockers(chain, size):
    """A call that gives the next task past the middle of the chain a second, earlier blocker."""
    middle = iter(range(size // 2, size))

    def add():
        task_id = next(middle)
        chain.update(task_id, add_blocked_by=[task_id - 2])
    return add


def completions(tasks, size):
    """A call that completes the next task DEPENDENTS others wait for (tasks 1..size exist)."""
    blockers = []
    for r in range(min(REPEATS, size // (DEPENDENTS + 1))):  # a blocker and its dependents
        blocker = 1 + r * (DEPENDENTS + 1)
        for d in range(blocker + 1, blocker + 1 + DEPENDENTS):
            tasks.update(d, add_blocked_by=[blocker])
        blockers.append(blocker)
    it = iter(blockers)
    return lambda: tasks.update(next(it), status="completed")


def timed_completions(tasks, size):
    """Median ms of completing a task that DEPENDENTS others wait for (tasks 1..size exist)."""
    rounds = min(REPEATS, size // (DEPENDENTS + 1))
    return timed(completions(tasks, size), rounds)


def bench(size):
    """s07 alone: amortized and late creates, an owner update."""
    with tempfile.TemporaryDirectory() as tmp:
        tasks = TaskManager(Path(tmp) / ".tasks")
        start = time.perf_counter()
        for n in range(size):
            tasks.create(f"task {n}", DESCRIPTION)
        create_all = time.perf_counter() - start
        # Creates near the end cost the same as the first ones: amortized O(1).
        late_create = timed(lambda: tasks.create("late", "x"))
        update = timed(lambda: tasks.update(size // 2, owner="bench"))
        list_all = timed(tasks.list_all)
        complete = timed_completions(tasks, size)
        return {"create (mean over all N)": create_all / size * 1000,
                "create (late, median)": late_create, "update owner": update,
                "list_all": list_all, f"complete + clear {DEPENDENTS} dependents": complete}


def store_creates(location, size):
    """ms per create in each quarter of creating `size` tasks at the store level, as s07 does:
    one lock per task, TaskManager.add (next_id(), the max-scan, then reserve()). Flat quarters:
    creating a board is O(N)."""
    manager = TaskManager(location)
    store = manager.store
    ends = []
    start = time.perf_counter()
    for n in range(size):
        with store.locked():
            manager.add(f"task {n}", DESCRIPTION, [])
        if (n + 1) % (size // 4) == 0:
            ends.append(time.perf_counter() - start)
    quarters = [ends[0]] + [b - a for a, b in zip(ends[:-1], ends[1:], strict=True)]
    return [q / (size // 4) * 1000 for q in quarters]


def print_store_creates(results):
    """results: {(store, size): [ms per create in each quarter]}."""
    print("\ncreating a board at the store level (next_id(), reserve), ms per create, "
          "by quarter of the run")
    for (name, size), quarters in results.items():
        print(f"  {name:<9}{size:>7,} tasks: " + "  ".join(f"{q:6.2f}" for q in quarters))


def files_store_creates(sizes):
    with tempfile.TemporaryDirectory() as tmp:
        return {("files", size): store_creates(Path(tmp) / str(size), size) for size in sizes}


def board_stores(size, folder, url):
    """{operation: {"files": ms, "postgres": ms}}: one TaskManager on a folder and PostgreSQL."""
    def boards(kind):
        return {"files": TaskManager(folder / kind), "postgres": TaskManager(fresh_schema(url))}
    tasks = boards("board")
    create = taking_turns(creates(tasks), size, mean=True)
    list_all = taking_turns({name: b.list_all for name, b in tasks.items()})
    scan = taking_turns({name: partial(b.store.scan, recheck=True) for name, b in tasks.items()})
    complete = taking_turns({name: completions(b, size) for name, b in tasks.items()},
                            min(REPEATS, size // (DEPENDENTS + 1)))
    chains = boards("chain")
    for chain in chains.values():
        for n in range(1, size + 1):
            chain.create(f"step {n}", "", [n - 1] if n > 1 else None)
    block = taking_turns({name: second_blockers(c, size) for name, c in chains.items()})
    postgres_url = tasks["postgres"].store._url
    cold = {"files": timed(lambda: TaskManager(folder / "board").list_all(), 3),  # a new process's
            "postgres": timed(lambda: TaskManager(postgres_url).list_all(), 3)}    # first listing
    return {"create (mean over all N)": create, "list_all": list_all,
            "scan (the store's part of it)": scan, "list_all (a new manager)": cold,
            "add a blocker (chained board)": block,
            f"complete + clear {DEPENDENTS} dependents": complete}


def fresh_schema(url):
    """A URL for an empty board on the same server: a new schema, looked up first."""
    import psycopg
    schema = f"bench_{secrets.token_hex(4)}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    return url + ("&" if "?" in url else "?") + f"options=-csearch_path%3D{schema}"


def _claim(location, name, barrier, results):
    tasks = TaskManager(location, agent=name)
    for task_id in range(1, CLAIM_ROUNDS + 1):
        barrier.wait()
        start = time.perf_counter()
        try:
            tasks.update(task_id, status="in_progress")
            won = True
        except ValueError:
            won = False
        results.put((task_id, won, (time.perf_counter() - start) * 1000))


def claim_rounds(location):
    """(winners in each round, the median ms of one contested start) for CLAIMERS processes."""
    setup = TaskManager(location)
    for n in range(CLAIM_ROUNDS):
        setup.create(f"contested {n}")
    fork = multiprocessing.get_context("fork")
    barrier, results = fork.Barrier(CLAIMERS), fork.Queue()
    procs = [fork.Process(target=_claim, args=(location, f"agent{n}", barrier, results))
             for n in range(CLAIMERS)]
    for p in procs:
        p.start()
    outcomes = [results.get(timeout=120) for _ in range(CLAIMERS * CLAIM_ROUNDS)]
    for p in procs:
        p.join(30)
    winners = [sum(won for t, won, _ in outcomes if t == task_id)
               for task_id in range(1, CLAIM_ROUNDS + 1)]
    return winners, statistics.median(ms for _, _, ms in outcomes)


def postgres_server():
    """(url, stop) of the server to measure, or (None, the reason) when there is none."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    import pg_server
    url = os.environ.get("BENCH_DATABASE_URL") or os.environ.get("TEST_DATABASE_URL")
    if url:
        return url, lambda: None
    why = pg_server.missing()
    if why:
        return None, why
    return pg_server.server(durable=True)   # fsync on: the numbers a real server gives


def compare_stores(sizes):
    url, stop = postgres_server()
    if url is None:
        print(f"\nPostgreSQL board: skipped ({stop})")
        return
    try:
        with tempfile.TemporaryDirectory() as tmp:
            results = {size: board_stores(size, Path(tmp) / str(size), url) for size in sizes}
            claims = {"files": claim_rounds(Path(tmp) / "claims"),
                      "postgres": claim_rounds(fresh_schema(url))}
            building = {("postgres", size): store_creates(fresh_schema(url), size)
                        for size in sizes}
    finally:
        stop()
    print("\nthe file board beside PostgreSQL on loopback (fsync on), ms per operation")
    print(f"{'operation':<34}" + "".join(f"{f'{s:,}: files':>14}{'postgres':>10}" for s in sizes))
    for op in results[sizes[0]]:
        print(f"{op:<34}" + "".join(f"{results[s][op]['files']:>14.2f}"
                                    f"{results[s][op]['postgres']:>10.2f}" for s in sizes))
    for name, (winners, ms) in claims.items():
        print(f"{CLAIMERS} concurrent claimers x {CLAIM_ROUNDS} rounds, {name}: winners per "
              f"round {winners}, median {ms:.2f} ms per contested start")
    print_store_creates(building)


def machine():
    return (f"machine: {platform.machine()}, {os.cpu_count()} cores, Python "
            f"{platform.python_version()}, {platform.system()} {platform.release()}")


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sizes", nargs="*", type=int, default=[1000, 10000],
                        help="board sizes in tasks (default: 1000 10000)")
    parser.add_argument("--stores", action="store_true",
                        help="only the file board beside PostgreSQL")
    args = parser.parse_args()
    sizes = args.sizes
    if min(sizes) <= 2 * REPEATS:
        parser.error(f"sizes must be above {2 * REPEATS} tasks")
    print(machine())
    if args.stores:
        print_store_creates(files_store_creates(sizes))
        return compare_stores(sizes)
    results = {}
    for size in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            results[size] = compare(size, Path(tmp))
    print("ms per operation; unsafe = the published algorithm (no lock, no atomic write, "
          "no checks)")
    print(f"{'operation':<34}" + "".join(f"{f'{s:,}: s07':>12}{'unsafe':>9}{'ratio':>7}"
                                         for s in sizes))
    for op in results[sizes[0]]:
        row = f"{op:<34}"
        for s in sizes:
            safe, unsafe = results[s][op]["s07"], results[s][op]["unsafe"]
            # A space before the ratio: 1141.9x must not run into the column before it.
            row += f"{safe:>12.2f}{unsafe:>9.2f} {safe / unsafe:>5.1f}x"
        print(row)
    details = {size: bench(size) for size in sizes}
    print("\ns07 alone, ms per operation")
    print(f"{'operation':<34}" + "".join(f"{s:>12,}" for s in sizes))
    for op in details[sizes[0]]:
        print(f"{op:<34}" + "".join(f"{details[s][op]:>12.2f}" for s in sizes))
    print_store_creates(files_store_creates(sizes))
    compare_stores(sizes)


if __name__ == "__main__":
    main()
