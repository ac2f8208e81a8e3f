#!/usr/bin/env python3
"""s03: the agent loop, four base tools, and a todo list the model keeps for itself.

An agent is a while loop: send the conversation to the model; if it asks for
tools, run them, append their results, and go round again. A turn is one user
prompt and everything until the model answers it in words; each step of it is
one model call and the tool calls that call asks for.

    user prompt
        |
        v
    +--------+  messages + tools   +-------+
    |  loop  | ------------------> | model |
    |        | <------------------ |       |
    +--------+   text | tool_use   +-------+
        |  ^
        |  | tool_result (one per tool_use, at the start of the next
        |  |              user message: the API requires it)
        v  |
    TOOL_HANDLERS: bash  read_file  write_file  edit_file  todo
                                                            |
                            TodoManager (in memory) <-------+
                            3 rounds without `todo` -> <reminder>

Key insight: the model plans better when it writes its plan down, and keeps
it current when the harness nags. The todo list is just a tool whose result
is the rendered list.

Read it top to bottom: the base tools, TodoManager (the idea), the dispatch
table, the loop.

One model call is endpoints.ask(). It streams the reply to the screen as it is
written, and hands back a reply whose parts the loop uses:

    reply.message   the assistant message, appended to the history as it is
    reply.calls     the tool calls to run, each with .id, .name, .input, and
                    .problem (why the input does not fit the tool, or None)
    reply.text      the answer to show the user when there are no calls
    reply.notes     text to add to the next user message (that a call cut off
                    by max_tokens was not run, say)

Each result goes back in the next user message, as a tool_result block that
names the call it answers:

    {"type": "tool_result", "tool_use_id": "toolu_01A...", "content": "...",
     "is_error": True}              (is_error only when the tool failed)

The loop is also given a run (harness/run.py): the client it talks to, this
run's session log and record of every call, and run.saved, the files that
hold long results whole.

Limits: the todos live in memory: they die with the program, and s06's
compaction hides them. s07 fixes that.

Run it:   python s03_todo.py "add a docstring to hello.py and track your steps"
          python s03_todo.py            (a REPL)
          python s03_todo.py --demo     (no key needed)
"""

import sys
from pathlib import Path

from harness import bash, cli, demos, endpoints, files, spill, terminal, tool_calls
from harness.session import views

# Tokens the model may write per call: enough for a file of code.
MAX_TOKENS = 8000
# Model calls a turn may make (--max-steps changes it).
MAX_STEPS = 50
# Seconds before a command and all it started are killed.
BASH_TIMEOUT = 120
# Characters of one tool result the model sees. A longer result is saved whole
# in a file, and the model gets its head, its tail and the file's path
# (read_file stops at the cap instead, and says where to read on).
OUTPUT_CAP = 50_000
# A plan longer than this belongs on s07's task board.
MAX_TODOS = 20
# Rounds without a `todo` call before the reminder is added.
NAG_AFTER = 3

SYSTEM = ("You are a coding agent working in the current folder. Use the tools "
          "to act. Plan multi-step work with the todo tool: mark an item "
          "in_progress before starting it and completed when done. Be brief.")


# ---------------------------------------------------------------- base tools
# harness/bash.py and files.py make each tool safe on a real machine, but the
# tools run with YOUR rights: the path check stops accidents; bash can do all
# you can. Run the lessons in a scratch folder.

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

# The dispatch table: every tool the model is offered, and the function that
# runs it. A call's input becomes the function's keyword arguments.
TOOL_HANDLERS = {
    "bash": run_bash,
    "read_file": run_read,
    "write_file": run_write,
    "edit_file": run_edit,
    "todo": TODO.update,
}


# ---------------------------------------------------------------- the loop

def call_tool(call: endpoints.Call, handlers: dict) -> tuple:
    """Run one call through the dispatch table: (output, is_error). Any failure
    goes back to the model as an error it can act on. (A production agent
    would ask the user before a risky call, too.)"""
    if call.name not in handlers:
        return f"unknown tool {call.name!r}; use one of {list(handlers)}", True
    # endpoints.ask checked the input's top level against the tool's schema:
    # every required argument present, none unknown, each of the right JSON
    # type. A call that does not fit carries .problem and is not run. What is
    # inside an argument (each todo item, say) the tool checks.
    if call.problem:
        return call.problem, True
    try:
        return str(handlers[call.name](**call.input)), False
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}", True


def run_tool_calls(run, calls: list, handlers: dict) -> list:
    """One tool_result per call, in order. On Ctrl-C the calls that ran keep
    their results and the rest are marked not run (harness/tool_calls.py)."""
    results = []
    with tool_calls.keep_on_ctrl_c(calls, results):
        for call in calls:
            terminal.show_tool_call(call.name, call.input)
            output, is_error = call_tool(call, handlers)
            # Longer than OUTPUT_CAP: saved whole (harness/spill.py).
            output = spill.keep_whole(output, OUTPUT_CAP, call.name, run.saved)
            # Build the tool_result block (its shape is in the docstring), show
            # it and log it now: a kill mid-batch loses no result already made.
            results.append(tool_calls.result(run, call, output, is_error))
    return results


REMINDER = "<reminder>Update your todos.</reminder>"


def agent_loop(messages: list, run, max_steps: int = MAX_STEPS) -> str:
    """Call the model until it answers in words, or max_steps calls are spent;
    return that answer."""
    rounds_without_todo = 0
    steps = 0
    while steps < max_steps:
        steps += 1
        # One model call, streamed to the screen as it is written.
        reply = endpoints.ask(run, SYSTEM, TOOLS, messages, MAX_TOKENS)
        messages.append(reply.message)
        # On disk before its calls run: --continue can pick the session up.
        run.log.record(messages)
        if not reply.calls:
            return reply.text
        # One result per call, then reply.notes.
        results = run_tool_calls(run, reply.calls, TOOL_HANDLERS) + reply.notes
        # The nag: a round with any `todo` call resets the count. After
        # NAG_AFTER rounds without one, every round carries the reminder.
        if any(call.name == "todo" for call in reply.calls):
            rounds_without_todo = 0
        else:
            rounds_without_todo += 1
        if rounds_without_todo >= NAG_AFTER:
            results.append({"type": "text", "text": REMINDER})
            terminal.show_note(f"  [harness adds: {REMINDER}]")
        messages.append({"role": "user", "content": results})
    # Not finished: the CLI tells the user how to go on.
    return cli.step_limit(max_steps)


def main(argv: list = None) -> int:
    # /context in the REPL: what the next request would send, part by part.
    context = views.context_command(SYSTEM, TOOLS)
    lesson = cli.Lesson("s03_todo", __doc__, agent_loop, demo=demos.s03_demo,
                        commands={"/context": context})
    return cli.run_cli(lesson, argv)


if __name__ == "__main__":
    sys.exit(main())
