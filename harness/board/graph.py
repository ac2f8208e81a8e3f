"""The graph walks behind s07's board: what a task waits for, the cycle check, an order.

Relied on by s07's TaskManager (can_start, check_blockers, list_all), and by the
session page's picture of the board (session/board_picture.py). The algorithms are
textbook, written here so the lesson reads as the rules they serve. Without each piece:
- waiting_on: a blocker that cannot be read (a hand-broken file) counts as finished, and a
  task starts before work it needs.
- refuse_cycle / find_cycle: two tasks wait for each other and neither can ever start.
- order_line / topological_order: "what next?" has no answer a model can follow; written naively
  (a path copied per step, a list scanned per task) both cost O(n²) on a chain of 10,000 tasks.
"""

import heapq

from harness.board.record import FINISHED


def waiting_on(task: dict, tasks: dict) -> list:
    """The blockers of task, each once and in order, that are not finished (a missing one
    counts as unfinished): s07's board and the session page's picture of it agree."""
    return [blocker for blocker in dict.fromkeys(task["blockedBy"])
            if tasks.get(blocker, {}).get("status") not in FINISHED]


def refuse_cycle(tasks: dict, tid: int, dep: int) -> None:
    """ValueError if making tid wait for dep would close a cycle (dep already waits for tid)."""
    cycle = find_cycle(tasks.get, tid, dep)
    if cycle:
        raise ValueError(f"that would make a cycle: #{' → #'.join(map(str, cycle))}")


def find_cycle(load, tid: int, dep: int):
    """If dep already waits (through blockers) for tid, the path tid → dep → … → tid, else
    None. load(id): a task as the store holds it now (None if it cannot be read)."""
    came_from, stack = {dep: None}, [dep]   # each node once, and how we got there: O(n)
    while stack:
        node = stack.pop()
        for b in (load(node) or {}).get("blockedBy", []):
            if b == tid:                       # dep waits for tid: walk back to dep for the path
                path = [tid]
                while node is not None:
                    path.append(node)
                    node = came_from[node]
                return [tid] + path[::-1]
            if b not in came_from:
                came_from[b] = node
                stack.append(b)
    return None


def order_line(tasks: dict) -> str:
    """"Order: #1 → #2 → #3": the unfinished tasks, blockers first, then by id."""
    todo = {i: t for i, t in tasks.items() if t["status"] not in FINISHED}
    if not todo:
        return "Order: nothing left to do."
    order, stuck = topological_order(todo, tasks)
    line = "Order: " + (" → ".join(f"#{i}" for i in order) or "nothing can start")
    left = sorted(set(todo) - set(order))
    if not left:
        return line
    # What waits, at any depth, for a task that cannot be read; nothing else but a cycle stops
    # a task from entering the order.
    behind = _behind(stuck, todo)
    reasons = []
    for ids, why in (([i for i in left if i in behind], "waiting for tasks that cannot be read"),
                     ([i for i in left if i not in behind], "waiting for each other in a "
                      "cycle (hand-edited files?): removeBlockedBy on one breaks it")):
        if ids:
            reasons.append(f"then {', '.join(f'#{i}' for i in ids)}: {why}")
    return line + f" ({'; '.join(reasons)})"


def _behind(stuck: set, todo: dict) -> set:
    """The stuck tasks, and every task of todo that waits for one of them, at any depth."""
    dependents = _dependents(todo)
    behind, queue = set(stuck), list(stuck)
    while queue:
        for j in dependents.get(queue.pop(), []):
            if j not in behind:
                behind.add(j)
                queue.append(j)
    return behind


def topological_order(todo: dict, known: dict) -> tuple:
    """(order, stuck): todo's ids with blockers first and ties by id (Kahn's algorithm, a heap).

    A blocker outside todo is finished if known has it, unreadable if not: a task waiting for
    an unreadable one is stuck. Whatever is in neither list waits in a cycle.
    """
    waits = {j: {b for b in t["blockedBy"] if b in todo} for j, t in todo.items()}
    stuck = {j for j, t in todo.items() if any(b not in known for b in t["blockedBy"])}
    dependents = _dependents(todo)
    free = [i for i in todo if not waits[i] and i not in stuck]
    heapq.heapify(free)
    order = []
    while free:
        i = heapq.heappop(free)
        order.append(i)
        for j in dependents.get(i, []):
            waits[j].discard(i)
            if not waits[j] and j not in stuck:
                heapq.heappush(free, j)
    return order, stuck


def _dependents(todo: dict) -> dict:
    """i -> the tasks of todo waiting for i, each once (the edges reversed), in O(n)."""
    dependents = {}
    for j, task in todo.items():
        for i in dict.fromkeys(task["blockedBy"]):
            if i in todo:
                dependents.setdefault(i, []).append(j)
    return dependents
