"""What the harness adds around one model call: s03's ask_model, and so every lesson's.

s03 shows the call (client.messages.stream, get_final_message, the loop reading stop_reason
and the tool_use blocks); this module wraps it in two calls a learner may skip:

    with model_call.Guard(run) as guard:           anything that fails: one line, naming the
        with client.messages.stream(**request) as stream:                   endpoint
            guard.display(stream)                  the reply on the screen as it is written
            response = stream.get_final_message()
    return guard.checked(response, request)        the reply made safe to keep, and counted

The SDK retries and assembles the stream; the rest is for proxies, gateways, llama-server and
small models. Without each piece:
- the guard's one line (EndpointError): HTML, a stream that breaks the rules, a connection
  dropped mid-reply or an error event ends in a traceback deep in the SDK, or blames the key.
- display: a slow model shows nothing for minutes, then a wall of text. quiet_serializer: an
  odd count puts pydantic's warning, lines of site-packages paths, on the terminal.
- _Watch: a stream of nothing but pings waits forever (httpx's timeout is per read).
- checked(): the SDK's objects (None fields, unknown blocks, an input as JSON text, half an
  emoji) go into the history, and every later request is refused or cannot be encoded.
- a cut call (max_tokens, or a stream closed before message_delta): running it writes half
  a file. It is left out; the next message tells the model, or, alone, the answer says so.
- the block count: blocks that share an index run a call with the input of none.
- stop_reason "tool_use" exactly when a complete call is in the reply: end_turn beside a
  call loses it; tool_use beside none sends an empty user message, which the API refuses. A
  refusal runs none of its calls, shows the API's explanation (stop_details), and answers a
  Refused, which cli takes out of the history (the API refuses again while it is there).
- pairing.unique_ids: an id numbered from 1 again (after --continue) or one like "call 1"
  gets the next request refused.
- pause_turn (and "compaction"): a paused turn looks finished; checked() resumes it, up to
  MAX_RESUMES (then the answer says to prompt on), never a reply holding a call of ours.
- _count, the usage line and the run's record: the cost is invisible, and a local server that
  dropped the tools goes unnoticed. _count_abandoned: a reply abandoned after it began
  (Ctrl-C, a signal, a dropped stream) is billed, yet /cost leaves it out.
"""

import contextlib
import json
import threading
import warnings
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from harness import config, errors, excerpt, pairing, terminal, tokens
from harness.clean import clean_json
from harness.errors import EndpointError
from harness.sdk import anthropic, httpx

MAX_RESUMES = 10      # pause_turn continuations of one call before it is returned as it is
RESUMED = {"pause_turn", "compaction"}    # stop reasons of a turn the server paused
# The blocks the history keeps and sends back (a compaction block: api_context's kept()).
KEEP_BLOCKS = {"text", "tool_use", "thinking", "redacted_thinking"}
ENDED = {"max_tokens": "[answer cut: the model reached max_tokens]",
         "model_context_window_exceeded": "[answer cut: the conversation filled the context "
                                          "window]",
         pairing.ENDED_EARLY: "[answer cut: the endpoint ended the stream before the reply was "
                              "complete]",
         "refusal": "[the model refused to continue with this request]"}
PAUSED = ("[the server paused this turn more often than the harness resumes it: send a "
          "prompt such as 'go on' to continue it]")
ENDED.update(dict.fromkeys(RESUMED, PAUSED))
# Events that carry the reply: a stream of anything else (pings) is no progress.
CONTENT = {"message_start", "content_block_start", "content_block_delta", "content_block_stop",
           "message_delta", "message_stop", "text", "input_json", "thinking", "citation",
           "signature", "compaction"}
# Every way the SDK fails on a stream that breaks the Messages API's rules.
ODD_STREAM = (ValueError, TypeError, LookupError, AttributeError, AssertionError, RuntimeError)


class Refused(str):
    """The answer of a reply the API refused: cli takes the turn out of the history."""


@dataclass
class Response:
    """The SDK's Message as the loop keeps it: content as plain dicts, safe to send again."""
    content: list
    stop_reason: str
    usage: object = None
    said: str = ""                  # the model's own words ("" if none): a summary, say
    late: object = None             # a note made after the calls ran (s07's board, api_context)
    early: list = field(default_factory=list)   # notes for the next user message, made now
    # The calls to run, in order, each input as the model sent it (content holds an object).
    tool_uses: list = field(default_factory=list)

    @property
    def notes(self) -> list:
        """Text blocks for the next user message, after the tool results (a call cut off)."""
        notes = list(self.early)
        if self.late is not None:
            notes.append({"type": "text", "text": self.late()})
        return notes

    @property
    def cut(self) -> bool:
        """It stopped mid-way: max_tokens, a full context window, or a stream that ended early."""
        return self.stop_reason in pairing.CUT

    @property
    def answer(self) -> str:
        """What the user sees when the turn ends, saying why it ended if that was not normal."""
        note = ENDED.get(self.stop_reason)
        shown = "\n".join(part for part in (self.said, note) if part)
        if self.stop_reason == "refusal":
            return Refused(shown)
        return shown or "(the model returned no text)"


@contextlib.contextmanager
def quiet_serializer():
    """pydantic's serializer warnings off: the harness says what was odd in one note."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Pydantic serializer warnings",
                                category=UserWarning)
        yield


class Guard:
    """One model call: its live display, and whatever goes wrong as one line (EndpointError)."""

    def __init__(self, run):
        self.run = run
        self.where = config.shown_url(str(run.client.base_url)).rstrip("/")
        host = urlsplit(self.where).hostname or self.where
        self.live = terminal.LiveReply(host, run.screen)
        self.began = False          # an event arrived: a failure now dropped a reply under way
        self.ended = False          # message_delta or message_stop arrived: the reply is whole
        self.answer_type = "no type"
        self.last = None            # the type of the last event the SDK handed on
        self.blocks = 0             # content blocks started: the next one's index
        self.watch = None
        self.stream = None          # the SDK's stream, once display() has it

    def __enter__(self) -> "Guard":
        return self

    def __exit__(self, kind, exc, traceback) -> bool:
        self.live.close()
        self._count_abandoned(exc)
        if exc is None or not isinstance(exc, Exception) or isinstance(exc, EndpointError):
            return False            # KeyboardInterrupt goes on to the REPL
        raise EndpointError(config.without_secrets(self._line(exc))) from None

    def display(self, stream) -> None:
        """Each event on the screen as it arrives; a stream of only pings for API_TIMEOUT is
        closed."""
        self.stream = stream
        self.answer_type = stream.response.headers.get("content-type", "no type")
        with _Watch(config.api_timeout(), stream.close) as self.watch, quiet_serializer():
            try:
                for event in stream:
                    self._show(event)
            except AttributeError:
                # A message_delta without usage (some servers leave it out): the SDK fails
                # after it took the stop reason, and the reply is whole.
                if stream.current_message_snapshot.stop_reason is None:
                    raise
                self.ended = True
            except json.JSONDecodeError:
                # After message_stop, a gateway's "event: done" holding "data: [DONE]"
                # (OpenAI's end marker): the reply is whole.
                if self.last != "message_stop":
                    raise
            except (anthropic.APIConnectionError, httpx.TransportError):
                # The connection closed after message_delta (a proxy that promised more
                # bytes): the reply is whole, and kept.
                if not self.ended:
                    raise

    def _count_abandoned(self, exc) -> None:
        """/cost counts a reply that stopped coming after it began (Ctrl-C, a signal, a dropped
        or silent stream; not one that broke the rules): the API bills message_start's input."""
        silent = self.watch is not None and self.watch.fired
        dropped = isinstance(exc, (anthropic.APIConnectionError, httpx.TransportError))
        stopped = silent or dropped or isinstance(exc, (KeyboardInterrupt, SystemExit))
        if exc is None or not (self.began and stopped):
            return
        try:
            usage = self.stream.current_message_snapshot.usage
        except (AttributeError, AssertionError):     # no message_start came: nothing known
            return
        self.run.recorder.call(usage, self.run.recorder.label, abandoned=True)

    def _show(self, event) -> None:
        self.began = True
        self.last = event.type
        # The SDK puts a delta into the block its index names: blocks that share an index (a
        # gateway's every 0) would pour a call's input into the text before it.
        if event.type == "content_block_start":
            if event.index != self.blocks:
                raise EndpointError(errors.malformed(self.where, "a content_block_start of "
                                                     f"index {event.index} where {self.blocks} "
                                                     "was next"))
            self.blocks += 1
        if event.type in CONTENT:
            self.watch.progress()
        if event.type in ("message_delta", "message_stop"):
            self.ended = True
        self.live.show(event)

    def _line(self, exc: Exception) -> str:
        """The one line a failure becomes."""
        client, timeout = self.run.client, config.api_timeout()
        if self.watch is not None and self.watch.fired:
            return (f"the endpoint at {self.where} went silent in the middle of its reply for "
                    f"API_TIMEOUT={timeout:g}s (keep-alive pings do not count): the turn was "
                    "abandoned; try again")
        if isinstance(exc, (anthropic.APIConnectionError, httpx.TransportError)):
            # Told apart by when it happened: SDK versions wrap a failed read differently.
            if self.began:
                return errors.dropped(exc.__cause__ or exc, self.where, timeout)
            return config.api_error_line(exc, client)
        if isinstance(exc, anthropic.APIStatusError):
            # After the answer began, an error can only be an error event in the stream.
            if self.began:
                return errors.error_event(exc, self.where)
            line = config.api_error_line(exc, client)
            if self.run.api_context is not None:       # a beta the endpoint does not take
                line = self.run.api_context.refused(line, exc, self.run.log.holds_messages)
            return line
        if isinstance(exc, anthropic.APIError):
            return config.api_error_line(exc, client)
        if isinstance(exc, json.JSONDecodeError):     # the SDK parses each event's data line
            return errors.malformed(self.where, "an event whose data is not JSON: "
                                                f"{excerpt.one_line(exc.doc, 80)}")
        if isinstance(exc, UnicodeEncodeError):       # ours: the request cannot be encoded
            return errors.unsendable(exc)
        if isinstance(exc, AssertionError):       # get_final_message: no message_start came
            return errors.malformed(self.where, f"no message_start (the answer was "
                                                f"{self.answer_type})")
        if isinstance(exc, ODD_STREAM):
            after = f"after a {self.last} event: " if self.last else "at its first event: "
            return (f"the endpoint at {self.where} did not answer like the Messages API "
                    f"({after}{type(exc).__name__}: {excerpt.one_line(exc, 120)})")
        return f"the model call failed: {type(exc).__name__}: {excerpt.one_line(exc, 120)}"

    def checked(self, response, request: dict) -> Response:
        """The SDK's Message as the history keeps it, counted; EndpointError if it lacks what
        the history needs (a call without an id or a name)."""
        stop_reason = response.stop_reason if self.ended else pairing.ENDED_EARLY
        _check_shape(response, stop_reason, self.where)
        content = _checked_calls(_plain(response.content), self.where)
        # A stream that ended early stopped inside its last block: a text is kept, a tool call
        # left to _cut_call; anything else (thinking without its signature) the API would refuse.
        if not self.ended and content and content[-1]["type"] not in ("text", "tool_use"):
            content.pop()
        # The reply's words come before its usage line, as on a terminal; a final answer's
        # usage line waits for the answer (terminal.print_answer).
        if _has_calls(content):
            terminal.show_reply_text(_said(content))
        else:
            self.run.screen.hold_usage(self.run.recorder.label)
        _count(self.run, response, request)
        # The server paused a long turn: send what it wrote back, and it goes on. Not a
        # reply holding a call of ours: sent back without its result, the API refuses it.
        resumes = 0
        while stop_reason in RESUMED and resumes < MAX_RESUMES and not _has_calls(content):
            resumes += 1
            stop_reason, more = _resumed(self.run, request, content)
            content += more
        setting = self.run.api_context
        kinds = KEEP_BLOCKS
        if setting is not None:                  # a compaction block, kept with its summary
            content = setting.kept(content)
            kinds = KEEP_BLOCKS | {"compaction"}
        content = _kept(content, kinds)
        # A refused reply may stop inside a call: none of its calls runs.
        if stop_reason == "refusal":
            content = [block for block in content if block["type"] != "tool_use"]
            _say_why_refused(response)
        early = []
        cut = _cut_call(content, stop_reason)
        if cut is not None:
            content.remove(cut)
            terminal.show_note(f"  [the reply was cut off by {stop_reason} inside a "
                               f"{cut['name']} call: it was not run]")
            early.append(pairing.cut_note(cut["name"], stop_reason))
        content = content or [{"type": "text", "text": "(no text)"}]
        sent = pairing.unique_ids(request["messages"], {"content": content})["content"]
        calls = [b for b in sent if b["type"] == "tool_use"]
        content = _as_history(sent)
        if calls:
            stop_reason = "tool_use"            # whatever the server said beside a call
        elif stop_reason == "tool_use":
            stop_reason = "end_turn"            # no call to run: the turn is over
        late = None
        if setting is not None:                  # s07's board after the API's summary
            late = setting.after_summary(content)
        if late is not None and not calls:
            # The turn ends here: the note follows it, in a message of its own (cli).
            self.run.carried.append({"type": "text", "text": late()})
            late = None
        return Response(content, stop_reason, response.usage, _said(content), late, early,
                        calls)


def _resumed(run, request: dict, content: list) -> tuple:
    """The rest of a paused turn: its stop reason, and the blocks it added."""
    paused = {"role": "assistant", "content": content}
    again = {**request, "messages": [*request["messages"], paused]}
    with Guard(run) as resumed:
        with run.client.messages.stream(**again) as stream:
            resumed.display(stream)
            response = stream.get_final_message()
    _count(run, response, again)
    stop_reason = response.stop_reason if resumed.ended else pairing.ENDED_EARLY
    # Checked as the first part was: a call without an id would break the history.
    _check_shape(response, stop_reason, resumed.where)
    return stop_reason, _checked_calls(_plain(response.content), resumed.where)


def _say_why_refused(response) -> None:
    """The API's reason for a refusal, when it gives one (stop_details.explanation)."""
    details = getattr(response, "stop_details", None)
    explanation = getattr(details, "explanation", None)
    if isinstance(explanation, str) and explanation.strip():
        terminal.show_note(f"[refused: {excerpt.one_line(explanation, 300)}]")


def _has_calls(content: list) -> bool:
    return any(block.get("type") == "tool_use" for block in content)


def _plain(content: list) -> list:
    """The SDK's blocks as plain dicts, every string sendable (half an emoji mended)."""
    return clean_json([block.model_dump(mode="json", exclude_none=True, warnings=False)
                       for block in content])


def _check_shape(response, stop_reason, where: str) -> None:
    """EndpointError unless content is a list of blocks and stop_reason a word (or none)."""
    if not isinstance(response.content, list):
        raise EndpointError(errors.malformed(where, "a message_start without content (is "
                                                    "ANTHROPIC_BASE_URL the Messages API?)"))
    odd = [item for item in response.content if not hasattr(item, "model_dump")]
    if odd:
        shown = excerpt.one_line(json.dumps(odd[0], default=str), 60)
        raise EndpointError(errors.malformed(where, f"a content item that is not a block: "
                                                    f"{shown}"))
    if stop_reason is not None and not isinstance(stop_reason, str):
        shown = excerpt.one_line(json.dumps(stop_reason, default=str), 60)
        raise EndpointError(errors.malformed(where, f"a stop_reason that is not a word: {shown}"))


def _checked_calls(content: list, where: str) -> list:
    """The blocks, EndpointError unless each text is a string and each call has an id and a
    name (they pair it with its result and pick the tool); a call the SDK gave no input (sent
    as null) gets None."""
    for block in content:
        if block.get("type") == "text" and not isinstance(block.get("text"), str):
            shown = excerpt.one_line(json.dumps(block.get("text"), default=str), 60)
            raise EndpointError(errors.malformed(where, f"a text block whose text is {shown}"))
        if block.get("type") != "tool_use":
            continue
        block.setdefault("input", None)
        for part in ("id", "name"):
            value = block.get(part)
            if not isinstance(value, str) or not value:
                raise EndpointError(errors.malformed(where, f"a tool_use block whose {part} is "
                                                            f"{json.dumps(value)}"))
    return content


def _as_history(calls: list) -> list:
    """New blocks, each call's input an object the API takes back (JSON text decoded, else {})."""
    kept = []
    for block in calls:
        if block["type"] == "tool_use" and not isinstance(block.get("input"), dict):
            block = {**block, "input": pairing.input_object(block.get("input")) or {}}
        kept.append(block)
    return kept


def _kept(content: list, kinds: set) -> list:
    """The blocks of the kinds the history keeps, without empty text or unsigned thinking."""
    kept = []
    for block in content:
        if block.get("type") not in kinds:
            terminal.show_note(f"  [a {block.get('type')!r} block in the reply was left out: "
                               "this harness does not use it]")
        elif block["type"] == "text" and not block.get("text", "").strip():
            continue                      # the API refuses an empty text block
        elif block["type"] == "thinking" and not block.get("signature"):
            # A compatible endpoint's reasoning, unsigned: the API refuses it back.
            terminal.show_note("  [a thinking block without its signature was left out: the "
                               "API refuses it back]")
        else:
            kept.append(block)
    return kept


def _cut_call(content: list, stop_reason: str):
    """The tool call a cut reply stopped inside, or None. Only the last block can be
    half-written (llama-server returns several parsed calls with stop_reason max_tokens)."""
    if stop_reason in pairing.CUT and content and content[-1]["type"] == "tool_use":
        return content[-1]
    return None


def _said(content: list) -> str:
    """The text blocks, joined."""
    texts = [b["text"] for b in content if b["type"] == "text" and b["text"] != "(no text)"]
    return "\n".join(texts).strip()


def _count(run, response, request: dict) -> None:
    """The usage line, the run's record, and once a session the dropped-tools warning. The
    API's own summary, a call of its own (only in usage.iterations), goes first
    (api_context's count())."""
    recorder, usage, setting = run.recorder, response.usage, run.api_context
    if setting is not None:
        setting.count(run, response)
    counts = tokens.usage_counts(usage)
    label = recorder.label
    terminal.show_usage(counts, label, run.screen)
    sent = request["messages"] if setting is None else setting.view(request["messages"])
    recorder.call(usage, label, sent=sent, system=request["system"], tools=request["tools"])
    if request["tools"] and len(recorder.completed_calls()) == 1:
        terminal.warn_if_tools_dropped(sum(counts[:3]), request["tools"])


def total_tokens(usage) -> int:
    """The context the API counted for a call: its input (uncached, read, written), output."""
    return sum(tokens.usage_counts(usage))


class _Watch:
    """A thread that closes the stream when no content arrived for `seconds`: pings, which
    each end a read, would otherwise keep httpx's timeout from ever firing."""

    def __init__(self, seconds: float, close):
        self.seconds, self.close = seconds, close
        self.fired = False
        self._moved = threading.Event()
        self._done = threading.Event()

    def __enter__(self) -> "_Watch":
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._moved.set()
        self._thread.join()

    def progress(self) -> None:
        self._moved.set()

    def _run(self) -> None:
        while not self._done.is_set():
            if not self._moved.wait(self.seconds):
                self.fired = True
                self.close()
                return
            self._moved.clear()
