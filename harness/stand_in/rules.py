"""The API's rules: a request the real API refuses gets its 400, in the API's words.

Relied on by server.py (each request is checked before a script step is used; a broken one
gets invalid_request_error and a line in .violations) and by the tests of the histories the
harness builds or repairs (the session log, layer 1, s06). Without it, an end-to-end test
passes on requests the real API refuses, and proves nothing. Checked, in the API's order (the
request's shape first, its length last):
- the request's fields, its model and max_tokens (_check_fields);
- the tools and tool_choice (_check_tools), and the system prompt;
- the history (_check_messages): roles, empty content and text, every tool_use answered in
  the next message, once, tool_use ids, block types and who may send them. What a model's reply
  may carry is accepted back, and so are consecutive user messages. The pairing is checked
  here on its own, apart from harness/pairing.py on purpose: a keeper that checks itself
  catches nothing;
- the betas the anthropic-beta header names: context_management's edits, each with its
  header, fields and bounds; compaction blocks (needing the compact edit); on-demand
  compaction, which this stand-in does not play, refused saying so. A missing header gets the
  documented words for compaction's, assumed alike for context editing's;
- at most 4 cache breakpoints (cache_control's form, never on empty text, is checked with
  the block that carries it);
- the context window: a prompt over it (after a compaction block drops what it replaces) is
  "prompt is too long". One that fits with less room than max_tokens is accepted, as the docs
  say of current models: the reply stops at the window (cut_to_window, from server.py).
Simpler than the real API: one model's limits whatever `model` says; the fields of every other
beta are accepted without their header. What a valid edit does is edits.py's.
"""

import json
import re

from harness.stand_in import edits, script, usage

TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
TOOL_USE_ID = re.compile(r"[a-zA-Z0-9_-]+")    # what the API takes as a tool_use id
# Blocks a model's reply may hold that the API accepts back in the history.
ASSISTANT_ONLY = {"thinking", "redacted_thinking", "server_tool_use", "web_search_tool_result",
                  "compaction"}
# The default model's documented limits (claude-sonnet-5-5, harness.config.DEFAULT_MODEL); a
# StandInAPI may be given others (context_window=, max_output=).
CONTEXT_WINDOW = 1_000_000   # tokens of input the model reads; more is "prompt is too long"
MAX_OUTPUT_TOKENS = 128_000  # the largest max_tokens it takes
# Top-level request fields the API takes; any other is "Extra inputs are not permitted".
REQUEST_FIELDS = {
    # what the anthropic SDK (2.16) sends from messages.create and messages.stream
    "model", "messages", "max_tokens", "system", "tools", "tool_choice", "stream", "metadata",
    "stop_sequences", "thinking", "cache_control", "service_tier", "container", "output_config",
    "inference_geo", "speed", "diagnostics",
    # sampling: documented for older models (newer ones refuse non-default values); not in SDK 2.16
    "temperature", "top_p", "top_k",
    # what client.beta.messages.create adds (taken here with or without the anthropic-beta header)
    "context_management", "mcp_servers", "compaction", "fallbacks", "billing_policy",
    "fallback_credit_token", "thread", "output_format",
}
MAX_BREAKPOINTS = 4          # blocks with cache_control in one request
# Each context_management edit: the beta header it needs, and its fields with their checks.
EDIT_BETAS = {"clear_tool_uses_20250919": "context-management-2025-06-27",
              "clear_thinking_20251015": "context-management-2025-06-27",
              "compact_20260112": "compact-2026-01-12"}
ON_DEMAND_BETA = "compact-2026-09-04"     # the top-level `compaction` (on-demand compaction)
MIN_COMPACT_TRIGGER = 50_000              # tokens: the least compact_20260112 takes


def check_request(body, max_output: int = MAX_OUTPUT_TOKENS,
                  context_window: int = CONTEXT_WINDOW, betas=()) -> str | None:
    """The first rule of the real API this request breaks, or None, in the API's order (a
    prompt is counted only once the request is valid). betas: its anthropic-beta header's."""
    if not isinstance(body, dict):
        return "request body must be a JSON object"
    return (_check_fields(body, max_output) or _check_tools(body)
            or _check_system(body.get("system")) or _check_messages(body.get("messages"))
            or _check_context_management(body, set(betas)) or _check_breakpoints(body)
            or _check_window(edits.after_compaction(body), context_window))


def _check_fields(body: dict, max_output: int) -> str | None:
    """Only documented top-level fields; a model; a max_tokens within the model's output limit."""
    unknown = sorted(set(body) - REQUEST_FIELDS)
    if unknown:
        return f"{unknown[0]}: Extra inputs are not permitted"
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "model: field required"
    limit = body.get("max_tokens")
    if type(limit) is not int or limit < 1:   # type(), not isinstance: True is an int to Python
        return "max_tokens: field required and must be a positive integer"
    if limit > max_output:
        return (f"max_tokens: {limit} > {max_output}, which is the maximum allowed number of "
                f"output tokens for {body['model']}")
    return _check_cache_control(body, "")


def _check_tools(body: dict) -> str | None:
    """Each tool well formed and named once; tool_choice in a documented form, naming a tool."""
    tools = body.get("tools") or []
    if not isinstance(tools, list):
        return "tools: Input should be a valid list"
    for i, t in enumerate(tools):
        if not isinstance(t, dict) or not TOOL_NAME.match(str(t.get("name", ""))):
            return f"tools.{i}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'"
        if not isinstance(t.get("input_schema"), dict) or t["input_schema"].get("type") != "object":
            return f"tools.{i}.input_schema.type: Input should be 'object'"
        broken = _check_cache_control(t, f"tools.{i}")
        if broken:
            return broken
    names = [t["name"] for t in tools]
    if len(set(names)) < len(names):
        return "tools: Tool names must be unique."
    choice = body.get("tool_choice")
    kinds = ("auto", "any", "none", "tool")
    if choice is not None and (not isinstance(choice, dict) or choice.get("type") not in kinds):
        return "tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none'"
    if isinstance(choice, dict) and choice["type"] == "tool":
        if not isinstance(choice.get("name"), str):
            return "tool_choice.name: Field required"
        if choice["name"] not in names:
            return f"Tool '{choice['name']}' not found in provided tools"
    return None


def _check_system(system) -> str | None:
    if system is not None and not isinstance(system, (str, list)):
        return "system: Input should be a valid string or list"
    for j, b in enumerate(system if isinstance(system, list) else []):
        if not isinstance(b, dict) or b.get("type") != "text" or not isinstance(b.get("text"), str):
            return f"system.{j}.type: Input should be 'text'"
        broken = _check_cache_control(b, f"system.{j}") or (
            None if b["text"] else f"system.{j}.text: text content blocks must be non-empty")
        if broken:
            return broken
    return None


def _check_messages(messages) -> str | None:
    """The conversation: starts with the user; every tool_use answered in the next message, once."""
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    if not all(isinstance(m, dict) for m in messages):
        return "messages: each message must be an object"
    # A compaction block may open the messages: it stands for all that came before it.
    if messages[0].get("role") != "user" and not edits.opens_with_compaction(messages[0]):
        return "messages.0.role: the first message must use the `user` role"
    # Consecutive user (or assistant) messages are fine: the API merges them.
    pending = set()   # the tool_use ids of the previous assistant message, to be answered now
    used = set()      # every tool_use id so far: an id may appear once in the whole conversation
    for i, m in enumerate(messages):
        role, content = m.get("role"), m.get("content")
        content = [script.text(content)] if isinstance(content, str) else content
        last_assistant = i == len(messages) - 1 and role == "assistant"
        if role not in ("user", "assistant"):
            return f"messages.{i}.role: Input should be 'user' or 'assistant'"
        if not isinstance(content, list) or (not content and not last_assistant):
            return (f"messages.{i}: all messages must have non-empty content except for the "
                    "optional final assistant message")
        broken = _check_blocks(i, role, content, pending, used)
        if broken:
            return broken
        pending = ({b["id"] for b in content if b.get("type") == "tool_use"}
                   if role == "assistant" else set())
    if pending and messages[-1].get("role") == "assistant":
        return (f"messages.{len(messages) - 1}: `tool_use` ids were found without "
                f"`tool_result` blocks: {', '.join(sorted(pending))}")
    return None


def _check_blocks(i: int, role: str, content: list, pending: set, used: set) -> str | None:
    """The blocks of message i. pending: the tool_use ids it must answer; used: ids seen so far."""
    answered, results_done = set(), False
    for j, b in enumerate(content):
        kind = b.get("type") if isinstance(b, dict) else None
        where = f"messages.{i}.content.{j}"
        broken = (kind and _check_cache_control(b, where)) or _check_block(where, role, kind, b)
        if not broken and kind == "tool_use":
            broken = _check_id(where, b.get("id"), used)
            used.add(b.get("id"))
        if not broken and kind == "tool_result" and results_done:
            broken = (f"{where}: tool_result blocks must come first in the content, "
                      "before any other block")
        elif not broken and kind == "tool_result":
            broken = _check_answer(where, b.get("tool_use_id"), pending, answered)
        if broken:
            return broken
        results_done = results_done or kind != "tool_result"
    if pending - answered:
        return (f"messages.{i}: `tool_use` ids were found without `tool_result` blocks "
                f"immediately after: {', '.join(sorted(pending - answered))}. Each `tool_use` "
                "block must have a corresponding `tool_result` block in the next message.")
    return None


def _check_block(where: str, role: str, kind, b) -> str | None:
    """One block on its own: its type, who may send it, its required fields."""
    if kind == "text":
        if not isinstance(b.get("text"), str) or not b["text"].strip():
            return f"{where}: text content blocks must contain non-whitespace text"
    elif kind == "tool_use":
        if role != "assistant":
            return f"{where}: tool_use blocks can only be in assistant messages"
        if not isinstance(b.get("input"), dict):
            return f"{where}.input: Input should be a valid dictionary"
    elif kind == "tool_result":
        if role != "user":
            return f"{where}: tool_result blocks can only be in user messages"
        return _check_result_content(where, b.get("content", ""))
    elif kind in ASSISTANT_ONLY:
        if role != "assistant":
            return f"{where}: {kind} blocks can only be in assistant messages"
        field = {"thinking": "signature", "redacted_thinking": "data"}.get(kind)
        if field and not isinstance(b.get(field), str):
            return f"{where}.{kind}.{field}: Field required"
        if kind == "compaction":
            return _check_compaction_block(where, b)
        if kind == "thinking" and not b["signature"]:   # the API signed it: "" cannot verify
            return f"{where}: Invalid `signature` in `thinking` block"
    else:
        return f"{where}.type: unknown content block type {kind!r}"
    return None


def _check_compaction_block(where: str, b: dict) -> str | None:
    """A summary the API wrote, or null (a failed compaction, which the API skips); never ""."""
    summary = b.get("content")
    if summary is not None and not isinstance(summary, str):
        return f"{where}.content: Input should be a valid string"
    if summary == "":
        return f"{where}.content: Empty string content is not allowed"
    return None


def _check_result_content(where: str, inner) -> str | None:
    """A tool_result's content: a string (even empty), or blocks, none of them an empty text."""
    if not isinstance(inner, (str, list)):
        return f"{where}.content: Input should be a valid string or list"
    for k, block in enumerate(inner if isinstance(inner, list) else []):
        if isinstance(block, dict) and block.get("type") == "text" and block.get("text") == "":
            return f"{where}.content.{k}: text content blocks must be non-empty"
    return None


def _check_id(where: str, tool_use_id, used: set) -> str | None:
    if not isinstance(tool_use_id, str) or not TOOL_USE_ID.fullmatch(tool_use_id):
        return f"{where}.id: String should match pattern '^[a-zA-Z0-9_-]+$'"
    if tool_use_id in used:
        return f"{where}: `tool_use` ids must be unique"
    return None


def _check_answer(where: str, tool_use_id, pending: set, answered: set) -> str | None:
    """A tool_result answers a tool_use of the previous message, and only one result per id."""
    if tool_use_id not in pending:
        return (f"{where}: unexpected `tool_use_id` found in `tool_result` blocks: "
                f"{tool_use_id}. Each `tool_result` block must have a corresponding "
                "`tool_use` block in the previous message.")
    if tool_use_id in answered:
        return (f"{where}: each tool_use must have a single result. "
                f"Found multiple `tool_result` blocks with id: {tool_use_id}")
    answered.add(tool_use_id)
    return None


def _check_context_management(body: dict, betas: set) -> str | None:
    """context_management's edits, each with its beta header; compaction blocks only where the
    compact edit is declared; on-demand compaction refused (with its own rules first)."""
    config = body.get("context_management")
    declared = set()
    if config is not None:
        if not isinstance(config, dict):
            return "context_management: Input should be a valid dictionary"
        extra = sorted(set(config) - {"edits"})
        if extra:
            return f"context_management.{extra[0]}: Extra inputs are not permitted"
        broken, declared = _check_edits(config.get("edits", []), betas)
        if broken:
            return broken
    if body.get("compaction") is not None:
        return _check_on_demand(body, betas)
    if "compact_20260112" not in declared:
        return _undeclared_compaction(body.get("messages"))
    return None


def _check_edits(edits, betas: set) -> tuple:
    """(the first rule the edits break or None, the edit types declared)."""
    if not isinstance(edits, list):
        return "context_management.edits: Input should be a valid list", set()
    declared = []
    for i, edit in enumerate(edits):
        where = f"context_management.edits.{i}"
        kind = edit.get("type") if isinstance(edit, dict) else None
        if kind not in EDIT_BETAS:
            tags = ", ".join(f"'{name}'" for name in EDIT_BETAS)
            return (f"{where}: Input tag {json.dumps(kind)} found using 'type' does not match "
                    f"any of the expected tags: {tags}"), set()
        if EDIT_BETAS[kind] not in betas:
            return f'"anthropic-beta: {EDIT_BETAS[kind]}" required', set()
        if kind in declared:
            return f"{where}: each context management edit type may be given once", set()
        declared.append(kind)
        broken = _check_edit(f"{where}.{kind}", kind, edit)
        if broken:
            return broken, set()
    first = [kind for kind in declared if kind != "compact_20260112"]
    if first[:1] == ["clear_tool_uses_20250919"] and "clear_thinking_20251015" in first:
        return ("context_management.edits: clear_thinking_20251015 must come before "
                "clear_tool_uses_20250919"), set()
    return None, set(declared)


def _check_edit(where: str, kind: str, edit: dict) -> str | None:
    """One edit's fields: only its own, each of its type (pydantic's words, as the API's)."""
    checks = EDIT_FIELDS[kind]
    extra = sorted(set(edit) - set(checks) - {"type"})
    if extra:
        return f"{where}.{extra[0]}: Extra inputs are not permitted"
    for name, check in checks.items():
        if edit.get(name) is not None:
            broken = check(f"{where}.{name}", edit[name])
            if broken:
                return broken
    return None


def _counted(*kinds, least=1):
    """A check of {"type": one of kinds, "value": a whole number >= least}."""
    def check(where, value):
        if not isinstance(value, dict):
            return f"{where}: Input should be a valid dictionary"
        extra = sorted(set(value) - {"type", "value"})
        if extra:
            return f"{where}.{extra[0]}: Extra inputs are not permitted"
        if value.get("type") not in kinds:
            return f"{where}.type: Input should be {' or '.join(repr(k) for k in kinds)}"
        number = value.get("value")
        if type(number) is not int:
            return f"{where}.value: Input should be a valid integer"
        if number < least:
            return f"{where}.value: Input should be greater than or equal to {least}"
        return None
    return check


def _kind(wanted, name):
    def check(where, value):
        if isinstance(value, wanted) and not (wanted is not bool and isinstance(value, bool)):
            return None
        return f"{where}: Input should be a valid {name}"
    return check


def _names(where, value):
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return None
    return f"{where}: Input should be a valid list of strings"


def _bool_or_names(where, value):
    return None if isinstance(value, bool) else _names(where, value)


def _thinking_keep(where, value):
    return None if value == "all" else _counted("thinking_turns")(where, value)


EDIT_FIELDS = {
    "clear_tool_uses_20250919": {
        "trigger": _counted("input_tokens", "tool_uses"), "keep": _counted("tool_uses", least=0),
        "clear_at_least": _counted("input_tokens", least=0), "exclude_tools": _names,
        "clear_tool_inputs": _bool_or_names},
    "clear_thinking_20251015": {"keep": _thinking_keep},
    "compact_20260112": {
        "trigger": _counted("input_tokens", least=MIN_COMPACT_TRIGGER),
        "pause_after_compaction": _kind(bool, "boolean"), "instructions": _kind(str, "string")},
}


def _check_on_demand(body: dict, betas: set) -> str | None:
    """The top-level `compaction` (on-demand): its beta, never with context_management."""
    if ON_DEMAND_BETA not in betas:
        return f'"anthropic-beta: {ON_DEMAND_BETA}" required'
    if body.get("context_management") is not None:
        return "compaction: cannot be combined with context_management"
    return "compaction: on-demand compaction is not played by this stand-in"


def _undeclared_compaction(messages) -> str | None:
    """A compaction block sent back without the compact edit: the API cannot apply it."""
    for i, m in enumerate(messages):
        content = m.get("content")
        for j, b in enumerate(content if isinstance(content, list) else []):
            if isinstance(b, dict) and b.get("type") == "compaction":
                return (f"messages.{i}.content.{j}: a compaction block needs the "
                        "compact_20260112 edit in context_management")
    return None


def _check_breakpoints(body: dict) -> str | None:
    marks = len(usage.breakpoints(body))
    if marks > MAX_BREAKPOINTS:
        return (f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
                f"Found {marks}.")
    return None


def _check_window(body: dict, context_window: int) -> str | None:
    """The prompt alone must fit the window (the reply stops where it is full)."""
    tokens = usage.prompt_tokens(body)
    if tokens > context_window:
        return f"prompt is too long: {tokens} tokens > {context_window} maximum"
    return None


def _check_cache_control(block, where):
    """cache_control, where present, is {"type": "ephemeral"} (ttl "5m" or "1h"), never on
    empty text."""
    mark, where = block.get("cache_control"), f"{where}." if where else ""
    if mark is None:
        return None
    if not isinstance(mark, dict) or mark.get("type") != "ephemeral":
        return f"{where}cache_control.type: Input should be 'ephemeral'"
    if mark.get("ttl", "5m") not in ("5m", "1h"):
        return f"{where}cache_control.ttl: Input should be '5m' or '1h'"
    if block.get("type") == "text" and block.get("text") == "":
        return f"{where}text: cache_control cannot be set for empty text blocks"
    return None


def cut_to_window(content: list, room: int) -> list:
    """The blocks of a reply that fit in `room` output tokens: the block that crosses the limit
    is the last one, a text cut to the characters that fit, any other block as it began."""
    kept, used = [], 0
    for block in content:
        size = usage.count_tokens(block)
        if used + size > room:
            if block.get("type") == "text":   # what fits once the block's own JSON is paid for
                frame = len(json.dumps({**block, "text": ""}, ensure_ascii=False))
                block = {**block, "text": block.get("text", "")[:max(0, (room - used) * 4 - frame)]}
            return kept + [block]
        kept.append(block)
        used += size
    return kept

