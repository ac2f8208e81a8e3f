"""A loopback stand-in for the Anthropic Messages API, replying from a script.

The tests and every lesson's `--demo` point the real `anthropic` client at it
(ANTHROPIC_BASE_URL=http://127.0.0.1:<port>), so the real SDK, the real loop
and the real tools run, with no key and no network.

    script = [reply(text("Hi"), tool("bash", {"command": "ls"})), reply(text("Done"))]
    with StandInAPI(script) as api:   # also summary=, min_cache_tokens=1024, clock=time.monotonic,
                                      #   context_window=1_000_000, max_output=128_000
        ...                            # api.url, .requests, .headers, .violations, .billing()

A script step answers one request (a step may also be a function of the request body
returning one, for scripts that react to tool results):
    reply(*blocks, stop_reason=None, usage=None, delay=0)   any block dicts, any stop_reason
    message(delay=0, **fields)    a reply with message fields overridden (content=None, usage=None)
    error(status, message, type=None, delay=0)   the API's JSON error, for stream requests too
    raw(status, body, content_type="application/json", delay=0)   exactly these bytes
delay= waits that many seconds before answering (a slow or hung model); other
requests are answered meanwhile, and closing the stand-in wakes the sleepers.

What it models:
- Rules: a request the real API refuses gets its 400 invalid_request_error, in the API's
  words, and is logged in .violations: an unknown top-level field, max_tokens over the
  model's output limit, duplicate tool names, a tool_choice naming no tool, a tool_use
  without its tool_result, two tool_results for one id, a tool_use id used twice in the
  conversation, empty text (in a tool_result too), a thinking block with an empty
  signature, an unknown block type, more than 4 cache breakpoints, ... What a model's reply
  may carry is accepted back (thinking with its signature, redacted_thinking, server tool
  blocks), and so are consecutive user messages. The pairing of tool_use and tool_result is
  checked here on its own, separately from harness/pairing.py on purpose: the stand-in plays
  the real API, an independent judge, and a check of the keeper by the keeper catches nothing.
- The context window: a prompt over context_window tokens gets "prompt is too long:
  N tokens > M maximum". One that fits but leaves less room than max_tokens is accepted,
  as the docs say of current models: the reply stops when the window is full, with
  stop_reason model_context_window_exceeded (a scripted reply longer than the room left is
  cut there). Earlier models refused input + max_tokens over the window with a 400 instead.
- Streaming: "stream": true gets server-sent events in the documented order
  (message_start, per block start / deltas / stop, ping, message_delta, message_stop);
  text arrives in 16-character deltas, tool input in pieces of json.dumps(input).
- Caching (PromptCache): the prefix is tools, system, then every message block;
  breakpoints are blocks with cache_control plus the top-level cache_control (on the
  last block). A breakpoint reads the longest cached prefix ending at it or up to 20
  blocks before it; every later breakpoint of at least min_cache_tokens is written;
  entries live 5 minutes from their last use; changing tool_choice keeps tools and
  system cached, not the messages. usage has all four counts; billing() prices them.
- Summaries: when `summary` is set, a request with no tools, or tool_choice none, or
  `<summary-request>` in its last user message's text is answered with it (end_turn)
  without using a script step.

Simpler than the real API: a token is 4 characters of a block's JSON (for the window
too, and earlier turns' thinking counts, which the API leaves out); one model's limits
whatever `model` says; the fields of every model and beta are accepted, without looking at
the anthropic-beta header; one cache for every key, and a "1h" ttl lives 5 minutes too; a
stream is sent in one piece, never paused between events and never with an error event
(raw() can send one); a str tool input streams in a single delta; only POST /v1/messages.
"""

import hashlib
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import accumulate, count

TEXT_PIECE = 16   # characters per text_delta / thinking_delta: several deltas even for short text
JSON_PIECE = 20   # characters per input_json_delta
TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
# Blocks a model's reply may hold that the API accepts back in the history.
ASSISTANT_ONLY = {"thinking", "redacted_thinking", "server_tool_use", "web_search_tool_result"}
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
_ids = count(1)


# ---------------------------------------------------------------- script steps

def text(s):
    return {"type": "text", "text": s}


def tool(name, input, id=None):
    return {"type": "tool_use", "id": id or f"toolu_{next(_ids):04d}", "name": name, "input": input}


def reply(*blocks, stop_reason=None, usage=None, delay=0):
    """A scripted assistant message; stop_reason defaults from its blocks. Any block dicts go,
    so a script can play what real servers send (thinking, unknown types, a str tool input)."""
    blocks = list(blocks)
    if stop_reason is None:
        stop_reason = "tool_use" if any(b.get("type") == "tool_use" for b in blocks) else "end_turn"
    return {"kind": "reply", "content": blocks, "stop_reason": stop_reason, "usage": usage,
            "delay": delay}


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


def estimate_tokens(obj):
    return max(1, len(json.dumps(obj, ensure_ascii=False)) // 4)


def _plain(block: dict) -> dict:
    """A block as the model reads it: cache_control is an instruction to the API, not content."""
    return {k: v for k, v in block.items() if k != "cache_control"}


# ---------------------------------------------------------------- the caching and billing model
# As documented for the real API: the cached prefix is tools -> system -> messages, matched
# byte for byte up to a breakpoint; a hit may be found up to 20 blocks before a breakpoint;
# nothing below the minimum length is cached; entries live 5 minutes from their last use.
# Simpler than the real thing: characters/4 for tokens, one cache for every key.

MIN_CACHE_TOKENS = 1024   # Sonnet-class models; some models need more
CACHE_TTL = 300           # seconds
LOOKBACK = 20             # blocks before a breakpoint searched for an earlier cached prefix
MAX_BREAKPOINTS = 4


def cache_blocks(body):
    """The request's cacheable blocks in the API's order, and where the messages start."""
    blocks = list(body.get("tools") or [])
    system = body.get("system")
    blocks += [text(system)] if isinstance(system, str) else list(system or [])
    start = len(blocks)
    for m in body.get("messages") or []:
        content = m.get("content")
        blocks += ([text(content)] if isinstance(content, str)
                   else [b for b in content or [] if isinstance(b, dict)])
    return blocks, start


def breakpoints(body):
    """Indices of the blocks with cache_control; the top-level one marks the last block."""
    blocks, _ = cache_blocks(body)
    marks = [i for i, b in enumerate(blocks) if isinstance(b, dict) and b.get("cache_control")]
    if body.get("cache_control") and blocks:
        marks.append(len(blocks) - 1)
    return marks


def prefix_hashes(body, blocks, start):
    """hashes[i] identifies blocks[0..i] (cache_control left out). tool_choice enters where the
    messages start: changing it keeps tools and system cached, not the messages."""
    h, hashes = hashlib.sha256(str(body.get("model")).encode()).digest(), []
    for i, block in enumerate(blocks):
        if i == start:
            choice = {"tool_choice": body.get("tool_choice"), "tools": bool(body.get("tools"))}
            h = hashlib.sha256(h + json.dumps(choice, sort_keys=True).encode()).digest()
        h = hashlib.sha256(h + json.dumps(_plain(block), sort_keys=True).encode()).digest()
        hashes.append(h)
    return hashes


class PromptCache:
    def __init__(self, min_tokens=MIN_CACHE_TOKENS, clock=time.monotonic):
        self.min_tokens, self.clock, self.entries = min_tokens, clock, {}  # hash -> expiry

    def usage(self, body):
        """input_tokens (uncached), cache_read_input_tokens, cache_creation_input_tokens."""
        blocks, start = cache_blocks(body)
        hashes = prefix_hashes(body, blocks, start)
        upto = list(accumulate(estimate_tokens(_plain(b)) for b in blocks))
        now = self.clock()
        self.entries = {h: t for h, t in self.entries.items() if t > now}
        marks = sorted(set(breakpoints(body)))
        hit = -1   # the end of the longest cached prefix any breakpoint reaches
        for mark in marks:
            for i in range(mark, max(mark - LOOKBACK, 0) - 1, -1):   # the breakpoint, then 20 back
                if hashes[i] in self.entries:
                    hit = max(hit, i)
                    break
        if hit >= 0:
            self.entries[hashes[hit]] = now + CACHE_TTL
        stored = hit
        for mark in marks:
            if mark > hit and upto[mark] >= self.min_tokens:
                self.entries[hashes[mark]] = now + CACHE_TTL
                stored = max(stored, mark)
        read = upto[hit] if hit >= 0 else 0
        written = upto[stored] - read if stored > hit else 0
        total = upto[-1] if upto else 0
        return {"input_tokens": total - read - written, "cache_creation_input_tokens": written,
                "cache_read_input_tokens": read}


# ---------------------------------------------------------------- summaries and the API's rules

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


def check_request(body, max_output: int = MAX_OUTPUT_TOKENS,
                  context_window: int = CONTEXT_WINDOW) -> str | None:
    """Return the first rule of the real API that this request breaks, or None.

    The order is the API's: the request's shape first, its length last (a prompt that is
    too long is only counted once it is a valid request)."""
    if not isinstance(body, dict):
        return "request body must be a JSON object"
    return (_check_fields(body, max_output) or _check_tools(body)
            or _check_system(body.get("system")) or _check_messages(body.get("messages"))
            or _check_breakpoints(body) or _check_window(body, context_window))


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
    if messages[0].get("role") != "user":
        return "messages.0.role: the first message must use the `user` role"
    # Consecutive user (or assistant) messages are fine: the API merges them.
    pending = set()   # the tool_use ids of the previous assistant message, to be answered now
    used = set()      # every tool_use id so far: an id may appear once in the whole conversation
    for i, m in enumerate(messages):
        role, content = m.get("role"), m.get("content")
        content = [text(content)] if isinstance(content, str) else content
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
            broken = f"{where}: `tool_use` ids must be unique" if b.get("id") in used else None
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
        if kind == "thinking" and not b["signature"]:   # the API signed it: "" cannot verify
            return f"{where}: Invalid `signature` in `thinking` block"
    else:
        return f"{where}.type: unknown content block type {kind!r}"
    return None


def _check_result_content(where: str, inner) -> str | None:
    """A tool_result's content: a string (even empty), or blocks, none of them an empty text."""
    if not isinstance(inner, (str, list)):
        return f"{where}.content: Input should be a valid string or list"
    for k, block in enumerate(inner if isinstance(inner, list) else []):
        if isinstance(block, dict) and block.get("type") == "text" and block.get("text") == "":
            return f"{where}.content.{k}: text content blocks must be non-empty"
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


def _check_breakpoints(body: dict) -> str | None:
    marks = len(breakpoints(body))
    if marks > MAX_BREAKPOINTS:
        return (f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
                f"Found {marks}.")
    return None


def prompt_tokens(body: dict) -> int:
    """The request's input, counted as the cache counts it: characters/4 of each block."""
    blocks, _ = cache_blocks(body)
    return sum(estimate_tokens(_plain(b)) for b in blocks)


def _check_window(body: dict, context_window: int) -> str | None:
    """The prompt alone must fit the window. (One that fits but leaves less room than max_tokens
    is accepted: the reply stops when the window is full; see StandInAPI._message.)"""
    tokens = prompt_tokens(body)
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
        size = estimate_tokens(block)
        if used + size > room:
            if block.get("type") == "text":   # what fits once the block's own JSON is paid for
                frame = len(json.dumps({**block, "text": ""}, ensure_ascii=False))
                block = {**block, "text": block.get("text", "")[:max(0, (room - used) * 4 - frame)]}
            return kept + [block]
        kept.append(block)
        used += size
    return kept


# ---------------------------------------------------------------- the server and its stream

class StandInAPI:
    """An HTTP server on 127.0.0.1 (random port) that plays `script`, one step per request."""

    def __init__(self, script, summary=None, min_cache_tokens=MIN_CACHE_TOKENS,
                 clock=time.monotonic, context_window: int = CONTEXT_WINDOW,
                 max_output: int = MAX_OUTPUT_TOKENS):
        self.script = list(script)
        self.summary = summary  # if set, summary requests (is_summary_request) get this text
        self.context_window = context_window   # tokens the model reads (check_request, _message)
        self.max_output = max_output           # the largest max_tokens it takes
        self.requests = []    # every request body received, in order
        self.headers = []     # and its HTTP headers (lower-case names)
        self.violations = []  # rules broken, one line each
        self.cache = PromptCache(min_cache_tokens, clock)
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
                status, payload, headers, delay = api._answer(body)
                # Sleep without holding the lock (other requests are answered meanwhile); shutdown
                # wakes every sleeper, which then drops its connection.
                if api._closing.wait(delay):
                    return
                try:
                    if status == 200 and isinstance(payload, dict) and body.get("stream"):
                        self._send(200, "".join(sse(payload)).encode(), {}, "text/event-stream")
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

    def _answer(self, body):
        """(status, payload, headers, delay) for one request."""
        with self._lock:
            self.requests.append(body)
            broken = check_request(body, self.max_output, self.context_window)
            if broken:
                self.violations.append(broken)
                return 400, _error_body("invalid_request_error", broken), {}, 0
            if self.summary is not None and is_summary_request(body):
                return 200, self._message(body, reply(text(self.summary))), {}, 0
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
            return 200, self._message(body, step), {}, step.get("delay", 0)

    def _message(self, body, step):
        fields = step.get("fields", {})
        content, stop_reason = step["content"], step["stop_reason"]
        room = self.context_window - prompt_tokens(body)
        if estimate_tokens(content) > room:   # the reply filled the window: it stops there
            content, stop_reason = cut_to_window(content, room), "model_context_window_exceeded"
        # The cache sees every request, whatever usage a step reports.
        sent = fields.get("content", content)
        usage = {**self.cache.usage(body), "output_tokens": estimate_tokens(sent or [])}
        message = {"id": f"msg_{len(self.requests):04d}", "type": "message", "role": "assistant",
                   "model": body["model"], "content": content, "stop_reason": stop_reason,
                   "stop_sequence": None,
                   "usage": usage if step["usage"] is None else step["usage"], **fields}
        self.usages.append(message.get("usage"))   # billing() sums what the client was told
        return message

    def billing(self):
        """The session's input as the API would bill it: uncached 1x, written 1.25x, read 0.1x."""
        def total(name):
            return sum(u.get(name) or 0 for u in self.usages if isinstance(u, dict))
        uncached, write, read = (total("input_tokens"), total("cache_creation_input_tokens"),
                                 total("cache_read_input_tokens"))
        return {"calls": len(self.usages), "input_sent": uncached + write + read,
                "uncached": uncached, "cache_write": write, "cache_read": read,
                "output": total("output_tokens"),
                "billed_input": uncached + 1.25 * write + 0.1 * read}

    def __enter__(self):
        # shutdown() waits for the serve loop's next poll: 0.5 s by default, paid by every test.
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                         daemon=True).start()
        return self

    def __exit__(self, *exc):
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()


def sse(message):
    """A message as the API streams it: server-sent events, text and tool input in pieces.
    The order is the documented one: message_start (empty content, output_tokens 1), each
    block's start / deltas / stop, a ping after the first block starts, message_delta with the
    stop reason and output tokens, message_stop."""
    def event(kind, **data):
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"
    content = message.get("content")
    blocks = content if isinstance(content, list) else []
    usage = message.get("usage")
    start = {**message, "content": [] if isinstance(content, list) else content,
             "stop_reason": None,
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
    output = usage.get("output_tokens") if isinstance(usage, dict) else None
    yield event("message_delta",
                delta={"stop_reason": message.get("stop_reason"), "stop_sequence": None},
                usage={"output_tokens": output})
    yield event("message_stop")


def _pieces(s, size):
    return [s[i:i + size] for i in range(0, len(s), size)] or [""]


def _error_body(kind, message):
    return {"type": "error", "error": {"type": kind, "message": message},
            "request_id": "req_standin"}
