"""The history keeper: every tool_use gets exactly one tool_result, in the next message.

The API refuses a whole request (400), on every later turn, for one tool_use without its
result, a result without its call, a tool_use id used twice, or a tool input that is not a
JSON object. This module alone keeps that rule, for model_call (each reply), tool_calls
(Ctrl-C), cli (a failed turn) and session/log.py (--continue). The stand-in API checks the
same rule separately, on purpose: it plays the real API, an independent judge.
Without each piece:
- unique_ids: an endpoint that numbers its ids from 1 in each process reuses them after
  --continue (the API refuses; layer 1 takes the new result for one it cleared); an id like
  a local server's "call 1" could never go to the API.
- cut_note: the model is not told that its call, cut by max_tokens, was not run.
- input_object: a tool input sent or saved as JSON text gets the next request refused.
- after_ctrl_c: Ctrl-C in the middle of a batch loses every result of it.
- ran_calls: a failed turn is told with the wrong number of calls kept, or kept unrun.
- keep_completed: after a failed turn the model forgets the calls that ran (and wrote files)
  and does them again, or a compaction in that turn leaves a call without its result.
- repair (Rebuild): a session stopped mid-batch, or a hand-edited or torn log, could never
  be resumed.
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
STOPPED = "interrupted; it may have acted"   # the result of a call running when a session stopped


# ---------------------------------------------------------------- a new reply

def unique_ids(history: list[dict], message: dict) -> dict:
    """message (a new reply, not yet appended) with each tool_use id that is used already, or
    that the API refuses (not ID: "call 1"), renamed, in order; message itself if none is."""
    content = message.get("content")
    if not isinstance(content, list):
        return message
    earlier = _ids_in(history)
    names = _NewIds(earlier | _ids_in([message]))
    renamed, blocks = False, []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "tool_use":
            given = block.get("id")
            if isinstance(given, str) and not ID.fullmatch(given):
                block = {**block, "id": _sendable_id(given, names)}
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


def ran_calls(messages: list) -> int:
    """Tool results of calls that ran (one Ctrl-C kept from running says NOT_RUN)."""
    return sum(message["role"] == "user" and block.get("type") == "tool_result"
               and block.get("content") != NOT_RUN for _, message, block in each_block(messages))


def keep_completed(messages: list, saved: int, prompt: dict, results: list | None,
                   ran: list) -> tuple[bool, int]:
    """After a failed turn, in place: a history the API accepts, keeping every call that ran
    with its result; returns (compacted, the calls that ran).

    saved: the history's length before the turn; prompt: the turn's message; results (from
    ToolsInterrupted) answer the last reply's calls; ran: the results the session log got
    since its last message. Repaired as repair() does; a turn with no call that ran is undone;
    one a compaction replaced the history in (the prompt is gone) goes on from the summary.
    """
    if results and messages and messages[-1]["role"] == "assistant":
        messages.append({"role": "user", "content": results})
    messages[:] = repair(messages, ran)[0]
    compacted = not any(m is prompt for m in messages)
    start = 0 if compacted else saved + 1
    done = ran_calls(messages[start:])
    if compacted:
        messages[:] = clean_json(messages) or []
    elif not done:
        del messages[saved:]
    else:
        messages[saved:] = clean_json(messages[saved:])
    return compacted, done


# ---------------------------------------------------------------- repair

def repair(history: list[dict], ran: list[dict] | None = None) -> tuple[list[dict], int]:
    """(a history the API accepts, tool calls left out).

    A tool_use is kept if the next message answers it. In the last message (its batch was
    running when the session stopped) its calls are answered from ran; the first without a
    result gets STOPPED (it may have acted) and those after it, which never ran, are left out.
    A tool_result is kept only if it answers the message before it, once, and comes first in
    its message; the first message is the user's (or opens with the API's summary, a
    compaction block); no empty text; a reused or refused id is renamed (its result too); an
    input saved as JSON text is decoded; a call whose input is no object goes, with its result.
    Messages that need no change stay the same objects: the session log writes only changes.
    """
    rebuilt = Rebuild(history, ran or [])
    return rebuilt.messages, rebuilt.dropped


class Rebuild:
    """repair's work: .messages (valid for the API), .dropped and .interrupted (calls)."""

    def __init__(self, history: list, ran: list):
        self.messages: list[dict] = []
        self.dropped = self.interrupted = 0
        self._used: set = set()               # the ids of the calls kept: each may appear once
        self._names = _NewIds(_ids_in(history) | _ids_in([{"content": ran}]))
        owed = None       # the results the last kept reply's calls get, for the next message
        for n, message in enumerate(history):
            if not isinstance(message, dict):
                continue
            following = history[n + 1] if n + 1 < len(history) else None
            if message.get("role") == "assistant":
                owed = self._reply(message, following, ran, running=following is None)
            elif message.get("role") == "user":
                self._user(message, owed or [])
                owed = None

    def _reply(self, message: dict, following, ran: list, running: bool) -> list | None:
        """Keep the reply with its answerable calls; return the results the next message owes
        them. running: the reply is the last message, so its batch was running."""
        blocks = _blocks(message.get("content"))
        # The first message must be the user's, or open with the API's summary.
        if not self.messages and not (blocks and blocks[0]["type"] == "compaction"):
            self.dropped += sum(b["type"] == "tool_use" for b in blocks)
            return None
        answers = ran if running else _results_in(following)
        kept, results = self._calls(blocks, answers, running)
        if not kept:
            return None
        self._keep(message, kept)
        if isinstance(following, dict) and following.get("role") == "user":
            return results
        if results:                        # no user message follows: one for the results
            self.messages.append({"role": "user", "content": results})
        return None

    def _calls(self, blocks: list, answers: list, running: bool) -> tuple[list, list]:
        """(the blocks kept, the results of their calls in order)."""
        by_id: dict = {}                   # id -> its results in order (an id twice: two)
        for block in answers:
            # The API takes a result's content as none, a string or a list of blocks.
            if isinstance(block.get("tool_use_id"), str) \
                    and isinstance(block.get("content", ""), (str, list)):
                by_id.setdefault(block["tool_use_id"], []).append(block)
        kept, results = [], []
        marked = False                     # STOPPED goes to one call: the one running
        for block in blocks:
            if block["type"] == "tool_result":   # only a user message may hold one
                continue
            if block["type"] != "tool_use":
                kept.append(block)
                continue
            call = _sendable(block)
            queue = by_id.get(call["id"], []) if call is not None else []
            answer = queue.pop(0) if queue else None
            if call is not None and answer is None and running and not marked:
                answer = stopped(call, STOPPED)
                marked = True
                self.interrupted += 1
            if call is None or answer is None:
                self.dropped += 1
                continue
            # An id used before, or one the API refuses: the call and its result renamed.
            if not ID.fullmatch(call["id"]):
                new = _sendable_id(call["id"], self._names)
                call, answer = {**call, "id": new}, {**answer, "tool_use_id": new}
            if call["id"] in self._used:
                new = self._names.fresh(call["id"])
                call, answer = {**call, "id": new}, {**answer, "tool_use_id": new}
            self._used.add(call["id"])
            kept.append(call)
            results.append(answer)
        return kept, results

    def _user(self, message: dict, owed: list) -> None:
        """Keep a user message: the results owed to the reply before it first, then the rest."""
        blocks = _blocks(message.get("content"))
        content = owed + [b for b in blocks if b["type"] not in ("tool_result", "tool_use")]
        if content:
            self._keep(message, content)

    def _keep(self, message: dict, blocks: list) -> None:
        """Keep message with these blocks: the same object if they are all its own, in order
        (a prompt stays the string it was)."""
        content = message.get("content")
        same = isinstance(content, str) or (
            isinstance(content, list) and len(blocks) == len(content)
            and all(a is b for a, b in zip(blocks, content, strict=True)))
        self.messages.append(message if same else {**message, "content": blocks})


def _blocks(content) -> list[dict]:
    """The content as a list of blocks, without empty text (which the API refuses)."""
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and isinstance(b.get("type"), str)
            and (b["type"] != "text" or (isinstance(b.get("text"), str) and b["text"].strip()))]


def _results_in(message) -> list[dict]:
    """The tool_result blocks of a user message, in order."""
    if not isinstance(message, dict) or message.get("role") != "user":
        return []
    return [b for b in _blocks(message.get("content")) if b["type"] == "tool_result"]


def _sendable(call: dict) -> dict | None:
    """The tool_use as the API takes it (input decoded from JSON text), or None if it cannot be."""
    if not (isinstance(call.get("id"), str) and call["id"] and isinstance(call.get("name"), str)):
        return None
    given = input_object(call.get("input"))
    if given is None:
        return None
    return call if given is call.get("input") else {**call, "input": given}


def _ids_in(history: list) -> set:
    """Every tool_use id, and every id a tool_result names, in history."""
    ids = set()
    for _, _, block in each_block(history):
        named = block.get("id") if block.get("type") == "tool_use" else block.get("tool_use_id")
        if isinstance(named, str):
            ids.add(named)
    return ids


def _sendable_id(given: str, names) -> str:
    """An id the API takes, from one it would refuse: each other character is _."""
    sendable = NOT_IN_ID.sub("_", given)
    if sendable in names.taken:
        return names.fresh(sendable)
    names.taken.add(sendable)
    return sendable


class _NewIds:
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
