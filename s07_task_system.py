#!/usr/bin/env python3
"""s07: a persistent task graph on disk that survives compaction and restarts.

s03's todos live in memory: a compaction (s06) hides them from the model and
an exit destroys them, and they have no order between them. s07 moves the
plan out of the conversation onto disk, as a dependency graph.

    .tasks/task_1.json  {"id": 1, "subject": "Design data model", "status": "completed", "blockedBy": []}
    .tasks/task_2.json  {"id": 2, "subject": "Implement API",     "status": "pending",   "blockedBy": []}
    .tasks/task_3.json  {"id": 3, "subject": "Write API tests",   "status": "pending",   "blockedBy": [2]}

        #1 Design data model --+--> #2 Implement API --> #3 Write API tests
                               +--> #4 Write docs
        completing #1 runs _clear_dependency(1): #2 and #4 become ready

    model --task_create/update/list/get--> TaskManager --atomic write, under a lock--> .tasks/
    compaction (s06) --> new first message = summary + the board, read fresh from disk

Key insight: state that must outlive the conversation belongs outside it.
The model reads the board back whenever it needs it; compaction and restarts
cannot lose what was never only in the context.

New since s06: TaskManager and the task_* tools; after every compaction the
board is appended to the summary; /tasks prints the board. The loop is s06's,
imported and run with these tools: nothing in it had to change.

Run it:   python s07_task_system.py "plan a refactor: design the data model, then the API and the docs, tests after the API"
          python s07_task_system.py            (a REPL: /tasks, /compact)
          python s07_task_system.py --demo
"""

import fcntl  # POSIX file locks; like the bash tool, this harness expects Linux or macOS
import json
import os
import re
import sys
import threading
from contextlib import contextmanager
from functools import partial
from datetime import datetime, timezone
from pathlib import Path

import s06_compact
from harness import run_cli, show_note
from s03_todo import BASE_HANDLERS, BASE_TOOLS, object_schema
from s06_compact import COMPACT_TOOL, auto_compact, compact_now, run_compact

TASKS_DIR = Path(".tasks")   # relative: the board belongs to the folder you run in
MARKERS = {"pending": "[ ]", "in_progress": "[>]", "completed": "[x]", "deleted": "[-]"}
FINISHED = {"completed", "deleted"}      # statuses that no longer block anyone
TASK_FILE = re.compile(r"task_(\d+)\.json")


def parse_task_id(value):
    """Ids come from a model: accept 3, "3" and "#3"; refuse anything else clearly."""
    number = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and re.fullmatch(r"\s*#?\d+\s*", value, re.ASCII):
        number = int(value.strip().lstrip("#"))
    if number is None or number < 1:
        raise ValueError(f"a task id is a positive number like 3, '3' or '#3'; got {value!r}")
    return number


def _ids(value):
    return [parse_task_id(v) for v in (value if isinstance(value, list) else [value])]


class TaskManager:
    """The board: one JSON file per task. Every change is atomic and made under a folder lock."""

    def __init__(self, tasks_dir):
        self.dir = Path(tasks_dir)
        self._last_id = None             # highest id known; found by one max-scan, then counted up
        self._scanned = None             # the folder that scan was of (the path may be relative)
        self._mutex = threading.RLock()  # the file lock is per process; this orders our own threads
        self._depth, self._lock_file = 0, None

    # ------------------------------------------------------------ files

    def _path(self, task_id):
        return self.dir / f"task_{task_id}.json"

    @contextmanager
    def _locked(self):
        """Hold .tasks/.lock for a read-modify-write. Re-entrant: update() calls _clear_dependency()."""
        with self._mutex:
            if self._depth == 0:
                self.dir.mkdir(parents=True, exist_ok=True)
                self._lock_file = open(self.dir / ".lock", "a")
                fcntl.flock(self._lock_file, fcntl.LOCK_EX)  # waits for other processes
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
                if self._depth == 0:
                    self._lock_file.close()  # closing releases the lock
                    self._lock_file = None

    def _read(self, path):
        """A task from its file, or ValueError naming the file. Never repairs or deletes it."""
        try:
            task = json.loads(path.read_bytes())  # bytes: json decodes UTF-8 itself, a little faster
            ok = (isinstance(task, dict) and task.get("id") == int(TASK_FILE.fullmatch(path.name)[1])
                  and task.get("status") in MARKERS and isinstance(task.get("subject"), str)
                  and isinstance(task.get("blockedBy"), list)
                  and all(isinstance(b, int) for b in task["blockedBy"]))
            if not ok:
                raise ValueError("not a valid task")
        except (OSError, ValueError, TypeError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            raise ValueError(f"{path} is unreadable ({exc}); it was left as it is") from None
        return task

    def _write(self, task, claim=False):
        """Write a whole file, then move it into place: a reader or a kill -9 sees old or new, never half.

        claim=True creates the file only if the id is free (os.link refuses to replace),
        so two processes can never write the same id. Returns False if it was taken.
        """
        # No fsync: a kill -9 cannot tear a file, but a power cut may lose the last writes
        # (a production store would fsync the file and the folder).
        task["updated_at"] = _now()
        tmp = self.dir / f".tmp_{task['id']}_{os.getpid()}_{threading.get_ident()}"  # never task_*.json
        tmp.write_text(json.dumps(task, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        if not claim:
            os.replace(tmp, self._path(task["id"]))
            return True
        try:
            os.link(tmp, self._path(task["id"]))
            return True
        except FileExistsError:
            return False
        finally:
            tmp.unlink()

    def _scan(self):
        """Every task on disk by id, and the files that could not be read."""
        tasks, bad = {}, []
        for path in self.dir.glob("task_*.json"):
            if TASK_FILE.fullmatch(path.name):
                try:
                    task = self._read(path)
                    tasks[task["id"]] = task
                except ValueError as exc:
                    bad.append(str(exc))
        return dict(sorted(tasks.items())), sorted(bad)

    def _load(self, task_id):
        path = self._path(task_id)
        if not path.exists():
            existing = ", ".join(f"#{i}" for i in self._scan()[0]) or "none yet"
            raise ValueError(f"no task #{task_id}; existing tasks: {existing}")
        return self._read(path)

    def _try_load(self, task_id):
        try:
            return self._read(self._path(task_id))
        except ValueError:
            return None

    # ------------------------------------------------------------ the API

    def create(self, subject, description=""):
        if not isinstance(subject, str) or not subject.strip():
            raise ValueError("subject must be a non-empty string")
        if not isinstance(description, str):
            raise ValueError("description must be a string")
        now = _now()
        task = {"id": 0, "subject": subject.strip(), "description": description, "status": "pending",
                "blockedBy": [], "owner": None, "created_at": now}
        with self._locked():
            if self._scanned != self.dir.resolve():  # max-scan of file names, once; corrupt files count too
                self._last_id = max((int(m[1]) for p in self.dir.glob("task_*.json")
                                     if (m := TASK_FILE.fullmatch(p.name))), default=0)
                self._scanned = self.dir.resolve()
            while True:  # another process may have taken the next id since our scan
                self._last_id += 1
                task["id"] = self._last_id
                if self._write(task, claim=True):
                    return f"Created task #{task['id']}: {task['subject']}"

    def get(self, task_id):
        task_id = parse_task_id(task_id)
        task = self._load(task_id)
        blocks = [t["id"] for t in self._scan()[0].values()
                  if task_id in t["blockedBy"] and t["status"] != "deleted"]
        return json.dumps({**task, "blocks": blocks}, indent=2, ensure_ascii=False)

    def update(self, task_id, status=None, add_blocked_by=None, remove_blocked_by=None, owner=None):
        task_id = parse_task_id(task_id)
        if status is None and add_blocked_by is None and remove_blocked_by is None and owner is None:
            raise ValueError("nothing to update: give status, addBlockedBy, removeBlockedBy or owner")
        if status is not None and status not in MARKERS:
            raise ValueError(f"status {status!r} is not one of {', '.join(MARKERS)}")
        if owner is not None and not isinstance(owner, str):
            raise ValueError("owner must be a string ('' clears it)")
        with self._locked():  # one lock for the board: simple, and plenty for a few agents
            task = self._load(task_id)
            if task["status"] == "deleted":
                raise ValueError(f"task #{task_id} was deleted; create a new task instead")
            blocked, notes = list(task["blockedBy"]), []
            for dep in _ids(add_blocked_by or []):
                other = self._existing(dep)
                if dep == task_id:
                    raise ValueError(f"task #{task_id} cannot block itself")
                if other["status"] in FINISHED:
                    notes.append(f"#{dep} is already {other['status']}, so it does not block #{task_id}")
                elif dep not in blocked:
                    cycle = self._chain(dep, task_id, {task_id: blocked})
                    if cycle:
                        raise ValueError("that would make a cycle: " + " → ".join(f"#{i}" for i in [task_id, *cycle]))
                    blocked.append(dep)
            for dep in _ids(remove_blocked_by or []):
                self._existing(dep)
                if dep not in blocked:
                    raise ValueError(f"#{task_id} is not blocked by #{dep}")
                blocked.remove(dep)
            if status in ("in_progress", "completed"):
                waiting = [b for b in blocked if (self._try_load(b) or {}).get("status") not in FINISHED]
                if waiting:
                    raise ValueError(f"#{task_id} is blocked by {self._names(waiting)}; "
                                     f"finish those first (or removeBlockedBy)")
            # Every check has passed: only now does anything change on disk.
            before = task["status"]
            task["blockedBy"] = blocked
            if status is not None:
                task["status"] = status
            if owner is not None:
                task["owner"] = owner or None
            self._write(task)
            lines = [f"Updated {self._line(task)}", *notes]
            if task["status"] in FINISHED and before not in FINISHED:
                ready = self._clear_dependency(task_id)
                if ready:
                    lines.append("Unblocked: " + ", ".join(f"#{t['id']} {t['subject']}" for t in ready))
            return "\n".join(lines)

    def _clear_dependency(self, completed_id):
        """Remove a finished task from every blockedBy; return the tasks that became ready."""
        ready = []
        with self._locked():
            tasks, _ = self._scan()  # unreadable files are skipped, never rewritten
            for task in tasks.values():
                if completed_id in task["blockedBy"]:
                    task["blockedBy"] = [b for b in task["blockedBy"] if b != completed_id]
                    self._write(task)
                    still = [b for b in task["blockedBy"] if tasks.get(b, {}).get("status") not in FINISHED]
                    if task["status"] not in FINISHED and not still:
                        ready.append(task)
        return ready

    def list_all(self):
        tasks, bad = self._scan()
        live = [t for t in tasks.values() if t["status"] != "deleted"]
        lines = [self._line(t, tasks) for t in live]
        lines += [f"! {problem}" for problem in bad]
        if not live:
            return "\n".join(lines + ["No tasks yet."])
        ready = [t for t in live if t["status"] == "pending" and not self._waiting(t, tasks)]
        open_ = [t for t in live if t["status"] != "completed"]
        summary = (", ".join(f"#{t['id']} {t['subject']}" for t in ready) if ready
                   else "none (all done)" if not open_ else "none (the rest are in progress or blocked)")
        return "\n".join(lines + [f"Ready to start: {summary}"])

    # ------------------------------------------------------------ helpers

    def _existing(self, task_id):
        task = self._load(task_id)
        if task["status"] == "deleted":
            raise ValueError(f"task #{task_id} was deleted")
        return task

    def _chain(self, start, goal, known):
        """A blockedBy path start → … → goal, if one exists (adding goal → start would close it)."""
        stack, seen = [(start, [start])], set()
        while stack:
            node, path = stack.pop()
            if node == goal:
                return path
            if node in seen:
                continue
            seen.add(node)
            blockers = known[node] if node in known else (self._try_load(node) or {}).get("blockedBy", [])
            stack.extend((b, path + [b]) for b in blockers)
        return None

    def _waiting(self, task, tasks):
        return [b for b in task["blockedBy"] if tasks.get(b, {}).get("status") not in FINISHED]

    def _names(self, ids):
        return ", ".join(f"#{i} {(self._try_load(i) or {}).get('subject', '(unreadable)')}" for i in ids)

    def _line(self, task, tasks=None):
        line = f"{MARKERS[task['status']]} #{task['id']}: {task['subject']}"
        if task.get("owner"):
            line += f" (owner: {task['owner']})"
        waiting = self._waiting(task, tasks) if tasks is not None else task["blockedBy"]
        return line + (f" blocked by {', '.join(f'#{b}' for b in waiting)}" if waiting else "")


def _now():
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


TASKS = TaskManager(TASKS_DIR)  # touches no file until the first call

# ---------------------------------------------------------------- tools

_ID = {"description": "a task id: 3 or \"#3\""}
TASK_TOOLS = [
    {"name": "task_create", "description": "Add a task to the persistent board in .tasks/; it starts pending. "
     "Use the board for work of several steps, with an order between them, or that must outlast this "
     "conversation (compaction, restarts). A single quick step needs no task: just do it.",
     "input_schema": object_schema({"subject": {"type": "string", "description": "a short imperative title"},
                                    "description": {"type": "string", "description": "details, optional"}},
                                   ["subject"])},
    {"name": "task_update", "description": "Change a task: its status, its blockers or its owner. A task "
     "cannot start or complete while a blocker is unfinished. Completing it unblocks its dependents.",
     "input_schema": object_schema({
         "task_id": _ID,
         "status": {"type": "string", "enum": list(MARKERS), "description": "deleted hides it for good"},
         "addBlockedBy": {"type": "array", "items": _ID, "description": "tasks that must finish first"},
         "removeBlockedBy": {"type": "array", "items": _ID, "description": "blockers to drop"},
         "owner": {"type": "string", "description": "who works on it; '' clears it"}}, ["task_id"])},
    {"name": "task_list", "description": "The board: every live task with its status and blockers, "
     "and which tasks can start now.", "input_schema": object_schema({}, [])},
    {"name": "task_get", "description": "One task in full, with the tasks it blocks.",
     "input_schema": object_schema({"task_id": _ID}, ["task_id"])},
]

TOOLS = BASE_TOOLS + [COMPACT_TOOL] + TASK_TOOLS
TOOL_HANDLERS = {  # the lambdas map the model's argument names onto TaskManager's
    **BASE_HANDLERS,
    "compact": run_compact,
    "task_create": lambda subject, description="": TASKS.create(subject, description),
    "task_update": lambda task_id, status=None, addBlockedBy=None, removeBlockedBy=None, owner=None:
        TASKS.update(task_id, status, addBlockedBy, removeBlockedBy, owner),
    "task_list": lambda: TASKS.list_all(),
    "task_get": lambda task_id: TASKS.get(task_id),
}

SYSTEM = ("You are a coding agent working in the current folder. Plan multi-step work on the task board "
          "(task_* tools): it lives on disk in .tasks/ and survives compaction and restarts. Give tasks an "
          "order with addBlockedBy, mark a task in_progress when you start it and completed when done. "
          "When the context gets long, call compact. Be brief.")


# ---------------------------------------------------------------- compaction, with the board

def board_message():
    return f"<task-board>\nThe task board in .tasks/, read from disk just now:\n{TASKS.list_all()}\n</task-board>"


def compact_with_board(messages, client, focus=""):
    """s06's compaction, then the board: the model carries on without having to ask for it."""
    if auto_compact(messages, client, focus):
        messages[0]["content"] += "\n\n" + board_message()
        show_note("  [the board, read from .tasks/, was added to the summary]")


# ---------------------------------------------------------------- the loop: s06's, unchanged

def agent_loop(messages, client):
    """s06's loop (and so s03's), with the task tools and a compaction that brings the board back."""
    return s06_compact.agent_loop(messages, client, system=SYSTEM, tools=TOOLS, handlers=TOOL_HANDLERS,
                                  compact=compact_with_board)


# ---------------------------------------------------------------- demo and main

def show_board(messages, client):
    """/tasks: the board from disk, no model call."""
    print(TASKS.list_all())


def demo():
    """Plan four tasks, be refused, compact, see the board come back, complete and unblock."""
    from stand_in_api import reply, text, tool
    plan = [("Design the data model", "tables and fields"), ("Implement the API", "endpoints on the model"),
            ("Write the docs", "how to use the API"), ("Write the API tests", "one per endpoint")]
    ids = []

    def create_plan(body):
        return reply(text("Planning four tasks."), *[tool("task_create", {"subject": s, "description": d})
                                                      for s, d in plan])

    def link(body):
        ids.extend(int(n) for n in re.findall(r"Created task #(\d+)", json.dumps(body["messages"][-1])))
        a, b, c, d = ids
        return reply(text("Now the order: the API and the docs wait for the model; the tests wait for the API."),
                     tool("task_update", {"task_id": b, "addBlockedBy": [a]}),
                     tool("task_update", {"task_id": f"#{c}", "addBlockedBy": [f"#{a}"]}),
                     tool("task_update", {"task_id": str(d), "addBlockedBy": [b]}))

    script = [
        reply(text("First, what is on the board already?"), tool("task_list", {})),
        create_plan, link,
        lambda body: reply(text("Trying to start the API before the data model (this must be refused)."),
                           tool("task_update", {"task_id": ids[1], "status": "in_progress"})),
        lambda body: reply(text("Refused, as it should be. Starting the data model; the files are on disk:"),
                           tool("task_update", {"task_id": ids[0], "status": "in_progress", "owner": "demo"}),
                           tool("bash", {"command": "ls .tasks"})),
        reply(text("Forcing a compaction: the conversation is replaced by a summary."),
              tool("compact", {"focus": "the task board"})),
        reply(text("The board is on disk, so it came back whole:"), tool("task_list", {})),
        lambda body: reply(text("The data model is done."),
                           tool("task_update", {"task_id": ids[0], "status": "completed"}),
                           tool("bash", {"command": f"cat .tasks/task_{ids[0]}.json"})),
        reply(text("Done: the data model is complete and the API and the docs are ready to start. "
                   "Run --demo again: the board continues.")),
    ]
    summary = ("Summary: planned four tasks on the board (data model, then API and docs, tests after the "
               "API) and started the data model. Next: finish the data model.")
    return script, "plan a small project on the task board, with dependencies", summary


def main(argv=None):
    return run_cli("s07_task_system", __doc__, agent_loop, demo=demo, argv=argv,
                   commands={"/tasks": show_board, "/compact": partial(compact_now, compact=compact_with_board)})


if __name__ == "__main__":
    sys.exit(main())
