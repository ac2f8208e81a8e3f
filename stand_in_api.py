"""A loopback stand-in for the Anthropic Messages API, replying from a script.

The tests and every lesson's `--demo` point the real `anthropic` client at it
(ANTHROPIC_BASE_URL=http://127.0.0.1:<port>), so the real SDK, the real loop
and the real tools run, with no key and no network.

    script = [reply(text("Hi"), tool("bash", {"command": "ls"})), reply(text("Done"))]
    with StandInAPI(script) as api:
        ...                        # api.url, api.requests, api.violations

(input_tokens in its replies is the request's size / 4, so compaction can be tested.)

It enforces the rules the real API enforces on a conversation and answers a
broken request with the real API's 400 error shape, so a lesson that sends an
invalid history fails here exactly as it would against the real service.
A script step is a reply dict, an `error(...)`, or a function of the request
body returning one of those (for scripts that react to tool results).
"""

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import count

TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_ids = count(1)


def text(s):
    return {"type": "text", "text": s}


def tool(name, input, id=None):
    return {"type": "tool_use", "id": id or f"toolu_{next(_ids):04d}", "name": name, "input": input}


def reply(*blocks, stop_reason=None, usage=None):
    """A scripted assistant message; stop_reason defaults from its blocks."""
    blocks = list(blocks)
    if stop_reason is None:
        stop_reason = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
    return {"kind": "reply", "content": blocks, "stop_reason": stop_reason, "usage": usage}


def error(status, message="scripted failure", type=None):
    """A scripted HTTP error: 429/500/529 are retried by the client, 400/401 are not."""
    default_type = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                    404: "not_found_error", 429: "rate_limit_error",
                    500: "api_error", 529: "overloaded_error"}.get(status, "api_error")
    return {"kind": "error", "status": status, "type": type or default_type, "message": message}


def estimate_tokens(obj):
    return max(1, len(json.dumps(obj, ensure_ascii=False)) // 4)


def check_request(body):
    """Return the first rule of the real API that this request breaks, or None."""
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "model: field required"
    if not isinstance(body.get("max_tokens"), int) or body["max_tokens"] < 1:
        return "max_tokens: field required and must be a positive integer"
    for i, t in enumerate(body.get("tools") or []):
        if not TOOL_NAME.match(str(t.get("name", ""))):
            return f"tools.{i}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'"
        if not isinstance(t.get("input_schema"), dict) or t["input_schema"].get("type") != "object":
            return f"tools.{i}.input_schema.type: Input should be 'object'"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    if messages[0].get("role") != "user":
        return "messages.0.role: the first message must use the `user` role"
    pending = set()  # tool_use ids of the previous assistant message, still unanswered
    for i, m in enumerate(messages):
        role, content = m.get("role"), m.get("content")
        if role not in ("user", "assistant"):
            return f"messages.{i}.role: Input should be 'user' or 'assistant'"
        if isinstance(content, str):
            content = [text(content)]
        if not isinstance(content, list) or not content:
            return f"messages.{i}: all messages must have non-empty content except for the optional final assistant message"
        results_done = False
        answered = set()
        for j, b in enumerate(content):
            kind = b.get("type") if isinstance(b, dict) else None
            where = f"messages.{i}.content.{j}"
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
                if results_done:
                    return f"{where}: tool_result blocks must come first in the content, before any other block"
                if b.get("tool_use_id") not in pending:
                    return (f"{where}: unexpected `tool_use_id` found in `tool_result` blocks: {b.get('tool_use_id')}. "
                            "Each `tool_result` block must have a corresponding `tool_use` block in the previous message.")
                answered.add(b["tool_use_id"])
                inner = b.get("content", "")
                if not isinstance(inner, (str, list)):
                    return f"{where}.content: Input should be a valid string or list"
            else:
                return f"{where}.type: unknown content block type {kind!r}"
            if kind != "tool_result":
                results_done = True
        if pending - answered:
            return (f"messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: "
                    f"{', '.join(sorted(pending - answered))}. Each `tool_use` block must have a corresponding "
                    "`tool_result` block in the next message.")
        pending = {b["id"] for b in content if b.get("type") == "tool_use"} if role == "assistant" else set()
    if pending and messages[-1].get("role") == "assistant":
        return (f"messages.{len(messages) - 1}: `tool_use` ids were found without `tool_result` blocks: "
                f"{', '.join(sorted(pending))}")
    return None


class StandInAPI:
    """An HTTP server on 127.0.0.1 (random port) that plays `script`, one step per request."""

    def __init__(self, script, summary=None):
        self.script = list(script)
        self.summary = summary  # if set, a request with no tools (a compaction summary) gets this text
        self.requests = []    # every request body received, in order
        self.headers = []     # and its HTTP headers (lower-case names)
        self.violations = []  # rules broken, one line each
        self._lock = threading.Lock()
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def do_POST(self):
                length = int(self.headers.get("content-length", 0))
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    return self._send(400, _error_body("invalid_request_error", "request body is not valid JSON"))
                if self.path.split("?")[0] != "/v1/messages":
                    return self._send(404, _error_body("not_found_error", f"no route {self.path}"))
                api.headers.append({k.lower(): v for k, v in self.headers.items()})
                status, payload, headers = api._answer(body)
                self._send(status, payload, headers)

            def _send(self, status, payload, headers=None):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.send_header("request-id", "req_standin")
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def _answer(self, body):
        with self._lock:
            self.requests.append(body)
            broken = check_request(body)
            if broken:
                self.violations.append(broken)
                return 400, _error_body("invalid_request_error", broken), {}
            if self.summary is not None and not body.get("tools"):
                return 200, self._message(body, reply(text(self.summary))), {}
            if not self.script:
                self.violations.append("script exhausted: the lesson made more calls than scripted")
                return 400, _error_body("invalid_request_error", "stand-in script exhausted"), {}
            step = self.script.pop(0)
            if callable(step):
                step = step(body)
        if step["kind"] == "error":
            # retry-after-ms keeps the client's retries fast in tests.
            return step["status"], _error_body(step["type"], step["message"]), {"retry-after-ms": "10"}
        return 200, self._message(body, step), {}

    def _message(self, body, step):
        usage = step["usage"] or {"input_tokens": estimate_tokens(body), "output_tokens": estimate_tokens(step["content"])}
        return {"id": f"msg_{len(self.requests):04d}", "type": "message", "role": "assistant",
                "model": body["model"], "content": step["content"], "stop_reason": step["stop_reason"],
                "stop_sequence": None, "usage": usage}

    def __enter__(self):
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self._server.shutdown()
        self._server.server_close()


def _error_body(kind, message):
    return {"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_standin"}
