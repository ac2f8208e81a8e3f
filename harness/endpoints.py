"""One model round: `reply = endpoints.ask(client, system, tools, messages, max_tokens)`.

Every lesson's loop makes this one call per round (s03 defines the loop; s06 and s07 repeat
it), and gets back one Reply with named parts:

    reply.message   the assistant message to append: plain dicts, safe to send again
    reply.calls     the tool calls to run, each with .id .name .input, and .problem when
                    the input does not fit the tool's schema (the loop returns that as an
                    is_error result instead of running it)
    reply.text      the final text, saying why the turn ended when that was not normal
    reply.said      the model's own words only ("" if none): a summary, say
    reply.stop_reason  why the reply ended (max_tokens: it was cut)
    reply.notes     text blocks for the next user message (a call cut off, and so not run)
    reply.usage     the API's token counts (s06 measures the context with them)

The stream, the usage line and every quirk of compatible endpoints live behind ask(). The
reference API never needs most of this; proxies, gateways, llama-server and small models do.
Without each piece:
- streaming (_stream): a slow model shows nothing for minutes, then a wall of text.
- pause_turn: a turn the server paused looks finished; ask() resumes it (up to MAX_RESUMES).
- errors as one line (EndpointError): a dropped connection, HTML from a wrong URL, text
  that cannot be encoded, or an API error ends in a traceback or a misleading line.
- _assistant_message: the SDK's objects (None fields, unknown and server blocks, a str input,
  a lone surrogate from half an emoji) go back into the history, and the next request is
  refused, or fails to encode, for every later call of the session.
- cut calls: a reply cut by max_tokens ends in a half-written call; running it writes half a
  file. It is left out of the history; when other calls ran, reply.notes tells the model,
  and when it was the only one, the turn ends and reply.text says the answer was cut.
- _decode_input / _check_input: a tool input sent as JSON text ('{"command": "ls"}') is
  refused though the model meant exactly that; a missing or mistyped argument becomes a
  TypeError deep in a tool.
- complete calls whatever stop_reason says: a server that says end_turn beside a tool call
  loses that call.
- unique ids (session_log.unique_ids): an endpoint that numbers its tool_use ids from 1
  again (after --continue, say) reuses an earlier call's id; the API refuses the request, and
  layer 1 would show the new result as the old one's placeholder.
- the usage line and the record (session/record.py): the cost of a session is invisible, and
  a local server that silently dropped the tools goes unnoticed.
"""

import json
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from harness import excerpt, terminal
from harness.clean import clean_json
from harness.config import api_error_line, api_timeout, model_id
from harness.errors import EndpointError, dropped, unsendable
from harness.sdk import anthropic, httpx
from harness.session import log as session_log
from harness.session.record import RECORD, usage_counts

MAX_RESUMES = 10      # pause_turn continuations of one round before it is returned as it is
CACHE = {"type": "ephemeral"}   # the top-level breakpoint: the API caches the prefix (s06)
JSON_TYPES = {"string": str, "integer": int, "number": (int, float), "boolean": bool,
              "array": list, "object": dict}
CUT = {"max_tokens", "model_context_window_exceeded"}   # the reply stopped mid-way
KEEP_BLOCKS = {"text", "tool_use", "thinking", "redacted_thinking"}   # what is sent back
ENDED = {"max_tokens": "[answer cut: the model reached max_tokens]",
         "model_context_window_exceeded": "[answer cut: the conversation filled the context "
                                          "window]",
         "refusal": "[the model refused to continue with this request]"}


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


def ask(client, system: str, tools: list, messages: list, max_tokens: int,
        label: str = "tokens") -> Reply:
    """One model round, streamed to the screen; EndpointError (one line) if it failed.

    label names the call in the usage line and the session record ("summary call" for a
    compaction's summary)."""
    sent = list(messages)
    content = []
    for _ in range(MAX_RESUMES + 1):
        response = _stream(client, model=model_id(), system=system, tools=tools, messages=sent,
                           max_tokens=max_tokens, cache_control=CACHE)
        _count(response.usage, label, sent, system, tools)
        content += list(response.content)
        if response.stop_reason != "pause_turn":
            break
        # The server paused a long turn: send what it wrote so far back, and it goes on.
        sent = sent + [_assistant_message(response.content, None)]
    cut = _cut_call(content, response.stop_reason)
    message = _assistant_message(content, cut, response.stop_reason)
    # An endpoint that numbers its ids from 1 again would reuse an earlier call's id.
    message = session_log.unique_ids(messages, message)
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
        notes.append({"type": "text", "text": f"[your {cut.name} call was cut off by "
                      f"{response.stop_reason} before it was complete, so it was not run; "
                      "send it again, in smaller pieces if it is long]"})
    return Reply(message, calls, text, notes, response.usage, said, response.stop_reason)


def total_tokens(usage) -> int:
    """The context the API counted for a call: its input (uncached, read, written) and output."""
    return sum(usage_counts(usage))


# ---------------------------------------------------------------- the stream

def _stream(client, **request):
    """Run a streamed request, showing it as it arrives; the final Message, or EndpointError."""
    where = str(client.base_url).rstrip("/")    # the URL actually used, for every message
    live = terminal.LiveReply(urlsplit(where).netloc)
    began = False
    try:
        with client.messages.stream(**request) as stream:
            # The endpoint answered: a failure from here on dropped a reply under way.
            began = True
            for event in stream:
                live.show(event)
            message = stream.get_final_message()
    except (anthropic.APIConnectionError, httpx.TransportError) as exc:
        # Told apart by when it happened, not by its class: SDK 2.17 wraps a read that fails
        # mid-stream in APIConnectionError, where 2.16 let httpx's own error through.
        if not began:
            raise EndpointError(api_error_line(exc, client)) from None
        cause = exc.__cause__ or exc
        raise EndpointError(dropped(cause, where, api_timeout())) from None
    except anthropic.APIError as exc:
        raise EndpointError(api_error_line(exc, client)) from None
    except UnicodeEncodeError as exc:   # a ValueError, but ours: the request cannot be encoded
        raise EndpointError(unsendable(exc)) from None
    except (ValueError, TypeError, KeyError, AttributeError, AssertionError,
            RuntimeError) as exc:
        raise EndpointError(f"the endpoint at {where} did not answer like the Messages "
                            f"API ({type(exc).__name__}: {excerpt.one_line(exc, 120)})") from None
    finally:
        live.close()
    if not isinstance(getattr(message, "content", None), list):
        raise EndpointError(f"the endpoint at {where} sent a reply without content "
                            "(is ANTHROPIC_BASE_URL the Messages API?)")
    return message


def _count(usage, label: str, sent: list, system: str, tools: list) -> None:
    """The usage line, the session record, and once a session the dropped-tools warning."""
    counts = usage_counts(usage)
    terminal.show_usage(counts, label)
    RECORD.call(usage, label, sent=sent, system=system, tools=tools)
    if tools and len(RECORD.data.calls) == 1:
        terminal.warn_if_tools_dropped(sum(counts[:3]), tools)


# ---------------------------------------------------------------- the reply as history

def _cut_call(content: list, stop_reason: str):
    """The tool call a cut reply stopped inside, or None. Only the last block can be
    half-written (llama-server returns several parsed calls with stop_reason max_tokens)."""
    if stop_reason in CUT and content and content[-1].type == "tool_use":
        return content[-1]
    return None


def _assistant_message(content: list, cut, stop_reason: str = "max_tokens") -> dict:
    """The assistant message as plain dicts, safe to send again and to write as JSON."""
    if cut is not None:
        terminal.show_note(f"  [the reply was cut off by {stop_reason} inside a {cut.name} "
                           "call: it was not run]")
    blocks = []
    for block in content:
        if block is cut:
            continue
        blocks.append(block.model_dump(mode="json", exclude_none=True, warnings=False))
    kept = []
    for block in clean_json(blocks):
        if block["type"] not in KEEP_BLOCKS:
            terminal.show_note(f"  [a {block['type']!r} block in the reply was left out: "
                               "this harness does not use it]")
        elif block["type"] == "text" and not block["text"].strip():
            continue                  # the API refuses an empty text block
        else:
            kept.append(block)
    for block in kept:     # the history must hold an object as a tool call's input
        if block["type"] == "tool_use" and not isinstance(block.get("input"), dict):
            decoded = _json_or_none(str(block.get("input")))
            block["input"] = decoded if isinstance(decoded, dict) else {}
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
    try:
        return json.loads(text)
    except ValueError:
        return None
