"""--api-context: the Messages API manages the context on the server, instead of s06's layers.

Loaded only when a run asks for it (Run.use_api_context, from s06's start) or resumes a
session holding the API's summary (Run.resumed). The two betas, as documented
(platform.claude.com/docs/en/build-with-claude/context-editing and /compaction, read 2026-12),
sent as Setting.request() shows: with `clear`, past the trigger the server shows old tool
results as a placeholder (the history keeps them all); with `compact`, past the trigger
(50,000 at the least) it summarises, and the reply opens with a `compaction` block that every
later request must send back.

The lessons' loops do not know; layer 3 (/compact, the compact tool) stays the harness's own.
Without each piece:
- client(): the loops would need a branch for the beta API and its fields.
- view(): with compaction, each request would carry the whole history the server drops (it
  is kept whole for the session log); /context measures the same view.
- kept(): model_call would drop the compaction block, and the server would summarise, and
  bill, the whole history again on every call.
- count(): a summary, billed only in usage.iterations, would be paid for and never shown;
  an endpoint that ignores the fields would leave the context to grow unsaid.
- after_summary(): after the API's summary, s07's model would have no board.
- refused(): a 400 naming the beta would not say the flag is the cause, nor the way on.
- resumed() / as_text(): a session the API compacted, continued without the compact edit,
  sends a block the API refuses on every call; its summary goes on as plain text instead.
- the note in setting(): a COMPACT_THRESHOLD the user set would be ignored in silence.
"""

from dataclasses import dataclass

from harness import config, terminal, tokens
from harness.session import repair
from harness.session.recorder import SUMMARY_BY_API as SUMMARY_LABEL

CLEAR, COMPACT = "clear", "compact"
BETAS = {CLEAR: "context-management-2025-06-27", COMPACT: "compact-2026-01-12"}
EDITS = {CLEAR: "clear_tool_uses_20250919", COMPACT: "compact_20260112"}
# The docs: with tools in the request, the model may call one instead of summarising (the
# block then comes back with no summary) unless the instructions say not to. Their wording.
INSTRUCTIONS = ("Summarize the transcript inside <summary></summary> tags. Include relevant "
                "information for continuing the task in the next context window. Do not call "
                "any tools while writing this summary; respond with text only.")
# Clearing takes old inputs too, as layer 1 does: else every byte written rides every request.
CLEAR_INPUTS = True
# The server's triggers, in input tokens: clearing well before s06's layer 2 would summarise;
# compacting at the least the API takes.
API_CLEAR_AT = 30_000
API_COMPACT_AT = 50_000
AS_TEXT = "[a summary of the conversation so far, written by the API:]\n"


def setting(mode: str, keep: int) -> "Setting":
    """--api-context's Setting; keep: the newest results clearing leaves (s06's KEEP_RECENT)."""
    made = Setting(COMPACT, API_COMPACT_AT)
    if mode == CLEAR:
        made = Setting(CLEAR, API_CLEAR_AT, keep, CLEAR_INPUTS)
    # The user's threshold is not the API's trigger; one not a number fails as without the flag.
    mine = config.positive_int("COMPACT_THRESHOLD", 0, "tokens")
    if mine:
        terminal.show_note(f"[COMPACT_THRESHOLD={mine} is not used with --api-context: "
                           f"{made.acts} past {made.trigger:,} tokens, and layer 2 only guards "
                           "the model's window]")
    return made


@dataclass
class Setting:
    """One run's --api-context: the edit it asks for, and what the API last said it did."""
    mode: str                   # CLEAR or COMPACT
    trigger: int                # input tokens past which the API acts
    keep: int = 3               # CLEAR: the newest tool uses kept whole
    clear_inputs: bool = False  # CLEAR: their inputs cleared too
    cleared: int = 0            # CLEAR: tool uses the last reply's applied_edits counted
    unheard: bool = False       # a reply said nothing of context management (said once)
    after: object = None        # s07: after() is the board to add after the API's summary
    guard: int = 0              # layer 2's threshold, at the window (within())

    def request(self) -> dict:
        """What every request adds: the beta, and context_management."""
        edit = {"type": EDITS[self.mode], "trigger": {"type": "input_tokens",
                                                      "value": self.trigger}}
        if self.mode == COMPACT:
            edit["instructions"] = INSTRUCTIONS
        else:
            edit["keep"] = {"type": "tool_uses", "value": self.keep}
            edit["clear_tool_inputs"] = self.clear_inputs
        return {"betas": [BETAS[self.mode]], "context_management": {"edits": [edit]}}

    def view(self, messages: list) -> list:
        """What a request sends: with compaction, from the last summary on; else all."""
        if self.mode != COMPACT:
            return messages
        return from_last_summary(messages)

    def client(self, client) -> "_Client":
        """The run's client, sending every request to the beta Messages API with this setting."""
        return _Client(client, self)

    def within(self, guard: int) -> int:
        """Layer 2's threshold with the flag: the window's guard (compaction.fit_to_window). A
        guard under the trigger means the API never acts in this window: said, once."""
        self.guard = guard
        if guard < self.trigger:
            terminal.show_note(f"[--api-context {self.mode} acts past {self.trigger:,} tokens, "
                               f"but CONTEXT_WINDOW is {config.context_window():,}: with room "
                               f"kept for a reply and a summary, layer 2 compacts first, at "
                               f"{guard:,}]")
        return guard

    @property
    def acts(self) -> str:
        """What happens past the trigger, for /context's line."""
        return "the API compacts" if self.mode == COMPACT else "the API clears"

    def describe(self) -> str:
        """One line for /context and /cost (layers 1 and 2 step aside)."""
        if self.mode == COMPACT:
            what = "summarises the conversation"
        else:
            what = f"clears old tool results, keeping the newest {self.keep},"
        said = f"the API (--api-context {self.mode}): it {what} past {self.trigger:,} tokens"
        if 0 < self.guard < self.trigger:
            said += f"; in this window layer 2 compacts first, at {self.guard:,}"
        return said

    def kept(self, content: list) -> list:
        """The reply's blocks as the history keeps them: a compaction block only with a
        summary (the docs), as a string (a gateway may send a list); a failed one is said."""
        kept = []
        for block in content:
            if block.get("type") != "compaction":
                kept.append(block)
                continue
            summary = summary_text(block)
            if self.mode != COMPACT:
                terminal.show_note("  [a 'compaction' block in the reply was left out: this run "
                                   "did not ask the API to compact]")
            elif not summary:
                terminal.show_note("  [the API's compaction failed (its block holds no "
                                   "summary): the conversation goes on uncompacted]")
            else:
                kept.append({**block, "content": summary})
        return kept

    def count(self, run, response) -> None:
        """Recorded and said: each summary the server wrote (a call of its own), the
        compaction; said only: the results it cleared, and, once a run, a reply silent on
        context management.
        An odd count is read as well as it can be, never a traceback."""
        usage = response.usage
        steps = summary_steps(usage)
        for step in steps:
            terminal.show_usage(tokens.usage_counts(step), SUMMARY_LABEL)
            run.recorder.call(step, SUMMARY_LABEL)
        for block in response.content:
            if block.type != "compaction":
                continue
            # As kept() reads it: a block of only white space is a failed compaction.
            summary = summary_text(block.model_dump(warnings=False))
            if summary:
                _compacted(run, steps, usage, summary)
        said = _field(response, "context_management")
        if said is None and not self.unheard:
            self.unheard = True
            terminal.show_note("[the endpoint's reply says nothing of context management: it "
                               "may ignore --api-context, and then only layer 2, at the "
                               "model's window, keeps the context in bounds]")
        if self.mode == CLEAR:
            self._cleared(_field(said, "applied_edits"))

    def _cleared(self, edits) -> None:
        """The clearing the reply reports, said when it grew (or restarted after layer 3)."""
        edits = edits if isinstance(edits, list) else []
        mine = [edit for edit in edits if _field(edit, "type") == EDITS[CLEAR]]
        uses = sum(tokens.as_count(_field(edit, "cleared_tool_uses")) for edit in mine)
        freed = sum(tokens.as_count(_field(edit, "cleared_input_tokens")) for edit in mine)
        more = uses - self.cleared if uses >= self.cleared else uses
        self.cleared = uses
        if more:
            results = terminal.plural(more, "more old tool result")
            terminal.show_note(f"  [the API cleared {results} on the server ({uses} in all, "
                               f"{freed:,} tokens): the history keeps them]")

    def after_summary(self, content: list):
        """s07's note after the API's summary, made when asked (after the calls ran), or None:
        no summary in this reply, or nothing to add."""
        if self.after is None or last_summary([{"content": content}]) is None:
            return None
        return self.after

    def refused(self, line: str, exc, saved: bool) -> str:
        """The line for an API error; for a 400 (or a proxy's 422) that names the beta or its
        fields, with the way on (run without --api-context; with --continue when the session
        log holds this conversation: else it would resume an older one)."""
        beta = BETAS[self.mode]
        words = [beta, "context_management", "anthropic-beta", "compaction", *EDITS.values()]
        if getattr(exc, "status_code", None) not in (400, 422):
            return line
        if not any(word in str(exc) for word in words):
            return line
        way_on = "run without --api-context"
        if saved:
            way_on += " (add --continue to go on with this conversation)"
        return (f"{line}: this endpoint does not take the API's context management ({beta}); "
                f"{way_on}, and the harness's own layers manage the context")


class _Client:
    """A client whose messages.stream(...) is the beta API's, with the setting's fields and
    the history's view."""

    def __init__(self, client, setting: Setting):
        self.base_url = client.base_url
        self.messages = self
        self._client, self._setting = client, setting

    def stream(self, **request):
        request = {**request, **self._setting.request()}
        request["messages"] = self._setting.view(request["messages"])
        return self._client.beta.messages.stream(**request)


# ---------------------------------------------------------------- summaries in a history

def summary_text(block: dict) -> str:
    """A compaction block's summary as the string the API takes back ("" if it has none),
    from a list of text blocks too."""
    content = block.get("content")
    if isinstance(content, list):
        texts = [str(part.get("text", "")) for part in content if isinstance(part, dict)]
        content = "\n".join(texts)
    return content.strip() if isinstance(content, str) else ""


def is_summary(block) -> bool:
    """A compaction block with a summary (the stand-in's edits.py asks the same)."""
    return (isinstance(block, dict) and block.get("type") == "compaction"
            and bool(summary_text(block)))


def last_summary(messages: list):
    """The index of the last message holding a compaction block with a summary, or None."""
    for n in range(len(messages) - 1, -1, -1):
        content = messages[n].get("content")
        for block in content if isinstance(content, list) else []:
            if is_summary(block):
                return n
    return None


def from_last_summary(messages: list) -> list:
    """What the API reads of a history: from its last summary on (a block before it in its
    message too), or all of it."""
    start = last_summary(messages)
    if start is None:
        return messages
    content = messages[start]["content"]
    first = max(n for n, block in enumerate(content) if is_summary(block))
    summary = {**content[first], "content": summary_text(content[first])}
    return [{**messages[start], "content": [summary, *content[first + 1:]]}] \
        + messages[start + 1:]


def resumed(messages: list, setting) -> list:
    """A resumed history this run can send: from the API's last summary on, as plain text
    (said) unless the run compacts; blocks without a summary are left out."""
    kept = from_last_summary(without_empty_summaries(messages))
    if setting is not None and setting.mode == COMPACT:
        return kept
    if kept is not messages:
        terminal.show_note("[this session was compacted by the API (--api-context compact): "
                           "it goes on from that summary, sent as plain text; add "
                           "--api-context compact to let the API compact it again]")
    return as_text(kept)


def without_empty_summaries(messages: list) -> list:
    """The history without compaction blocks that hold no summary (the API refuses them):
    said, and the history repaired (session/repair.py)."""
    blank = 0
    kept = []
    for message in messages:
        content = message.get("content")
        if not isinstance(content, list):
            kept.append(message)
            continue
        blocks = [b for b in content if not (isinstance(b, dict) and b.get("type") ==
                                             "compaction" and not summary_text(b))]
        blank += len(content) - len(blocks)
        kept.append({**message, "content": blocks} if len(blocks) < len(content) else message)
    if not blank:
        return messages
    terminal.show_note(f"[{terminal.plural(blank, 'compaction block')} without a summary left "
                       "out of the resumed history: the API refuses them]")
    return repair.repair(kept)[0]


def as_text(messages: list) -> list:
    """The history with its first summary as a user message of its own, opening it (the API
    wants the user first; the rest of its message follows); any other compaction block is left
    out."""
    result = []
    for message in messages:
        content = message.get("content")
        if not isinstance(content, list):
            result.append(message)
            continue
        rest = []
        for block in content:
            if not (isinstance(block, dict) and block.get("type") == "compaction"):
                rest.append(block)
            elif not result and summary_text(block):
                summary = AS_TEXT + summary_text(block)
                result.append({"role": "user", "content": [{"type": "text", "text": summary}]})
        if rest:
            result.append({**message, "content": rest})
    return result


# ---------------------------------------------------------------- what a summary cost

def summary_steps(usage) -> list:
    """The usage of each summary the server wrote in this reply: usage.iterations'
    compaction entries (billed, and not in the top-level counts)."""
    steps = _field(usage, "iterations")
    if not isinstance(steps, list):
        return []
    return [step for step in steps if _field(step, "type") == "compaction"]


def _compacted(run, steps: list, usage, summary: str) -> None:
    """The API's compaction, said and marked on the session page: its size before (what its
    summary call read) and after (what this reply's call read)."""
    after = sum(tokens.usage_counts(usage)[:3])
    if steps:
        before = sum(tokens.usage_counts(steps[-1])[:3])
        size = f"{before:,} → {after:,} tokens"
    else:
        before = None
        size = f"to {after:,} tokens (its size before: not reported)"
    terminal.show_note(f"  [the API compacted the conversation {size}; its summary, a "
                       "compaction block, is kept in the history and sent back]")
    run.recorder.compacted(before or 0, after, summary, "none: the API's compaction block, "
                           "kept in the session log", counted=before, after_counted=True)


def _field(value, name: str):
    """A field of a part of the reply, a dict or an SDK object alike (None if absent)."""
    if isinstance(value, dict):
        return value.get(name)
    return getattr(value, name, None)
