"""Layer 1 for tool INPUTS: the text an old write_file or edit_file call sent, cleared from view.

Relied on by s06's micro_compact (and so s07's loop), next to the clearing of old results.

    [a: write_file {"path": "app.py", "content": <24,000 characters>}]   <- 6,000 tokens, every call
                                 |  older than the newest KEEP_RECENT calls
                                 v
    [a: write_file {"path": "app.py", "content": "[cleared from the context: 24,000 characters;
                                                   read_file shows the file as it is now]"}]

Without it, a session that writes a few big files carries every byte it ever wrote in every
request, long after the files are on disk. The API's server-side `clear_tool_uses` edit has
a `clear_tool_inputs` option for the same reason.

The rules are layer 1's rules for results: only calls older than the newest KEEP_RECENT,
only texts longer than KEEP_CHARS, and what they free counts toward the same batch, because
rewriting an assistant message throws the cache away from there on, just as a result does.
The placeholder input keeps the call valid for the API (the same keys, all strings) and the
history keeps the real input, so the transcript is complete.

It also says which calls showed a whole file (files_shown_whole), for s06's rule on when an
old read_file result is stale. Without it, a read of ten lines, a read cut short at the cap,
or a write that failed would hide the last whole read of a file the model still needs.
"""

import os

from harness.files import READ_ON           # how read_file ends a read it cut short
from harness.layer1_policy import tokens   # s06's estimate: characters / 4

INPUT_FIELDS = {"write_file": ("content",), "edit_file": ("old_text", "new_text")}  # worth clearing
SHOW_WHOLE_FILE = {"read_file", "write_file"}   # an edit shows only a part of a file
CLEARED = "[cleared from the context: "          # how a cleared text begins (/context counts it)


def files_shown_whole(call: dict, result: dict) -> set:
    """{the path} if this call showed the whole file as it now is (a read_file of all its lines,
    a write_file), and worked; else an empty set. Only such a call makes an earlier read of it
    stale."""
    given = call.get("input") if isinstance(call.get("input"), dict) else {}
    part = call.get("name") == "read_file" and (     # some lines, or cut short at the cap
        given.get("offset") not in (None, 1) or given.get("limit") is not None
        or READ_ON in str(result.get("content", "")))
    shown = call.get("name") in SHOW_WHOLE_FILE and not part and not result.get("is_error")
    return {path_of(call)} - {None} if shown else set()


def path_of(call: dict):
    """The path a file tool call names, normalised ("./a.txt" is "a.txt"), or None."""
    path = (call.get("input") or {}).get("path")
    return os.path.normpath(path) if isinstance(path, str) and path else None


def inputs_worth_clearing(messages: list[dict], keep_recent: int, keep_chars: int,
                          exclude: set = frozenset()) -> dict[str, int]:
    """{tool_use id: tokens clearing it frees} for the inputs in messages older than the newest
    keep_recent calls and longer than keep_chars (s06's KEEP_RECENT and KEEP_CHARS), less the
    calls in exclude (those already cleared, and the newest turn's)."""
    calls = [b for m in messages if m.get("role") == "assistant" and isinstance(m.get("content"), list)
             for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_use"]
    worth = {}
    for block in calls[:max(len(calls) - keep_recent, 0)]:
        if block.get("id") in exclude:
            continue
        fields = _texts(block)
        if sum(len(t) for t in fields.values()) > keep_chars:
            worth[block["id"]] = tokens(fields) - tokens(_placeholders(fields))
    return worth


def clear_inputs(view_messages: list[dict], cleared_ids: set) -> list[dict]:
    """The view with the inputs of those tool calls replaced by placeholders (a copy)."""
    if not cleared_ids:
        return view_messages
    view = []
    for m in view_messages:
        if m.get("role") == "assistant" and isinstance(m.get("content"), list) and any(
                isinstance(b, dict) and b.get("id") in cleared_ids for b in m["content"]):
            m = {**m, "content": [_cleared_call(b) if isinstance(b, dict) and b.get("id") in cleared_ids
                                  else b for b in m["content"]]}
        view.append(m)
    return view


def _cleared_call(block: dict) -> dict:
    fields = _texts(block)
    if not fields:
        return block
    return {**block, "input": {**block["input"], **_placeholders(fields)}}


def _texts(block: dict) -> dict[str, str]:
    """The clearable text fields of a tool call: {} for any other tool, or a non-string field."""
    names = INPUT_FIELDS.get(block.get("name"), ())
    given = block.get("input") if isinstance(block.get("input"), dict) else {}
    return {k: given[k] for k in names if isinstance(given.get(k), str)}


def _placeholders(fields: dict[str, str]) -> dict[str, str]:
    # Worded so that it cannot pass for file contents, which a model might copy, and true whether
    # or not the call worked (its result, which says so, is cleared only if long).
    return {k: f"{CLEARED}{len(v):,} characters; read_file shows the file as it is now]"
            for k, v in fields.items()}

