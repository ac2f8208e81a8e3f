#!/usr/bin/env python3
"""s03: the agent loop, four base tools, and a todo list the model keeps for itself.

An agent is a while loop: send the conversation and the tools to the model; if it asks for
tools, run them, send their results back, and go round again until it answers in words.

    user prompt
        |
        v
    +--------+   request: model, system, tools,   +-------+
    |  loop  |   messages, max_tokens             | model |
    |        | ---------------------------------> |       |
    |        | <--------------------------------- |       |
    +--------+   reply: text and tool_use blocks, +-------+
        |  ^     stop_reason: "tool_use", or why it ended ("end_turn", ...)
        |  |
        |  | one tool_result per tool_use, first in the next user message
        v  |
    TOOL_HANDLERS: bash  read_file  write_file  edit_file  todo
                                                            |
                            TodoManager (in memory) <-------+
                            3 rounds without `todo` -> <reminder>

Key insight: the model plans better when it writes its plan down, and keeps it current when
the harness nags. The todo list is just a tool whose result is the rendered list.

Read it top to bottom: agent_loop (the whole idea of an agent), ask_model (the request and
the reply), run_tool_calls and call_tool (a tool_result for each tool_use), then the four base
tools, TodoManager, and the dispatch table (TOOLS, TOOL_HANDLERS). The todo list is agent_loop's
rounds_without_todo and its nag, TodoManager, and the todo tool. A call into harness/ makes the
bare idea safe on a real machine; its name, or the comment above it, says what it does, and
you can skip it on a first read. From harness/ you need two things: the reply's shape
(ask_model lists it) and run, which holds the session (agent_loop says what is in it).

Limits: the todos live in memory and die with the program (--continue starts an empty list),
and s06's compaction hides them. s07 keeps them on disk.

Run it:   python s03_todo.py "add a docstring to hello.py and track your steps"
          python s03_todo.py            (a REPL)
          python s03_todo.py --demo     (no key needed)
"""

import sys
from pathlib import Path

from harness import bash, files, model_call, spill, step_limit, terminal, tool_calls, tool_input

# Tokens the model may write per call: enough for a file of code.
MAX_TOKENS = 8000
# Model calls a turn may make (--max-steps, or MAX_STEPS in the environment, changes it).
# Calls that resume a reply the server paused ("pause_turn") finish the same step: not counted.
MAX_STEPS = 50
# Seconds before a command and all it started are killed.
BASH_TIMEOUT = 120
# Characters of one tool result the model sees. A longer result is saved whole in a file,
# and the model gets its head, its tail and the file's path.
OUTPUT_CAP = 50_000
# A plan longer than this belongs on s07's task board.
MAX_TODOS = 20
# Rounds without a `todo` call before the reminder is added.
NAG_AFTER = 3

SYSTEM = ("You are a coding agent working in the current folder. Use the tools to act. Plan "
          "multi-step work with the todo tool: mark an item in_progress before starting it and "
          "completed when done. Be brief.")
REMINDER = "<reminder>Update your todos.</reminder>"


# ---------------------------------------------------------------- the loop

def agent_loop(messages: list, run, max_steps: int = MAX_STEPS) -> str:
    """Call the model until it answers in words, or max_steps calls are spent; return that
    answer. messages ends with the user's prompt (the REPL keeps it from turn to turn). run:
    the session (harness/run.py's Run, made by cli.run_cli); this lesson uses run.client (the
    SDK's client), run.model, run.log (the session on disk) and run.saved (big results' files)."""
    rounds_without_todo = 0        # the nag's count of steps without a todo call; 0 each turn
    steps = 0
    while steps < max_steps:
        steps += 1
        # A Response, not the SDK's Message: its fields, plain dicts, are in ask_model below.
        response = ask_model(run, SYSTEM, TOOLS, messages)
        messages.append({"role": "assistant", "content": response.content})
        # On disk before its calls run: --continue can pick the session up.
        run.log.record(messages)
        # A stop_reason other than "tool_use" (response.tool_uses is empty): the turn is over.
        if response.stop_reason != "tool_use":
            return response.answer
        results = run_tool_calls(run, response, TOOL_HANDLERS, TOOLS)
        # A `todo` call, even one TodoManager rejects, sets the count back to 0: the model looked
        # at its plan. From NAG_AFTER rounds on, a REMINDER text block follows the results.
        if any(call["name"] == "todo" for call in response.tool_uses):
            rounds_without_todo = 0
        else:
            rounds_without_todo += 1
        if rounds_without_todo >= NAG_AFTER:
            results.append({"type": "text", "text": REMINDER})
            terminal.show_note(f"  [harness adds: {REMINDER}]")
        messages.append({"role": "user", "content": results})
    # Not finished: the answer says so, and how to go on (a str; nothing is raised).
    return step_limit.reached(max_steps)


def ask_model(run, system: str, tools: list, messages: list,
              max_tokens: int = MAX_TOKENS) -> model_call.Response:
    """One model call: the request below, streamed so that the reply shows as it is written.
    Without streaming, and without the harness, the call and what the loop reads are:

        reply = run.client.messages.create(**request)       # waits for the whole reply
        reply.stop_reason                                   # "tool_use", "end_turn", ...
        calls = [b for b in reply.content if b.type == "tool_use"]   # .id, .name, .input

    Here the reply comes back as a Response (harness/model_call.py), in plain dicts: content
    (the blocks, to send back), tool_uses (its tool_use blocks, {"id", "name", "input"}; a
    call the reply was cut off inside is left out), stop_reason ("tool_use" exactly when
    tool_uses is not empty), answer (what the user sees) and notes (text for the model after
    the results, such as "a call was cut off"); the rest is for the display and /cost."""
    request = {"model": run.model, "system": system, "tools": tools, "messages": messages,
               "max_tokens": max_tokens,
               # Prompt caching: the API caches this request, and the next one, which repeats
               # it and adds to its end, can read that part back at 0.1x the price (s06 says when).
               "cache_control": {"type": "ephemeral"}}
    # Whatever fails on the way (after the SDK's own retries) ends as one line that names
    # the endpoint: an EndpointError, which the REPL shows, and a one-shot run exits on.
    with model_call.Guard(run) as guard:
        with run.client.messages.stream(**request) as stream:
            # The reply on the screen as it is written.
            guard.display(stream)
            response = stream.get_final_message()
    # What the loop relies on: stop_reason is "tool_use" exactly when a whole call is kept.
    # The reply as plain dicts, a half-written call left out, its tokens counted; a reply the
    # server paused (stop_reason "pause_turn") is sent back, up to 10 times, to go on.
    return guard.checked(response, request)


def run_tool_calls(run, response, handlers: dict, tools: list) -> list:
    """One tool_result per tool_use, in order; then the harness's notes. The idea is two
    lines, call_tool(...) and result = {...}: the rest is harness. handlers and tools (for
    call_tool's check of the input) are parameters because s06 and s07 pass their own."""
    results = []
    # Ctrl-C: keep_on_ctrl_c fills results for the calls not reached (and the one running),
    # and raises ToolsInterrupted; the REPL keeps them with the conversation.
    with tool_calls.keep_on_ctrl_c(run, response.tool_uses, results):
        for call in response.tool_uses:
            terminal.show_tool_call(call["name"], call["input"])
            output, is_error = call_tool(call, handlers, tools)
            # Longer than OUTPUT_CAP: saved whole in .transcripts/results/ (read_file can open
            # it); the model sees its head, tail and path (only the head, if it cannot be saved).
            output = spill.keep_whole(output, OUTPUT_CAP, call["name"], run.saved)
            result = {"type": "tool_result", "tool_use_id": call["id"], "content": output}
            if is_error:
                result["is_error"] = True
            # kept() returns the tool_result to send: a copy, "(no output)" if empty, a lone
            # surrogate replaced (the API refuses it); shown, and logged now: a kill mid-batch
            # loses no result.
            results.append(tool_calls.kept(run, call, result))
    # The notes, text after the results (which must come first): usually none; one may say
    # "your reply ran out of max_tokens in the middle of a call, which was not run".
    return results + response.notes


def call_tool(call: dict, handlers: dict, tools: list) -> tuple:
    """Run one tool_use through the dispatch table: (output, is_error). Any failure goes back
    to the model as an error it can act on. (A production agent would ask the user before a
    risky call, too.)"""
    name = call["name"]
    if name not in handlers:
        return f"unknown tool {name!r}; use one of {list(handlers)}", True
    try:
        # The input checked against the tool's schema: a missing, unknown or mistyped
        # argument is a clear error, not a TypeError deep in the tool; an object or array
        # sent as JSON text is decoded. (Only the top level: see TODO_ITEM.)
        arguments = tool_input.checked(call["input"], name, tools)
        return str(handlers[name](**arguments)), False
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}", True


# ---------------------------------------------------------------- the base tools
# harness/bash.py and files.py make each tool safe on a real machine, but the tools run with
# YOUR rights: the path check stops accidents; bash can do all you can. Run the lessons in a
# scratch folder.

def safe_path(path: str) -> Path:
    """The path, symlinks followed, or ValueError if it leaves the workspace: the current
    folder (files.workspace(): Path.cwd(), and an error that says so if it was deleted)."""
    return files.inside(files.workspace().resolve(), path)


def run_bash(command: str) -> str:
    # bash -c command: stdout and stderr together, "[exit status N]" when it fails;
    # killed, with all it started, after BASH_TIMEOUT seconds: a TimeoutError, which
    # call_tool sends the model as an error result, with the output until then.
    return bash.run(command, cwd=files.workspace(), timeout=BASH_TIMEOUT)


def run_read(path: str, limit: int = None, offset: int = 1) -> str:
    # Stops at OUTPUT_CAP, and says where to read on. shown: the path as the model wrote it,
    # for the messages (safe_path's is absolute).
    return files.read_lines(safe_path(path), shown=path, offset=offset, limit=limit,
                            cap=OUTPUT_CAP)


def run_write(path: str, content: str) -> str:
    # Atomic: a full disk or a kill leaves the old file, never half of it. note: "", or which
    # of the old file's attributes (its owner, say) could not be kept.
    size, note = files.write_and_note(safe_path(path), content, shown=path)
    return f"Wrote {terminal.plural(size, 'byte')} to {path}{note}"


def run_edit(path: str, old_text: str, new_text: str) -> str:
    target = safe_path(path)
    text = files.read_text(target, shown=path)
    # Exactly one occurrence, or a ValueError that says how to fix the call.
    edited = files.edit_text(text, old_text, new_text, shown=path)
    # field: the argument an error names (new_text, if the edit cannot be encoded).
    _, note = files.write_and_note(target, edited, shown=path, field="new_text")
    return f"Edited {path}: replaced 1 occurrence{note}"


def schema(required: list, **properties) -> dict:
    """A tool's input_schema: a JSON object with these properties."""
    return {"type": "object", "properties": properties, "required": required}


STRING = {"type": "string"}

BASE_TOOLS = [
    {"name": "bash",
     "description": f"Run a shell command in the workspace (timeout {BASH_TIMEOUT}s). Returns "
                    "stdout and stderr.",
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
            raise ValueError(f"{len(doing)} items are in_progress; only one may be "
                             "in_progress at a time")
        self.items = checked
        return self.render()

    def check(self, number: int, item: object) -> dict:
        """One item, checked (see TODO_ITEM): a missing id (or a null one) or status takes a
        default; a status not in MARKS is refused."""
        if not isinstance(item, dict):
            raise ValueError(f"item {number} must be an object")
        text = item.get("text", "")
        status = item.get("status", "pending")
        # Words only: str() of a weak model's null would make a todo named "None".
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"item {number}: text must be some words, got {text!r}")
        # A status sent as a list or an object is refused in words, not with a TypeError.
        if not isinstance(status, str) or status not in self.MARKS:
            raise ValueError(f"item {number}: status {status!r} is not one of "
                             f"{', '.join(self.MARKS)}")
        # A missing or null id takes the item's number (an id of 0 is kept).
        item_id = item.get("id")
        if item_id is None:
            item_id = number
        return {"id": str(item_id), "text": text.strip(), "status": status}

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

# What the model is asked to send for each item. The API does not hold a model to its tool's
# schema (only a strict tool would), and call_tool checks only the top level (items is an
# array): an item may come without these fields, so TodoManager.check requires its text, and
# gives a missing id or status a default.
TODO_ITEM = schema(["id", "text", "status"], id=STRING, text=STRING,
                   status={"type": "string", "enum": list(TodoManager.MARKS)})

TOOLS = BASE_TOOLS + [
    {"name": "todo",
     "description": "Replace your todo list for this conversation. Send the whole list each "
                    "time. At most one item in_progress.",
     "input_schema": schema(["items"], items={"type": "array", "items": TODO_ITEM})},
]

# The dispatch table: every tool the model is offered, and the function that runs it. A
# call's input becomes the function's keyword arguments.
TOOL_HANDLERS = {
    "bash": run_bash,
    "read_file": run_read,
    "write_file": run_write,
    "edit_file": run_edit,
    "todo": TODO.update,
}


def main(argv: list = None) -> int:
    # The command line (the REPL, --demo, --continue, the page) loads here, when the lesson
    # runs: importing a lesson, as s06 imports s03, loads its mechanism alone.
    from harness import cli
    # Each turn, run_cli appends {"role": "user", "content": prompt} to the history, calls
    # agent_loop(history, run) and prints its answer; a REPL keeps the history for the next.
    lesson = cli.Lesson("s03_todo", __doc__, agent_loop, system=SYSTEM, tools=TOOLS)
    return cli.run_cli(lesson, argv)


if __name__ == "__main__":
    sys.exit(main())
