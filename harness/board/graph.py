"""The two graph walks behind s07's board: the cycle check and the execution order.

Relied on by s07's TaskManager (_check_new_blockers and order). Both are textbook algorithms,
written here so the lesson reads as the rules they serve. Without each piece:
- find_cycle: two tasks wait for each other and neither can ever start.
- topological_order: "what next?" has no answer a model can follow; written naively (a path
  copied per step, a list scanned per task) both cost O(n²) on a chain of 10,000 tasks.
"""

import heapq


def find_cycle(load, tid: int, dep: int):
    """If dep already waits (through blockers) for tid, the path tid → dep → … → tid; else None.

    load(id) gives a task as the store holds it now (None if it cannot be read): s07 passes a
    validated scan's dict.get, so a hand edit is seen.
    """
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


def topological_order(todo: dict, known: dict) -> tuple:
    """(order, stuck): todo's ids with blockers first and ties by id (Kahn's algorithm, a heap).

    A blocker outside todo is finished if known has it, unreadable if not: a task waiting for an
    unreadable one is stuck. Whatever is in neither list waits in a cycle.
    """
    waits = {j: {b for b in t["blockedBy"] if b in todo} for j, t in todo.items()}
    stuck = {j for j, t in todo.items() if any(b not in known for b in t["blockedBy"])}
    dependents = {}                        # i -> the tasks waiting for i (the edges reversed)
    for j, blockers in waits.items():
        for i in blockers:
            dependents.setdefault(i, []).append(j)
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
