"""One model round: `reply = endpoints.ask(run, system, tools, messages, max_tokens)`.

Every lesson's loop makes this one call per round (s03 defines the loop; s06 and s07 repeat
it), and gets back one Reply with named parts. The run (harness/run.py) holds the client,
the screen and the record the round is shown and counted on, and --api-context's setting
(harness/api_context.py): with one, the request goes to the beta Messages API with its beta
and context_management, and the reply keeps the API's compaction block.

    reply.message   the assistant message to append: plain dicts, safe to send again
    reply.calls     the tool calls to run, each with .id .name .input, and .problem when
                    the input does not fit the tool's schema (the loop returns that as an
                    is_error result instead of running it)
    reply.text      the final text, saying why the turn ended when that was not normal
    reply.said      the model's own words only ("" if none): a summary, say
    reply.stop_reason  why the reply ended (max_tokens, or pairing.ENDED_EARLY: it was cut)
    reply.cut       True when it stopped mid-way (max_tokens, ENDED_EARLY: pairing.CUT)
    reply.notes     text blocks for the next user message (a call cut off, and so not run)
    reply.usage     the API's token counts (s06 measures the context with them)

The stream, the usage line and every quirk of compatible endpoints live behind ask(). The
reference API never needs most of this; proxies, gateways, llama-server and small models do.
Without each piece:
- streaming (_stream): a slow model shows nothing for minutes, then a wall of text.
- _Assembly, the reply put together event by event: the SDK's helper trusts the events, so a
  delta before its block, a call without an id or a null text is a traceback, half an emoji
  in a call's JSON fails the turn, and a stream that closes inside a call runs the call as
  far as it got (task #1 completed while the model was writing #17).
- pause_turn (and "compaction", a pause after the API's summary): a turn the server paused
  looks finished; ask() resumes it (up to MAX_RESUMES).
- errors as one line (EndpointError): a dropped connection, HTML from a wrong URL, text
  that cannot be encoded, or an API error ends in a traceback or a misleading line.
- _assistant_message: the SDK's objects (None fields, unknown and server blocks, a str input,
  a lone surrogate from half an emoji) go back into the history, and the next request is
  refused, or fails to encode, for every later call of the session.
- cut calls (pairing.cut_call): a reply cut by max_tokens, or by a stream that ended before
  message_delta, ends in a half-written call; running it writes half a file. It is left out
  of the history; when other calls ran, reply.notes tells the model, and when it was the
  only one, the turn ends and reply.text says the answer was cut.
- _decode_input / _check_input: a tool input sent as JSON text ('{"command": "ls"}') is
  refused though the model meant exactly that; a missing or mistyped argument becomes a
  TypeError deep in a tool; half an emoji escaped in that text poisons the history.
- complete calls whatever stop_reason says: a server that says end_turn beside a tool call
  loses that call.
- unique ids (pairing.unique_ids): an endpoint that numbers its tool_use ids from 1
  again (after --continue, say) reuses an earlier call's id; the API refuses the request, and
  layer 1 would show the new result as the old one's placeholder.
- the usage line and the run's record (session/record.py): the cost of a session is
  invisible, and a local server that silently dropped the tools goes unnoticed. A summary the
  API wrote is counted as a call of its own (its usage is only in usage.iterations).
"""

import json
import types
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from harness import api_context, excerpt, pairing, terminal
from harness.clean import clean_json
from harness.config import api_error_line, api_timeout, model_id
from harness.errors import EndpointError, dropped, error_event, malformed, unsendable
from harness.sdk import anthropic, httpx
from harness.session.record import usage_counts

MAX_RESUMES = 10      # pause_turn continuations of one round before it is returned as it is
CACHE = {"type": "ephemeral"}   # the top-level breakpoint: the API caches the prefix (s06)
JSON_TYPES = {"string": str, "integer": int, "number": (int, float), "boolean": bool,
              "array": list, "object": dict}
# What is sent back (and a compaction block, when the run asked the API to compact).
KEEP_BLOCKS = {"text", "tool_use", "thinking", "redacted_thinking", "compaction"}
RESUMED = {"pause_turn", "compaction"}    # stop reasons of a turn the server paused
ENDED = {"max_tokens": "[answer cut: the model reached max_tokens]",
         "model_context_window_exceeded": "[answer cut: the conversation filled the context "
                                          "window]",
         pairing.ENDED_EARLY: "[answer cut: the endpoint ended the stream before the reply was "
                              "complete]",
         "refusal": "[the model refused to continue with this request]"}
# Each delta of a stream: the blocks it belongs to, and the field that carries it.
DELTAS = {"text_delta": (("text",), "text"), "citations_delta": (("text",), "citation"),
          "thinking_delta": (("thinking",), "thinking"),
          "signature_delta": (("thinking",), "signature"),
          "input_json_delta": (("tool_use", "server_tool_use"), "partial_json"),
          "compaction_delta": (("compaction",), "content")}
KNOWN_BLOCKS = {"text", "thinking", "redacted_thinking", "tool_use", "server_tool_use",
                "compaction"}
TEXT_FIELDS = {"text": "text", "thinking": "thinking"}   # a block's text: a string, never null


@dataclass
class Call:
    id: str
    name: str
    input: dict
    problem: str | None = None    # why the input does not fit the tool's schema


@dataclass
class Reply:
    message: dict
    calls: list = field(default_factory=list)
    text: str = ""
    notes: list = field(default_factory=list)
    usage: object = None
    said: str = ""
    stop_reason: str = ""

    @property
    def cut(self) -> bool:
        """The reply stopped mid-way: max_tokens, a full context window, or a stream that
        ended early (pairing.CUT). Its last words, or its last call, are missing."""
        return self.stop_reason in pairing.CUT


def ask(run, system: str, tools: list, messages: list, max_tokens: int,
        label: str = "tokens") -> Reply:
    """One model round with run.client, streamed to the screen and counted in run.recorder;
    EndpointError (one line) if it failed.

    label names the call in the usage line and the session record ("summary call" for a
    compaction's summary)."""
    sent = list(messages)
    content = []
    # --api-context: the beta and context_management ({} without it), and with compaction,
    # the history from the API's last summary on (it drops what came before it anyway).
    extra = api_context.request(run.api_context, messages)
    if run.api_context is not None:
        sent = run.api_context.view(sent)
    for _ in range(MAX_RESUMES + 1):
        response = _stream(run.client, run.screen, model=model_id(), system=system,
                           tools=tools, messages=sent, max_tokens=max_tokens, cache_control=CACHE,
                           **extra)
        _count(run, response, label, sent, system, tools)
        content += list(response.content)
        if response.stop_reason not in RESUMED:
            break
        # The server paused a long turn: send what it wrote so far back, and it goes on.
        sent = sent + [_assistant_message(response.content, None, setting=run.api_context)]
    cut = pairing.cut_call(content, response.stop_reason)
    message = _assistant_message(content, cut, response.stop_reason, run.api_context)
    # An endpoint that numbers its ids from 1 again would reuse an earlier call's id.
    message = pairing.unique_ids(messages, message)
    calls = _calls(content, cut, tools)
    uses = [b for b in message["content"] if b["type"] == "tool_use"]
    for call, block in zip(calls, uses, strict=True):
        call.id = block["id"]
    said = _said(message)
    if calls:
        terminal.show_reply_text(said)          # beside tool calls: shown, not returned
    text = _final_text(said, response.stop_reason)
    notes = []
    if cut is not None:
        notes.append(pairing.cut_note(cut.name, response.stop_reason))
    return Reply(message, calls, text, notes, response.usage, said, response.stop_reason)


def total_tokens(usage) -> int:
    """The context the API counted for a call: its input (uncached, read, written) and output."""
    return sum(usage_counts(usage))


# ---------------------------------------------------------------- the stream

def _stream(client, screen, **request):
    """Run a streamed request, showing it as it arrives on the run's screen; the final
    Message, or EndpointError."""
    where = str(client.base_url).rstrip("/")    # the URL actually used, for every message
    live = terminal.LiveReply(urlsplit(where).netloc, screen)
    began = False
    # With betas (--api-context), the beta Messages API: it takes them and context_management.
    messages_api = client.beta.messages if "betas" in request else client.messages
    try:
        with messages_api.create(stream=True, **request) as events:
            # The endpoint answered: a failure from here on dropped a reply under way.
            began = True
            reply = _Assembly(where, events.response.headers.get("content-type", "no type"))
            for event in events:
                for shown in reply.add(event):
                    live.show(shown)
            return reply.message()
    except (anthropic.APIConnectionError, httpx.TransportError) as exc:
        # Told apart by when it happened, not by its class: SDK 2.17 wraps a read that fails
        # mid-stream in APIConnectionError, where 2.16 let httpx's own error through.
        if not began:
            raise EndpointError(api_error_line(exc, client)) from None
        cause = exc.__cause__ or exc
        raise EndpointError(dropped(cause, where, api_timeout())) from None
    except anthropic.APIStatusError as exc:
        # After the answer began, an error can only be an error event in the stream.
        if began:
            raise EndpointError(error_event(exc, where)) from None
        line = api_error_line(exc, client)
        raise EndpointError(api_context.refused(line, exc, request)) from None
    except anthropic.APIError as exc:
        raise EndpointError(api_error_line(exc, client)) from None
    except json.JSONDecodeError as exc:     # the SDK parses each event's data line
        raise EndpointError(malformed(where, "an event whose data is not JSON: "
                                             f"{excerpt.one_line(exc.doc, 80)}")) from None
    except UnicodeEncodeError as exc:   # a ValueError, but ours: the request cannot be encoded
        raise EndpointError(unsendable(exc)) from None
    except (ValueError, TypeError, LookupError, AttributeError, AssertionError,
            RuntimeError) as exc:
        raise EndpointError(f"the endpoint at {where} did not answer like the Messages "
                            f"API ({type(exc).__name__}: {excerpt.one_line(exc, 120)})") from None
    finally:
        live.close()


class _Assembly:
    """One streamed reply put together from its events, each checked as it arrives.

    The SDK's own helper (messages.stream) trusts the events: a delta before its block is an
    IndexError, a null text a TypeError, half an emoji in a tool's JSON a ValueError, and a
    stream that closes in the middle of a call hands back the call as far as it got. Here what
    breaks the rules is one EndpointError that names the endpoint and what it sent; event and
    delta types the API adds later are skipped, as its docs ask; and a reply whose stream
    ended before message_delta (which follows every block) comes back cut: stop_reason
    pairing.ENDED_EARLY, so its last call is never run.
    """

    def __init__(self, where: str, answer_type: str):
        self.where = where
        self.answer_type = answer_type    # the response's content type, for a stream of nothing
        self.start = None                 # message_start's message, as plain data
        self.blocks = []                  # the content blocks so far, as plain data
        self.json = {}                    # block index -> the pieces of its tool input's JSON
        self.ended = False                # message_delta or message_stop arrived

    def add(self, event) -> list:
        """Take one event in; return what the live display shows for it."""
        if not hasattr(event, "to_dict"):     # the SDK makes an object of JSON objects only
            raise self._bad(f"an event whose data is {excerpt.one_line(json.dumps(event), 60)}, "
                            "not a JSON object")
        data = event.to_dict(warnings=False)
        kind = data.get("type")
        if kind == "message_start":
            self._begin(data.get("message"))
            return []
        if kind not in ("content_block_start", "content_block_delta", "content_block_stop",
                        "message_delta", "message_stop"):
            return []                     # an event type added after this harness was written
        if self.start is None:
            raise self._bad(f"a {kind} before message_start")
        if kind == "content_block_start":
            self._block_start(data)
            return [event]
        if kind == "content_block_delta":
            return self._delta(data)
        if kind == "content_block_stop":
            self._block_at(data, kind)
            return [event]
        if kind == "message_delta":
            self._message_delta(data)
        # message_delta follows every block, and message_stop ends the stream: either says
        # the reply is whole.
        self.ended = True
        return []

    def message(self):
        """The reply as the SDK's Message (what ask() reads), every string sendable."""
        if self.start is None:
            raise self._bad(f"no message_start (the answer was {self.answer_type}, with no "
                            "event of the Messages API)")
        for index, pieces in self.json.items():
            text = "".join(pieces)
            if not text.strip():
                continue                  # deltas of "" only: the input is the block start's
            # json.loads, not the SDK's parser: it takes half an emoji, which clean_json mends.
            # Text that is not JSON stays text: make_call tells the model so.
            parsed = _json_or_none(text)
            self.blocks[index]["input"] = text if parsed is None else parsed
        blocks = clean_json(self.blocks)
        stop_reason = self.start.get("stop_reason")
        if not self.ended:
            stop_reason = pairing.ENDED_EARLY
            # The last block stopped wherever the stream did. Text is kept as far as it went;
            # a tool call is left to pairing.cut_call; anything else (a thinking block without its
            # signature) the API would refuse.
            if blocks and blocks[-1]["type"] not in ("text", "tool_use"):
                blocks = blocks[:-1]
        reply = {**self.start, "content": blocks, "stop_reason": stop_reason}
        return anthropic.types.Message.construct(**reply)

    def _begin(self, message) -> None:
        if not isinstance(message, dict):
            raise self._bad("a message_start without a message")
        if not isinstance(message.get("content"), list):
            raise self._bad("a message_start without content (is ANTHROPIC_BASE_URL the "
                            "Messages API?)")
        self.start = message
        for block in message["content"]:     # a server may send whole blocks here
            self.blocks.append(self._checked(block))

    def _block_start(self, data: dict) -> None:
        index = data.get("index")
        if index != len(self.blocks) or isinstance(index, bool):
            raise self._bad(f"content block {json.dumps(index)} where block "
                            f"{len(self.blocks)} comes next")
        self.blocks.append(self._checked(data.get("content_block")))

    def _checked(self, block) -> dict:
        """A content block, or EndpointError if it lacks what the history needs of it."""
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise self._bad("a content_block_start without a block")
        field = TEXT_FIELDS.get(block["type"])
        if field and not isinstance(block.get(field), str):
            raise self._bad(f"a {block['type']} block whose {field} is "
                            f"{json.dumps(block.get(field))}")
        if block["type"] == "tool_use":
            self._check_call(block)
        return dict(block)

    def _check_call(self, block: dict) -> None:
        """A call's id pairs it with its result, and its name picks the tool: both strings."""
        for part in ("id", "name"):
            value = block.get(part)
            if value in (None, ""):
                raise self._bad(f"a tool_use block without {_a(part)}")
            if not isinstance(value, str):
                raise self._bad(f"a tool_use block whose {part} is {json.dumps(value)}")

    def _block_at(self, data: dict, kind: str) -> dict:
        """The block a content_block_delta or _stop names, which must have started."""
        index = data.get("index")
        started = isinstance(index, int) and not isinstance(index, bool)
        if not started or not 0 <= index < len(self.blocks):
            raise self._bad(f"a {kind} for block {json.dumps(index)} before its "
                            "content_block_start")
        return self.blocks[index]

    def _delta(self, data: dict) -> list:
        block = self._block_at(data, "content_block_delta")
        delta = data.get("delta")
        if not isinstance(delta, dict):
            raise self._bad("a content_block_delta without a delta")
        kind = delta.get("type")
        if kind not in DELTAS:
            return []                     # a delta type added after this harness was written
        owners, field = DELTAS[kind]
        if block["type"] not in owners:
            if block["type"] in KNOWN_BLOCKS:
                raise self._bad(f"{_a(kind)} for {_a(block['type'])} block")
            return []                     # a block type of its own: left out of the history
        value = delta.get(field)
        wanted = dict if kind == "citations_delta" else str
        if kind == "compaction_delta" and value is None:
            return []                     # a failed summary: the block keeps no content
        if not isinstance(value, wanted):
            raise self._bad(f"{_a(kind)} whose {field} is {json.dumps(value)}")
        if kind == "input_json_delta":
            self.json.setdefault(data["index"], []).append(value)
            return [_shown("input_json", partial_json=value)]
        if kind == "citations_delta":
            block["citations"] = (block.get("citations") or []) + [value]
        elif kind == "compaction_delta":   # the whole summary, in one delta (as the SDK reads it)
            block["content"] = value
        elif kind == "signature_delta":
            block["signature"] = value
        else:
            block[field] += value
        if kind == "text_delta":
            return [_shown("text", text=value)]
        return []

    def _message_delta(self, data: dict) -> None:
        """The stop reason and the final usage counts (each optional, as some servers send)."""
        delta = data.get("delta")
        if isinstance(delta, dict) and "stop_reason" in delta:
            self.start["stop_reason"] = delta["stop_reason"]
        if isinstance(data.get("context_management"), dict):   # what the API's edits did
            self.start["context_management"] = data["context_management"]
        usage = data.get("usage")
        if isinstance(usage, dict):
            counts = self.start.get("usage")
            counts = dict(counts) if isinstance(counts, dict) else {}
            for name, value in usage.items():
                if value is not None:     # a count left out keeps message_start's
                    counts[name] = value
            self.start["usage"] = counts

    def _bad(self, what: str) -> EndpointError:
        return EndpointError(malformed(self.where, what))


def _a(word: str) -> str:
    """'a text block', 'an input_json_delta'."""
    article = "an" if word[0] in "aeiou" else "a"
    return f"{article} {word}"


def _shown(kind: str, **fields):
    """An event as terminal.LiveReply reads it: the shape of the SDK's own text and input_json
    events."""
    return types.SimpleNamespace(type=kind, **fields)


def _count(run, response, label: str, sent: list, system: str, tools: list) -> None:
    """The usage line, the run's record, and once a session the dropped-tools warning. A
    summary the API wrote first is a call of its own (billed, and only in usage.iterations),
    recorded before the reply's, with the compaction it made (api_context.announce)."""
    recorder, usage = run.recorder, response.usage
    for step in api_context.summary_steps(usage):
        terminal.show_usage(usage_counts(step), api_context.SUMMARY_LABEL)
        recorder.call(step, api_context.SUMMARY_LABEL)
    api_context.announce(run, response)
    counts = usage_counts(usage)
    terminal.show_usage(counts, label)
    recorder.call(usage, label, sent=sent, system=system, tools=tools)
    if tools and len(recorder.data.calls) == 1:
        terminal.warn_if_tools_dropped(sum(counts[:3]), tools)


# ---------------------------------------------------------------- the reply as history

def _assistant_message(content: list, cut, stop_reason: str = "max_tokens",
                       setting=None) -> dict:
    """The assistant message as plain dicts, safe to send again and to write as JSON. setting:
    the run's --api-context (a compaction block is kept only when it asked for one)."""
    if cut is not None:
        terminal.show_note(f"  [the reply was cut off by {stop_reason} inside a {cut.name} "
                           "call: it was not run]")
    blocks = []
    for block in content:
        if block is cut:
            continue
        blocks.append(block.model_dump(mode="json", exclude_none=True, warnings=False))
    kept = []
    for block in api_context.kept_blocks(setting, clean_json(blocks)):
        if block["type"] not in KEEP_BLOCKS:
            terminal.show_note(f"  [a {block['type']!r} block in the reply was left out: "
                               "this harness does not use it]")
        elif block["type"] == "text" and not block["text"].strip():
            continue                  # the API refuses an empty text block
        else:
            kept.append(block)
    for block in kept:     # the history must hold an object as a tool call's input
        if block["type"] == "tool_use" and not isinstance(block.get("input"), dict):
            block["input"] = pairing.input_object(block.get("input")) or {}
    return {"role": "assistant", "content": kept or [{"type": "text", "text": "(no text)"}]}


def _calls(content: list, cut, tools: list) -> list:
    """Every complete tool call of the reply, its input as sent, decoded and checked."""
    calls = []
    for block in content:
        if block.type == "tool_use" and block is not cut:
            calls.append(make_call(block.id, block.name, clean_json(block.input), tools))
    return calls


def make_call(call_id: str, name: str, given: object, tools: list) -> Call:
    """A Call with its input decoded to the tool's schema, or .problem saying what is wrong."""
    schema = {}
    for tool in tools or []:
        if tool["name"] == name:
            schema = tool.get("input_schema", {})
    call = Call(call_id, name, given)
    try:
        call.input = _decode_input(given, schema)
        _check_input(call.input, schema)
    except ValueError as exc:
        call.problem = str(exc)
    return call


def _said(message: dict) -> str:
    """The text blocks of the message, joined."""
    texts = [b["text"] for b in message["content"] if b["type"] == "text"]
    return "\n".join(t for t in texts if t != "(no text)").strip()


def _final_text(answer: str, stop_reason: str) -> str:
    """What the user sees when the turn ends, saying why it ended if that was not normal."""
    note = ENDED.get(stop_reason)
    shown = "\n".join(x for x in (answer, note) if x)
    return shown or "(the model returned no text)"


# ---------------------------------------------------------------- tool inputs

def _decode_input(args: object, schema: dict) -> dict:
    """The arguments as the schema wants them (JSON text where an object belongs is decoded;
    json.loads only parses data, the model's text is never run), or ValueError."""
    if isinstance(args, str):
        args = _json_or_none(args)
    if not isinstance(args, dict):
        raise ValueError("the arguments must be a JSON object such as {\"path\": \"a.txt\"}, "
                         f"got {type(args).__name__}")
    props = schema.get("properties", {})
    decoded = {}
    for name, value in args.items():
        want = props.get(name, {}).get("type")
        if want in ("array", "object") and isinstance(value, str):
            parsed = _json_or_none(value)
            value = parsed if isinstance(parsed, JSON_TYPES[want]) else value
        decoded[name] = value
    return decoded


def _check_input(args: dict, schema: dict) -> None:
    """Top-level check against the schema, so the model gets a clear error."""
    props = schema.get("properties", {})
    for name in schema.get("required", []):
        if name not in args:
            raise ValueError(f"missing required argument {name!r}")
    for name, value in args.items():
        if name not in props:
            raise ValueError(f"unexpected argument {name!r}; expected: "
                             f"{', '.join(props) or 'none'}")
        kinds = props[name].get("type")
        if not kinds:
            continue
        kinds = kinds if isinstance(kinds, list) else [kinds]
        if not any(_is_a(value, kind) for kind in kinds):
            raise ValueError(f"argument {name!r} must be {' or '.join(kinds)}, "
                             f"got {type(value).__name__}")


def _is_a(value, kind: str) -> bool:
    """JSON's types: a boolean is not a number here, as it is not in JSON."""
    if isinstance(value, bool) and kind != "boolean":
        return False
    return isinstance(value, JSON_TYPES[kind])


def _json_or_none(text: str):
    """The data of a JSON text, every string sendable (its escapes may hold half an emoji,
    "\\ud83d"), or None."""
    try:
        return clean_json(json.loads(text))
    except ValueError:
        return None
