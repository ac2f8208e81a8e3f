"""How s07's board reads as text: a line per task, names, the board, the board cut to size.

Relied on by s07 (every TaskManager answer, the board after a compaction) and by the REPL's
/task commands: the lesson decides what can start, graph.py what a task waits for, this module
words it. Without each piece:
- line / names (one_line): a newline in a subject or an owner forges a line ("[x] #9 done").
- existing: "no task #10001" named every id of a board of 10,000 tasks, a 40,381-character
  error; a big board is named by its count, its lowest and highest ids and the nearest ones.
- board: a board whose every record is unreadable said "No tasks yet", and a model planned
  all the work again.
- fit and brief: a board of 10,000 tasks, or one task with a huge title, made the message
  after a compaction bigger than the context it replaced; cut blindly, it lost "Ready to
  start".
- reopened / no_longer_waiting: reopening a finished task does not re-block what it freed, and
  deleting one frees its dependents though the work was never done; unsaid, a model believes
  otherwise.
- theirs / taken_over: a refusal (claims.py) would not say whose the task is, nor how a
  person takes it over.
"""

import heapq
import json

from harness import terminal
from harness.board.graph import waiting_on
from harness.board.record import FINISHED, STATUSES
from harness.excerpt import one_line

# Ids a "no task #N" names: a model picks the right one from 20; every id of 10,000 was 40 kB.
IDS_NAMED = 20


def ids(task_ids: list) -> str:
    """"#1, #2"."""
    return ", ".join(f"#{i}" for i in task_ids)


def existing(task_ids, wanted: int) -> str:
    """The tasks a missing one's error names: "#1, #2, #3" or "none yet"; on a board of more
    than IDS_NAMED, "999 of them, #1 to #1000; the nearest are ..." (the IDS_NAMED closest to
    wanted, in order): the model still finds a neighbour it mistyped, in a bounded line."""
    task_ids = sorted(task_ids)
    if len(task_ids) <= IDS_NAMED:
        return ids(task_ids) or "none yet"
    nearest = heapq.nsmallest(IDS_NAMED, task_ids, key=lambda i: (abs(i - wanted), i))
    return (f"{len(task_ids):,} of them, #{task_ids[0]} to #{task_ids[-1]}; the nearest are "
            f"{ids(sorted(nearest))}")


def created(task: dict, notes: list) -> str:
    """task_create's answer: "Created task #4: Write the API tests (blocked by #2)"."""
    line = f"Created task #{task['id']}: {one_line(task['subject'])}"
    if task["blockedBy"]:
        line += f" (blocked by {ids(task['blockedBy'])})"
    return "\n".join([line] + notes)


def names(tasks: list) -> str:
    """"#1 Design the data model, #2 Implement the API"."""
    return ", ".join(f"#{t['id']} {one_line(t['subject'])}" for t in tasks)


def line(task: dict, waiting: list = None) -> str:
    """`[ ] #4: Write the API tests (owner: bob) blocked by #2`; waiting: its unfinished
    blockers (all of its blockers when not given)."""
    if waiting is None:
        waiting = task["blockedBy"]
    # A deleted task waits for nothing, though its file keeps its blockers.
    if task["status"] == "deleted":
        waiting = []
    shown = f"{STATUSES[task['status']]} #{task['id']}: {one_line(task['subject'])}"
    if task.get("owner"):
        shown += f" (owner: {one_line(task['owner'])})"
    if waiting:
        shown += f" blocked by {ids(waiting)}"
    return shown


def board(tasks: dict, problems: list, order: str, ready: str) -> str:
    """The board as task_list shows it: a line per live task (naming only the blockers still
    unfinished), a line per record that cannot be used, the order when a task waits for
    another, and what can start now, last."""
    live = [t for t in tasks.values() if t["status"] != "deleted"]
    lines = [line(task, waiting_on(task, tasks)) for task in live]
    lines += [f"! {p}" for p in problems]
    if not live and problems:      # not "No tasks yet": a model would plan it all again
        return "\n".join(lines + [_none_readable(len(problems))])
    unfinished = [t for t in live if t["status"] not in FINISHED]
    if any(t["blockedBy"] for t in unfinished):      # an order helps only with blockers
        lines.append(order)
    return "\n".join(lines + [ready])


def _none_readable(n: int) -> str:
    them = "it" if n == 1 else "them"
    return (f"No readable tasks: {terminal.plural(n, 'file')} above could not be used; fix or "
            f"remove {them}, then list again")


def ready_line(ready: list, tasks: dict) -> str:
    """"Ready to start: #2 ..., #3 ...", or why nothing is."""
    live = [t for t in tasks.values() if t["status"] != "deleted"]
    if not live:
        return "No tasks yet."
    if ready:
        return "Ready to start: " + names(ready)
    if all(t["status"] in FINISHED for t in live):
        return "Ready to start: none (all done)"
    return "Ready to start: none (the rest are in progress or blocked)"


def in_full(task: dict, tasks: dict) -> str:
    """task_get's answer: the task as the store keeps it, and the live tasks it blocks."""
    blocks = [other["id"] for other in tasks.values()
              if task["id"] in other["blockedBy"] and other["status"] != "deleted"]
    return json.dumps({**task, "blocks": blocks}, indent=2, ensure_ascii=False)


def described(task_ids: list, store) -> str:
    """"#2 Implement the API, #7 (missing or unreadable)": blockers, named as they are now."""
    parts = []
    for tid in task_ids:
        task = store.try_load(tid)
        parts.append(f"#{tid} {one_line(task['subject'])}" if task else
                     f"#{tid} (missing or unreadable)")
    return ", ".join(parts)


def finished_blocker(blocker: dict, tid) -> str:
    """A blocker already finished is not stored: say so, not silently."""
    what = f"#{tid}" if tid is not None else "the new task"
    return f"#{blocker['id']} is already {blocker['status']}, so it does not block {what}"


def theirs(task: dict, holder: str) -> str:
    """Why an agent may not change another agent's task (in progress, or completed: reopening
    it), and who may."""
    tid, holder = task["id"], one_line(holder)
    if task["status"] == "completed":
        return (f"#{tid} was completed by {holder}; to do more on it, create a new task (a "
                f"person can reopen it with /task start {tid})")
    return (f"#{tid} is in progress by {holder}; pick another task, or ask {holder} (a person "
            f"can take it over with /task start {tid})")


def taken_over(task: dict, holder: str) -> str:
    """What a person's /task start or /task done says when the task was another agent's."""
    if task["status"] == "completed":
        return f"#{task['id']} was completed by {one_line(holder)}; reopened"
    return f"took #{task['id']} over from {one_line(holder)}"


def reopened(task: dict, unblocked: list) -> list:
    """Reopening a finished task does not re-block what it freed: say so, and how to."""
    if not unblocked:
        return []
    verb = "waits" if len(unblocked) == 1 else "wait"
    first = unblocked[0]
    return [f"Reopened #{task['id']}: {ids(unblocked)} stopped waiting for it when it "
            f"finished, and no longer {verb} for it; to make #{first} wait again, give it "
            f"addBlockedBy [{task['id']}] (task_update), or type /task block {first} "
            f"{task['id']}"]


def no_longer_waiting(freed: list, deleted: dict) -> list:
    """Deleting a task frees its dependents, but the work was never done: say so."""
    if not freed:
        return []
    verb = "waits" if len(freed) == 1 else "wait"
    return [f"{names(freed)} no longer {verb} for #{deleted['id']} (it was deleted, not done)"]


def fit(text: str, limit: int) -> str:
    """text within limit characters, its first lines and its last (what can start now) kept."""
    *lines, last = text.splitlines()
    kept, room = [], limit - min(len(last), limit // 4) - 60
    for shown in lines:
        room -= len(shown) + 1
        if room < 0:
            kept.append(f"... (cut to {limit:,} characters: task_list shows the whole board)")
            break
        kept.append(shown)
    return "\n".join(kept + [last[:limit // 4]])


def brief(tasks: dict, problems: list, ready: str, limit: int) -> str:
    """A big board after a compaction: the counts, then only the unfinished tasks and what can
    start now; cut to about limit characters."""
    live = [t for t in tasks.values() if t["status"] != "deleted"]
    unfinished = [t for t in live if t["status"] not in FINISHED]
    lines = [f"({len(unfinished)} unfinished, {len(live) - len(unfinished)} done; "
             "task_list shows all)"]
    lines += [line(task, waiting_on(task, tasks)) for task in unfinished]
    lines += [f"! {p}" for p in problems]
    return fit("\n".join(lines + [ready]), limit)


def say_board_added(screen, name: str) -> None:
    """Tell the user the board was added after a summary, naming its folder as they find it
    from where they are (screen: the run's; None: say nothing)."""
    if screen is not None:
        terminal.show_note(f"  [the board, read from {screen.where(name)}, was added after "
                           "the summary]")
