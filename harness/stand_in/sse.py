"""Server-sent events: a message as the API streams it, for requests with "stream": true.

Relied on by server.py, which streams a reply when the request asks (the lessons always do:
s03.ask_model streams). The order is the documented one: message_start (empty content,
output_tokens 1), each block's start / deltas / stop, a ping after the first block starts,
message_delta with the stop reason and output tokens, message_stop. Without each piece:
- the deltas in pieces (TEXT_PIECE, JSON_PIECE characters): the SDK's joining of deltas, and
  the live reply the terminal draws as they arrive, would go untested.
- the compaction block as the docs stream it (a start with no summary, then one
  compaction_delta), message_delta's context_management and usage.iterations: the harness's
  reading of the API's own context management would go untested.
- the other block types whole in their start event (redacted_thinking, server tool blocks,
  unknown types): a reply holding one could not be streamed.
Simpler than the real API: a stream is sent in one piece, with no error event (script.raw()
can send one); a str tool input streams in a single delta.
"""

import json

TEXT_PIECE = 16   # characters per text_delta / thinking_delta: several deltas even for short text
JSON_PIECE = 20   # characters per input_json_delta


def stream(message):
    """A message as the API streams it: its server-sent events, in the documented order."""
    def event(kind, **data):
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"
    content = message.get("content")
    blocks = content if isinstance(content, list) else []
    usage = message.get("usage")
    start = {**message, "content": [] if isinstance(content, list) else content,
             "stop_reason": None, "stop_details": None,
             "usage": {**usage, "output_tokens": 1} if isinstance(usage, dict) else usage}
    yield event("message_start", message=start)
    if not blocks:
        yield event("ping")
    for i, block in enumerate(blocks):
        kind = block.get("type")
        if kind == "text":
            yield event("content_block_start", index=i, content_block={"type": "text", "text": ""})
            deltas = [{"type": "text_delta", "text": piece}
                      for piece in _pieces(block.get("text", ""), TEXT_PIECE)]
        elif kind == "tool_use":
            yield event("content_block_start", index=i, content_block={
                "type": "tool_use", "id": block.get("id"), "name": block.get("name"), "input": {}})
            # json.dumps of whatever was scripted, so a str or list input arrives as exactly that.
            # A str goes in one piece: the SDK cannot parse a top-level JSON string cut in two.
            encoded, tool_input = json.dumps(block.get("input")), block.get("input")
            pieces = [encoded] if isinstance(tool_input, str) else _pieces(encoded, JSON_PIECE)
            deltas = [{"type": "input_json_delta", "partial_json": piece} for piece in pieces]
        elif kind == "compaction":
            yield event("content_block_start", index=i,
                        content_block={"type": "compaction", "content": None})
            deltas = [{"type": "compaction_delta", "content": block.get("content")}]
        elif kind == "thinking":
            yield event("content_block_start", index=i,
                        content_block={"type": "thinking", "thinking": ""})
            deltas = [{"type": "thinking_delta", "thinking": piece}
                      for piece in _pieces(block.get("thinking", ""), TEXT_PIECE)]
            deltas.append({"type": "signature_delta", "signature": block.get("signature", "")})
        else:   # redacted_thinking, server tool blocks, unknown types: whole in the start event
            yield event("content_block_start", index=i, content_block=block)
            deltas = []
        if i == 0:
            yield event("ping")
        for delta in deltas:
            yield event("content_block_delta", index=i, delta=delta)
        yield event("content_block_stop", index=i)
    final = {"output_tokens": usage.get("output_tokens") if isinstance(usage, dict) else None}
    if isinstance(usage, dict) and "iterations" in usage:
        final["iterations"] = usage["iterations"]
    extra = {}
    if "context_management" in message:
        extra["context_management"] = message["context_management"]
    delta = {"stop_reason": message.get("stop_reason"), "stop_sequence": None}
    if message.get("stop_details") is not None:
        delta["stop_details"] = message["stop_details"]
    yield event("message_delta", delta=delta, usage=final, **extra)
    yield event("message_stop")


def _pieces(s, size):
    return [s[i:i + size] for i in range(0, len(s), size)] or [""]

