"""The repair of a history into one the Messages API accepts (harness/pairing.py's rule:
every tool_use gets exactly one tool_result, in the next message). Every lesson relies on
it after a failed turn and for --continue: cli, session/log.py and api_context.py load it,
not a lesson's import.
Without each piece:
- repair (Rebuild): a session stopped mid-batch, or a hand-edited or torn log, could never
  be resumed.
- keep_completed: after a failed turn the model forgets the calls that ran (and wrote files)
  and does them again, or a compaction in that turn leaves a call without its result.
- ran_calls: a failed turn is told with the wrong number of calls kept, or kept unrun.
"""

from harness import pairing
from harness.clean import clean_json

# The result of a call that was running when a session stopped.
STOPPED = "interrupted; it may have acted"
# The blocks each role's messages hold as this harness writes them. A hand edit may add any
# other (a kind the API does not know, thinking in a user message): every call would be refused.
WRITTEN = {"user": {"text", "tool_result"},
           "assistant": {"text", "tool_use", "thinking", "redacted_thinking", "compaction"}}


def repair(history: list[dict], ran: list[dict] | None = None) -> tuple[list[dict], int]:
    """(a history the API accepts, tool calls left out).

    A tool_use is kept if the next message answers it. In the last message (its batch was
    running when the session stopped) its calls are answered from ran; the first without a
    result gets STOPPED (it may have acted) and those after it, which never ran, are left out.
    A tool_result is kept only if it answers the message before it, once, and comes first in
    its message; the first message is the user's (or opens with the API's summary, a
    compaction block); no empty text; a reused or refused id is renamed (its result too); an
    input saved as JSON text is decoded; a call whose input is no object goes, with its result;
    a block of a kind the harness never writes in that role's message (a hand edit) goes.
    Messages that need no change stay the same objects: the session log writes only changes.
    """
    rebuilt = Rebuild(history, ran or [])
    return rebuilt.messages, rebuilt.dropped


class Rebuild:
    """repair's work: .messages (valid for the API), .dropped and .interrupted (calls)."""

    def __init__(self, history: list, ran: list):
        self.messages: list[dict] = []
        self.dropped = self.interrupted = 0
        self.refused = 0                      # blocks left out that the API would refuse
        self._used: set = set()               # the ids of the calls kept: each may appear once
        self._names = pairing.NewIds(pairing.ids_in(history) | pairing.ids_in([{"content": ran}]))
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
        blocks = self._written(message, "assistant")
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
            if block["type"] == "tool_result":   # only a user message may hold one: a hand edit's
                self.refused += 1
                continue
            if block["type"] != "tool_use":
                kept.append(block)
                continue
            call = _sendable(block)
            queue = by_id.get(call["id"], []) if call is not None else []
            answer = queue.pop(0) if queue else None
            if call is not None and answer is None and running and not marked:
                answer = pairing.stopped(call, STOPPED)
                marked = True
                self.interrupted += 1
            if call is None or answer is None:
                self.dropped += 1
                continue
            # An id used before, or one the API refuses: the call and its result renamed.
            if not pairing.ID.fullmatch(call["id"]):
                new = pairing.sendable_id(call["id"], self._names)
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
        blocks = self._written(message, "user")
        # A call in a user message is a hand edit's (the API refuses it there): said, as others.
        self.refused += sum(1 for b in blocks if b["type"] == "tool_use")
        content = owed + [b for b in blocks if b["type"] not in ("tool_result", "tool_use")]
        if content:
            self._keep(message, content)

    def _written(self, message: dict, role: str) -> list:
        """_blocks of message that the harness writes in a role's message (tool calls and
        results too: _calls and _user judge those); any other, and thinking without its
        signature (the API refuses it back), is counted in self.refused. A hand edit's
        cache_control goes."""
        kept = []
        for block in _blocks(message.get("content")):
            if block["type"] in ("tool_use", "tool_result") or (
                    block["type"] in WRITTEN[role]
                    and (block["type"] != "thinking" or block.get("signature"))):
                if "cache_control" in block:
                    block = {k: v for k, v in block.items() if k != "cache_control"}
                kept.append(block)
            else:
                self.refused += 1
        return kept

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
    given = pairing.input_object(call.get("input"))
    if given is None:
        return None
    return call if given is call.get("input") else {**call, "input": given}


# ---------------------------------------------------------------- a turn that failed

def ran_calls(messages: list) -> int:
    """Tool results of calls that ran (one Ctrl-C kept from running says NOT_RUN)."""
    return sum(message["role"] == "user" and block.get("type") == "tool_result"
               and block.get("content") != pairing.NOT_RUN
               for _, message, block in pairing.each_block(messages))


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
