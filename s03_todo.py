#!/usr/bin/env python3
"""s03: the agent loop, four base tools, and a todo list the model keeps for itself.

An agent is a while loop: send the conversation to the model; if it asks for
tools, run them, append their results, and go round again.

    user prompt
        |
        v
    +--------+  messages + tools   +-------+
    |  loop  | ------------------> | model |
    |        | <------------------ |       |
    +--------+   text | tool_use   +-------+
        |  ^
        |  | tool_result (one per tool_use, first in the next user message)
        v  |
    TOOL_HANDLERS: bash  read_file  write_file  edit_file  todo
                                                            |
                            TodoManager (in memory) <-------+
                            3 rounds without `todo` -> <reminder>

Key insight: the model plans better when it writes its plan down, and keeps
it current when the harness nags. The todo list is just a tool whose result
is the rendered list.

Read it top to bottom: the base tools (harness/bash.py and files.py keep them
safe on a real machine), TodoManager (the idea), the dispatch table, the loop.
One model call is endpoints.ask(): it streams the reply, and hands back what
the loop needs, whatever a compatible server bends. The loop is given a run
(harness/run.py): the client, and this run's log and record of every call.

Limits: the todos live in memory, so they die with the program, and s06's
compaction hides them from the model; s07 fixes that.

Run it:   python s03_todo.py "add a docstring to hello.py and track your steps"
          python s03_todo.py            (a REPL)
          python s03_todo.py --demo     (no key needed)
"""

import sys
from pathlib import Path

from harness import bash, cli, demos, endpoints, files, spill, terminal, tool_calls
from harness.session import views

MAX_TOKENS = 8000      # per model call: enough for a file's worth of code
MAX_STEPS = 50         # model calls a turn may make (--max-steps): s03 cannot
                       # compact, so its context fills long before s06's 200
BASH_TIMEOUT = 120     # seconds before a command and all its children are killed
OUTPUT_CAP = 50_000    # characters of a result the model sees; a longer one is saved
                       # whole (bash keeps 2,000,000) and it gets the head, tail, path
MAX_TODOS = 20         # a longer plan belongs on s07's task board
NAG_AFTER = 3          # rounds of tool use without `todo` before the reminder

SYSTEM = ("You are a coding agent working in the current folder. Use the tools "
          "to act. Plan multi-step work with the todo tool: mark an item "
          "in_progress before starting it and completed when done. Be brief.")


# ---------------------------------------------------------------- base tools
# The tools run with YOUR rights in the current folder. The path check stops
# accidents, but bash can do anything you can: run the lessons in a scratch folder.

def safe_path(path: str) -> Path:
    """The path, symlinks followed, or ValueError if it leaves the workspace."""
    return files.inside(Path.cwd().resolve(), path)


def run_bash(command: str) -> str:
    return bash.run(command, cwd=Path.cwd(), timeout=BASH_TIMEOUT)


def run_read(path: str, limit: int = None, offset: int = 1) -> str:
    return files.read_lines(safe_path(path), path, offset, limit, OUTPUT_CAP)


def run_write(path: str, content: str) -> str:
    # Atomic: a full disk or a kill leaves the old file, never half of it.
    size = files.write_atomic(safe_path(path), content, path)
    return f"Wrote {size:,} bytes to {path}"


def run_edit(path: str, old_text: str, new_text: str) -> str:
    target = safe_path(path)
    text = files.read_text(target, path)
    # Exactly one occurrence, or a ValueError that says how to fix the call.
    edited = files.edit_text(text, old_text, new_text, path)
    files.write_atomic(target, edited, path, field="new_text")
    return f"Edited {path}: replaced 1 occurrence"


def schema(required: list, **properties) -> dict:
    """A tool's input_schema: a JSON object with these properties."""
    return {"type": "object", "properties": properties, "required": required}


STRING = {"type": "string"}

BASE_TOOLS = [
    {"name": "bash",
     "description": f"Run a shell command in the workspace "
                    f"(timeout {BASH_TIMEOUT}s). Returns stdout and stderr.",
     "input_schema": schema(["command"], command=STRING)},
    {"name": "read_file",
     "description": "Read a UTF-8 text file in the workspace.",
     "input_schema": schema(
         ["path"], path=STRING,
         limit={"type": "integer", "description": "at most this many lines"},
         offset={"type": "integer", "description": "the first line (1 = first)"})},
    {"name": "write_file",
     "description": "Create or overwrite a file in the workspace.",
     "input_schema": schema(["path", "content"], path=STRING, content=STRING)},
    {"name": "edit_file",
     "description": "Replace one exact, unique occurrence of old_text.",
     "input_schema": schema(["path", "old_text", "new_text"], path=STRING,
                            old_text=STRING, new_text=STRING)},
]

BASE_HANDLERS = {
    "bash": run_bash,
    "read_file": run_read,
    "write_file": run_write,
    "edit_file": run_edit,
}


# ---------------------------------------------------------------- the todo list

class TodoManager:
    MARKS = {"pending": "[ ]", "in_progress": "[>]", "completed": "[x]"}

    def __init__(self) -> None:
        self.items = []

    def update(self, items: list) -> str:
        """Replace the whole list, or raise ValueError and keep the old one."""
        if len(items) > MAX_TODOS:
            raise ValueError(f"{len(items)} items; keep it to {MAX_TODOS} or fewer")
        checked = [self.check(n, item) for n, item in enumerate(items, 1)]
        doing = [i for i in checked if i["status"] == "in_progress"]
        if len(doing) > 1:
            raise ValueError(f"{len(doing)} items are in_progress; only one may "
                             "be in_progress at a time")
        self.items = checked
        return self.render()

    def check(self, number: int, item: object) -> dict:
        if not isinstance(item, dict):
            raise ValueError(f"item {number} must be an object")
        text = str(item.get("text", "")).strip()
        status = item.get("status", "pending")
        if not text:
            raise ValueError(f"item {number}: text is empty")
        if status not in self.MARKS:
            raise ValueError(f"item {number}: status {status!r} is not one "
                             f"of {', '.join(self.MARKS)}")
        return {"id": str(item.get("id", number)), "text": text,
                "status": status}

    def render(self) -> str:
        if not self.items:
            return "No todos."
        lines = []
        for item in self.items:
            mark = self.MARKS[item["status"]]
            lines.append(f"{mark} #{item['id']}: {item['text']}")
        done = [i for i in self.items if i["status"] == "completed"]
        lines.append(f"({len(done)}/{len(self.items)} completed)")
        return "\n".join(lines)


TODO = TodoManager()

TODO_ITEM = schema(["id", "text", "status"], id=STRING, text=STRING,
                   status={"type": "string", "enum": list(TodoManager.MARKS)})

TOOLS = BASE_TOOLS + [
    {"name": "todo",
     "description": "Replace your todo list for this conversation. Send "
                    "the whole list each time. At most one item in_progress.",
     "input_schema": schema(["items"], items={"type": "array",
                                              "items": TODO_ITEM})},
]

TOOL_HANDLERS = {**BASE_HANDLERS, "todo": TODO.update}


# ---------------------------------------------------------------- the loop

def call_tool(call: endpoints.Call, handlers: dict) -> tuple:
    """Run one call through the dispatch table: (output, is_error). Any failure
    goes back to the model, which can try again. (A production agent would also
    ask the user before a risky call.)"""
    if call.name not in handlers:
        return f"unknown tool {call.name!r}; use one of {list(handlers)}", True
    # endpoints.ask checked the input against the schema: a misfit is not run.
    if call.problem:
        return call.problem, True
    try:
        return str(handlers[call.name](**call.input)), False
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}", True


def run_tool_calls(run, calls: list, handlers: dict) -> list:
    """One tool_result per call, in order. Ctrl-C keeps what ran and marks the
    rest, so the model does not do it twice (harness/tool_calls.py)."""
    results = []
    with tool_calls.keep_on_ctrl_c(calls, results):
        for call in calls:
            terminal.show_tool_call(call.name, call.input)
            output, is_error = call_tool(call, handlers)
            # Over OUTPUT_CAP, the whole is saved (harness/spill.py).
            output = spill.keep_whole(output, OUTPUT_CAP, call.name, run.saved)
            # Shown, and logged for --continue, at once.
            results.append(tool_calls.result(run, call, output, is_error))
    return results


REMINDER = "<reminder>Update your todos.</reminder>"


def agent_loop(messages: list, run, max_steps: int = MAX_STEPS) -> str:
    rounds_without_todo = 0
    for _ in range(max_steps):
        # One model call, streamed to the screen as it is written.
        reply = endpoints.ask(run, SYSTEM, TOOLS, messages, MAX_TOKENS)
        messages.append(reply.message)
        run.log.record(messages)              # on disk before its calls run
        if not reply.calls:
            return reply.text
        # + a note for a call cut off by max_tokens (it was not run)
        results = run_tool_calls(run, reply.calls, TOOL_HANDLERS) + reply.notes
        # The nag: after NAG_AFTER rounds without `todo` (any todo call resets
        # it), a reminder goes along with every round.
        if any(call.name == "todo" for call in reply.calls):
            rounds_without_todo = 0
        else:
            rounds_without_todo += 1
        if rounds_without_todo >= NAG_AFTER:
            results.append({"type": "text", "text": REMINDER})
            terminal.show_note(f"  [harness adds: {REMINDER}]")
        messages.append({"role": "user", "content": results})
    return cli.step_limit(max_steps)    # not finished: the CLI says how to go on


def main(argv: list = None) -> int:
    context = views.context_command(SYSTEM, TOOLS)      # /context: what fills it
    lesson = cli.Lesson("s03_todo", __doc__, agent_loop, demo=demos.s03_demo,
                        commands={"/context": context})
    return cli.run_cli(lesson, argv)


if __name__ == "__main__":
    sys.exit(main())
