"""The history keeper: every tool_use gets exactly one tool_result, in the next message.

The API refuses a whole request (400), on every later turn, for one tool_use without its
result, a result without its call, a tool_use id used twice, or a tool input that is not a
JSON object. This module keeps that rule, for model_call (each reply) and tool_calls
(Ctrl-C); session/repair.py, with its helpers, rebuilds a history that breaks it (a failed
turn's, or a saved one for --continue). The stand-in API checks the same rule separately, on
purpose: it plays the real API, an independent judge.
Without each piece:
- unique_ids: an endpoint that numbers its ids from 1 in each process reuses them after
  --continue (the API refuses; layer 1 takes the new result for one it cleared); an id like
  a local server's "call 1" could never go to the API.
- cut_note: the model is not told that its call, cut by max_tokens, was not run.
- input_object: a tool input sent or saved as JSON text gets the next request refused.
- after_ctrl_c: Ctrl-C in the middle of a batch loses every result of it.
"""

import json
import re

from harness.clean import clean_json

# A stream that ended before message_delta: no stop_reason of the API says so, and the notes
# quote this one in a sentence ("cut off by an early end of the stream").
ENDED_EARLY = "an early end of the stream"
CUT = {"max_tokens", "model_context_window_exceeded", ENDED_EARLY}   # the reply stopped mid-way
INTERRUPTED = "interrupted by the user while it ran: it may have acted (check before redoing it)"
NOT_RUN = "not run: interrupted by the user"
ID = re.compile(r"[a-zA-Z0-9_-]+")    # the tool_use ids the API takes
NOT_IN_ID = re.compile(r"[^a-zA-Z0-9_-]")   # the characters it refuses in one


# ---------------------------------------------------------------- a new reply

def unique_ids(history: list[dict], message: dict) -> dict:
    """message (a new reply, not yet appended) with each tool_use id that is used already, or
    that the API refuses (not ID: "call 1"), renamed, in order; message itself if none is."""
    content = message.get("content")
    if not isinstance(content, list):
        return message
    earlier = ids_in(history)
    names = NewIds(earlier | ids_in([message]))
    renamed, blocks = False, []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "tool_use":
            given = block.get("id")
            if isinstance(given, str) and not ID.fullmatch(given):
                block = {**block, "id": sendable_id(given, names)}
                renamed = True
            elif isinstance(given, str) and given in earlier:
                block = {**block, "id": names.fresh(given)}
                renamed = True
            earlier.add(block.get("id"))
        blocks.append(block)
    return {**message, "content": blocks} if renamed else message


def cut_note(name: str, stop_reason: str) -> dict:
    """The text block that tells the model its cut call was not run (reply.notes)."""
    return {"type": "text", "text": f"[your {name} call was cut off by {stop_reason} before "
            "it was complete, so it was not run; send it again, in smaller pieces if it is long]"}


def input_object(given: object) -> dict | None:
    """A tool input as the API takes it back: the object, or one decoded from JSON text (half
    an emoji in it mended); None if it is neither."""
    if isinstance(given, dict):
        return given
    try:
        decoded = json.loads(given) if isinstance(given, str) else None
    except (ValueError, RecursionError):
        return None
    return clean_json(decoded) if isinstance(decoded, dict) else None


# ---------------------------------------------------------------- reading a history

def each_block(messages: list):
    """(index, message, block) for each block (a dict) of each message's list content."""
    for n, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict):
                yield n, message, block


def tool_id(block: dict):
    """The tool id a tool_use or a tool_result block names, or None."""
    return block.get("tool_use_id") or block.get("id")


def tool_pairs(messages: list) -> list:
    """(tool_use, tool_result) of every call the history answered, oldest first."""
    calls, pairs = {}, []
    for _, message, block in each_block(messages):
        if block.get("type") == "tool_use" and message.get("role") == "assistant":
            calls[block.get("id")] = block
        elif block.get("type") == "tool_result" and message.get("role") == "user":
            call = calls.get(block.get("tool_use_id"))
            if call is not None:
                pairs.append((call, block))
    return pairs


def newest_ids(messages: list) -> set:
    """The tool ids of the newest reply and its results (the model has not seen those yet)."""
    return {tool_id(block) for _, _, block in each_block(messages[-2:])} - {None}


# ---------------------------------------------------------------- a turn that did not finish

def stopped(call, what: str) -> dict:
    """The error tool_result that says a call was stopped, and how (what)."""
    return {"type": "tool_result", "tool_use_id": call["id"], "content": what, "is_error": True}


def after_ctrl_c(calls: list, results: list) -> list:
    """A result for every call of a batch Ctrl-C stopped: those that ran theirs, the one
    running INTERRUPTED ("it may have acted"), the rest NOT_RUN."""
    done = len(results)
    rest = [stopped(calls[done], INTERRUPTED)] if done < len(calls) else []
    for call in calls[done + 1:]:
        rest.append(stopped(call, NOT_RUN))
    return results + rest


def ids_in(history: list) -> set:
    """Every tool_use id, and every id a tool_result names, in history."""
    ids = set()
    for _, _, block in each_block(history):
        named = block.get("id") if block.get("type") == "tool_use" else block.get("tool_use_id")
        if isinstance(named, str):
            ids.add(named)
    return ids


def sendable_id(given: str, names) -> str:
    """An id the API takes, from one it would refuse: each other character is _."""
    sendable = NOT_IN_ID.sub("_", given)
    if sendable in names.taken:
        return names.fresh(sendable)
    names.taken.add(sendable)
    return sendable


class NewIds:
    """New tool_use ids, old_2, old_3, ..., that no message uses (taken grows with each)."""

    def __init__(self, taken: set):
        self.taken = taken
        self.next: dict = {}   # old -> the number to try next, so that renaming one id
                               # many times (an endpoint with one id for all) stays linear

    def fresh(self, old: str) -> str:
        n = self.next.get(old, 2)
        while f"{old}_{n}" in self.taken:
            n += 1
        self.next[old] = n + 1
        self.taken.add(f"{old}_{n}")
        return f"{old}_{n}"
