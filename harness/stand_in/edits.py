"""The API's own context management, played: what the model reads of a request that sends
context_management, and what the server's summary costs.

Relied on by server.py (each valid request goes through Edits.apply; the reply's usage is
counted on the prompt it returns) and rules.py (the window is measured after after_compaction;
a compaction block may open the messages). Without each piece:
- clearing (clear_tool_uses_20250919): `--api-context clear` would go unplayed, and the bench
  would bill server clearing as if nothing were cleared. Past `trigger` (input tokens or tool
  uses), every tool use but the newest `keep` (exclude_tools never) has its result replaced by
  CLEARED (and with clear_tool_inputs its input by {}), if that frees `clear_at_least` tokens;
  applied_edits says how many tool uses were cleared and the tokens that freed.
- compaction (compact_20260112): past `trigger` (150,000 tokens by default, at least 50,000),
  one more sampling step writes the summary (the stand-in's `summary`), its usage reported
  only in usage.iterations; the reply opens with the `compaction` block and goes on from it
  alone (pause_after_compaction: the block alone, stop_reason "compaction"). A later request
  is read from the block it sends back on (after_compaction).
- the prompt returned is what usage.py's cache sees: a clearing rewrites the cache from the
  first block it changed, and the summary step reads the request's cached prefix.

Readings where the docs are silent (platform.claude.com/docs/en/build-with-claude/
context-editing and /compaction, read 2026-12; docs/cost.md repeats them):
- a clearing once made is kept, by tool_use id (KEPT, as a stateless server could by replaying
  the earlier requests): clearings come in batches, each paid for once, as the docs' "subsequent
  requests can reuse the newly cached prefix" and clear_at_least imply. The other reading,
  AGAIN (StandInAPI(clearing=AGAIN)), measures each request afresh, so once past the trigger
  every request clears all but the newest `keep`; the bench measures both.
- CLEARED's text, and a cleared input as {}.
- `keep` counts every tool use, excluded or not; the trigger counts the whole prompt (tools,
  system, messages); with both edits, clearing comes first.
- the summary step's prompt: the request's, then the instructions (SUMMARY_PROMPT, the
  documented default, when none are given) as a user message; its output is the block as sent.
Simpler than the real API: one summary text whatever the conversation; clear_thinking_20251015
is checked (rules.py) but clears nothing; at most one compaction a request.
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
