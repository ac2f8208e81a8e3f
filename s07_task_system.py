#!/usr/bin/env python3
"""s07: a persistent task graph that survives compaction and restarts.

s03's todos live in memory: a compaction (s06) hides them, an exit destroys
them, and they have no order. s07 moves the plan out of the conversation, as a graph.

    .tasks/task_1.json  {"id": 1, "subject": "Design the data model", "status": "completed", ...}
    .tasks/task_2.json  {"id": 2, "subject": "Implement the API",     "blockedBy": [], ...}
    .tasks/task_4.json  {"id": 4, "subject": "Write the API tests",   "blockedBy": [2], ...}

        #1 Design the data model --+--> #2 Implement the API --> #4 Write the API tests
                                   +--> #3 Write the docs
        completing #1 runs _clear_dependency: #2 and #3 become ready

    model --task_create/update/list/get--> TaskManager --> a store: .tasks/ (one file per
                                                           task) or a postgresql:// board
    compaction (s06) --> new first message = summary + the board, read fresh from the store

Key insight: state that must outlive the conversation belongs outside it. The model reads the
board back whenever it needs it; compaction and restarts cannot lose what was never only in it.

Read it in this order: TaskManager (ids by max-scan, create, update, _clear_dependency, the
board and its order), the rules update() checks, then the tools and the loop. The store behind
`self.store` is for after: harness/board/record.py (what every store promises), board_files.py
(a folder safe for several processes, kill -9 and hand edits), board_postgres.py (machines).

New since s06: TaskManager, the task_* tools, the board re-attached after every compaction,
agent names and claims, --board; in the REPL /tasks, /task (and /task import), and a line for
each change another agent made ([board: bob started #3]) before the next prompt.

Run it:   python s07_task_system.py "plan a refactor: the data model, then the API and the docs"
          python s07_task_system.py --name alice     (a REPL: /tasks, /task help, /compact)
          python s07_task_system.py --demo
"""

import json
import os
import sys
from functools import partial
from pathlib import Path

from harness import demos
from harness.session import log as session_log
from harness.board import commands as task_commands
from harness.board.text import fit, names, none_readable, render_line, reopen_notes
from harness.cli import run_cli, step_limit
from harness.config import max_steps, model_id
from harness.endpoints import assistant_turn, complete_tool_calls, cut_note, final_text
from harness.board.record import (FINISHED, STATUSES, Task, agent_name, check_text, check_update,
                                 default_agent_name, ids, new_task, one_line, parse_task_id)
from harness.board import open_store
from harness.session.record import RECORD
from harness.session.views import context_command
from harness.board.graph import find_cycle, topological_order
from harness.terminal import show_note, show_stream, show_usage
from s03_todo import BASE_TOOLS, CACHE, MAX_TOKENS, object_schema, run_tool_calls, show_reply
from s06_compact import (CONTEXT, COMPACT_TOOL, MAX_STEPS, TOOL_HANDLERS as S06_HANDLERS, auto_compact,
                         compact_if_asked, compact_if_needed, compact_now, compact_threshold, micro_compact)

TASKS_DIR = Path(".tasks")    # relative: the board belongs to the folder you run in
BOARD_IN_SUMMARY = 40         # a board too big to re-attach whole is cut to this many unfinished
BOARD_CHARS = 12_000          # characters of board after a compaction: less than it replaced


class TaskManager:
    """The board: tasks with blockers, in a store (a folder of JSON files by default) that is the
    only truth. Every call reads what it needs, so another agent's writes are seen by our next
    call; a hand edit, by the next listing and by every update that reads that task."""

    def __init__(self, board: object, agent: str = None) -> None:
        self.store = open_store(board)         # a folder or a postgresql:// URL: see harness/
        self.agent = agent or default_agent_name()  # who we are: the owner of what we start
        self._last_id, self._scanned = None, None

    def next_id(self) -> int:
        """The largest id in the store plus one ("max-scan"); ids are never reused. The scan costs
        O(n), so it runs once per board; then ids count up (create() skips one taken meanwhile)."""
        if self._scanned != self.store.board:  # which board: a relative folder follows the cwd
            self._last_id, self._scanned = self.store.largest_id(), self.store.board
        self._last_id += 1
        return self._last_id

    def create(self, subject: str, description: str = "", blocked_by: list = None) -> str:
        subject = check_text(subject, "subject")
        description = check_text(description, "description", empty=True)
        with self.store.locked():
            blocked, notes = self._check_new_blockers(None, [], blocked_by or [])
            while True:
                task = new_task(self.next_id(), subject, description, blocked)
                if self.store.claim(task):     # False: another process took this id first
                    waits = f" (blocked by {', '.join(f'#{b}' for b in blocked)})" * bool(blocked)
                    return "\n".join([f"Created task #{task['id']}: {one_line(subject)}{waits}"]
                                     + notes)

    def update(self, task_id: object, status: str = None, add_blocked_by: list = None,
               remove_blocked_by: list = None, owner: str = None, force: bool = False) -> str:
        """load → check → apply → write → _clear_dependency. A refused call changes nothing.
        force=True is a person taking a task over on purpose (/task start, /task done)."""
        task_id = parse_task_id(task_id)
        with self.store.locked():              # one writer at a time, across processes
            task = self.store.load(task_id)
            change, notes = self._check_update(task, status, add_blocked_by, remove_blocked_by,
                                               owner, force)
            before = task["status"]
            task.update(change)                # every check passed: only now does anything change
            if before in FINISHED and task["status"] not in FINISHED:
                notes += reopen_notes(task, task.pop("unblocked", []))
            self.store.write(task)
            lines = [f"Updated {render(task)}", *notes]
            if task["status"] in FINISHED and before not in FINISHED:
                lines += self._clear_dependency(task)
            return "\n".join(lines)

    def _clear_dependency(self, finished: Task) -> list:
        """Remove a finished task from every blockedBy; say which tasks can start now.
        Only inside update(), under the board's lock: nobody changes a blocker meanwhile."""
        tasks, _ = self.store.scan()
        freed = []
        for waiting in [t for t in tasks.values() if finished["id"] in t["blockedBy"]]:
            task = self.store.try_load(waiting["id"])  # read again: never write over a hand edit
            if task and finished["id"] in task["blockedBy"]:
                task["blockedBy"] = [b for b in task["blockedBy"] if b != finished["id"]]
                self.store.write(task)
                tasks[task["id"]] = task
                freed.append(task)
        if finished["status"] == "deleted":    # the work was never done: say so, not "Unblocked"
            wait = "waits" if len(freed) == 1 else "wait"
            return [f"{names(freed)} no longer {wait} for #{finished['id']} (it was deleted, "
                    "not done)"] if freed else []
        if freed:   # remembered, so that reopening the task can say who stopped waiting for it
            self.store.write({**finished, "unblocked": [t["id"] for t in freed]})
        ready = [t for t in freed if t["status"] not in FINISHED and not waiting_on(t, tasks)]
        return ["Unblocked: " + names(ready)] if ready else []

    def list_all(self, brief: bool = False) -> str:
        """The board as text: every live task, problems, an order, and what can start now (last).
        brief (after a compaction): the first BOARD_IN_SUMMARY unfinished tasks, no order."""
        tasks, problems = self.store.scan(validate=True)
        live = [t for t in tasks.values() if t["status"] != "deleted"]
        unfinished = [t for t in live if t["status"] not in FINISHED]
        shown = unfinished[:BOARD_IN_SUMMARY] if brief else live
        lines = [render(t, tasks) for t in shown] + [f"! {p}" for p in problems]
        if brief:                              # the counts first; what was left out, after
            lines.insert(0, f"({len(unfinished)} unfinished, {len(live) - len(unfinished)} done)")
            if len(unfinished) > len(shown):
                lines.append(f"... and {len(unfinished) - len(shown)} more unfinished tasks: "
                             "task_list shows all")
        if not live and problems:              # not "No tasks yet": a model would plan it all again
            return "\n".join(lines + [none_readable(len(problems))])
        if any(t["blockedBy"] for t in unfinished) and not brief:  # an order helps with blockers
            lines.append(self.order(tasks))
        return "\n".join(lines + [self.ready(tasks)])

    def ready(self, tasks: dict = None) -> str:
        """What can start now: pending, and every blocker finished."""
        tasks = tasks if tasks is not None else self.store.scan(validate=True)[0]
        unfinished = [t for t in tasks.values() if t["status"] not in FINISHED]
        ready = [t for t in unfinished if t["status"] == "pending" and not waiting_on(t, tasks)]
        if not any(t["status"] != "deleted" for t in tasks.values()):
            return "No tasks yet."
        return "Ready to start: " + (names(ready) if ready else "none (all done)" if not unfinished
                                     else "none (the rest are in progress or blocked)")

    def get(self, task_id: object) -> str:
        task_id = parse_task_id(task_id)
        task = self.store.load(task_id)
        tasks, _ = self.store.scan(validate=True)
        blocks = [t["id"] for t in tasks.values()
                  if task_id in t["blockedBy"] and t["status"] != "deleted"]
        return json.dumps({**task, "blocks": blocks}, indent=2, ensure_ascii=False)

    def order(self, tasks: dict = None) -> str:
        """An order for the unfinished tasks: blockers first, then by id (a topological sort)."""
        tasks = tasks if tasks is not None else self.store.scan(validate=True)[0]
        todo = {i: t for i, t in tasks.items() if t["status"] not in FINISHED}
        if not todo:
            return "Order: nothing left to do."
        order, stuck = topological_order(todo, tasks)
        line = "Order: " + (" → ".join(f"#{i}" for i in order) or "nothing can start")
        left = sorted(set(todo) - set(order))
        why = ("waiting for tasks that cannot be read" if stuck else  # else only a cycle stops them
               "waiting for each other in a cycle (hand-edited files?): removeBlockedBy on one "
               "breaks it")
        return line + (f" (then {', '.join(f'#{i}' for i in left)}: {why})" if left else "")

    # ------------------------------------------------------------ the rules update() checks

    def _check_update(self, task: Task, status, add, remove, owner, force: bool) -> tuple:
        """The new field values, or ValueError; reads the board but writes nothing."""
        check_update(status, add, remove, owner)   # the arguments' types and values
        tid, current = task["id"], task["status"]
        if current == "deleted":
            raise ValueError(f"task #{tid} was deleted; create a new task instead")
        if add and (status or current) in FINISHED:
            raise ValueError(f"#{tid} is {status or current}; set it back to pending before "
                             "giving it blockers")
        change, notes = self._claim(task, status, owner, force)
        blocked, notes = self._check_new_blockers(tid, task["blockedBy"], add or [], notes)
        for dep in ids(remove or []):          # a missing or unreadable blocker can be removed
            if dep not in blocked:
                raise ValueError(f"#{tid} is not blocked by #{dep}")
            blocked.remove(dep)
        waiting = [b for b in blocked if self.store.status_of(b) not in FINISHED]
        if status in ("in_progress", "completed") and waiting:
            raise ValueError(f"#{tid} is blocked by {self._describe(waiting)}; finish those first "
                             f"(or removeBlockedBy)")
        return {**change, "blockedBy": blocked}, notes

    def _claim(self, task: Task, status, owner, force: bool) -> tuple:
        """(the status and owner to set, notes). An agent starts a task only in its own name and
        never changes a task another agent has in progress; a person can take one over (force)."""
        holder, tid, notes = task.get("owner"), task["id"], []
        if status == "in_progress" and owner and owner != self.agent and not force:
            raise ValueError(f"you are {self.agent}: start #{tid} in your own name (leave owner "
                             "out), or let that agent start it")
        if task["status"] == "in_progress" and holder and holder != self.agent:
            if not force:
                raise ValueError(f"#{tid} is in progress by {holder}; pick another task, or ask "
                                 f"{holder} (a person can take it over with /task start {tid})")
            notes.append(f"took #{tid} over from {holder}")
        change = {"status": status} if status else {}
        if owner is not None:
            change["owner"] = owner or None
        elif status == "pending":
            change["owner"] = None             # back to pending releases it
        elif status == "in_progress" or (status and task["status"] == "in_progress"):
            change["owner"] = self.agent       # starting (or taking over) claims it
        return change, notes

    def _check_new_blockers(self, tid, blocked: list, add: list, notes: list = None) -> tuple:
        """blocked + add, checked: each blocker exists, is live, is not tid, and closes no cycle."""
        blocked, notes = list(blocked), list(notes or [])
        for dep in ids(add):
            other = self.store.load(dep)
            if other["status"] == "deleted":
                raise ValueError(f"task #{dep} was deleted")
            if dep == tid:
                raise ValueError(f"task #{tid} cannot block itself")
            if other["status"] in FINISHED:
                what = f"#{tid}" if tid is not None else "the new task"
                notes.append(f"#{dep} is already {other['status']}, so it does not block {what}")
            elif dep not in blocked:     # a new task (tid None) has no dependents: no cycle
                board = self.store.scan(validate=True)[0] if tid is not None else {}  # hand edits
                if tid is not None and (cycle := find_cycle(board.get, tid, dep)):
                    raise ValueError(f"that would make a cycle: #{' → #'.join(map(str, cycle))}")
                blocked.append(dep)
        return blocked, notes

    def _describe(self, task_ids: list) -> str:
        return ", ".join(f"#{i} {one_line(t['subject'])}" if (t := self.store.try_load(i)) else
                         f"#{i} (missing or unreadable)" for i in task_ids)


def waiting_on(task: Task, tasks: dict) -> list:
    """The blockers of task that are not finished (a missing one counts as unfinished)."""
    return [b for b in task["blockedBy"] if tasks.get(b, {}).get("status") not in FINISHED]


def render(task: Task, tasks: dict = None) -> str:
    """One line of the board; with the board, only the blockers still unfinished are named."""
    return render_line(task, waiting_on(task, tasks) if tasks is not None else task["blockedBy"])


# ---------------------------------------------------------------- the tools and the loop

_ID = {"description": "a task id: 3 or \"#3\""}
TASK_TOOLS = [
    {"name": "task_create", "description": "Add a task to the persistent board; it starts pending. "
     "Use the board for work of several steps, with an order between them, or that must outlast "
     "this conversation (compaction, restarts). A single quick step needs no task: just do it.",
     "input_schema": object_schema({
         "subject": {"type": "string", "description": "a short imperative title"},
         "description": {"type": "string", "description": "details, optional"},
         "blockedBy": {"type": "array", "items": _ID, "description": "must finish first"}},
         ["subject"])},
    {"name": "task_update", "description": "Change a task: its status, blockers or owner. A task "
     "cannot start or complete while a blocker is unfinished. Starting a task claims it for you; a "
     "task in progress by another agent is theirs. Completing it unblocks its dependents.",
     "input_schema": object_schema({
         "task_id": _ID,
         "status": {"type": "string", "enum": list(STATUSES), "description": "deleted hides it"},
         "addBlockedBy": {"type": "array", "items": _ID, "description": "must finish first"},
         "removeBlockedBy": {"type": "array", "items": _ID, "description": "blockers to drop"},
         "owner": {"type": "string", "description": "who works on it; '' clears it"}},
         ["task_id"])},
    {"name": "task_list", "description": "The board: every live task with its status, owner and "
     "blockers, which tasks can start now, and an order to do them in.",
     "input_schema": object_schema({}, [])},
    {"name": "task_get", "description": "One task in full, with the tasks it blocks.",
     "input_schema": object_schema({"task_id": _ID}, ["task_id"])},
]

TOOLS = BASE_TOOLS + [COMPACT_TOOL] + TASK_TOOLS
TOOL_HANDLERS = {  # lambdas: choose_board() rebinds TASKS; they also map blockedBy etc.
    **S06_HANDLERS,
    "task_create": lambda subject, description="", blockedBy=None:
        TASKS.create(subject, description, blockedBy),
    "task_update": lambda task_id, status=None, addBlockedBy=None, removeBlockedBy=None, owner=None:
        TASKS.update(task_id, status, addBlockedBy, removeBlockedBy, owner),
    "task_list": lambda: TASKS.list_all(),
    "task_get": lambda task_id: TASKS.get(task_id),
}

SYSTEM = ("You are a coding agent working in the current folder. Plan multi-step work on the task "
          "board (task_* tools): it lives outside the conversation and survives compaction and "
          "restarts; other agents may share it. Give tasks an order with blockedBy, mark a task "
          "in_progress when you start it (that claims it) and completed when done. When the "
          "context gets long, call compact. Be brief.")


def board_message() -> str:
    """The board for the model after a compaction: fresh from the store, bounded."""
    try:
        board = TASKS.list_all()
        if len(board) > BOARD_CHARS or board.count("\n") > BOARD_IN_SUMMARY + 1:
            board = fit(TASKS.list_all(brief=True), BOARD_CHARS)  # a big board: unfinished first
    except ValueError as exc:   # say so: an unreadable board must not look like an empty one
        board = f"The task board could not be read: {exc}"
    return f"<task-board>\nThe task board ({TASKS.store.name}), just read:\n{board}\n</task-board>"


def compact_with_board(messages: list, client, focus: str = "") -> bool:
    """s06's compaction, then the board, read fresh: the model carries on without asking for it."""
    if auto_compact(messages, client, focus, attach=board_message, system=SYSTEM, tools=TOOLS):
        show_note(f"  [the board, read from {TASKS.store.name}, was added to the summary]")
        return True
    return False


def agent_loop(messages: list, client) -> str:
    """s06's loop plus the task tools; after any compaction the board comes back from the store."""
    steps = 0
    while steps < max_steps(MAX_STEPS):                  # --max-steps, or MAX_STEPS
        steps += 1
        session_log.record(messages)                     # saved as it goes: --continue
        compact_if_needed(messages, client, compact_with_board)                   # layer 2 + board
        view = micro_compact(messages)                                            # layer 1
        response = show_stream(client.messages.stream(model=model_id(), system=SYSTEM, tools=TOOLS,
                                                      messages=view, max_tokens=MAX_TOKENS,
                                                      cache_control=CACHE))
        show_usage(response.usage, tools=TOOLS)   # warns once if the endpoint dropped the tools
        messages.append(assistant_turn(response, note=show_note))
        CONTEXT.record(response.usage, messages)                                  # layer 2 measures
        if response.stop_reason == "pause_turn":  # the server paused a long turn: resume it
            continue
        calls = complete_tool_calls(response)     # a call cut off by max_tokens is not run
        if not calls:
            return final_text(response)
        show_reply(response)
        results = run_tool_calls(calls, TOOLS, TOOL_HANDLERS) + cut_note(response)
        messages.append({"role": "user", "content": results})
        compact_if_asked(calls, messages, client, compact_with_board)             # layer 3 + board
    return step_limit(steps)    # not a finished turn: the CLI says how to go on


# ---------------------------------------------------------------- the REPL, the demo and main

TASKS = TaskManager(TASKS_DIR)  # the board the tools use; touches no file until the first call


def choose_board(args) -> str:
    """--board or TASK_BOARD: which board; --name or AGENT_NAME: who we are (each run anew)."""
    global TASKS
    name = agent_name(args.name or os.environ.get("AGENT_NAME") or "")
    TASKS = TaskManager(args.board or os.environ.get("TASK_BOARD") or TASKS_DIR, agent=name)
    RECORD.watch_board(lambda: TASKS.store.scan()[0])   # the session page draws it
    return f"agent {TASKS.agent}"


def main(argv: list = None) -> int:
    commands = {"/tasks": lambda *_: task_commands.run(TASKS, ""),
                "/task": lambda messages, client, arg: task_commands.run(TASKS, arg),
                "/compact": partial(compact_now, compact=compact_with_board),
                "/context": partial(context_command, SYSTEM, TOOLS, micro_compact, compact_threshold,
                                    CONTEXT)}
    demo = lambda: demos.s07_demo(compact_threshold(), TASKS)  # late: TASKS rebinds  # noqa: E731
    return run_cli("s07_task_system", __doc__, agent_loop, demo=demo, argv=argv, commands=commands,
                   help_extra=task_commands.HELP, on_start=choose_board,
                   options=task_commands.OPTIONS, before_prompt=task_commands.live(lambda: TASKS))


if __name__ == "__main__":
    sys.exit(main())
