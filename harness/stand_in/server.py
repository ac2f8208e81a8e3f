"""The stand-in's HTTP server: POST /v1/messages on 127.0.0.1, answered from a script.

Relied on by the tests and every lesson's --demo, which point the real `anthropic` client at
it (ANTHROPIC_BASE_URL=api.url). Each request, in order: kept in .requests (its headers in
.headers); checked by rules.py with the betas its anthropic-beta header names (a broken one
gets its 400 and a line in .violations); made by edits.py into the prompt the model reads;
answered with `summary` if it is a summary request, with the compaction block alone for a
pause, else by the next script step: a message with usage.py's usage, as sse.py's events when
it streams. Without each piece:
- the lock: two requests at once (a retry while the first still waits) could take one step,
  and .requests would not be in the order steps were used.
- delay=: a slow or hung model could not be played. The sleeper waits without the lock, and
  closing the stand-in wakes it.
- the window at the reply (_message): model_context_window_exceeded would go untested.
- "script exhausted", and a step that raised: one 400 and a line in .violations each, not a
  dropped connection the test cannot explain.
- serve_forever's short poll: every test would wait half a second for the server to close.
Simpler than the real API: only POST /v1/messages.
"""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from harness.stand_in import edits, rules, script, sse, usage


class StandInAPI:
    """An HTTP server on 127.0.0.1 (random port) that plays `script`, one step per request."""

    def __init__(self, script, summary=None, min_cache_tokens=usage.MIN_CACHE_TOKENS,
                 clock=time.monotonic, context_window: int = rules.CONTEXT_WINDOW,
                 max_output: int = rules.MAX_OUTPUT_TOKENS, clearing: str = edits.KEPT):
        self.script = list(script)
        self.summary = summary  # if set, summary requests (is_summary_request) get this text
        self.edits = edits.Edits(clearing, summary)   # the API's context management (edits.py)
        self.context_window = context_window   # tokens the model reads (check_request, _message)
        self.max_output = max_output           # the largest max_tokens it takes
        self.requests = []    # every request body received, in order
        self.prompts = []     # what the model read of each valid one (edits.py), in order
        self.headers = []     # each request's HTTP headers (lower-case names)
        self.violations = []  # rules broken, one line each
        self.cache = usage.PromptCache(min_cache_tokens, clock)
        self.usages = []      # the usage reported for each reply
        self._lock = threading.Lock()
        self._closing = threading.Event()
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def do_POST(self):
                length = int(self.headers.get("content-length", 0))
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    return self._send(400, _error_body("invalid_request_error",
                                                       "request body is not valid JSON"))
                if self.path.split("?")[0] != "/v1/messages":
                    return self._send(404, _error_body("not_found_error", f"no route {self.path}"))
                api.headers.append({k.lower(): v for k, v in self.headers.items()})
                betas = [b.strip() for b in self.headers.get("anthropic-beta", "").split(",")]
                status, payload, headers, delay = api._answer(body, betas)
                # Sleep without holding the lock (other requests are answered meanwhile); shutdown
                # wakes every sleeper, which then drops its connection.
                if api._closing.wait(delay):
                    return
                try:
                    if status == 200 and isinstance(payload, dict) and body.get("stream"):
                        events = "".join(sse.stream(payload)).encode()
                        self._send(200, events, {}, "text/event-stream")
                    else:
                        self._send(status, payload, headers)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up waiting
                    pass

            def _send(self, status, payload, headers=None, content_type="application/json"):
                if isinstance(payload, tuple):        # a raw step: (bytes, content type)
                    payload, content_type = payload
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", content_type)
                self.send_header("content-length", str(len(data)))
                self.send_header("request-id", "req_standin")
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def _answer(self, body, betas=()):
        """(status, payload, headers, delay) for one request."""
        with self._lock, usage.counting():
            self.requests.append(body)
            broken = rules.check_request(body, self.max_output, self.context_window, betas)
            if broken:
                self.violations.append(broken)
                return 400, _error_body("invalid_request_error", broken), {}, 0
            seen = self.edits.apply(body)
            compaction = seen.compaction
            self.prompts.append(seen.prompt if compaction is None else compaction.after)
            if self.summary is not None and script.is_summary_request(body):
                answer = script.reply(script.text(self.summary))
                return 200, self._message(body, answer, seen), {}, 0
            if seen.compaction is not None and seen.compaction.pause:
                # The block alone: the script's next step answers the request that goes on.
                return 200, self._message(body, script.reply(stop_reason="compaction"), seen), {}, 0
            if not self.script:
                self.violations.append("script exhausted: the lesson made more calls than scripted")
                return 400, _error_body("invalid_request_error", "stand-in script exhausted"), {}, 0
            step = self.script.pop(0)
            if callable(step):
                try:
                    step = step(body)
                except Exception as exc:
                    # A script that could not go on: one clear 400, no traceback.
                    self.violations.append(f"the script could not go on: {exc}")
                    failed = _error_body("invalid_request_error", f"stand-in script failed: {exc}")
                    return 400, failed, {}, 0
            if step["kind"] == "error":
                # retry-after-ms keeps the client's retries fast in tests.
                return (step["status"], _error_body(step["type"], step["message"]),
                        {"retry-after-ms": "10"}, step.get("delay", 0))
            if step["kind"] == "raw":
                return step["status"], (step["body"], step["content_type"]), {}, step["delay"]
            return 200, self._message(body, step, seen), {}, step.get("delay", 0)

    def _message(self, body, step, seen):
        """The reply to body, written from seen.prompt (what the model reads of it)."""
        fields = step.get("fields", {})
        content, stop_reason = step["content"], step["stop_reason"]
        prompt = seen.prompt
        compaction = seen.compaction
        summary_usage = None
        if compaction is not None:
            # One more sampling step first: the summary, which reads the request's prefix.
            summary_usage = usage.reply_usage(self.cache, compaction.asked, [compaction.block])
            prompt = compaction.after
        room = self.context_window - usage.prompt_tokens(prompt)
        if usage.count_tokens(content) > room:   # the reply filled the window: it stops there
            content = rules.cut_to_window(content, room)
            stop_reason = "model_context_window_exceeded"
        # The cache sees every request, whatever usage a step reports (a paused one has no
        # step after its summary).
        counted = None
        if compaction is None or not compaction.pause:
            counted = usage.reply_usage(self.cache, prompt, fields.get("content", content))
        if compaction is not None:
            counted = usage.with_summary(summary_usage, counted)
            content = [compaction.block] + content
        message = {"id": f"msg_{len(self.requests):04d}", "type": "message", "role": "assistant",
                   "model": body["model"], "content": content, "stop_reason": stop_reason,
                   "stop_sequence": None,
                   "usage": counted if step["usage"] is None else step["usage"], **fields}
        if body.get("context_management") is not None:
            message["context_management"] = {"applied_edits": seen.applied_edits}
        if "stop_details" in step:              # a refusal's category and explanation
            message["stop_details"] = step["stop_details"]
        self.usages.append(message.get("usage"))   # billing() sums what the client was told
        return message

    def billing(self):
        """The session's input as the API would bill it (usage.bill): what the client was told."""
        return usage.bill(self.usages)

    def __enter__(self):
        # shutdown() waits for the serve loop's next poll: 0.5 s by default, paid by every test.
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.005},
                         daemon=True).start()
        return self

    def __exit__(self, *exc):
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()


def _error_body(kind, message):
    return {"type": "error", "error": {"type": kind, "message": message},
            "request_id": "req_standin"}
