"""--api-context: the Messages API manages the context on the server, instead of s06's layers.

Relied on by s06 (its flag, OPTION, and its constants: start() puts a Setting on the run,
layer 1 steps aside for it, and layer 2 only guards the model's window), s07 (s06's flag,
and compacted(): its loop adds the board after the API's summary), endpoints.ask (what the
request adds and sends, what the reply keeps and costs), cli (a resumed session goes on
from the API's summary) and session/views.py (/context and /cost say which is in charge).
The API's two betas, as documented (platform.claude.com/docs/en/build-with-claude/
context-editing and /compaction, read 2026-12):

    --api-context clear     context_management {"edits": [{"type": "clear_tool_uses_20250919",
                            "trigger": ..., "keep": ..., "clear_tool_inputs": ...}]}, beta
                            context-management-2025-06-27: past the trigger the server shows
                            old tool results as a placeholder; the history keeps them all
    --api-context compact   {"type": "compact_20260112", "trigger": ..., "instructions": ...},
                            beta compact-2026-01-12: past the trigger (50,000 at the least)
                            the server summarises, and the reply opens with a `compaction`
                            block that every later request must send back; the summary's own
                            cost is only in usage.iterations

Layer 3 (/compact, the compact tool) stays the harness's own in both modes: a person or the
model asking for a summary gets the transcript on disk and a summary, as without the flag.
The API's on-demand compaction (beta compact-2026-09-04, a top-level `compaction`) would do it
on the server, but it cannot be sent with context_management, keeps no transcript, and must
replace the messages it summarises. Without each piece:
- request(): the betas and the edit, built in one place; a history holding a compaction block
  sent without the compact edit is refused by the API on every later call, so it is one
  clear line here instead (continue it with --api-context compact).
- view(): with compaction, the request would carry the whole history the server drops anyway
  (it is kept whole for the session log and --continue); endpoints.ask sends it, /context
  measures it.
- kept_blocks(): endpoints drops block types it does not use, and would drop the compaction
  block; the next request would then send the whole history again, and the server would
  summarise it again, and bill it again, on every call. A compaction whose summary failed
  (content null) is left out: the docs say to send back only blocks with a summary.
- compacted(): s07 promises the board after every compaction; after the API's, the model
  would have only the summary, and would have to remember the tasks.
- summary_steps() and announce(): a summary the server wrote would be paid for and never
  shown: its usage is only in usage.iterations, the top-level counts leave it out. A reply
  with no context_management at all (which the API always sends back) is said once: an
  endpoint that takes the fields and ignores them would leave the context to grow, unmanaged,
  to the model's window.
- refused(): an endpoint without the beta answers a 400 that names it; the user would not
  know that the flag is the cause, nor that s06's own layers are the way on.
- in_charge(): /context and /cost could not say which is managing the context.
- setting()'s note: a COMPACT_THRESHOLD the user set would be ignored in silence.
"""

from dataclasses import dataclass

from harness import config, terminal
from harness.errors import EndpointError

CLEAR, COMPACT = "clear", "compact"
BETAS = {CLEAR: "context-management-2025-06-27", COMPACT: "compact-2026-01-12"}
EDITS = {CLEAR: "clear_tool_uses_20250919", COMPACT: "compact_20260112"}
# The docs: with tools in the request, the model may call one instead of summarising (the
# block then comes back with no summary) unless the instructions say not to. Their wording.
INSTRUCTIONS = ("Summarize the transcript inside <summary></summary> tags. Include relevant "
                "information for continuing the task in the next context window. Do not call "
                "any tools while writing this summary; respond with text only.")
SUMMARY_LABEL = "summary by the API"    # a summary call, as the record and /cost count them
# Clearing takes the old calls' inputs too (clear_tool_inputs), as layer 1 clears old write/edit
# texts: a session that writes big files would carry every byte it wrote in every request.
CLEAR_INPUTS = True
OPTION = (("--api-context",), {
    "choices": (CLEAR, COMPACT), "metavar": "{clear,compact}",
    "help": "let the API manage the context on the server instead of the harness's layers 1 "
            "and 2: clear old tool results (context editing), or compact (a summary the API "
            "writes); see docs/cost.md"})


@dataclass
class Setting:
    """One run's --api-context: the edit it asks for, and what the API last said it did."""
    mode: str                   # CLEAR or COMPACT
    trigger: int                # input tokens past which the API acts
    keep: int = 3               # CLEAR: the newest tool uses kept whole
    clear_inputs: bool = False  # CLEAR: their inputs cleared too
    cleared: int = 0            # CLEAR: tool uses the last reply's applied_edits counted
    unheard: bool = False       # a reply said nothing of context management (said once)

    def request(self) -> dict:
        """What endpoints.ask adds to the request: the beta, and context_management."""
        edit = {"type": EDITS[self.mode], "trigger": {"type": "input_tokens",
                                                      "value": self.trigger}}
        if self.mode == COMPACT:
            edit["instructions"] = INSTRUCTIONS
        else:
            edit["keep"] = {"type": "tool_uses", "value": self.keep}
            edit["clear_tool_inputs"] = self.clear_inputs
        return {"betas": [BETAS[self.mode]], "context_management": {"edits": [edit]}}

    def view(self, messages: list) -> list:
        """What a request sends: with compaction, from the last summary on (the API drops what
        came before it); with clearing, every message (the server clears)."""
        if self.mode != COMPACT:
            return messages
        return from_last_summary(messages)

    @property
    def acts(self) -> str:
        """What happens past the trigger, for /context's line."""
        return "the API compacts" if self.mode == COMPACT else "the API clears"

    def describe(self) -> str:
        """One line for /context and /cost (layers 1 and 2 step aside: harness/api_context.py)."""
        if self.mode == COMPACT:
            what = "summarises the conversation"
        else:
            what = f"clears old tool results, keeping the newest {self.keep},"
        return f"the API (--api-context {self.mode}): it {what} past {self.trigger:,} tokens"


def setting(args, clear_at: int, compact_at: int, keep: int):
    """--api-context's Setting from s06's constants, or None without the flag. args: the
    command line as parsed (None, or a lesson's that lacks the flag: no setting)."""
    mode = getattr(args, "api_context", None)
    if mode not in (CLEAR, COMPACT):
        return None
    made = Setting(COMPACT, compact_at)
    if mode == CLEAR:
        made = Setting(CLEAR, clear_at, keep, CLEAR_INPUTS)
    # The user's threshold (the environment, or ./.env, read by now) is not the API's trigger;
    # one that is not a number is the one line it is without the flag.
    mine = config.positive_int("COMPACT_THRESHOLD", 0, "tokens")
    if mine:
        terminal.show_note(f"[COMPACT_THRESHOLD={mine} is not used with --api-context: "
                           f"{made.acts} past {made.trigger:,} tokens, and layer 2 only guards "
                           "the model's window]")
    return made


def request(setting, messages: list) -> dict:
    """The request's extra fields for this run's setting ({} without one); EndpointError for a
    history holding a compaction block when the run does not ask for compaction."""
    if setting is not None and setting.mode == COMPACT:
        return setting.request()
    if last_summary(messages) is not None:
        raise EndpointError("this conversation holds a summary the API wrote (a compaction "
                            "block, from --api-context compact): continue it with "
                            "--api-context compact, in s06 or s07")
    return {} if setting is None else setting.request()


def last_summary(messages: list) -> int | None:
    """The index of the last message holding a compaction block with a summary, or None."""
    for n in range(len(messages) - 1, -1, -1):
        content = messages[n].get("content")
        for block in content if isinstance(content, list) else []:
            if _is_summary(block):
                return n
    return None


def from_last_summary(messages: list) -> list:
    """What the API reads of a history: from its last summary on (it drops what came before
    the compaction block), or all of it if the API has summarised nothing. cli resumes a
    session from here, so that what s06 measures of it is what a request sends."""
    start = last_summary(messages)
    if start is None:
        return messages
    # Within its message too: a block before the summary (a text) is dropped as well.
    content = messages[start]["content"]
    first = max(n for n, block in enumerate(content) if _is_summary(block))
    if first == 0:
        return messages[start:]
    return [{**messages[start], "content": content[first:]}] + messages[start + 1:]


def _is_summary(block) -> bool:
    return isinstance(block, dict) and block.get("type") == "compaction" \
        and bool(block.get("content"))


def kept_blocks(setting, blocks: list) -> list:
    """The reply's blocks as the history keeps them: a compaction block only when the run asked
    for compaction, and only with a summary (a failed one is said, and left out)."""
    kept = []
    for block in blocks:
        if block.get("type") != "compaction":
            kept.append(block)
        elif setting is None or setting.mode != COMPACT:
            terminal.show_note("  [a 'compaction' block in the reply was left out: this run did "
                               "not ask the API to compact]")
        elif not block.get("content"):
            terminal.show_note("  [the API's compaction failed (its block holds no summary): "
                               "the conversation goes on uncompacted]")
        else:
            kept.append(block)
    return kept


def compacted(reply) -> bool:
    """Whether the API summarised the conversation in this reply (endpoints.ask's Reply): its
    message then holds the compaction block, and all before it is gone from what the model
    reads. s07 adds the board after it, as after its own compaction."""
    return last_summary([reply.message]) is not None


def summary_steps(usage) -> list:
    """The usage of each summary the server wrote in this reply (usage.iterations' compaction
    entries): billed, and left out of the top-level counts."""
    steps = _field(usage, "iterations") or []
    return [step for step in steps if _field(step, "type") == "compaction"]


def announce(run, response) -> None:
    """What the server did in this reply, said and marked: a summary (its size before and
    after, on the session page), or more tool results cleared; and once a run, a reply that
    says nothing of context management (an endpoint that may ignore the beta)."""
    for block in response.content:
        if block.type == "compaction" and getattr(block, "content", None):
            _compacted(run, response.usage, block.content)
    setting = run.api_context
    if setting is None:
        return
    said = _field(response, "context_management")
    if said is None and not setting.unheard:
        setting.unheard = True
        terminal.show_note("[the endpoint's reply says nothing of context management: it may "
                           "ignore --api-context, and then only layer 2, at the model's window, "
                           "keeps the context in bounds]")
    if setting.mode == CLEAR:
        _cleared(setting, _field(said, "applied_edits") or [])


def _cleared(setting, edits: list) -> None:
    """The clearing the reply reports: said when it cleared more than the last reply did (or
    anything, after layer 3 made a new history)."""
    mine = [edit for edit in edits if _field(edit, "type") == EDITS[CLEAR]]
    uses = sum(_field(edit, "cleared_tool_uses") or 0 for edit in mine)
    freed = sum(_field(edit, "cleared_input_tokens") or 0 for edit in mine)
    more = uses - setting.cleared if uses >= setting.cleared else uses
    setting.cleared = uses
    if more:
        results = terminal.plural(more, "more old tool result")
        terminal.show_note(f"  [the API cleared {results} on the server ({uses} in all, "
                           f"{freed:,} tokens): the history keeps them]")


def _compacted(run, usage, summary: str) -> None:
    steps = summary_steps(usage)
    before = sum(_tokens_in(step) for step in steps[-1:])
    after = _tokens_in(usage)
    terminal.show_note(f"  [the API compacted the conversation: {before:,} → {after:,} tokens; "
                       "its summary, a compaction block, is kept in the history and sent back]")
    run.recorder.compacted(before, after, summary, "none: the API's compaction block, kept in "
                           "the session log", counted=before, after_counted=True)


def _tokens_in(usage) -> int:
    names = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    return sum(_field(usage, name) or 0 for name in names)


def refused(line: str, exc, request: dict) -> str:
    """The one line for an API error: for a 400 (or a proxy's 422) that names the beta or its
    fields, with the way on (run without --api-context)."""
    betas = request.get("betas") or []
    words = [*betas, "context_management", "anthropic-beta", "compaction", *EDITS.values()]
    if not betas or getattr(exc, "status_code", None) not in (400, 422):
        return line
    if not any(word in str(exc) for word in words):
        return line
    return (f"{line}: this endpoint does not take the API's context management ({betas[0]}); "
            "run without --api-context, and the harness's own layers manage the context")


def in_charge(run) -> str | None:
    """Which manages the context, for /context and /cost; None for a lesson without layers."""
    if run.api_context is not None:
        return run.api_context.describe()
    if run.recorder.data.current_threshold is None:
        return None
    return "the harness's layers 1 and 2 (without --api-context)"


def _field(value, name: str):
    """A field of a part of the reply, a dict or an SDK object alike (None if absent)."""
    if isinstance(value, dict):
        return value.get(name)
    return getattr(value, name, None)
