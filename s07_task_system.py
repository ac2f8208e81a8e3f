#!/usr/bin/env python3
"""s07: a persistent task graph that survives compaction and restarts.

s03's todos live in memory: a compaction hides them, an exit destroys them,
and nothing says which must wait for which. s07 moves the plan out of the
conversation, as a graph.

    .tasks/task_1.json  {"id": 1, "subject": "Design the data model", "description": "",
                         "status": "completed", "blockedBy": [], "owner": "alice",
                         "unblocked": [2, 3], "created_at": "2026-12-04T16:00:00+00:00", ...}
    .tasks/task_4.json  {"id": 4, "subject": "Write the API tests", "blockedBy": [2], ...}

    One JSON file per task holds all of it: owner is the agent that started it, unblocked
    whom completing it freed. A change replaces the file whole.

        #1 Design the data model --+--> #2 Implement the API --> #4 Write the API tests
                                   +--> #3 Write the docs
        completing #1 runs _clear_dependency: #2 and #3 become ready

    model --task_create/update/list/get--> TaskManager --> .tasks/ (a file per task)
                                                           or a postgresql:// board
    compaction (s06) --> new first message = summary + the board, read fresh

Key insight: state that must outlive the conversation belongs outside it. The model reads the
board back whenever it needs it; compaction and restarts cannot lose what was never only in it.

The rules, in TaskManager below: ids by max-scan, never reused; a blocked task cannot start
or complete; completing one frees its dependents; a task another agent has in progress is
theirs. What a store must do: harness/board/record.py.

New since s06: TaskManager, its tools, the board after each compaction, --board, --name,
/tasks and /task.

Run it:   python s07_task_system.py "plan a refactor: the data model, then the API and the docs"
          python s07_task_system.py --name alice     (a REPL: /tasks, /task help, /compact)
          python s07_task_system.py --demo
"""

import functools
import sys

import s03_todo as s03
import s06_compact as s06
from harness import api_context, board, cli, demos, endpoints
from harness.board import claims, graph, record, text
from harness.board import commands as commands_for

# Relative: each folder you run in has a board.
TASKS_DIR = ".tasks"
# At most this much of the board (about 3,000 tokens) comes back with a compaction's
# summary; a bigger board comes back as its unfinished tasks.
BOARD_CHARS = 12_000
# Completed or deleted: such a task blocks nobody.
FINISHED = record.FINISHED


class TaskManager:
    """The board: tasks with blockers, in a store that is the only truth;
    every call reads it afresh, so it sees other agents' writes."""

    def __init__(self, location, agent=None):
        self.store = board.open_store(location)   # a folder or a postgresql:// URL
        self.agent = agent or record.default_agent_name()  # who owns what we start

    def next_id(self) -> int:
        """Max-scan: one more than the largest id on the board."""
        # The id of every task file (task_3.json holds #3), or of every row.
        largest = max(self.store.ids(), default=0)
        # A task file deleted by hand must not give its id to a new task: a
        # task still waiting for the old one would wait for a stranger. So
        # the store also keeps the largest id it ever gave.
        largest = max(largest, self.store.high_water())
        return largest + 1

    def create(self, subject, description="", blocked_by=None) -> str:
        subject = record.check_text(subject, "subject")
        description = record.check_text(description, "description", empty=True)
        # The board's lock (.tasks/.lock, or a row lock on PostgreSQL): one
        # change at a time, across processes and machines.
        with self.store.locked():
            blocked, notes = self.check_blockers(None, [], blocked_by or [])
            task = record.new_task(self.next_id(), subject, description, blocked)
            # reserve() creates .tasks/task_<id>.json only if that name is
            # free: a temporary file, written whole, then linked to the name (a
            # link never replaces a file). A file made by hand may hold the id:
            # take the next.
            while not self.store.reserve(task):
                task["id"] = self.next_id()
        return text.created(task, notes)

    def update(self, task_id, status=None, add_blocked_by=None,
               remove_blocked_by=None, owner=None, force=False) -> str:
        """load -> check -> write -> _clear_dependency. A refused call changes
        nothing. force: a person takes a task over on purpose (/task start)."""
        task_id = record.parse_task_id(task_id)
        with self.store.locked():
            task = self.store.load(task_id)
            before = task["status"]
            change, notes = self.check_update(task, status, add_blocked_by,
                                              remove_blocked_by, owner, force)
            # Every check passed: only now does anything change.
            task.update(change)
            # Reopening does not re-block the tasks it freed (`unblocked`);
            # the note says how to.
            if before in FINISHED and task["status"] not in FINISHED:
                unblocked = task.pop("unblocked", [])
                notes += text.reopened(task, unblocked)
            # write() replaces the task's file atomically (a temporary file,
            # then a rename over the old one), or its row: a reader, or a kill
            # in the middle, sees the old task or the new, never half.
            self.store.write(task)
            lines = [f"Updated {text.line(task)}"] + notes
            if before not in FINISHED and task["status"] in FINISHED:
                lines += self._clear_dependency(task)
        return "\n".join(lines)

    def _clear_dependency(self, finished) -> list:
        """Remove a finished task from every blockedBy; say what can start now."""
        # Each file is atomic, not the set: a kill in this loop leaves a task
        # naming a finished blocker, which blocks nothing (can_start).
        freed = self.store.dependents(finished["id"])    # each read fresh
        for task in freed:
            blockers = task["blockedBy"]
            task["blockedBy"] = [b for b in blockers if b != finished["id"]]
            self.store.write(task)
        if finished["status"] == "deleted":   # never done: not "Unblocked"
            return text.no_longer_waiting(freed, finished)
        # Kept: reopening it can then say who stopped waiting.
        finished["unblocked"] = [t["id"] for t in freed]
        self.store.write(finished)
        tasks = self.store.scan()[0]
        ready = [t for t in freed if self.can_start(t, tasks)]
        return ["Unblocked: " + text.names(ready)] if ready else []

    def can_start(self, task, tasks) -> bool:
        """Pending, and every blocker finished (a missing one is unfinished)."""
        waiting = graph.waiting_on(task, tasks)
        return task["status"] == "pending" and not waiting

    def list_all(self) -> str:
        """The board: every live task, an order (if any waits), what can start."""
        # scan() -> (every readable task by id, a line per unreadable file);
        # validate=True also looks again at files edited by hand.
        tasks, problems = self.store.scan(validate=True)
        # The unfinished tasks, blockers first (a topological sort).
        order = graph.order_line(tasks)
        return text.board(tasks, problems, order, self.ready(tasks))

    def ready(self, tasks) -> str:
        """What can start now."""
        ready = [t for t in tasks.values() if self.can_start(t, tasks)]
        return text.ready_line(ready, tasks)

    def get(self, task_id) -> str:
        """One task in full, with the live tasks it blocks."""
        task = self.store.load(record.parse_task_id(task_id))
        return text.in_full(task, self.store.scan(validate=True)[0])

    # ------------------------------------------------- the rules update() checks

    def check_update(self, task, status, add, remove, owner, force) -> tuple:
        """(the new field values, notes), or ValueError. Writes nothing."""
        record.check_update(status, add, remove, owner)   # types and values
        tid, new_status = task["id"], status or task["status"]
        if task["status"] == "deleted":
            raise ValueError(f"task #{tid} was deleted; create a new task")
        if add and new_status in FINISHED:
            raise ValueError(f"#{tid} is {new_status}; set it back to pending "
                             "before giving it blockers")
        # The new status and owner (board/claims.py): starting claims it, never
        # in another's name; another agent's task in progress is theirs unless a
        # person takes it over (force); back to pending frees it. `change` holds
        # the fields to set, e.g. {"status": "in_progress", "owner": "alice"};
        # `notes` says what else happened ("took #3 over from bob").
        change, notes = claims.check(task, status, owner, self.agent, force)
        blocked, more = self.check_blockers(tid, task["blockedBy"], add or [])
        # A blocker whose task is gone can be removed too.
        for dep in record.ids(remove or []):
            if dep not in blocked:
                raise ValueError(f"#{tid} is not blocked by #{dep}")
            blocked.remove(dep)
        # A blocked task cannot start or complete.
        waiting = []
        for dep in blocked:
            if self.store.status_of(dep) not in FINISHED:
                waiting.append(dep)
        if status in ("in_progress", "completed") and waiting:
            names = text.described(waiting, self.store)
            raise ValueError(f"#{tid} is blocked by {names}; finish those "
                             "first (or removeBlockedBy)")
        # Nor may a task in progress take an open blocker: it would be
        # blocked while in progress.
        added = record.ids(add or [])
        opened = [dep for dep in waiting if dep in added]
        if new_status == "in_progress" and opened:
            raise ValueError(f"#{tid} is in progress; to make it wait for "
                             f"{text.described(opened, self.store)}, give it "
                             "status pending in the same call (that frees it)")
        change["blockedBy"] = blocked
        return change, notes + more

    def check_blockers(self, tid, blocked, add) -> tuple:
        """blocked + add, each checked: it exists, is not deleted, is not tid,
        closes no cycle. A finished one is not added, only noted. Returns
        (blockers, notes), or raises ValueError."""
        blocked, notes = list(blocked), []
        for dep in record.ids(add):
            other = self.store.load(dep)
            if other["status"] == "deleted":
                raise ValueError(f"task #{dep} was deleted; it cannot block "
                                 "anything")
            if dep == tid:
                raise ValueError(f"task #{tid} cannot block itself")
            if other["status"] in FINISHED:
                notes.append(text.finished_blocker(other, tid))
            elif dep not in blocked:
                # A new task (tid None) has no dependents: it closes no cycle.
                if tid is not None:
                    tasks = self.store.scan(validate=True)[0]
                    graph.refuse_cycle(tasks, tid, dep)
                blocked.append(dep)
        return blocked, notes


# ---------------------------------------------------------------- the tools

# No "type": a model sends 3 or "#3", and parse_task_id takes both.
ID = {"description": "a task id: 3 or \"#3\""}
IDS = {"type": "array", "items": ID}
STRING = s03.STRING

TASK_TOOLS = [
    {"name": "task_create",
     "description": "Add a task to the persistent board (pending). Use it for "
                    "work of several steps in an order, or that must outlast "
                    "this conversation; one quick step needs no task.",
     "input_schema": s03.schema(["subject"], subject=STRING,
                                description=STRING, blockedBy=IDS)},
    {"name": "task_update",
     "description": "Change a task's status, blockers or owner. A task cannot "
                    "start or complete while a blocker is unfinished. Starting "
                    "a task claims it; one in progress by another agent is "
                    "theirs. Completing it unblocks its dependents.",
     "input_schema": s03.schema(
         ["task_id"], task_id=ID, addBlockedBy=IDS, removeBlockedBy=IDS,
         status={"type": "string", "enum": list(record.STATUSES)},
         owner={"type": "string", "description": "'' clears it"})},
    {"name": "task_list",
     "description": "The board: every live task with its status, owner and "
                    "blockers, an order to do them in, what can start now.",
     "input_schema": s03.schema([])},
    {"name": "task_get",
     "description": "One task in full, with the tasks it blocks.",
     "input_schema": s03.schema(["task_id"], task_id=ID)},
]

TASKS = TaskManager(TASKS_DIR)   # touches no file until it is used


# The model's names (blockedBy) passed on as TaskManager's (blocked_by).

def task_create(subject, description="", blockedBy=None):
    return TASKS.create(subject, description, blockedBy)


def task_update(task_id, status=None, addBlockedBy=None,
                removeBlockedBy=None, owner=None):
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

SYSTEM = ("You are a coding agent working in the current folder. Plan "
          "multi-step work on the task board (task_* tools): it outlives the "
          "conversation, so read it first (task_list), and other agents may "
          "share it. Order tasks with "
          "blockedBy; mark a task in_progress when you start it (that claims "
          "it) and completed when done. When the context gets long, call "
          "compact. Be brief.")


# ---------------------------------------------------------------- the loop

def board_message(run) -> str:
    """After a compaction: the board, read fresh (see BOARD_CHARS); the user is told."""
    return text.board_message(TASKS, BOARD_CHARS, run.screen)


def compact_with_board(messages, run, focus="") -> bool:
    """s06's compaction, with the board, read fresh, after the summary."""
    return s06.auto_compact(messages, run, focus, SYSTEM, TOOLS,
                            attach=board_message)


def agent_loop(messages, run, max_steps=s06.MAX_STEPS) -> str:
    """s06's loop with s07's tools: after a compaction the board comes back."""
    steps = 0
    while steps < max_steps:
        steps += 1
        view = s06.micro_compact(messages, run)                # layer 1
        if s06.needs_compaction(view):                         # layer 2
            compact_with_board(messages, run)                  # layer 2 + board
            view = s06.micro_compact(messages, run)            # layer 1
        reply = endpoints.ask(run, SYSTEM, TOOLS, view, s03.MAX_TOKENS)
        messages.append(reply.message)
        run.log.record(messages)              # on disk before its calls run
        s06.CONTEXT.record(reply.usage, messages)              # layer 2 measures
        if not reply.calls:
            # --api-context compact: the API summarised, and the turn ends: the board
            # waits in a message of its own, for the next turn.
            if api_context.compacted(reply):
                messages.append({"role": "user", "content": board_message(run)})
            return reply.text
        results = s03.run_tool_calls(run, reply.calls, TOOL_HANDLERS) + reply.notes
        # --api-context compact: the API summarised; the board too, read now.
        if api_context.compacted(reply):
            results.append({"type": "text", "text": board_message(run)})
        messages.append({"role": "user", "content": results})
        s06.compact_if_asked(reply.calls, messages, run,       # layer 3 + board
                             compact_with_board)
    return cli.step_limit(max_steps)


# ---------------------------------------------------------------- main

def start(run, args) -> str:
    """At the start of a run: s06's settings, with s07's system and tools;
    --board (or TASK_BOARD) re-points TASKS.store, --name sets TASKS.agent."""
    s06.start(run, args, SYSTEM, TOOLS)
    return commands_for.choose_board(run, TASKS, TASKS_DIR, args)


def main(argv=None) -> int:
    # /tasks and /task: a person works the board by the same rules.
    commands = commands_for.repl_commands(TASKS)
    commands.update(s06.repl_commands(SYSTEM, TOOLS, compact_with_board))
    demo = functools.partial(demos.s07_demo, TASKS, s06.CONTEXT)
    # --board, --name, and other agents' news before each prompt.
    board_options = commands_for.cli_options(TASKS)
    lesson = cli.Lesson("s07_task_system", __doc__, agent_loop, demo=demo,
                        commands=commands, on_start=start, **board_options)
    return cli.run_cli(lesson, argv)


if __name__ == "__main__":
    sys.exit(main())
