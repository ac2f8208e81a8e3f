#!/usr/bin/env python3
"""s07: a persistent task graph on disk that survives compaction and restarts.

s03's todos live in memory: a compaction (s06) hides them, an exit destroys
them, and they have no order. s07 moves the plan onto disk, as a graph.

    .tasks/task_1.json  {"id": 1, "subject": "Design the data model", "status": "completed", "blockedBy": []}
    .tasks/task_2.json  {"id": 2, "subject": "Implement the API",     "status": "pending",   "blockedBy": []}
    .tasks/task_4.json  {"id": 4, "subject": "Write the API tests",   "status": "pending",   "blockedBy": [2]}

        #1 Design the data model --+--> #2 Implement the API --> #4 Write the API tests
                                   +--> #3 Write the docs
        completing #1 runs _clear_dependency: #2 and #3 become ready

    model --task_create/update/list/get--> TaskManager --> .tasks/ (one file per task)
    compaction (s06) --> new first message = summary + the board, read fresh from disk

Key insight: state that must outlive the conversation belongs outside it.
The model reads the board back whenever it needs it; compaction and restarts
cannot lose what was never only in the context.

Read it in this order: THE IDEA (TaskManager: ids, create, update,
_clear_dependency, the board), THE TOOLS AND THE LOOP, then THE HARDENING
(locks, atomic writes, validation, caching) that lets several agents share one board.

New since s06: TaskManager, the task_* tools, the board re-attached after
every compaction, agent names and claims, /tasks and /task in the REPL.

Run it:   python s07_task_system.py "plan a refactor: design the data model, then the API and the docs, tests after the API"
          python s07_task_system.py --name alice     (a REPL: /tasks, /task help, /compact)
          python s07_task_system.py --demo
"""

import heapq
import json
import os
import re
import sys
import unicodedata
from functools import partial
from pathlib import Path

from harness.cli import run_cli
from harness.config import SetupError, model_id
from harness.task_record import FINISHED, STATUSES, check_text, ids, new_task, one_line, open_store, parse_task_id
from harness.terminal import show_note, show_stream, show_usage
from s03_todo import (BASE_HANDLERS, BASE_TOOLS, CACHE, MAX_STEPS, MAX_TOKENS, STEP_LIMIT_TEXT, assistant_turn,
                      final_text, object_schema, run_tool_calls, tool_calls)
from s06_compact import (CONTEXT, COMPACT_TOOL, auto_compact, compact_now, compact_request, compact_threshold,
                         micro_compact, needs_compaction, run_compact)

TASKS_DIR = Path(".tasks")    # relative: the board belongs to the folder you run in
DEMO_MIN_THRESHOLD = 5_000   # below this the demo would compact before it has linked its tasks
BOARD_IN_SUMMARY = 40         # unfinished tasks re-attached after a compaction; task_list shows the rest


# ================================================================ THE IDEA: a task graph in files

class TaskManager:
    """The board: one JSON file per task, .tasks/task_<id>.json, and nothing else.

    The files are the only truth. Every call reads what it needs from disk, so a
    second agent on the same board, or a person with an editor, is always seen.
    """

    def __init__(self, tasks_dir, agent=None):
        self.files = open_store(tasks_dir)     # a folder or a postgresql:// URL: see harness/
        self.agent = agent or default_agent_name()  # who this process is: the owner of what it starts
        self._last_id, self._scanned = None, None

    @property
    def dir(self):
        return self.files.dir

    def next_id(self):
        """The largest id on disk plus one ("max-scan"); ids are never reused.

        Scanning every file name costs O(n), so it runs once per process (per folder);
        after it ids count up. If another process took the id meanwhile, create() tries the next.
        """
        if self._scanned != self.files.board:  # which board: a relative folder follows the cwd
            self._last_id, self._scanned = self.files.largest_id(), self.files.board
        self._last_id += 1
        return self._last_id

    def create(self, subject, description="", blocked_by=None):
        subject, description = check_text(subject, "subject"), check_text(description, "description", empty=True)
        with self.files.locked():
            blocked, notes = self._check_new_blockers(None, [], blocked_by or [])
            while True:
                task = new_task(self.next_id(), subject, description, blocked)
                if self.files.claim(task):     # False: another process took this id first
                    waits = f" (blocked by {', '.join(f'#{b}' for b in blocked)})" if blocked else ""
                    return "\n".join([f"Created task #{task['id']}: {one_line(subject)}{waits}", *notes])

    def update(self, task_id, status=None, add_blocked_by=None, remove_blocked_by=None, owner=None, force=False):
        """load → check → apply → write → _clear_dependency. A refused call changes nothing.

        force=True is a person taking a task over on purpose (/task start, /task done).
        """
        task_id = parse_task_id(task_id)
        with self.files.locked():              # one writer at a time, across processes
            task = self.files.load(task_id)
            change, notes = self._check_update(task, status, add_blocked_by, remove_blocked_by, owner, force)
            before = task["status"]
            task.update(change)                # every check passed: only now does anything change
            if before in FINISHED and task["status"] not in FINISHED:
                notes += reopen_notes(task, task.pop("unblocked", []))
            self.files.write(task)
            lines = [f"Updated {render_line(task)}", *notes]
            if task["status"] in FINISHED and before not in FINISHED:
                lines += self._clear_dependency(task)
            return "\n".join(lines)

    def _clear_dependency(self, finished):
        """Remove a finished task from every blockedBy; say which tasks can start now.

        Runs only inside update(), which holds the board's lock, so no other agent can
        add or clear a blocker between our read and our write.
        """
        tasks, _ = self.files.scan()
        freed, ready = [], []
        for listed in tasks.values():
            task = self.files.try_load(listed["id"]) if finished["id"] in listed["blockedBy"] else None
            if task and finished["id"] in task["blockedBy"]:  # read again: never write over a hand edit
                task = {**task, "blockedBy": [b for b in task["blockedBy"] if b != finished["id"]]}
                self.files.write(task)
                tasks[task["id"]] = task
                freed.append(task)
        ready = [t for t in freed if t["status"] not in FINISHED and not waiting_on(t, tasks)]
        if finished["status"] == "deleted":    # the work was never done: say so, not "Unblocked"
            return [f"{names(freed)} no longer wait{'s' * (len(freed) == 1)} for #{finished['id']} "
                    "(it was deleted, not done)"] if freed else []
        if freed:   # remembered, so that reopening the task can say who stopped waiting for it
            self.files.write({**finished, "unblocked": [t["id"] for t in freed]})
        return ["Unblocked: " + names(ready)] if ready else []

    def list_all(self):
        """The board as text: every live task, problems, an order, and what can start now (last)."""
        tasks, problems = self.files.scan(validate=True)
        live = [t for t in tasks.values() if t["status"] != "deleted"]
        lines = [render_line(t, tasks) for t in live] + [f"! {p}" for p in problems]
        if not live and problems:               # "No tasks yet" would make a model plan the work again
            n = len(problems)
            return "\n".join(lines + [f"No readable tasks: {n} file{'s' * (n != 1)} above could not be used; "
                                      f"fix or remove {'them' if n != 1 else 'it'}, then list again"])
        if not live:
            return "\n".join(lines + ["No tasks yet."])
        ready = [t for t in live if t["status"] == "pending" and not waiting_on(t, tasks)]
        unfinished = [t for t in live if t["status"] not in FINISHED]
        if any(t["blockedBy"] for t in unfinished):  # an order helps only when there are dependencies
            lines.append(self.order(tasks))
        lines.append("Ready to start: " + (names(ready) if ready else "none (all done)" if not unfinished
                                            else "none (the rest are in progress or blocked)"))
        return "\n".join(lines)

    def get(self, task_id):
        task_id = parse_task_id(task_id)
        task = self.files.load(task_id)
        tasks, _ = self.files.scan(validate=True)
        blocks = [t["id"] for t in tasks.values() if task_id in t["blockedBy"] and t["status"] != "deleted"]
        return json.dumps({**task, "blocks": blocks}, indent=2, ensure_ascii=False)

    def order(self, tasks=None):
        """An execution order of the unfinished tasks: blockers first, then by id (a topological sort)."""
        tasks = tasks if tasks is not None else self.files.scan(validate=True)[0]
        todo = {i: t for i, t in tasks.items() if t["status"] not in FINISHED}
        if not todo:
            return "Order: nothing left to do."
        waits, stuck, dependents = {}, set(), {}   # dependents: i -> the tasks waiting for i (edges reversed)
        for j, t in todo.items():
            waits[j] = blockers = {b for b in t["blockedBy"] if b in todo}
            if len(blockers) < len(t["blockedBy"]) and any(b not in tasks for b in t["blockedBy"]):
                stuck.add(j)                   # it waits for a task that cannot be read
            for i in blockers:
                dependents.setdefault(i, []).append(j)
        free = [i for i in todo if not waits[i] and i not in stuck]
        heapq.heapify(free)
        order = []
        while free:                            # Kahn's algorithm; the heap keeps ties in id order
            i = heapq.heappop(free)
            order.append(i)
            for j in dependents.get(i, []):
                waits[j].discard(i)
                if not waits[j] and j not in stuck:
                    heapq.heappush(free, j)
        line = "Order: " + (" → ".join(f"#{i}" for i in order) or "nothing can start")
        left = sorted(set(todo) - set(order))
        if not left:
            return line
        why = ("waiting for tasks that cannot be read" if stuck else  # else only a cycle stops them
               "waiting for each other in a cycle (hand-edited files?): removeBlockedBy on one breaks it")
        return line + f" (then {', '.join(f'#{i}' for i in left)}: {why})"

    # ------------------------------------------------------------ the rules update() checks

    def _check_update(self, task, status, add, remove, owner, force):
        """The new field values, or ValueError; reads the board but writes nothing."""
        if status is None and add is None and remove is None and owner is None:
            raise ValueError("nothing to update: give status, addBlockedBy, removeBlockedBy or owner")
        if status is not None and status not in STATUSES:
            raise ValueError(f"status {status!r} is not one of {', '.join(STATUSES)}")
        if owner is not None and not isinstance(owner, str):
            raise ValueError("owner must be a string ('' clears it)")
        tid, current = task["id"], task["status"]
        if current == "deleted":
            raise ValueError(f"task #{tid} was deleted; create a new task instead")
        if add and (status or current) in FINISHED:
            raise ValueError(f"#{tid} is {status or current}; set it back to pending before giving it blockers")
        blocked, notes = self._check_new_blockers(tid, task["blockedBy"], add or [])
        for dep in ids(remove or []):          # a missing or unreadable blocker can always be removed
            if dep not in blocked:
                raise ValueError(f"#{tid} is not blocked by #{dep}")
            blocked.remove(dep)
        change = {"blockedBy": blocked}
        if status in ("in_progress", "completed"):
            waiting = [b for b in blocked if self.files.status_of(b) not in FINISHED]
            if waiting:
                raise ValueError(f"#{tid} is blocked by {self._describe(waiting)}; finish those first "
                                 f"(or removeBlockedBy)")
        change.update(self._check_claim(task, status, owner, force, notes))
        return change, notes

    def _check_claim(self, task, status, owner, force, notes):
        """Who holds a task. Starting one that another agent has, or finishing theirs, is refused."""
        holder, tid, change = task.get("owner"), task["id"], {}
        if status is not None:
            change["status"] = status
        if owner is not None:
            change["owner"] = owner or None
        held = task["status"] == "in_progress" and holder
        taking = status == "in_progress" and holder != (owner or self.agent)     # start it as someone else
        leaving = status in ("completed", "pending", "deleted") and holder != self.agent  # finish or drop theirs
        renaming = owner is not None and (owner or None) != holder and holder != self.agent  # hand it on
        if held and (taking or leaving or renaming):
            if not force:
                raise ValueError(f"#{tid} is in progress by {holder}; pick another task, or ask {holder} "
                                 f"(a person can take it over with /task start {tid})")
            notes.append(f"took #{tid} over from {holder}")
            if owner is None:
                change["owner"] = self.agent   # the record says who took it
        if status == "in_progress" and owner is None:
            change["owner"] = self.agent       # starting a task claims it
        if status == "pending" and owner is None:
            change["owner"] = None             # back to pending releases it
        return change

    def _check_new_blockers(self, tid, blocked, add):
        """blocked + add, checked: each blocker exists, is live, is not tid, and closes no cycle."""
        blocked, notes = list(blocked), []
        for dep in ids(add):
            other = self.files.load(dep)
            if other["status"] == "deleted":
                raise ValueError(f"task #{dep} was deleted")
            if dep == tid:
                raise ValueError(f"task #{tid} cannot block itself")
            if other["status"] in FINISHED:
                notes.append(f"#{dep} is already {other['status']}, so it does not block #{tid or 'the new task'}")
            elif dep not in blocked:
                if tid is not None:            # a new task has no dependents yet, so no cycle is possible
                    cycle = find_cycle(self.files.scan()[0], tid, dep)
                    if cycle:
                        raise ValueError("that would make a cycle: " + " → ".join(f"#{i}" for i in cycle))
                blocked.append(dep)
        return blocked, notes

    def _describe(self, task_ids):
        return ", ".join(f"#{i} {one_line(t['subject'])}" if (t := self.files.try_load(i)) else
                         f"#{i} (missing or unreadable)" for i in task_ids)


def reopen_notes(task, unblocked):
    """Reopening a finished task does not re-block what it freed: say so, and how to."""
    if not unblocked:
        return []
    freed = ", ".join(f"#{i}" for i in unblocked)
    return [f"Reopened #{task['id']}: {freed} stopped waiting for it when it finished and do not wait again; "
            f"to make one wait, task_update it with addBlockedBy [{task['id']}]"]


def waiting_on(task, tasks):
    """The blockers of task that are not finished (a missing one counts as unfinished)."""
    return [b for b in task["blockedBy"] if tasks.get(b, {}).get("status") not in FINISHED]


def names(tasks):
    return ", ".join(f"#{t['id']} {one_line(t['subject'])}" for t in tasks)


def render_line(task, tasks=None):
    line = f"{STATUSES[task['status']]} #{task['id']}: {one_line(task['subject'])}"
    if task.get("owner"):
        line += f" (owner: {one_line(task['owner'])})"
    waiting = waiting_on(task, tasks) if tasks is not None else task["blockedBy"]
    return line + (f" blocked by {', '.join(f'#{b}' for b in waiting)}" if waiting else "")


def default_agent_name():
    """Differs between two processes, stays the same across restarts in one terminal."""
    try:
        where = Path(os.ttyname(0)).name       # e.g. pts3
    except OSError:
        where = str(os.getpid())               # not a terminal: one name per process
    return f"{os.environ.get('USER') or 'agent'}-{where}"


# ================================================================ THE TOOLS AND THE LOOP

_ID = {"description": "a task id: 3 or \"#3\""}
TASK_TOOLS = [
    {"name": "task_create", "description": "Add a task to the persistent board in .tasks/; it starts pending. "
     "Use the board for work of several steps, with an order between them, or that must outlast this "
     "conversation (compaction, restarts). A single quick step needs no task: just do it.",
     "input_schema": object_schema({"subject": {"type": "string", "description": "a short imperative title"},
                                    "description": {"type": "string", "description": "details, optional"},
                                    "blockedBy": {"type": "array", "items": _ID,
                                                  "description": "tasks that must finish first"}},
                                   ["subject"])},
    {"name": "task_update", "description": "Change a task: its status, its blockers or its owner. A task "
     "cannot start or complete while a blocker is unfinished. Starting a task claims it for you; a task in "
     "progress by another agent cannot be started or completed by you. Completing it unblocks its dependents.",
     "input_schema": object_schema({
         "task_id": _ID,
         "status": {"type": "string", "enum": list(STATUSES), "description": "deleted hides it for good"},
         "addBlockedBy": {"type": "array", "items": _ID, "description": "tasks that must finish first"},
         "removeBlockedBy": {"type": "array", "items": _ID, "description": "blockers to drop"},
         "owner": {"type": "string", "description": "who works on it; '' clears it"}}, ["task_id"])},
    {"name": "task_list", "description": "The board: every live task with its status, owner and blockers, "
     "which tasks can start now, and an order to do them in.", "input_schema": object_schema({}, [])},
    {"name": "task_get", "description": "One task in full, with the tasks it blocks.",
     "input_schema": object_schema({"task_id": _ID}, ["task_id"])},
]

TOOLS = BASE_TOOLS + [COMPACT_TOOL] + TASK_TOOLS
TOOL_HANDLERS = {  # the lambdas map the model's argument names onto TaskManager's
    **BASE_HANDLERS,
    "compact": run_compact,
    "task_create": lambda subject, description="", blockedBy=None: TASKS.create(subject, description, blockedBy),
    "task_update": lambda task_id, status=None, addBlockedBy=None, removeBlockedBy=None, owner=None:
        TASKS.update(task_id, status, addBlockedBy, removeBlockedBy, owner),
    "task_list": lambda: TASKS.list_all(),
    "task_get": lambda task_id: TASKS.get(task_id),
}

SYSTEM = ("You are a coding agent working in the current folder. Plan multi-step work on the task board "
          "(task_* tools): it lives on disk in .tasks/ and survives compaction and restarts; other agents "
          "may share it. Give tasks an order with blockedBy, mark a task in_progress when you start it "
          "(that claims it) and completed when done. When the context gets long, call compact. Be brief.")


def board_message():
    """The board for the model after a compaction: the unfinished tasks, bounded, fresh from disk."""
    try:
        tasks, problems = TASKS.files.scan(validate=True)
    except ValueError as exc:   # say so: an unreadable board must not look like an empty one
        return f"<task-board>\nThe task board could not be read: {exc}\n</task-board>"
    open_ = [t for t in tasks.values() if t["status"] not in FINISHED]
    if len(tasks) <= BOARD_IN_SUMMARY:  # a small board goes whole, exactly as task_list shows it
        return f"<task-board>\nThe task board in .tasks/, read from disk just now:\n{TASKS.list_all()}\n</task-board>"
    lines = [render_line(t, tasks) for t in open_[:BOARD_IN_SUMMARY]]
    done = sum(t["status"] == "completed" for t in tasks.values())
    if len(open_) > BOARD_IN_SUMMARY:
        lines.append(f"... and {len(open_) - BOARD_IN_SUMMARY} more unfinished tasks: task_list shows all")
    lines += [f"! {p}" for p in problems[:5]]
    summary = f"{len(open_)} unfinished, {done} completed" if tasks else "No tasks yet."
    return ("<task-board>\nThe task board in .tasks/, read from disk just now "
            f"({summary}):\n" + "\n".join(lines) + "\n</task-board>")


def compact_with_board(messages, client, focus=""):
    """s06's compaction, then the board, read fresh from disk: the model carries on without asking for it."""
    if auto_compact(messages, client, focus, attach=board_message, system=SYSTEM, tools=TOOLS):
        show_note("  [the board, read from .tasks/, was added to the summary]")


def agent_loop(messages, client):
    """s06's loop with the task tools; after any compaction the board comes back from disk."""
    steps = 0
    while steps < MAX_STEPS:
        steps += 1
        if needs_compaction(messages):                                                # layer 2
            compact_with_board(messages, client)                  # the board comes back after compaction
        response = show_stream(client.messages.stream(model=model_id(), system=SYSTEM, tools=TOOLS,
                                                      messages=micro_compact(messages),               # layer 1
                                                      max_tokens=MAX_TOKENS, cache_control=CACHE))
        show_usage(response.usage, tools=TOOLS)   # warns once if the endpoint dropped the tools
        messages.append(assistant_turn(response))
        CONTEXT.record(response.usage, messages)
        if response.stop_reason == "pause_turn":  # the server paused a long turn: resume it
            continue
        calls = tool_calls(response)
        if not calls:
            return final_text(response)
        # A TaskManager refusal is a ValueError; run_tool_calls turns it into an is_error tool_result.
        messages.append({"role": "user", "content": run_tool_calls(response, TOOLS, TOOL_HANDLERS)})
        focus = compact_request(response.content)
        if focus is not None:                                                         # layer 3
            compact_with_board(messages, client, focus)
    return STEP_LIMIT_TEXT


def find_cycle(tasks, tid, dep):
    """If dep already waits (through blockers) for tid, the path tid → dep → … → tid; else None.

    Without this check two tasks could wait for each other and neither could ever start.
    """
    came_from, stack = {dep: None}, [dep]   # each node once, and how we got there: O(n), not O(n²)
    while stack:
        node = stack.pop()
        for b in tasks.get(node, {}).get("blockedBy", []):
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


# ================================================================ the REPL, the demo and main

TASKS = TaskManager(TASKS_DIR)  # the board the tools use; touches no file until the first call (made here,
                                # after TaskFiles exists; the tool handlers look it up when called)


def show_board(messages, client, arg=""):
    """/tasks: the board from disk, no model call."""
    print(TASKS.list_all())


TASK_COMMANDS = """/task commands (no model call; the same rules as the model's tools):
  /task                 the board (same as /tasks)      /task add TITLE       a new task
  /task show N          one task in full                /task start N         start it (takes it over if needed)
  /task done N          complete it                     /task delete N        delete it
  /task block N BY...   N waits for BY                  /task unblock N BY... N no longer waits for BY
  /task ready           what can start now              /task order           an order to do them in"""


def task_command(messages, client, arg=""):
    """/task ...: a person works the board through the same TaskManager and its rules."""
    words = arg.split()
    verb, rest = (words[0].lower(), words[1:]) if words else ("list", [])
    need = {"show": 1, "start": 1, "done": 1, "delete": 1, "block": 2, "unblock": 2}
    if verb in need and len(rest) < need[verb]:
        raise ValueError(f"/task {verb} needs {'a task id' if need[verb] == 1 else 'a task id and its blockers'}"
                         f"; /task help lists the commands")
    actions = {
        "list": TASKS.list_all, "help": lambda: TASK_COMMANDS,
        "add": lambda: TASKS.create(" ".join(rest)) if rest else _fail("/task add needs a title"),
        "show": lambda: TASKS.get(rest[0]),
        "start": lambda: TASKS.update(rest[0], status="in_progress", force=True),
        "done": lambda: TASKS.update(rest[0], status="completed", force=True),
        "delete": lambda: TASKS.update(rest[0], status="deleted", force=True),
        "block": lambda: TASKS.update(rest[0], add_blocked_by=rest[1:]),
        "unblock": lambda: TASKS.update(rest[0], remove_blocked_by=rest[1:]),
        "ready": lambda: next(line for line in TASKS.list_all().splitlines() + ["No tasks yet."]
                              if line.startswith(("Ready to start: ", "No tasks yet."))),
        "order": TASKS.order,
    }
    if verb not in actions:
        raise ValueError(f"unknown /task command {verb!r}; /task help lists them")
    print(actions[verb]())


def _fail(message):
    raise ValueError(message)


def choose_board(args) -> str:
    """--board or TASK_BOARD: which board (a folder, or a postgresql:// URL); --name or AGENT_NAME: who
    this process is on it. Each run decides afresh, even a second main() in one process."""
    global TASKS
    name = unicodedata.normalize("NFKC", args.name or os.environ.get("AGENT_NAME") or "").strip()
    if name and not re.fullmatch(r"[\w.@-]{1,40}", name):
        raise SetupError(f"an agent name is 1-40 letters, digits or . _ @ -; got {name!r}")
    TASKS = TaskManager(args.board or os.environ.get("TASK_BOARD") or TASKS_DIR, agent=name or None)
    return f"agent {TASKS.agent}"


def demo():
    """Plan four tasks, be refused, compact, see the board come back, complete and unblock."""
    from harness.stand_in_api import reply, text, tool
    if TASKS_DIR.exists() and not TASKS_DIR.is_dir():
        raise SetupError(f"the demo needs a folder {TASKS_DIR}/ here, and a file of that name is in the way")
    if compact_threshold() < DEMO_MIN_THRESHOLD:  # the script reads its task ids from the recent messages
        raise SetupError(f"the demo needs COMPACT_THRESHOLD of at least {DEMO_MIN_THRESHOLD:,} tokens "
                         f"(it is {compact_threshold():,}); unset it for the demo")
    TASKS.agent = "demo"
    plan = [("Design the data model", "tables and fields"), ("Implement the API", "endpoints on the model"),
            ("Write the docs", "how to use the API"), ("Write the API tests", "one per endpoint")]
    ids_ = []

    def create_plan(body):
        return reply(text("Planning four tasks."), *[tool("task_create", {"subject": s, "description": d})
                                                      for s, d in plan])

    def link(body):
        ids_.extend(int(n) for n in re.findall(r"Created task #(\d+)", json.dumps(body["messages"][-1])))
        if len(ids_) != 4:
            raise RuntimeError("the demo's tasks were not created; see the tool results above")
        a, b, c, d = ids_
        return reply(text("Now the order: the API and the docs wait for the model; the tests wait for the API."),
                     tool("task_update", {"task_id": b, "addBlockedBy": [a]}),
                     tool("task_update", {"task_id": f"#{c}", "addBlockedBy": [f"#{a}"]}),
                     tool("task_update", {"task_id": str(d), "addBlockedBy": [b]}))

    script = [
        reply(text("First, what is on the board already?"), tool("task_list", {})),
        create_plan, link,
        lambda body: reply(text("Trying to start the API before the data model (this must be refused)."),
                           tool("task_update", {"task_id": ids_[1], "status": "in_progress"})),
        lambda body: reply(text("Refused, as it should be. Starting the data model; the files are on disk:"),
                           tool("task_update", {"task_id": ids_[0], "status": "in_progress"}),
                           tool("bash", {"command": "ls .tasks"})),
        reply(text("Forcing a compaction: the conversation is replaced by a summary."),
              tool("compact", {"focus": "the task board"})),
        reply(text("The board is on disk, so it came back whole:"), tool("task_list", {})),
        lambda body: reply(text("The data model is done."),
                           tool("task_update", {"task_id": ids_[0], "status": "completed"}),
                           tool("bash", {"command": f"cat .tasks/task_{ids_[0]}.json"})),
        reply(text("Done: the data model is complete and the API and the docs are ready to start. "
                   "Run --demo again: the board continues.")),
    ]
    summary = ("Summary: planned four tasks on the board (data model, then API and docs, tests after the "
               "API) and started the data model. Next: finish the data model.")
    return script, "plan a small project on the task board, with dependencies", summary


def main(argv=None):
    compact = partial(compact_now, compact=compact_with_board)
    return run_cli("s07_task_system", __doc__, agent_loop, demo=demo, argv=argv, help_extra=TASK_COMMANDS,
                   commands={"/tasks": show_board, "/task": task_command, "/compact": compact},
                   options=[(("--name",), {"help": "this agent's name on the board (default: AGENT_NAME, "
                                                   "else your user and terminal)"}),
                            (("--board",), {"help": "the board: a folder (default: TASK_BOARD, else .tasks) "
                                                    "or a postgresql:// URL"})],
                   on_start=choose_board)


if __name__ == "__main__":
    sys.exit(main())
