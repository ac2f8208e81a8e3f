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
idea of this lesson), the loop pieces (how one tool call is checked and run,
and how a reply becomes history), then agent_loop: the while loop itself.
THE HARDENING after it keeps bash safe on a real machine (floods, closed
terminals, background jobs).

This is the first lesson: s06 and s07 import its tools and loop pieces.
Limits: the todos live in memory, so they die with the program, and a
compaction (s06) takes them out of the model's sight; s07 fixes that.

Run it:   python s03_todo.py "add a docstring to hello.py and track your steps"
          python s03_todo.py            (a REPL)       python s03_todo.py --demo
"""

import json
import os
import select
import shlex
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from harness.cli import run_cli
from harness.config import model_id
from harness.terminal import show_note, show_stream, show_text, show_tool_call, show_tool_result, show_usage

MAX_TOKENS = 8000      # per model call; large enough for a file's worth of code
MAX_STEPS = 50         # model calls per turn before the loop gives up
BASH_TIMEOUT = 120     # seconds before a command's whole process group is killed
OUTPUT_CAP = 50_000    # characters of tool output the model sees
FLOOD_BYTES = 10_000_000  # output beyond the cap after which a command is stopped (`yes` writes this in 0.1 s)
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

def workspace():
    return Path.cwd().resolve()


def safe_path(p):
    """Resolve p (following symlinks) and refuse it if it leaves the workspace."""
    path = (workspace() / p).resolve()
    if not path.is_relative_to(workspace()):
        raise ValueError(f"path {p!r} is outside the workspace {workspace()}; use a path inside it")
    return path


def _cap(text):
    if len(text) <= OUTPUT_CAP:
        return text
    return text[:OUTPUT_CAP] + f"\n... [output cut: {len(text) - OUTPUT_CAP:,} more characters]"


def run_bash(command):
    # A new session makes the command a process group, so a timeout kills its children too.
    proc = subprocess.Popen(command, shell=True, cwd=workspace(), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        with _signals_raise():
            kept, dropped = _read_output(proc)
    except BaseException:  # a timeout, Ctrl-C, a closed terminal: leave no command running
        _kill_group(proc)
        raise
    out = kept.decode("utf-8", errors="replace").strip()
    if len(out) > OUTPUT_CAP or dropped:
        more = len(out[OUTPUT_CAP:].encode("utf-8")) + dropped
        out = out[:OUTPUT_CAP] + f"\n... [output cut: {more:,} more bytes]"
    if dropped > FLOOD_BYTES:
        _kill_group(proc)
        return out + (f"\n[stopped: the command wrote more than {FLOOD_BYTES // 1_000_000} MB, so it was "
                      "killed; send big output to a file (cmd > out.txt) and read parts of it]")
    if proc.wait():                     # the shell has exited: _read_output saw it, or end of output
        out += f"\n[exit status {proc.returncode}]"
    return out or "(no output)"


def _read_text(target, shown):
    """The text of a resolved path; errors name the path as the model wrote it."""
    if not target.is_file():
        raise ValueError(f"{shown}: no such file" if not target.exists() else f"{shown}: is a directory, not a file")
    try:
        return target.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{shown}: not UTF-8 text; inspect it with bash (e.g. `file {shown}`) instead") from None


def run_read(path, limit=None):
    lines = _read_text(safe_path(path), path).splitlines()
    if limit is not None:
        if limit < 1:
            raise ValueError("limit must be a positive number of lines")
        if len(lines) > limit:
            lines = lines[:limit] + [f"... ({len(lines) - limit} more lines)"]
    return _cap("\n".join(lines)) or "(empty file)"


def run_write(path, content):
    target = safe_path(path)
    data = _utf8(content, "content")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    lines = len(content.splitlines())
    return f"Wrote {len(data):,} bytes ({lines} line{'s' * (lines != 1)}) to {path}"


def run_edit(path, old_text, new_text):
    target = safe_path(path)
    text = _read_text(target, path)
    if not old_text:
        raise ValueError("old_text is empty; give the exact text to replace")
    found = text.count(old_text)
    if found == 0:
        raise ValueError(f"old_text not found in {path}; read the file and copy the text exactly")
    if found > 1:
        raise ValueError(f"old_text occurs {found} times in {path}; include more lines so it is unique")
    target.write_bytes(_utf8(text.replace(old_text, new_text, 1), "new_text"))
    return f"Edited {path}: replaced 1 occurrence"


def object_schema(properties, required):
    return {"type": "object", "properties": properties, "required": required}


BASE_TOOLS = [
    {"name": "bash", "description": f"Run a shell command in the workspace (timeout {BASH_TIMEOUT}s). "
                                    "Returns stdout and stderr together.",
     "input_schema": object_schema({"command": {"type": "string"}}, ["command"])},
    {"name": "read_file", "description": "Read a UTF-8 text file in the workspace.",
     "input_schema": object_schema({"path": {"type": "string"},
                                    "limit": {"type": "integer", "description": "read at most this many lines"}},
                                   ["path"])},
    {"name": "write_file", "description": "Create or overwrite a file in the workspace.",
     "input_schema": object_schema({"path": {"type": "string"}, "content": {"type": "string"}},
                                   ["path", "content"])},
    {"name": "edit_file", "description": "Replace one exact, unique occurrence of old_text in a file.",
     "input_schema": object_schema({"path": {"type": "string"}, "old_text": {"type": "string"},
                                    "new_text": {"type": "string"}}, ["path", "old_text", "new_text"])},
]

BASE_HANDLERS = {"bash": run_bash, "read_file": run_read, "write_file": run_write, "edit_file": run_edit}


# ---------------------------------------------------------------- the todo list

class TodoManager:
    STATUSES = {"pending": "[ ]", "in_progress": "[>]", "completed": "[x]"}

    def __init__(self):
        self.items = []

    def update(self, items):
        """Replace the whole list, or raise ValueError and keep the old one."""
        if len(items) > MAX_TODOS:
            raise ValueError(f"{len(items)} items; keep the list to {MAX_TODOS} or fewer")
        checked = []
        for n, item in enumerate(items, 1):
            if not isinstance(item, dict):
                raise ValueError(f"item {n} must be an object with id, text and status")
            text = str(item.get("text", "")).strip()
            status = item.get("status", "pending")
            if not text:
                raise ValueError(f"item {n}: text is empty")
            if status not in self.STATUSES:
                raise ValueError(f"item {n}: status {status!r} is not one of {', '.join(self.STATUSES)}")
            checked.append({"id": str(item.get("id", n)), "text": text, "status": status})
        doing = [i["id"] for i in checked if i["status"] == "in_progress"]
        if len(doing) > 1:
            raise ValueError(f"{len(doing)} items are in_progress (#{', #'.join(doing)}); "
                             "only one may be in_progress at a time")
        self.items = checked
        return self.render()

    def render(self):
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
         "status": {"type": "string", "enum": list(TodoManager.STATUSES)}}, ["id", "text", "status"])}},
         ["items"])},
]

TOOL_HANDLERS = {**BASE_HANDLERS, "todo": lambda items: TODO.update(items)}


# ---------------------------------------------------------------- loop pieces

JSON_TYPES = {"string": str, "integer": int, "number": (int, float), "boolean": bool,
              "array": list, "object": dict}


def check_args(schema, args):
    """Top-level check of a tool call against its schema, so the model gets a clear error."""
    props = schema.get("properties", {})
    for name in schema.get("required", []):
        if name not in args:
            raise ValueError(f"missing required argument {name!r}")
    for name, value in args.items():
        if name not in props:
            raise ValueError(f"unexpected argument {name!r}; expected: {', '.join(props)}")
        kinds = props[name].get("type")
        kinds = kinds if isinstance(kinds, list) else [kinds] if kinds else []
        ok = any(isinstance(value, JSON_TYPES[k]) and not (isinstance(value, bool) and k != "boolean")
                 for k in kinds)
        if kinds and not ok:
            raise ValueError(f"argument {name!r} must be {' or '.join(kinds)}, got {type(value).__name__}")


def decode_args(args, schema):
    """The arguments as the schema wants them, or ValueError.

    Some endpoints and small models send JSON-encoded text where an object or an array belongs
    ('{"command": "ls"}' as a string, or "items": "[...]"). Decoding it gives the model the result
    it meant; json.loads only parses data, it never runs anything.
    """
    if isinstance(args, str):
        args = _json_or_none(args)
    if not isinstance(args, dict):
        raise ValueError("the arguments must be a JSON object such as {\"path\": \"a.txt\"}, "
                         f"got {type(args).__name__}")
    props = schema.get("properties", {})
    decoded = {}
    for name, value in args.items():
        want = props.get(name, {}).get("type")
        if want in ("array", "object") and isinstance(value, str):
            parsed = _json_or_none(value)
            value = parsed if isinstance(parsed, JSON_TYPES[want]) else value
        decoded[name] = value
    return decoded


def _json_or_none(text):
    try:
        return json.loads(text)
    except ValueError:
        return None


def call_tool(name, args, tools, handlers):
    """Run one tool; return (output, is_error). A tool failure never escapes.

    Every result is capped, whichever tool made it. A production agent would ask the
    user's permission here before running it.
    """
    schemas = {t["name"]: t["input_schema"] for t in tools}
    if name not in handlers:
        return f"unknown tool {name!r}; available: {', '.join(handlers)}", True
    try:
        args = decode_args(args, schemas.get(name, {}))
        check_args(schemas.get(name, {}), args)
        return _cap(str(handlers[name](**args))), False
    except Exception as exc:  # the model sees every failure and can try again
        return _cap(f"{type(exc).__name__}: {exc}"), True


def run_tool_calls(response, tools, handlers):
    """One tool_result per complete tool call, in order, ready to open the next user message."""
    results, cut = [], cut_call(response)
    for block in response.content:
        if block.type == "text":
            show_text(block.text)
        if block.type != "tool_use" or block is cut:
            continue
        show_tool_call(block.name, block.input)
        output, is_error = call_tool(block.name, block.input, tools, handlers)
        show_tool_result(output, is_error)
        result = {"type": "tool_result", "tool_use_id": block.id, "content": output}
        if is_error:
            result["is_error"] = True
        results.append(result)
    if cut is not None:  # its id got no tool_use in the history, so it gets no result: say it in words
        results.append({"type": "text", "text": f"[your {cut.name} call was cut off by {response.stop_reason} "
                                                "before it was complete, so it was not run; send it again, "
                                                "in smaller pieces if it is long]"})
    return results


CUT = {"max_tokens", "model_context_window_exceeded"}   # the reply stopped mid-way
KEEP_BLOCKS = {"text", "tool_use", "thinking", "redacted_thinking"}  # what the loop sends back


def cut_call(response):
    """The tool call a cut reply stopped inside, or None.

    Only the last block can be half-written (a partial input would write half a file); the
    calls before it were finished before it began. llama-server, for one, returns several
    parsed calls with stop_reason max_tokens.
    """
    content = response.content or []
    if response.stop_reason in CUT and content and content[-1].type == "tool_use":
        return content[-1]
    return None


def assistant_turn(response):
    """The assistant message as plain dicts, safe to send again and to write as JSON."""
    cut = cut_call(response)
    if cut is not None:  # half-written: never keep (or run) it
        show_note(f"  [the reply was cut off by {response.stop_reason} inside a {cut.name} call: it was not run]")
    blocks = [b.model_dump(mode="json", exclude_none=True, warnings=False) for b in response.content or []
              if b is not cut]
    for b in [b for b in blocks if b["type"] not in KEEP_BLOCKS]:
        show_note(f"  [a {b['type']!r} block in the reply was left out: this harness does not use it]")
    blocks = [b for b in blocks if b["type"] in KEEP_BLOCKS]
    for b in blocks:  # the API accepts only an object as a tool call's input in the history
        if b["type"] == "tool_use" and not isinstance(b.get("input"), dict):
            decoded = _json_or_none(str(b.get("input")))
            b["input"] = decoded if isinstance(decoded, dict) else {}
    blocks = [b for b in blocks if b["type"] != "text" or b["text"].strip()]
    return {"role": "assistant", "content": blocks or [{"type": "text", "text": "(no text)"}]}


def tool_calls(response):
    """The tool calls to run: every complete one, whatever stop_reason says.

    Compatible servers may say end_turn beside a tool call; dropping it silently would lose work.
    But a reply cut by max_tokens may end in a half-written call: that one is not run (cut_call).
    """
    cut = cut_call(response)
    return [b for b in response.content or [] if b.type == "tool_use" and b is not cut]


def final_text(response):
    """What the user sees when the turn ends, saying why it ended if that was not normal."""
    answer = "\n".join(b.text for b in response.content if b.type == "text").strip()
    notes = {"max_tokens": f"[answer cut: the model reached max_tokens={MAX_TOKENS}]",
             "model_context_window_exceeded": "[answer cut: the conversation filled the context window]",
             "refusal": "[the model refused to continue with this request]"}
    note = notes.get(response.stop_reason)
    return "\n".join(x for x in (answer, note) if x) or "(the model returned no text)"


REMINDER = "<reminder>Update your todos.</reminder>"
STEP_LIMIT_TEXT = (f"[stopped: {MAX_STEPS} model calls in this turn without finishing; "
                   f"say 'continue' to go on]")


# ---------------------------------------------------------------- the loop

def agent_loop(messages, client):
    rounds_without_todo, steps = 0, 0
    while steps < MAX_STEPS:
        steps += 1
        # One model call, streamed so the reply shows while it is written (harness.show_stream).
        response = show_stream(client.messages.stream(model=model_id(), system=SYSTEM, messages=messages,
                                                      tools=TOOLS, max_tokens=MAX_TOKENS, cache_control=CACHE))
        show_usage(response.usage, tools=TOOLS)   # warns once if the endpoint dropped the tools
        messages.append(assistant_turn(response))
        if response.stop_reason == "pause_turn":  # the server paused a long turn: resume it
            continue
        calls = tool_calls(response)
        if not calls:
            return final_text(response)
        # A tool's exception becomes an is_error tool_result: the model reads it and can act on it.
        results = run_tool_calls(response, TOOLS, TOOL_HANDLERS)
        used_todo = any(b.name == "todo" for b in calls)
        rounds_without_todo = 0 if used_todo else rounds_without_todo + 1
        if rounds_without_todo >= NAG_AFTER:
            results.append({"type": "text", "text": REMINDER})
            show_note(f"  [harness adds: {REMINDER}]")
        messages.append({"role": "user", "content": results})
    return STEP_LIMIT_TEXT


# ================================================================ THE HARDENING
# What keeps the tools above safe on a real machine. Each says what goes wrong without it.

def _read_output(proc):
    """Read the output as it comes, keeping only what the model will see.

    Without it, reading all output first holds it in memory (`yes` filled 2.9 GB in 10 s) and
    waits for a background job that keeps the pipe open. Returns (kept bytes, bytes dropped). Stops at end of output, when the shell has exited and only a
    background job still holds the pipe, or when the command floods.
    """
    kept, dropped = bytearray(), 0
    deadline = time.monotonic() + BASH_TIMEOUT
    fd = proc.stdout.fileno()
    while dropped <= FLOOD_BYTES:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"command timed out after {BASH_TIMEOUT}s and was killed with its children; "
                               "for a long job, send its output to a file and run it in the background: "
                               "cmd > job.log 2>&1 &")
        if not select.select([fd], [], [], min(left, 0.2))[0]:
            if proc.poll() is not None:
                break      # the shell is done; `job &` keeps the pipe open, and we do not wait for it
            continue
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            proc.wait(timeout=left)  # end of output: the shell is about to exit
            break
        room = 4 * OUTPUT_CAP - len(kept)  # a character is at most 4 bytes of UTF-8
        kept += chunk[:max(room, 0)]
        dropped += max(len(chunk) - max(room, 0), 0)
    proc.stdout.close()
    return kept, dropped


def _kill_group(proc):
    """The command and every child it started: killing only the shell would leave them running."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


@contextmanager
def _signals_raise():
    """While a command runs, SIGTERM and a closed terminal (SIGHUP) raise, so the command is killed too.

    Without this Python would die at once and leave the command running as an orphan.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    def stop(signum, frame):
        raise SystemExit(128 + signum)
    saved = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)


def _utf8(text, field):
    """Encode before opening the file: otherwise a text that cannot be stored (a lone surrogate)
    fails after the file was opened, and leaves an empty or truncated file behind."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate from a model's JSON (e.g. "\\ud800") cannot be stored
        raise ValueError(f"{field} contains characters that are not valid text (a lone surrogate)") from None



# ---------------------------------------------------------------- demo and main

def demo():
    """A scripted session: a plan, a refused second in_progress, the nag, a finished plan."""
    from harness.stand_in_api import reply, text, tool

    def todos(*statuses):
        steps = ["Write hello.py", "Run it", "Add a docstring"]
        return tool("todo", {"items": [{"id": str(n), "text": t, "status": s}
                                       for n, (t, s) in enumerate(zip(steps, statuses), 1)]})
    script = [
        reply(text("I'll plan first."), todos("in_progress", "pending", "pending")),
        reply(text("Trying to start two items at once (the todo tool should refuse)."),
              todos("in_progress", "in_progress", "pending")),
        reply(tool("write_file", {"path": "demo/hello.py", "content": "print('hello')\n"})),
        reply(tool("bash", {"command": f"{shlex.quote(sys.executable)} demo/hello.py"})),
        reply(tool("read_file", {"path": "demo/hello.py"})),
        reply(text("The harness reminded me; updating the plan."), todos("completed", "completed", "in_progress")),
        reply(tool("edit_file", {"path": "demo/hello.py", "old_text": "print(",
                                 "new_text": '"""Say hello."""\nprint('})),
        reply(todos("completed", "completed", "completed")),
        reply(text("Done: demo/hello.py prints hello and has a docstring.")),
    ]
    return script, "write demo/hello.py, run it, add a docstring, and track your steps", None


def main(argv=None):
    return run_cli("s03_todo", __doc__, agent_loop, demo=demo, argv=argv)


if __name__ == "__main__":
    sys.exit(main())
