"""The script a stand-in plays: one step answers one request, and summaries answer themselves.

Relied on by the tests and every lesson's --demo (harness/demos.py), which write their model
as a list of steps; server.py plays them in order. A step may also be a function of the
request body returning one, for scripts that react to tool results. Every step takes delay=,
seconds to wait before answering: a slow or hung model. Without each piece:
- reply: only what a real model sends could be played, never the odd replies real servers
  send (thinking, unknown block types, a str tool input), which the harness must survive.
- message, raw, error: a missing usage, an HTML page or a 529 could not be played.
- tool: every test would number its tool_use ids by hand, and two could collide.
- is_summary_request: a script would need a step for every summary layer 2 asks for, at a
  point that depends on token counts; with `summary` set, such a request is answered with it
  (end_turn) without using a step.
"""

import itertools

_ids = itertools.count(1)


def text(s):
    return {"type": "text", "text": s}


def tool(name, input, id=None):
    return {"type": "tool_use", "id": id or f"toolu_{next(_ids):04d}", "name": name, "input": input}


def reply(*blocks, stop_reason=None, usage=None, delay=0, stop_details=None):
    """A scripted assistant message of any block dicts; stop_reason defaults from its blocks.
    stop_details: a refusal's {"type": "refusal", "category": ..., "explanation": ...}."""
    blocks = list(blocks)
    if stop_reason is None:
        stop_reason = "tool_use" if any(b.get("type") == "tool_use" for b in blocks) else "end_turn"
    step = {"kind": "reply", "content": blocks, "stop_reason": stop_reason, "usage": usage,
            "delay": delay}
    if stop_details is not None:
        step["stop_details"] = stop_details
    return step


def message(delay=0, **fields):
    """A reply whose message JSON has `fields` overridden, e.g. content=None or usage=None."""
    return {**reply(), "fields": fields, "delay": delay}


def raw(status, body, content_type="application/json", delay=0):
    """Exactly these bytes, as a wrong but live endpoint sends them (HTML, other JSON)."""
    data = body.encode() if isinstance(body, str) else body
    return {"kind": "raw", "status": status, "body": data, "content_type": content_type,
            "delay": delay}


def error(status, message="scripted failure", type=None, delay=0):
    """A scripted HTTP error: 429/500/529 are retried by the client, 400/401 are not."""
    default_type = {400: "invalid_request_error", 401: "authentication_error",
                    403: "permission_error", 404: "not_found_error", 429: "rate_limit_error",
                    500: "api_error", 529: "overloaded_error"}.get(status, "api_error")
    return {"kind": "error", "status": status, "type": type or default_type, "message": message,
            "delay": delay}


def is_summary_request(body):
    """No tools, tool_choice none, or <summary-request> in the last user message's text."""
    if not body.get("tools") or (body.get("tool_choice") or {}).get("type") == "none":
        return True
    users = [m for m in body.get("messages") or []
             if isinstance(m, dict) and m.get("role") == "user"]
    content = users[-1].get("content") if users else None
    if isinstance(content, str):
        texts = [content]
    else:
        texts = [b.get("text") for b in content or []
                 if isinstance(b, dict) and b.get("type") == "text"]
    return any(isinstance(t, str) and "<summary-request>" in t for t in texts)
