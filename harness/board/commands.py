"""The REPL's /task and /tasks commands, --board and --name: a person works s07's board.

Relied on by s07's main(), which hands its TaskManager to repl_commands() and cli_options()
(the flags, s06's --api-context among them, /task help, and Live). Loaded in main(), so
importing s07 loads none of it; /task import loads checklist.py, the first prompt live.py. It
imports no lesson. The commands go through TaskManager's methods and rules, so a person cannot
do what an agent may not, except take a task over on purpose (start, done and delete are
forced: "took #3 over from bob"; start reopens another agent's completed task). Without it,
fixing one task costs a model call; without Live, a person at the REPL does not see what the
other agents on a shared board are doing.
"""

import atexit
import contextlib
import os
import shlex

from harness import errors, terminal
from harness.board import graph

HELP = """/task commands (no model call; the same rules as the model's tools):
  /task                 the board (same as /tasks)
  /task add TITLE       a new task
  /task show N          one task in full
  /task start N         start it (takes it over from another agent, or reopens it)
  /task done N          complete it
  /task delete N        delete it
  /task block N BY...   N waits for BY
  /task unblock N BY... N no longer waits for BY
  /task ready           what can start now
  /task order           an order to do them in
  /task import FILE     a Markdown checklist (- [ ] item, - [x] done item) becomes tasks"""

OPTIONS = [  # s07's flags, for cli.run_cli (s07 adds s06's --api-context: it runs s06's loop)
    (("--name",), {"help": "this agent's name on the board (default: AGENT_NAME, else your user, "
                           "host and terminal)"}),
    (("--board",), {"help": "the board: a folder (default: TASK_BOARD, else .tasks) or a "
                            "postgresql:// URL"})]
NEEDS = {"show": 1, "start": 1, "done": 1, "delete": 1, "block": 2, "unblock": 2, "add": 1,
         "import": 1}


def task_command(tasks, arg: str) -> None:
    """/task ARG: parse the words, run the one matching TaskManager call, print its answer."""
    words = arg.split()
    verb, rest = (words[0].lower(), words[1:]) if words else ("list", [])
    if verb in NEEDS and len(rest) < NEEDS[verb]:
        what = {1: "a task id", 2: "a task id and its blockers"}[NEEDS[verb]]
        what = {"add": "a title", "import": "a file"}.get(verb, what)
        raise ValueError(f"/task {verb} needs {what}; /task help lists the commands")
    # One id: `/task done 1 2` did #1 and left #2 unsaid.
    if verb in ("show", "start", "done", "delete") and len(rest) > 1:
        raise ValueError(f"/task {verb} takes one task id (given: {' '.join(rest)}); give each "
                         f"its own /task {verb}")
    actions = {
        "list": tasks.list_all, "help": lambda: HELP,
        "add": lambda: tasks.create(" ".join(rest)),
        "show": lambda: tasks.get(rest[0]),
        "start": lambda: tasks.update(rest[0], status="in_progress", force=True),
        "done": lambda: tasks.update(rest[0], status="completed", force=True),
        "delete": lambda: tasks.update(rest[0], status="deleted", force=True),
        "block": lambda: tasks.update(rest[0], add_blocked_by=rest[1:]),
        "unblock": lambda: tasks.update(rest[0], remove_blocked_by=rest[1:]),
        "ready": lambda: tasks.ready(tasks.store.scan(recheck=True)[0]),
        "order": lambda: graph.order_line(tasks.store.scan(recheck=True)[0]),
        "import": lambda: _import(tasks, " ".join(rest)),   # s03's plan onto the board
    }
    if verb not in actions:
        hint = errors.did_you_mean(verb, actions, prefix="/task ")
        raise ValueError(f"unknown /task command {verb!r}{hint}; /task help lists them")
    terminal.show_out(actions[verb]())   # escaped: a subject or an owner may hold codes


def _import(tasks, path: str) -> str:
    """/task import FILE (checklist.py, loaded only for it), FILE read as a shell reads one
    word: ~ is home, and quotes around a name with spaces are not part of it."""
    from harness.board import checklist
    with contextlib.suppress(ValueError):          # unbalanced quotes: the name as typed
        words = shlex.split(path)
        path = words[0] if len(words) == 1 else path
    return checklist.import_checklist(tasks, os.path.expanduser(path))


def repl_commands(tasks) -> dict:
    """/tasks and /task for run_cli: {"/x": fn(messages, run, arg)}."""
    return {"/tasks": lambda messages, run, arg: task_command(tasks, ""),
            "/task": lambda messages, run, arg: task_command(tasks, arg)}


def cli_options(tasks, *more) -> dict:
    """cli.Lesson's keywords for s07: --board and --name (and `more` options: --api-context), /task
    help in --help and named by /help, and the live board before each REPL prompt."""
    return {"options": [*more, *OPTIONS], "help_extra": HELP, "before_prompt": Live(tasks),
            "repl_help": "/task help lists what /task does: add, start, done, block, ..."}


class Live:
    """A before-prompt hook for the REPL: one line per change other agents made since the
    last prompt ([board: bob started #3]). The watcher (board/live.py) is made on the first
    prompt, and made again if the TaskManager moved to another store."""

    def __init__(self, tasks) -> None:
        self.tasks, self.store, self.watcher = tasks, None, None

    def __call__(self) -> None:
        if self.store is not self.tasks.store:
            if self.watcher:
                self.watcher.close()
                self.watcher = None
            # Made first, then marked as made: a board it cannot read (it raises) is tried
            # again at the next prompt, not left half made.
            from harness.board import live      # loaded at the REPL's first prompt
            self.watcher = live.BoardWatcher(self.tasks.store, self.tasks.agent)
            self.store = self.tasks.store
            atexit.register(self.watcher.close)
        for line in self.watcher.changes():
            terminal.show_note(line)
