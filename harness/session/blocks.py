"""The blocks of a request: what kind each is, and about how many tokens it holds.

Relied on by recorder.py (the requests the session page shows) and views.py (/context), so
that both sort and count a request the same way: each block by tokens.estimate, the harness's
one estimate, marked "~" wherever it is shown. Without each piece:
- plain(): an SDK block (an object) could not be read or compared, and a cache_control mark
  (for the API, not the model) would make the same block look new.
- parts(): a cleared placeholder would count as a tool result, and s07's board (added to the
  summary after a compaction) as ordinary text.
"""

import json

from harness import tokens
from harness.board import message as board_message   # s07's board, where it sits in a text

# How s06's layer 1 begins a cleared tool result, and a cleared write/edit text (s06 writes
# them from these).
PLACEHOLDER = "[Previous: "
INPUT_PLACEHOLDER = "[cleared from the context: "

# The kinds, in the order the request sends them, with the letter /context draws for each.
KINDS = {"tools": ("T", "tool definitions"), "system": ("S", "system prompt"),
         "text": ("x", "text"), "calls": ("c", "tool calls"), "results": ("r", "tool results"),
         "cleared": ("p", "cleared placeholders"), "board": ("b", "the board")}


def as_json(value: object) -> str:
    """value as the request sends it (near enough to measure it)."""
    return json.dumps(value, ensure_ascii=False, default=str)


def plain(block: object) -> object:
    """The block as the model reads it: a dict (an SDK object is dumped), cache_control left out."""
    if hasattr(block, "model_dump"):
        block = block.model_dump(mode="json", exclude_none=True, warnings=False)
    if isinstance(block, dict):
        return {k: v for k, v in block.items() if k != "cache_control"}
    return block


def content_blocks(message: object) -> list:
    """A message's blocks; a message whose content is a string is one text block."""
    message = plain(message)
    content = message.get("content") if isinstance(message, dict) else message
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [plain(block) for block in content or []]


def split_board(text: str) -> tuple:
    """(the text without s07's board, the board with its tags); the board is "" when absent."""
    span = board_message.board_span(text)
    if span is None:
        return text, ""
    start, end = span
    return text[:start] + text[end:], text[start:end]


def is_cleared(block: object) -> bool:
    """A layer-1 placeholder: a tool result replaced, or a tool call whose input was cleared."""
    if not isinstance(block, dict):
        return False
    if block.get("type") == "tool_result":
        content = block.get("content")
        return isinstance(content, str) and content.startswith(PLACEHOLDER)
    if block.get("type") == "tool_use" and isinstance(block.get("input"), dict):
        return any(isinstance(v, str) and v.startswith(INPUT_PLACEHOLDER)
                   for v in block["input"].values())
    return False


def parts(block: object) -> list:
    """(kind, estimated tokens) of one block; a text holding the board is two parts."""
    kind = block.get("type") if isinstance(block, dict) else None
    if kind == "text":
        rest, board = split_board(str(block.get("text", "")))
        found = [("text", tokens.estimate(rest))]
        return found + [("board", tokens.estimate(board))] if board else found
    if kind == "tool_use":
        return [("cleared" if is_cleared(block) else "calls", tokens.estimate(block))]
    if kind == "tool_result":
        return [("cleared" if is_cleared(block) else "results", tokens.estimate(block))]
    return [("text", tokens.estimate(block))]     # thinking and anything else the model wrote


def message_parts(messages: list) -> list:
    """(kind, estimated tokens) of every block of every message, in order."""
    return [part for message in messages for block in content_blocks(message)
            for part in parts(block)]
