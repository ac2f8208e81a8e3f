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

Key insight: the model plans better when it writes its plan down, and it
keeps the plan current when the harness nags. The todo list is just a tool
whose result is the rendered list.

Read it in this order: the base tools (the model's hands), TodoManager (the
idea of this lesson), the loop pieces (how one tool call is checked and run),
then agent_loop: the while loop itself. Each tool is a few plain lines that
hand the work to the harness package (harness/bash.py, harness/files.py), which
keeps it safe on a real machine; harness/endpoints.py turns each reply into
history and tool calls, whatever a compatible endpoint bends.

This is the first lesson: s06 and s07 import its tools and loop pieces.
Limits: the todos live in memory, so they die with the program, and a
compaction (s06) takes them out of the model's sight; s07 fixes that.

Run it:   python s03_todo.py "add a docstring to hello.py and track your steps"
          python s03_todo.py            (a REPL)       python s03_todo.py --demo
"""

import sys
from pathlib import Path

from harness import bash, demos, files, spill
from harness.session import log as session_log
from harness.cli import ToolsInterrupted, not_run, run_cli, step_limit
from harness.config import max_steps, model_id
from harness.endpoints import (assistant_turn, check_args, complete_tool_calls, cut_note,
                               decode_args, final_text)
from harness.session.record import RECORD
from harness.session.views import print_context
from harness.terminal import (show_note, show_stream, show_text, show_tool_call, show_tool_result,
                              show_usage)

MAX_TOKENS = 8000      # per model call; large enough for a file's worth of code
MAX_STEPS = 50         # model calls a turn may make: s03 cannot compact, so its context fills
                       # long before 200 calls (s06 and s07 allow 200; --max-steps sets any)
BASH_TIMEOUT = 120     # seconds before a command's whole process group is killed
OUTPUT_CAP = 50_000    # characters of a tool result the model sees; the rest is saved whole
KEEP_UP_TO = 2_000_000  # characters of bash output kept (and saved whole) before it is cut
MAX_TODOS = 20         # a longer plan belongs on s07's task board
NAG_AFTER = 3          # rounds of tool use without `todo` before the reminder
# Every call re-sends the whole conversation; a top-level cache_control lets the API read the
# unchanged prefix from its cache at a tenth of the price (s06's docstring explains the rules).
CACHE = {"type": "ephemeral"}

SYSTEM = ("You are a coding agent working in the current folder. Use the tools to act. "
          "Plan multi-step work with the todo tool: mark an item in_progress before "
          "starting it and completed when done. Be brief.")


# ---------------------------------------------------------------- base tools
# The workspace is the current folder. These tools run with YOUR rights: the
# path check stops accidents in the file tools, but bash can do anything you can.
# That is not a sandbox; run the lessons in a scratch folder.

def safe_path(p: str) -> Path:
    """Resolve p (following symlinks) and refuse it if it leaves the workspace."""
    return files.inside(Path.cwd().resolve(), p)


def run_bash(command: str) -> str:
    return bash.run(command, cwd=Path.cwd(), timeout=BASH_TIMEOUT, cap=KEEP_UP_TO)


def run_read(path: str, limit: int = None, offset: int = 1) -> str:
    if (limit is not None and limit < 1) or offset < 1:
        raise ValueError("limit and offset must be positive numbers of lines")
    return files.read_lines(safe_path(path), path, offset, limit, OUTPUT_CAP)


def run_write(path: str, content: str) -> str:
    data = files.encode(content, "content")
    files.write_atomic(safe_path(path), data, path)
    lines = len(content.splitlines())
    return f"Wrote {len(data):,} bytes ({lines} line{'s' * (lines != 1)}) to {path}"


def run_edit(path: str, old_text: str, new_text: str) -> str:
    target = safe_path(path)
    text = files.read_text(target, path)
    edited = files.edit_text(text, old_text, new_text, path)
    files.write_atomic(target, files.encode(edited, "new_text"), path)
    return f"Edited {path}: replaced 1 occurrence"


def object_schema(properties: dict, required: list) -> dict:
    return {"type": "object", "properties": properties, "required": required}


BASE_TOOLS = [
    {"name": "bash", "description": f"Run a shell command in the workspace (timeout "
                                    f"{BASH_TIMEOUT}s). Returns stdout and stderr together.",
     "input_schema": object_schema({"command": {"type": "string"}}, ["command"])},
    {"name": "read_file", "description": "Read a UTF-8 text file in the workspace.",
     "input_schema": object_schema({
         "path": {"type": "string"},
         "limit": {"type": "integer", "description": "read at most this many lines"},
         "offset": {"type": "integer", "description": "the first line to read (1 = the first)"}},
         ["path"])},
    {"name": "write_file", "description": "Create or overwrite a file in the workspace.",
     "input_schema": object_schema({"path": {"type": "string"}, "content": {"type": "string"}},
                                   ["path", "content"])},
    {"name": "edit_file", "description": "Replace one exact, unique occurrence of old_text.",
     "input_schema": object_schema({"path": {"type": "string"}, "old_text": {"type": "string"},
                                    "new_text": {"type": "string"}},
                                   ["path", "old_text", "new_text"])},
]

BASE_HANDLERS = {"bash": run_bash, "read_file": run_read, "write_file": run_write,
                 "edit_file": run_edit}


# ---------------------------------------------------------------- the todo list

class TodoManager:
    STATUSES = {"pending": "[ ]", "in_progress": "[>]", "completed": "[x]"}

    def __init__(self) -> None:
        self.items = []

    def update(self, items: list) -> str:
        """Replace the whole list, or raise ValueError and keep the old one."""
        if len(items) > MAX_TODOS:
            raise ValueError(f"{len(items)} items; keep the list to {MAX_TODOS} or fewer")
        checked = [self._check(n, item) for n, item in enumerate(items, 1)]
        doing = [i["id"] for i in checked if i["status"] == "in_progress"]
        if len(doing) > 1:
            raise ValueError(f"{len(doing)} items are in_progress (#{', #'.join(doing)}); "
                             "only one may be in_progress at a time")
        self.items = checked
        return self.render()

    def _check(self, n: int, item: object) -> dict:
        if not isinstance(item, dict):
            raise ValueError(f"item {n} must be an object with id, text and status")
        text, status = str(item.get("text", "")).strip(), item.get("status", "pending")
        if not text:
            raise ValueError(f"item {n}: text is empty")
        if status not in self.STATUSES:
            raise ValueError(f"item {n}: status {status!r} is not one of "
                             f"{', '.join(self.STATUSES)}")
        return {"id": str(item.get("id", n)), "text": text, "status": status}

    def render(self) -> str:
        if not self.items:
            return "No todos."
        lines = [f"{self.STATUSES[i['status']]} #{i['id']}: {i['text']}" for i in self.items]
        done = sum(i["status"] == "completed" for i in self.items)
        return "\n".join(lines + [f"({done}/{len(self.items)} completed)"])


TODO = TodoManager()

TOOLS = BASE_TOOLS + [
    {"name": "todo", "description": "Replace your todo list for this conversation. Send the whole "
     "list each time. At most one item in_progress.",
     "input_schema": object_schema({"items": {"type": "array", "items": object_schema({
         "id": {"type": "string"}, "text": {"type": "string"},
         "status": {"type": "string", "enum": list(TodoManager.STATUSES)}},
         ["id", "text", "status"])}},
         ["items"])},
]

TOOL_HANDLERS = {**BASE_HANDLERS, "todo": lambda items: TODO.update(items)}


# ---------------------------------------------------------------- loop pieces

def call_tool(name: str, args: object, tools: list, handlers: dict) -> tuple:
    """Run one tool; return (output, is_error). A tool failure never escapes.

    Every result is capped, whichever tool made it; a longer one is saved whole in
    .transcripts/results/ and the model gets its head, its tail and the path (harness/spill.py).
    A production agent would ask the user's permission here before running it.
    """
    schemas = {t["name"]: t["input_schema"] for t in tools}
    if name not in handlers:
        return f"unknown tool {name!r}; available: {', '.join(handlers)}", True
    try:
        args = decode_args(args, schemas.get(name, {}))  # JSON text where an object belongs
        check_args(schemas.get(name, {}), args)
        return spill.keep_whole(str(handlers[name](**args)), OUTPUT_CAP, name), False
    except Exception as exc:  # the model sees every failure and can try again
        return spill.keep_whole(f"{type(exc).__name__}: {exc}", OUTPUT_CAP, name), True


def run_tool_calls(calls: list, tools: list, handlers: dict) -> list:
    """One tool_result per call, in order, ready to open the next user message.

    Ctrl-C in the middle keeps what already ran: the REPL gets every result so far (the
    rest marked not run) and keeps them, so the model does not do that work twice.
    """
    results = []
    for call in calls:
        try:
            show_tool_call(call.name, call.input)
            output, is_error = call_tool(call.name, call.input, tools, handlers)
        except KeyboardInterrupt:
            raise ToolsInterrupted(results + [not_run(c) for c in calls[len(results):]]) from None
        show_tool_result(output, is_error)
        RECORD.tool(call.name, call.input, output, is_error)   # for the session page
        result = {"type": "tool_result", "tool_use_id": call.id, "content": output}
        if is_error:
            result["is_error"] = True
        results.append(result)
    return results


def show_reply(response) -> None:
    """The reply's text, for a log (on a terminal show_stream showed it as it came)."""
    for block in response.content or []:
        if block.type == "text":
            show_text(block.text)


REMINDER = "<reminder>Update your todos.</reminder>"


# ---------------------------------------------------------------- the loop

def agent_loop(messages: list, client) -> str:
    rounds_without_todo, steps = 0, 0
    while steps < max_steps(MAX_STEPS):                  # --max-steps, or MAX_STEPS
        steps += 1
        session_log.record(messages)                     # saved as it goes: --continue
        # One model call, streamed so the reply shows while it is written (harness/terminal.py).
        response = show_stream(client.messages.stream(model=model_id(), system=SYSTEM, tools=TOOLS,
                                                      messages=messages, max_tokens=MAX_TOKENS,
                                                      cache_control=CACHE))
        show_usage(response.usage, tools=TOOLS)   # warns once if the endpoint dropped the tools
        messages.append(assistant_turn(response, note=show_note))
        if response.stop_reason == "pause_turn":  # the server paused a long turn: resume it
            continue
        calls = complete_tool_calls(response)     # a call cut off by max_tokens is not run
        if not calls:
            return final_text(response)
        show_reply(response)
        # A tool's exception becomes an is_error tool_result: the model reads it and can act on it.
        results = run_tool_calls(calls, TOOLS, TOOL_HANDLERS) + cut_note(response)
        used_todo = any(call.name == "todo" for call in calls)                       # the nag
        rounds_without_todo = 0 if used_todo else rounds_without_todo + 1
        if rounds_without_todo >= NAG_AFTER:
            results.append({"type": "text", "text": REMINDER})
            show_note(f"  [harness adds: {REMINDER}]")
        messages.append({"role": "user", "content": results})
    return step_limit(steps)    # not a finished turn: the CLI says how to go on


def main(argv: list = None) -> int:
    context = {"/context": lambda messages, client, arg: print_context(SYSTEM, TOOLS, messages, None)}
    return run_cli("s03_todo", __doc__, agent_loop, demo=demos.s03_demo, argv=argv, commands=context)


if __name__ == "__main__":
    sys.exit(main())
