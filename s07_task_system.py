#!/usr/bin/env python3
"""s07: a persistent task graph that survives compaction and restarts.

s03's todos live in memory: a compaction hides them, an exit destroys them, and nothing says
which must wait for which. s07 moves the plan out of the conversation, as a graph of tasks
kept in files, one JSON file per task:

    .tasks/task_1.json  {"id": 1, "subject": "Design the data model", "description": "",
                         "status": "completed", "blockedBy": [], "owner": "alice",
                         "created_at": "2026-12-04T16:00:00+00:00", ..., "unblocked": [2, 3]}
    .tasks/task_4.json  {"id": 4, "subject": "Write the API tests", "blockedBy": [2], ...}
    .tasks/.lock        the lock (one change at a time); it also holds the largest id given

        #1 Design the data model --+--> #2 Implement the API --> #4 Write the API tests
                                   +--> #3 Write the docs
        completing (or deleting) #1 runs _clear_dependency: #2 and #3 become ready

    model --task_create/update/list/get--> TaskManager --> TaskFolder: .tasks/task_<id>.json
                                                           (or a postgresql:// board)
    compaction (s06) --> new first message = summary + the board, read fresh

Key insight: state that must outlive the conversation belongs outside it. The model reads the
board back whenever it needs it; compaction and restarts cannot lose what was never only in it.

The rules, in TaskManager: a new id by max-scan (one more than the largest on disk or ever
given), never reused; a blocked task cannot start or complete; no cycle of waits; completing
one frees its dependents; a deleted task blocks nobody; agents claim what they start (claims.py).
New since s06: TaskFolder, TaskManager, its tools, the board after a compaction, --board, --name.

Run it:   python s07_task_system.py "plan a refactor: the data model, then the API and the docs"
          python s07_task_system.py --name alice     (a REPL: /tasks, /task help, /compact)
          python s07_task_system.py --demo
"""

import contextlib
import fcntl
import json
import os
import re
import sys
from pathlib import Path

import s03_todo as s03
import s06_compact as s06
from harness import board, compaction, step_limit, writer
from harness.board import claims, folder, graph, record, text

TASKS_DIR = ".tasks"             # relative: each folder you run in has its own board
# The only file names that are tasks: task_<id>.json, the id under 10**15 (record.MAX_ID).
TASK_FILE = re.compile(r"task_([1-9][0-9]{0,14})\.json", re.ASCII)
# About 3,000 tokens: after a compaction, a bigger board comes back as its unfinished tasks.
BOARD_CHARS = 12_000
FINISHED = record.FINISHED      # completed or deleted: such a task blocks nobody
# .lock's bytes 32-47 hold the largest id ever given, so a task file deleted by hand keeps its
# id. Bytes 0-31 are folder.py's (its cache's stamp): this lesson never reads them.
HIGH_WATER_AT = folder.STAMP_BYTES    # 32
HIGH_WATER_BYTES = 16


def new_task(task_id: int, subject: str, description: str, blocked_by: list) -> dict:
    """A task, as its file holds it ("unblocked", the ids it freed, is added once completed)."""
    stamp = record.now()
    return {"id": task_id,               # the number in its file's name; never reused
            "subject": subject,          # a short title, one line when shown
            "description": description,  # details; may be empty
            # pending, in_progress, completed, or deleted (kept on disk, blocks nobody)
            "status": "pending",
            "blockedBy": blocked_by,     # the ids of the tasks that must finish first
            "owner": None,               # who started, completed or ended it, or was named
            "created_at": stamp,
            "updated_at": stamp}         # set again on every write


# ---------------------------------------------------------------- the task files

class TaskFolder:
    """The board as a folder: .tasks/task_<id>.json per task, and .tasks/.lock. Opening .lock,
    the read limits and the temporary file are in folder.py and writer.py."""

    def __init__(self, location):
        self.dir = Path(location)
        self.name = f"{self.dir}/"           # the board, as the user and the model see it
        self.lock_fd = None                  # .tasks/.lock, open while we hold the lock

    def path(self, task_id: int) -> Path:
        return self.dir / f"task_{task_id}.json"

    @contextlib.contextmanager
    def locked(self):
        """One change at a time, across processes: an exclusive lock on .tasks/.lock."""
        fd = folder.open_lock(self.dir)      # made if missing; a regular file, never a link
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)   # waits while another agent holds it
            self.lock_fd = fd
            yield fd
        finally:
            self.lock_fd = None
            os.close(fd)                     # closing the file releases the lock

    def high_water(self) -> int:
        """The largest id ever given (read under the lock), or 0: none yet, or a hand edit."""
        if self.lock_fd is None:
            raise RuntimeError("the mark is read under the lock: call this inside locked()")
        raw = os.pread(self.lock_fd, HIGH_WATER_BYTES, HIGH_WATER_AT)
        digits = raw.decode("ascii", "replace").strip()
        if digits.isdigit() and int(digits) < record.MAX_ID:
            return int(digits)
        return 0

    def ids(self) -> set:
        """The max-scan's scan: the id in the name of every task_<id>.json, a broken one too."""
        found = set()
        for name in folder.listing(self.dir):
            match = TASK_FILE.fullmatch(name)
            if match:
                found.add(int(match[1]))
        return found

    def read(self, task_id: int) -> dict:
        """A task from its file, or ValueError: a broken file is flagged, never repaired."""
        path = self.path(task_id)
        # Never through a link, and at most 1 MB: a FIFO, or a link to /dev/zero, is refused.
        data = folder.read(path)
        try:
            task = json.loads(data)
        except (ValueError, RecursionError) as exc:   # not JSON, not UTF-8, nested too deep
            raise folder.unreadable(path, exc) from None
        # A field a hand edit broke: what PostgreSQL's constraints would refuse (board/record.py).
        problem = record.task_problem(task, task_id)
        if problem:
            raise folder.unreadable(path, f"not a valid task: {problem}")
        return task

    def load(self, task_id: int) -> dict:
        """A task to change, or ValueError: no file, or read() refuses it (a link, broken too)."""
        if not os.path.lexists(self.path(task_id)):
            existing = text.existing(self.scan()[0], task_id)
            raise ValueError(f"no task #{task_id}; existing tasks: {existing}")
        return self.read(task_id)

    def try_load(self, task_id: int):
        """read(), or None: missing, or cannot be read."""
        with contextlib.suppress(ValueError):
            return self.read(task_id)
        return None

    def scan(self, recheck: bool = False) -> tuple:
        """Every task file: (the readable tasks by id, in id order; a line per broken file).
        recheck: unused here; folder.Remembering's cache reads it (True: every file again)."""
        tasks, problems = {}, []
        for name in folder.listing(self.dir):
            match = TASK_FILE.fullmatch(name)
            if match:
                try:
                    tasks[int(match[1])] = self.read(int(match[1]))
                except ValueError as exc:
                    problems.append(str(exc))
            elif name.startswith("task_") and name.endswith(".json"):   # task_05.json
                problems.append(f"{self.dir / name} is not a task file name; it was left")
        return dict(sorted(tasks.items())), sorted(problems)

    def write(self, task: dict) -> None:
        """Replace a task's file atomically (rename): a reader or killed process sees old or new."""
        temporary = self.write_temporary(task)
        os.replace(temporary, self.path(task["id"]))

    def reserve(self, task: dict) -> bool:
        """Create a task's file only if its name is free: False if a file made by hand took it."""
        temporary = self.write_temporary(task)
        try:
            # The mark first: the id is never given again, even if what follows fails.
            if task["id"] > self.high_water():
                mark = str(task["id"]).rjust(HIGH_WATER_BYTES)
                os.pwrite(self.lock_fd, mark.encode(), HIGH_WATER_AT)
            # A hard link takes only a free name, and shows the task whole at once (writer.link).
            writer.link(temporary, self.path(task["id"]))
            return True
        except FileExistsError:
            return False
        finally:
            temporary.unlink(missing_ok=True)    # linked, it had two names: this one goes

    def write_temporary(self, task: dict) -> Path:
        """The task, stamped updated_at, whole in a new file beside its own: .tmp_task_<random>.tmp,
        opened O_CREAT|O_EXCL|O_NOFOLLOW (ValueError if read() would refuse the task)."""
        task["updated_at"] = record.now()
        data = record.as_file(task)          # json.dumps, of a task a read would accept
        return writer.temporary_beside(self.path(task["id"]), data)


# ---------------------------------------------------------------- the rules

class TaskManager:
    """The board's rules, over its store (TaskFolder, above), which holds every agent's writes."""

    def __init__(self, location, agent=None):
        self.use(location)
        self.agent = agent or record.default_agent_name()  # who owns what we start

    def use(self, location) -> None:
        """self.store: TaskFolder above, or a postgresql:// board. open_store wraps TaskFolder in
        folder.Remembering, a cache of its reads (a scan() without recheck may miss a hand edit)."""
        self.store = board.open_store(location, TaskFolder)

    def next_id(self) -> int:
        """Max-scan, under the lock: one more than the largest id on the board or ever given
        (the high-water mark: a task file deleted by hand keeps its id); new_id refuses 10**15."""
        largest = max(self.store.ids(), default=0)
        return record.new_id(max(largest, self.store.high_water()) + 1)

    def create(self, subject, description="", blocked_by=None) -> str:
        subject = record.check_text(subject, "subject")
        description = record.check_text(description, "description", empty=True)
        # One change at a time, across processes (and machines, on a postgresql:// board).
        with self.store.locked():
            blocked, notes = self.check_blockers(tid=None, blocked=[], add=blocked_by or [])
            task = self.add(subject, description, blocked)
        return text.created(task, notes)

    def add(self, subject, description, blocked, status="pending") -> dict:
        """A new task at the next id. If a file made by hand has its name, reserve() refuses,
        and next_id() lists the folder again. (status: /task import adds finished tasks.)"""
        task = new_task(self.next_id(), subject, description, blocked)
        task["status"] = status
        while not self.store.reserve(task):
            task["id"] = self.next_id()
        return task

    def update(self, task_id, status=None, add_blocked_by=None, remove_blocked_by=None,
               owner=None, force=False) -> str:
        """load -> check -> write -> _clear_dependency; a refused call changes nothing.
        force: a person takes a task over on purpose (/task start, /task done)."""
        task_id = record.parse_task_id(task_id)
        # Before the lock: something to change, a status of STATUSES, an owner's name or "".
        record.check_arguments(status, add_blocked_by, remove_blocked_by, owner)
        with self.store.locked():
            task = self.store.load(task_id)
            before = task["status"]
            change, notes = self.check_update(task, status, add_blocked_by,
                                              remove_blocked_by, owner, force)
            # Every check passed: only now does anything change (status, owner, blockedBy).
            task.update(change)
            # Reopening does not re-block the tasks it freed; the note says how to.
            if before in FINISHED and task["status"] not in FINISHED:
                freed = task.pop("unblocked", [])     # no longer so once it is reopened
                notes += text.reopened(task, freed)
            self.store.write(task)
            lines = [f"Updated {text.line(task)}"] + notes
            if before not in FINISHED and task["status"] in FINISHED:
                lines += self._clear_dependency(task)
        return "\n".join(lines)

    def check_update(self, task, status, add, remove, owner, force) -> tuple:
        """What a change must pass: (the new fields, notes), or ValueError; writes nothing."""
        tid, status_after = task["id"], status or task["status"]
        if task["status"] == "deleted":
            raise ValueError(f"task #{tid} was deleted; create a new task")
        if add and status_after in FINISHED:
            raise ValueError(f"#{tid} is {status_after}; set it back to pending (in the same "
                             "call, or before) to give it blockers")
        # change: the new status and owner (start, complete, or delete one in progress:
        # self.agent; pending: none). Another's task, started or done, needs force (claims.py).
        change, notes = claims.check(task, status, owner, force, self.agent)
        blocked, more = self.check_blockers(tid, task["blockedBy"], add or [])
        # A blocker whose task is gone can be removed too; one listed twice (by hand) goes whole.
        for dep in record.ids(remove or []):
            if dep not in blocked:
                raise ValueError(f"#{tid} is not blocked by #{dep}")
            blocked = [b for b in blocked if b != dep]
        self.check_not_blocked(tid, status, status_after, blocked, record.ids(add or []))
        change["blockedBy"] = blocked
        return change, notes + more

    def check_not_blocked(self, tid, status, status_after, blocked, added) -> None:
        """A blocked task cannot start or complete; nor may a task in progress take an open
        blocker. status: the one asked for (None: unchanged); status_after: once changed."""
        # A completion takes itself out of every blockedBy, but a hand edit (or a completion
        # stopped part way) can leave a finished id here: read each (a missing one blocks).
        tasks = {dep: self.store.try_load(dep) or {} for dep in blocked}
        waiting = [dep for dep in blocked if tasks[dep].get("status") not in FINISHED]
        if status in ("in_progress", "completed") and waiting:
            raise ValueError(f"#{tid} is blocked by {text.described(waiting, self.store)}; "
                             "finish those first (or removeBlockedBy)")
        newly_waiting = [dep for dep in waiting if dep in added]
        if status_after == "in_progress" and newly_waiting:
            raise ValueError(f"#{tid} is in progress; to make it wait for "
                             f"{text.described(newly_waiting, self.store)}, give it status pending "
                             "in the same call (that frees it)")

    def check_blockers(self, tid, blocked, add) -> tuple:
        """blocked + add, each id in add checked: it exists, is not deleted, is not tid, closes
        no cycle. A finished one is not added, only noted. (blockers, notes), or ValueError."""
        blocked, notes = list(blocked), []
        # Read once for the cycle check (does dep wait for tid?); a new task (tid None) closes none.
        tasks = self.store.scan(recheck=True)[0] if tid is not None and add else {}
        for dep in record.ids(add):              # 3, "3" or "#3", each read as 3
            other = self.store.load(dep)
            if other["status"] == "deleted":
                raise ValueError(f"task #{dep} was deleted; it cannot block anything")
            if dep == tid:
                raise ValueError(f"task #{tid} cannot block itself")
            if other["status"] in FINISHED:
                notes.append(text.finished_blocker(other, tid))
            elif dep not in blocked:
                graph.refuse_cycle(tasks, tid, dep)      # ValueError if dep waits for tid
                blocked.append(dep)
        return blocked, notes

    def _clear_dependency(self, finished) -> list:
        """The mechanism: take a finished task's id out of the blockedBy of every task not
        deleted; say what can start now. A completed task keeps the ids it freed."""
        tasks = self.store.scan(recheck=True)[0]
        freed = []
        for other in tasks.values():
            # A deleted task waits for nothing: it is not freed, and reopening will not name it.
            if finished["id"] not in other["blockedBy"] or other["status"] == "deleted":
                continue
            # Read again just before it is written: a hand edit since is kept, not lost.
            fresh = self.store.try_load(other["id"])
            if fresh and finished["id"] in fresh["blockedBy"]:
                fresh["blockedBy"] = [b for b in fresh["blockedBy"] if b != finished["id"]]
                self.store.write(fresh)
                freed.append(fresh)
        if finished["status"] == "deleted":          # never done: not "Unblocked"
            return text.no_longer_waiting(freed, finished)
        finished["unblocked"] = [t["id"] for t in freed]    # update() wrote it; now with these
        self.store.write(finished)
        tasks = self.store.scan()[0]       # as just written: a freed task may wait on another
        ready = [t for t in freed if self.can_start(t, tasks)]
        return ["Unblocked: " + text.names(ready)] if ready else []

    def can_start(self, task, tasks) -> bool:
        """Pending, and every blocker finished (a missing one is unfinished)."""
        return task["status"] == "pending" and not graph.waiting_on(task, tasks)

    def list_all(self) -> str:
        """The board: each task not deleted, an order if any waits, and what can start."""
        tasks, problems = self.store.scan(recheck=True)
        order = graph.order_line(tasks)
        return text.board(tasks, problems, order, self.ready(tasks))

    def ready(self, tasks) -> str:
        ready = [t for t in tasks.values() if self.can_start(t, tasks)]
        return text.ready_line(ready, tasks)

    def get(self, task_id) -> str:
        """One task in full, with the tasks (not deleted) it blocks."""
        task = self.store.load(record.parse_task_id(task_id))
        return text.in_full(task, self.store.scan(recheck=True)[0])


# ---------------------------------------------------------------- the tools

# No "type": a model sends 3 or "#3", and parse_task_id takes both.
ID = {"description": "a task id: 3 or \"#3\""}
IDS = {"type": "array", "items": ID}

TASK_TOOLS = [
    {"name": "task_create",
     "description": "Add a task to the persistent board (pending). Use it for work of several "
                    "steps in an order, or that must outlast this conversation; one quick step "
                    "needs no task.",
     "input_schema": s03.schema(["subject"], subject=s03.STRING, description=s03.STRING,
                                blockedBy=IDS)},
    {"name": "task_update",
     "description": "Set a task's status, blockers or owner. A task cannot start or "
                    "complete while a blocker is unfinished. Starting a task claims it; one "
                    "another agent started or completed is theirs. Completing it frees its "
                    "dependents.",
     "input_schema": s03.schema(
         ["task_id"], task_id=ID, addBlockedBy=IDS, removeBlockedBy=IDS,
         status={"type": "string", "enum": list(record.STATUSES)},
         owner={"type": "string", "description": "'' clears it"})},
    {"name": "task_list",
     "description": "The board: every live task with its status, owner and blockers, an "
                    "order to do them in, what can start now.",
     "input_schema": s03.schema([])},
    {"name": "task_get",
     "description": "One task in full, with the tasks it blocks.",
     "input_schema": s03.schema(["task_id"], task_id=ID)},
]

TASKS = TaskManager(TASKS_DIR)   # touches no file until it is used


# The model's names (blockedBy) passed on as TaskManager's (blocked_by).
def task_create(subject, description="", blockedBy=None):
    return TASKS.create(subject, description, blockedBy)


def task_update(task_id, status=None, addBlockedBy=None, removeBlockedBy=None, owner=None):
    return TASKS.update(task_id, status, addBlockedBy, removeBlockedBy, owner)


TOOLS = s06.TOOLS + TASK_TOOLS
# The dispatch table: every tool offered, and what runs it.
TOOL_HANDLERS = {
    "bash": s03.run_bash,
    "read_file": s03.run_read,
    "write_file": s03.run_write,
    "edit_file": s03.run_edit,
    "compact": s06.compact_tool,
    "task_create": task_create,
    "task_update": task_update,
    "task_list": TASKS.list_all,
    "task_get": TASKS.get,
}

SYSTEM = ("You are a coding agent working in the current folder. Plan multi-step work on the "
          "task board (task_* tools): it outlives the conversation, so read it first "
          "(task_list), and other agents may share it. Order tasks with blockedBy; mark a task "
          "in_progress when you start it (that claims it) and completed when done. When the "
          "context gets long, call compact. Be brief.")


# ---------------------------------------------------------------- the loop

def board_message(run) -> str:
    """After a compaction's summary: the board, read fresh, as task_list shows it (only its
    unfinished tasks if it is over BOARD_CHARS)."""
    text.say_board_added(run.screen, TASKS.store.name)
    try:
        shown = TASKS.list_all()
        if len(shown) > BOARD_CHARS:
            tasks, problems = TASKS.store.scan(recheck=True)
            shown = text.brief(tasks, problems, TASKS.ready(tasks), BOARD_CHARS)
    except ValueError as exc:
        # An unreadable board must not look like an empty one: the model would plan it all again.
        shown = f"The task board could not be read: {exc}"
    heading = f"The task board ({TASKS.store.name}), just read:"
    # The markers: --continue puts a board read afresh between them; /context counts it apart.
    return f"{board.BOARD_START}\n{heading}\n{shown}\n{board.BOARD_END}"


def compact_with_board(messages, run, focus="") -> bool:
    """s06's compaction: the history becomes one message, the summary, then the board."""
    return s06.auto_compact(messages, run, focus, SYSTEM, TOOLS, attach=board_message)


def agent_loop(messages, run, max_steps=s06.MAX_STEPS) -> str:
    """s06's loop with s07's tools: after a compaction the board comes back."""
    steps = 0
    while steps < max_steps:
        steps += 1
        view = s06.micro_compact(messages, run)                # layer 1
        if s06.needs_compaction(view):                         # layer 2
            compact_with_board(messages, run)                  # layer 2 + board
            view = s06.micro_compact(messages, run)            # layer 1
        response = s03.ask_model(run, SYSTEM, TOOLS, view)
        messages.append({"role": "assistant", "content": response.content})
        run.log.record(messages)              # on disk before its calls run
        s06.CONTEXT.record(response.usage, messages)           # layer 2 measures
        if response.stop_reason != "tool_use":
            return response.answer
        results = s03.run_tool_calls(run, response, TOOL_HANDLERS, TOOLS)
        messages.append({"role": "user", "content": results})
        s06.compact_if_asked(response, messages, run, compact_with_board)  # layer 3 + board
    return step_limit.reached(max_steps)


def start(run, args) -> str:
    """s06's start (the board after an API summary too), then board.choose: --board, --name."""
    s06.start(run, args, SYSTEM, TOOLS, attach=board_message)
    return board.choose(run, TASKS, TASKS_DIR, args)


def main(argv=None) -> int:
    # As in s03, the command line loads only when the lesson runs; /tasks and /task, too.
    from harness import cli
    from harness.board import commands as commands_for
    commands = {**commands_for.repl_commands(TASKS), **s06.repl_commands(compact_with_board)}
    lesson = cli.Lesson("s07_task_system", __doc__, agent_loop, system=SYSTEM, tools=TOOLS,
                        commands=commands, on_start=start, demo_args=(TASKS, s06.CONTEXT),
                        context_view=s06.micro_compact, context_size=s06.CONTEXT,
                        **commands_for.cli_options(TASKS, compaction.API_CONTEXT_FLAG))
    return cli.run_cli(lesson, argv)


if __name__ == "__main__":
    sys.exit(main())
