"""The API's own context management, played: what the model reads of a request that sends
context_management, and what the server's summary costs.

Relied on by server.py (each valid request goes through Edits.apply before its reply is made;
the reply's usage is counted on the prompt it returns) and rules.py (the window is measured
after after_compaction; a compaction block may open the messages). Without each piece:
- clearing (clear_tool_uses_20250919, beta context-management-2025-06-27): `--api-context
  clear` would send its edit to a stand-in that ignores it, and the bench would bill server
  clearing as if nothing were cleared. Past `trigger` (input tokens, or tool uses), every tool
  use but the newest `keep` (exclude_tools never) has its result replaced by CLEARED, and with
  clear_tool_inputs its input by {}, if that frees at least `clear_at_least` tokens. The
  response says so in context_management.applied_edits: the tool uses cleared in this request
  and the tokens that freed.
- compaction (compact_20260112, beta compact-2026-01-12): past `trigger` (at least 50,000
  tokens, 150,000 by default), a summary (the stand-in's `summary`) is written in one more
  sampling step, its usage reported only in usage.iterations; the reply opens with the
  `compaction` block and goes on from the summary alone; with pause_after_compaction the
  reply is the block alone, stop_reason "compaction". A later request that sends the block
  back is read from it on (after_compaction): everything before it is dropped.
- the cache: the prompt returned is what usage.py's cache sees, so a clearing rewrites the
  cache from the first block it changed, and the summary step reads the request's cached
  prefix (the summary request is that prefix and the instructions after it).

Readings where the documentation is silent (platform.claude.com/docs/en/build-with-claude/
context-editing and /compaction, read 2026-12), each a choice docs/cost.md repeats:
- whether a clearing, once made, is measured again against the trigger on the next request
  (reading AGAIN: the server is stateless and the client sends the whole history each time,
  so once past the trigger every request clears all but the newest `keep`, and each rewrites
  the cache from the newest cleared result) or is kept, the trigger then measured against the
  prompt as earlier clearings left it (reading KEPT: clearings come in batches, each paid for
  once). The stand-in takes KEPT by default: the docs say "subsequent requests can reuse the
  newly cached prefix" after a clearing, which AGAIN would never allow, and clear_at_least
  ("worth breaking your prompt cache") only makes sense of batches. It keeps what it cleared
  by tool_use id, as a stateless server could by replaying the earlier requests. StandInAPI(
  clearing=AGAIN) plays the other reading: the bench measures both.
- the placeholder's text (CLEARED), and what a cleared input becomes ({}): undocumented.
- `keep` counts every tool use, excluded or not; the trigger counts the whole prompt (tools,
  system, messages), as the docs say of compaction's; with both edits, clearing comes first.
- the summary step's prompt: the request's prompt, then the instructions (the documented
  default when none are given) as a user message; its output is the block as sent.
Simpler than the real API: one summary text whatever the conversation; clear_thinking_20251015
is checked (rules.py) but clears nothing (the lessons send no thinking); compaction happens at
most once a request (the API may compact again in a request whose server tools add enough).
"""

from dataclasses import dataclass, field

from harness import api_context, pairing
from harness.stand_in import script, usage

KEPT, AGAIN = "kept", "again"      # the two readings of a clearing (above)
CLEARED = "[this tool result was cleared by context management]"
CLEAR_TRIGGER = 100_000            # input tokens: clear_tool_uses_20250919's default trigger
CLEAR_KEEP = 3                     # tool uses kept by default
COMPACT_TRIGGER = 150_000          # input tokens: compact_20260112's default trigger
SUMMARY = "Summary of the conversation so far."   # when the stand-in has no summary of its own
# The documented default summarisation prompt (platform.claude.com/docs/en/build-with-claude/
# compaction, "Custom summarization instructions").
SUMMARY_PROMPT = ("You have written a partial transcript for the initial task above. Please "
                  "write a summary of the transcript. The purpose of this summary is to provide "
                  "continuity so you can continue to make progress towards solving the task in "
                  "a future context, where the raw history above may not be accessible and will "
                  "be replaced with this summary. Write down anything that would be helpful, "
                  "including the state, next steps, learnings etc. You must wrap your summary in "
                  "a <summary></summary> block.")


@dataclass
class Compaction:
    """A summary the server wrote in this request: its block, the request the summary step
    read (for its usage), and the prompt the reply is then written from."""
    block: dict
    asked: dict
    after: dict
    pause: bool


@dataclass
class Applied:
    """What the model reads of one request, and what the server did to it."""
    prompt: dict                                   # the body as the model reads it
    applied_edits: list = field(default_factory=list)
    compaction: Compaction | None = None


class Edits:
    """The server's context management for one conversation (a StandInAPI's)."""

    def __init__(self, reading: str = KEPT, summary: str | None = None):
        if reading not in (KEPT, AGAIN):
            raise ValueError(f"clearing must be {KEPT!r} or {AGAIN!r}, not {reading!r}")
        self.reading = reading
        self.summary = summary or SUMMARY
        self.cleared = set()      # KEPT: the tool_use ids cleared so far

    def apply(self, body: dict) -> Applied:
        """The prompt the model reads of a valid request (rules.py has checked it)."""
        config = body.get("context_management") or {}
        edits = {edit["type"]: edit for edit in config.get("edits") or []}
        applied = Applied(after_compaction(body))
        clearing = edits.get("clear_tool_uses_20250919")
        if clearing is not None:
            self._clear(applied, clearing)
        compacting = edits.get("compact_20260112")
        if compacting is not None:
            applied.compaction = self._compact(applied.prompt, compacting)
        return applied

    def _clear(self, applied: Applied, edit: dict) -> None:
        prompt = applied.prompt
        uses = _tool_uses(prompt["messages"])
        before = self.cleared & set(uses) if self.reading == KEPT else set()
        inputs = edit.get("clear_tool_inputs") or False
        shown = _with_cleared(prompt, before, uses, inputs)
        trigger = edit.get("trigger") or {"type": "input_tokens", "value": CLEAR_TRIGGER}
        measured = len(uses) if trigger["type"] == "tool_uses" else usage.prompt_tokens(shown)
        cleared = before
        if measured > trigger["value"]:
            keep = (edit.get("keep") or {"value": CLEAR_KEEP})["value"]
            exclude = set(edit.get("exclude_tools") or ())
            older = list(uses)[:max(len(uses) - keep, 0)]
            more = {tid for tid in older if uses[tid] not in exclude} - before
            at_least = (edit.get("clear_at_least") or {"value": 0})["value"]
            bigger = _with_cleared(prompt, before | more, uses, inputs)
            freed = usage.prompt_tokens(shown) - usage.prompt_tokens(bigger)
            if more and freed >= at_least:
                cleared, shown = before | more, bigger
        if self.reading == KEPT:
            self.cleared |= cleared
        if cleared:
            applied.applied_edits.append({
                "type": "clear_tool_uses_20250919", "cleared_tool_uses": len(cleared),
                "cleared_input_tokens": usage.prompt_tokens(prompt) - usage.prompt_tokens(shown)})
        applied.prompt = shown

    def _compact(self, prompt: dict, edit: dict) -> Compaction | None:
        trigger = (edit.get("trigger") or {"value": COMPACT_TRIGGER})["value"]
        if usage.prompt_tokens(prompt) <= trigger:
            return None
        instructions = edit.get("instructions") or SUMMARY_PROMPT
        ask = {"role": "user", "content": [script.text(instructions)]}
        asked = {**prompt, "messages": prompt["messages"] + [ask]}
        block = {"type": "compaction", "content": self.summary}
        after = {**prompt, "messages": [{"role": "assistant", "content": [block]}]}
        return Compaction(block, asked, after, bool(edit.get("pause_after_compaction")))


def after_compaction(body: dict) -> dict:
    """The body with every message block before the last compaction block dropped (a null
    one, a failed compaction, is skipped, as the API does): what the model reads of it."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return body
    for n in range(len(messages) - 1, -1, -1):
        content = messages[n].get("content") if isinstance(messages[n], dict) else None
        blocks = content if isinstance(content, list) else []
        for k in range(len(blocks) - 1, -1, -1):
            if api_context.is_summary(blocks[k]):
                first = {**messages[n], "content": blocks[k:]}
                return {**body, "messages": [first] + messages[n + 1:]}
    return body


def opens_with_compaction(message) -> bool:
    """A message whose first block is a compaction block: it may open the messages."""
    content = message.get("content") if isinstance(message, dict) else None
    return isinstance(content, list) and bool(content) and api_context.is_summary(content[0])


def _tool_uses(messages: list) -> dict:
    """{tool_use id: tool name}, in the order of the conversation (the rules have checked
    that every call is answered)."""
    return {call["id"]: call["name"] for call, _ in pairing.tool_pairs(messages)}


def _with_cleared(prompt: dict, ids: set, uses: dict, inputs) -> dict:
    """The prompt with these tool uses' results as CLEARED, and their inputs as {} where
    clear_tool_inputs says so (True: every tool; a list: those tools)."""
    if not ids:
        return prompt
    messages = []
    for m in prompt["messages"]:
        content = m.get("content")
        if not isinstance(content, list):
            messages.append(m)
            continue
        # A cleared block is a new one; the others are the request's own (usage counts them once).
        blocks = []
        for b in content:
            if b.get("type") == "tool_result" and b.get("tool_use_id") in ids:
                b = {**b, "content": CLEARED}
            named = isinstance(inputs, list) and uses.get(b.get("id")) in inputs
            if b.get("type") == "tool_use" and b.get("id") in ids and (inputs is True or named):
                b = {**b, "input": {}}
            blocks.append(b)
        messages.append({**m, "content": blocks})
    return {**prompt, "messages": messages}
