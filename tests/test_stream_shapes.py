"""Streams an endpoint cuts short or bends, played byte for byte through the real SDK.

Each stand-in step here is raw server-sent events: a stream that closes cleanly in the middle
of a reply (no content_block_stop, message_delta or message_stop), or one that breaks the
Messages API's rules. What a user relies on: a call whose input did not arrive whole never
runs, the model is told which call was cut, a malformed stream is one line naming the endpoint
and what it sent, and the next request of the session is accepted.
"""

import json

import pytest

import s03_todo
import s07_task_system
from helpers import tool_results
from harness.stand_in.script import raw, reply, text, tool
from helpers import Pinging, messages, words

CUT_NOTE = "[answer cut: the endpoint ended the stream before the reply was complete]"


def sse(*events) -> str:
    """Server-sent events as the API frames them: the event's type, then its data."""
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)


def stream(*events) -> dict:
    """A stand-in step that sends exactly these events, then closes the stream cleanly."""
    return raw(200, sse(*events), "text/event-stream")


# Enough input tokens that no test here is told the endpoint dropped the tools.
START = Pinging.START
STOP_EVENT = {"type": "message_stop"}


def ended(stop_reason: str) -> list:
    """The events that end a whole reply: message_delta with its stop reason, message_stop."""
    return [{"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": None},
             "usage": {"output_tokens": 9}}, STOP_EVENT]


def block_stop(index: int) -> dict:
    return {"type": "content_block_stop", "index": index}


def text_block(index: int, *pieces: str) -> list:
    """A text block's start and deltas (its content_block_stop is the caller's to add)."""
    events = [{"type": "content_block_start", "index": index,
               "content_block": {"type": "text", "text": ""}}]
    for piece in pieces:
        events.append({"type": "content_block_delta", "index": index,
                       "delta": {"type": "text_delta", "text": piece}})
    return events


def tool_block(index: int, name: str, call_id: str, *pieces: str) -> list:
    """A tool_use block's start and its input as JSON text in pieces (no content_block_stop)."""
    events = [{"type": "content_block_start", "index": index,
               "content_block": {"type": "tool_use", "id": call_id, "name": name, "input": {}}}]
    for piece in pieces:
        events.append({"type": "content_block_delta", "index": index,
                       "delta": {"type": "input_json_delta", "partial_json": piece}})
    return events


def assistant_blocks(api, request: int) -> list:
    """Every block of every assistant message the loop sent in request `request`."""
    messages = api.requests[request]["messages"]
    return [b for m in messages if m["role"] == "assistant" for b in m["content"]]


# ---------------------------------------------------------------- a stream cut short

def test_a_task_update_cut_off_inside_its_input_is_not_run(run_main, workdir):
    """The model was writing task #17; the stream closed after `"task_id": 1`. Parsed as it
    stood, that input completes task #1."""
    cut = stream(START, *tool_block(0, "task_update", "toolu_cut",
                                    '{"status": "completed", ', '"task_id": 1'))
    script = [reply(tool("task_create", {"subject": "Design the data model"})),
              reply(text("Created.")), cut, reply(text("Still here."))]
    code, out, err, api = run_main(s07_task_system, stdin="plan\nfinish it\nand now?\nq\n",
                                   script=script)
    assert code == 0 and api.violations == [] and "Traceback" not in words(err)
    task = json.loads((workdir / ".tasks" / "task_1.json").read_text())
    assert task["status"] == "pending"
    assert CUT_NOTE in out and "Still here." in out
    assert "cut off by an early end of the stream inside a task_update call" in words(err)
    # The next request holds no trace of the call: a tool_use there would need a result.
    assert "toolu_cut" not in json.dumps(api.requests[-1]["messages"])


def test_the_calls_before_a_cut_one_run_and_the_model_is_told_which_was_cut(run_main, workdir):
    whole = json.dumps({"path": "a.txt", "content": "whole"})
    cut = stream(START, *tool_block(0, "write_file", "toolu_whole", whole), block_stop(0),
                 *tool_block(1, "edit_file", "toolu_cut", '{"path": "a.txt", "old_text": "wh'))
    code, out, err, api = run_main(s03_todo, "go", script=[cut, reply(text("done"))])
    assert code == 0 and out.strip() == "done" and api.violations == []
    assert (workdir / "a.txt").read_text() == "whole"
    assert [b["id"] for b in assistant_blocks(api, 1) if b["type"] == "tool_use"] == ["toolu_whole"]
    answer = api.requests[1]["messages"][-1]["content"]
    assert [r["tool_use_id"] for r in tool_results(api.requests[1])] == ["toolu_whole"]
    note = answer[-1]["text"]
    assert "your edit_file call was cut off by an early end of the stream" in note
    assert "it was not run" in note


@pytest.mark.parametrize("after_the_input, runs", [
    ([], False),                                   # the JSON is whole, its block never ended
    ([block_stop(0)], False),                      # the block ended, the reply did not
    ([block_stop(0), *ended("tool_use")[:1]], True),   # all but message_stop arrived
    ([*ended("tool_use")], True),                  # no content_block_stop, the reply ended
])
def test_a_call_runs_only_from_a_reply_that_reached_its_end(run_main, workdir,
                                                            after_the_input, runs):
    """What ends a reply is message_delta (it follows every block and carries the stop reason);
    without it, the last call may be the first of several, or half of itself."""
    whole = json.dumps({"path": "a.txt", "content": "x"})
    events = [START, *tool_block(0, "write_file", "toolu_1", whole), *after_the_input]
    code, out, err, api = run_main(s03_todo, stdin="go\nagain\nq\n",
                                   script=[stream(*events), reply(text("ok")), reply(text("ok"))])
    assert code == 0 and api.violations == [] and "Traceback" not in err
    assert (workdir / "a.txt").exists() == runs
    assert (CUT_NOTE in out) != runs


def test_a_text_reply_cut_off_keeps_what_arrived_and_says_it_was_cut(run_main):
    cut = stream(START, *text_block(0, "The answer is ", "fo"))
    code, out, err, api = run_main(s03_todo, stdin="question\nsay it again\nq\n",
                                   script=[cut, reply(text("42"))])
    assert code == 0 and api.violations == []
    assert f"The answer is fo\n{CUT_NOTE}" in out and "42" in out
    assert assistant_blocks(api, 1) == [{"type": "text", "text": "The answer is fo"}]


@pytest.mark.parametrize("inside", [
    [],                                                        # only message_start arrived
    text_block(0),                                             # a text block, no text yet
    [{"type": "content_block_start", "index": 0,               # thinking, before its signature
      "content_block": {"type": "thinking", "thinking": ""}},
     {"type": "content_block_delta", "index": 0,
      "delta": {"type": "thinking_delta", "thinking": "First the list"}}],
])
def test_whatever_block_a_stream_ended_in_the_next_request_is_accepted(run_main, inside):
    code, out, err, api = run_main(s03_todo, stdin="go\nagain\nq\n",
                                   script=[stream(START, *inside), reply(text("fine"))])
    assert code == 0 and CUT_NOTE in out and "fine" in out
    assert api.violations == [] and len(api.requests) == 2


# ---------------------------------------------------------------- a stream that breaks the rules

# Each is one line naming the endpoint; the SDK puts the stream together, and the line says
# after which event it failed, and how.
MALFORMED = [
    ([START, {"type": "content_block_delta", "index": 0,
              "delta": {"type": "text_delta", "text": "hi"}}, *ended("end_turn")],
     " (after a message_start event: IndexError"),
    ([START, {"type": "content_block_start", "index": 0,
              "content_block": {"type": "tool_use", "name": "bash", "input": {}}},
      block_stop(0), *ended("tool_use")],
     ": it sent a tool_use block whose id is null"),
    ([START, {"type": "content_block_start", "index": 0,
              "content_block": {"type": "tool_use", "id": "toolu_1", "input": {}}},
      block_stop(0), *ended("tool_use")],
     ": it sent a tool_use block whose name is null"),
    ([START, {"type": "content_block_start", "index": 0,
              "content_block": {"type": "text", "text": None}},
      {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hi"}},
      block_stop(0), *ended("end_turn")],
     " (after a content_block_start event: TypeError"),
    ([START, *text_block(0), {"type": "content_block_delta", "index": 0,
                              "delta": {"type": "text_delta", "text": None}}],
     " (after a content_block_start event: TypeError"),
    ([START, *text_block(0, "hi"), block_stop(3), *ended("end_turn")],
     " (after a text event: IndexError"),
    ([START, *text_block(1, "hi"), block_stop(1), *ended("end_turn")],
     ": it sent a content_block_start of index 1 where 0 was next"),
    ([*text_block(0, "hi"), block_stop(0), *ended("end_turn")],
     ": it sent no message_start (the answer was text/event-stream)"),
    ([{"type": "message_start", "message": None}, *ended("end_turn")],
     ": it sent no message_start (the answer was text/event-stream)"),
    ([START, {"type": "content_block_start", "index": 0, "content_block": None}],
     " (after a message_start event: AttributeError"),
    ([START, {"type": "content_block_delta", "index": 0, "delta": None}],
     " (after a message_start event: IndexError"),
    ([START, *text_block(0), {"type": "content_block_delta", "index": 0, "delta": None}],
     " (after a content_block_start event: AttributeError"),
    # A gateway that passes on a weak model's Python-style arguments: the SDK cannot parse them.
    ([START, *tool_block(0, "bash", "toolu_1", "{'command': 'ls'}"), block_stop(0),
      *ended("tool_use")],
     " (after a content_block_start event: ValueError: Unable to parse tool parameter JSON"),
]


@pytest.mark.parametrize("events, said", MALFORMED)
def test_a_stream_that_breaks_the_rules_is_one_line_naming_what_it_sent(run_main, events, said):
    code, out, err, api = run_main(s03_todo, "hi", script=[stream(*events)])
    assert code == 1 and "Traceback" not in words(err) and len(messages(err)) == 1, err
    said = f"the endpoint at {api.url} did not answer like the Messages API{said}"
    assert said in words(err)


@pytest.mark.parametrize("events", [
    [START, {"type": "content_block_start", "index": 0,
             "content_block": {"type": "text", "text": None}}, block_stop(0), *ended("end_turn")],
    [START, *text_block(0), {"type": "content_block_delta", "index": 0,
                             "delta": {"type": "input_json_delta", "partial_json": "{}"}}],
    [START, *tool_block(0, "bash", "toolu_1"), {"type": "content_block_delta", "index": 0,
                                                "delta": {"type": "text_delta", "text": "ls"}}]])
def test_a_delta_the_sdk_skips_or_a_null_text_alone_costs_nothing_but_the_cut(run_main, events):
    """A null text with no delta, or a delta for another kind of block: the SDK leaves them
    out; the stream then ended early, so the reply is cut, and the session goes on."""
    code, out, err, api = run_main(s03_todo, stdin="go\nagain\nq\n",
                                   script=[stream(*events), reply(text("fine"))])
    assert code == 0 and "fine" in out and "Traceback" not in err, err
    assert api.violations == [] and len(api.requests) == 2


@pytest.mark.parametrize("body, said", [
    (sse(START) + "event: content_block_start\ndata: {not json\n\n",
     "did not answer like the Messages API: it sent an event whose data is not JSON: {not json"),
    (sse(START) + 'event: error\ndata: {"type": "error", "error": {"type": "overloaded_error", '
                  '"message": "Overloaded"}}\n\n',
     "sent an error in the middle of the reply (overloaded_error: Overloaded)"),
    ("", "it sent no message_start (the answer was text/event-stream)"),
])
def test_data_not_json_an_error_event_or_no_event_at_all_is_one_line(run_main, body, said):
    code, out, err, api = run_main(s03_todo, "hi", script=[raw(200, body, "text/event-stream")])
    assert code == 1 and "Traceback" not in words(err) and len(messages(err)) == 1, err
    assert f"the endpoint at {api.url}" in words(err) and said in words(err)


def test_after_a_malformed_stream_the_repl_keeps_the_conversation(run_main):
    bad = stream(START, {"type": "content_block_delta", "index": 0,
                         "delta": {"type": "text_delta", "text": "hi"}})
    code, out, err, api = run_main(s03_todo, stdin="first\nsecond\nq\n",
                                   script=[bad, reply(text("fine"))])
    assert code == 0 and "fine" in out and api.violations == [] and "Traceback" not in err
    assert "did not answer like the Messages API (after a message_start event" in words(err)
    assert [m["content"] for m in api.requests[1]["messages"]] == ["second"]


def test_unknown_types_and_a_message_delta_without_usage_do_no_harm(
        run_main):
    """The API adds event and delta types over time, and says to ignore the unknown ones."""
    events = [START, {"type": "hologram_2031", "frames": 3}, *text_block(0, "Hello"),
              {"type": "content_block_delta", "index": 0,
               "delta": {"type": "sparkle_delta", "sparkle": 1}},
              block_stop(0),
              {"type": "message_delta", "delta": {"stop_reason": "end_turn"}}, STOP_EVENT]
    code, out, err, api = run_main(s03_todo, "hi", script=[stream(*events)])
    assert code == 0 and out.strip() == "Hello" and "Traceback" not in err, err


# ---------------------------------------------------------------- odd stop reasons, endless pings

def test_a_stop_reason_sent_as_an_object_is_one_line_naming_the_endpoint(run_main):
    events = [START, *text_block(0, "hi"), block_stop(0),
              {"type": "message_delta", "delta": {"stop_reason": {"why": "done"}},
               "usage": {"output_tokens": 9}}, STOP_EVENT]
    code, out, err, api = run_main(s03_todo, "hi", script=[stream(*events)])
    assert code == 1 and "Traceback" not in err and len(messages(err)) == 1, err
    said = f"the endpoint at {api.url} did not answer like the Messages API: it sent a stop_reason"
    assert said in words(err)


def test_a_reply_in_words_that_says_tool_use_ends_the_turn(run_main):
    """A server that says tool_use beside no call: with nothing to run, the turn is over; the
    loop must not go round and send an empty user message, which the API refuses."""
    script = [reply(text("All done."), stop_reason="tool_use"), reply(text("unused"))]
    code, out, err, api = run_main(s03_todo, "hi", script=script)
    assert code == 0 and out.strip() == "All done." and "Traceback" not in err, err
    assert len(api.requests) == 1 and api.violations == []


def test_a_refused_reply_runs_none_of_its_calls(run_main, workdir):
    """The API's classifier can stop a reply with refusal in the middle of a tool call: no
    call of a refused reply runs (half a file would be written), and the user is told."""
    write = tool("write_file", {"path": "x.txt", "content": "half"})
    script = [reply(text("Sure"), write, stop_reason="refusal"), reply(text("after"))]
    code, out, err, api = run_main(s03_todo, "hi", script=script)
    assert not (workdir / "x.txt").exists() and len(api.requests) == 1, err
    assert "[the model refused to continue with this request]" in out + err


@pytest.mark.hang_limit(60)       # a bound against hanging, not a claim
def test_pings_do_not_keep_a_reply_that_never_comes_waiting_past_api_timeout(run_main):
    """Each ping ends a read, so httpx's per-read timeout never fires: the harness's watch
    bounds the wait for the reply itself."""
    went_silent(run_main, {"type": "ping"})


@pytest.mark.hang_limit(30)       # a bound against hanging, not a claim
def test_a_keep_alive_event_of_a_gateways_own_does_not_count_as_the_reply_coming(run_main):
    """The SDK drops pings before the harness sees them, but hands on an event of a type the
    API does not have: a gateway that keeps the line open with its own must still meet
    API_TIMEOUT, not keep the user waiting forever."""
    went_silent(run_main, {"type": "keepalive"})


def went_silent(run_main, event: dict) -> None:
    """s03 against an endpoint that sends message_start, then only this event: it must end
    after API_TIMEOUT=2 with the one line that says so."""
    with Pinging(event) as endpoint:
        env = {"ANTHROPIC_BASE_URL": endpoint.url, "API_TIMEOUT": "2"}
        code, out, err, api = run_main(s03_todo, "hi", env=env)
    assert code == 1 and "Traceback" not in err, err
    said = (f"the endpoint at {endpoint.url} went silent in the middle of its reply for "
            "API_TIMEOUT=2s (keep-alive pings do not count)")
    assert said in words(err)


def test_a_usage_count_of_400_digits_is_no_traceback_and_no_309_digit_total(run_main):
    """An endpoint's nonsense count ended a one-shot run in an OverflowError."""
    huge = {"input_tokens": 10**400, "output_tokens": 10**400}
    code, out, err, api = run_main(s03_todo, "hi", script=[reply(text("hello"), usage=huge)])
    assert code == 0 and out.strip() == "hello", err
    assert "Traceback" not in err and "0000000000" not in err



@pytest.mark.parametrize("odd", [{"input_tokens": 12.5, "output_tokens": 5},
                                 {"input_tokens": 12, "output_tokens": 5, "cache_creation": "x"}],
                         ids=["a-float", "a-field-of-the-wrong-type"])
def test_an_odd_usage_puts_no_pydantic_warning_on_the_terminal(run_main, odd):
    """A count sent as 12.5, or a usage field of the wrong type, makes pydantic warn while the
    SDK's objects are turned into dicts: lines of site-packages paths, or a failed call. The
    usage line reads the count, and says nothing else."""
    code, out, err, api = run_main(s03_todo, "hi", script=[reply(text("hello"), usage=odd)])
    assert code == 0 and out.strip() == "hello", err
    assert "[tokens: 12 in" in words(err) and "5 out]" in words(err)
    assert "Pydantic" not in err and "Warning" not in err


@pytest.mark.parametrize("start, said", [
    ({"type": "text", "text": 5}, "a text block whose text is 5"),
    ({"type": "text", "text": ["a"]}, 'a text block whose text is ["a"]')],
    ids=["a-number", "a-list"])
def test_a_text_block_whose_text_is_not_a_string_is_one_line_naming_the_endpoint(
        run_main, start, said):
    """A gateway's text block holding a number (or a list) where the API sends a string ended
    a one-shot run in a traceback, and the REPL in a line that named no endpoint."""
    events = [START, {"type": "content_block_start", "index": 0, "content_block": start},
              block_stop(0), *ended("end_turn")]
    code, out, err, api = run_main(s03_todo, "hi", script=[stream(*events)])
    assert code == 1 and "Traceback" not in err, err
    assert messages(err) == [f"error: the endpoint at {api.url} did not answer like the "
                             f"Messages API: it sent {said}"], err


def test_message_start_content_that_is_not_blocks_is_one_line_naming_the_endpoint(run_main):
    start = {**START, "message": {**START["message"], "content": ["hello"]}}
    code, out, err, api = run_main(s03_todo, "hi", script=[stream(start, *ended("end_turn"))])
    assert code == 1 and "Traceback" not in err, err
    assert messages(err) == [f"error: the endpoint at {api.url} did not answer like the "
                             "Messages API: it sent a content item that is not a block: "
                             '"hello"'], err


def test_blocks_that_share_an_index_are_one_line_not_a_call_run_without_its_input(run_main):
    """A gateway that numbered every block 0: the SDK's stream put the call's input into the
    text block before it, and the call ran with {} ("missing required argument 'command'",
    which the model had sent)."""
    events = [START, *text_block(0, "I will run it"), block_stop(0),
              *tool_block(0, "bash", "toolu_z", '{"command": "echo ZERO"}'), block_stop(0),
              *ended("tool_use")]
    code, out, err, api = run_main(s03_todo, "hi", script=[stream(*events)])
    assert code == 1 and len(api.requests) == 1, err
    assert messages(err)[-1] == (f"error: the endpoint at {api.url} did not answer like the "
                                 "Messages API: it sent a content_block_start of index 0 "
                                 "where 1 was next"), err


def test_a_done_sentinel_after_a_whole_reply_is_ignored(run_main):
    """A gateway that ends the stream with OpenAI's marker, data: [DONE], under an event name
    of its own, after the reply's message_stop: the whole reply was thrown away as "data that
    is not JSON". (With no event name, the SDK skips it itself.)"""
    events = sse(START, *text_block(0, "all here"), block_stop(0), *ended("end_turn"))
    done = raw(200, events + "event: done\ndata: [DONE]\n\n", "text/event-stream")
    code, out, err, api = run_main(s03_todo, "hi", script=[done])
    assert code == 0 and out.strip() == "all here", err


def test_data_that_is_not_json_before_the_reply_ends_is_still_one_line(run_main):
    events = sse(START, *text_block(0, "half")) + "event: done\ndata: [DONE]\n\n"
    code, out, err, api = run_main(s03_todo, "hi", script=[raw(200, events, "text/event-stream")])
    assert code == 1 and "an event whose data is not JSON: [DONE]" in words(err), err


@pytest.mark.hang_limit(60)       # a bound against hanging, not a claim
def test_a_reply_abandoned_part_way_is_counted_for_what_the_api_read(run_main):
    """The API bills a reply abandoned after it began (Ctrl-C, a stream that went silent or
    dropped) for the input it read, which message_start reports: /cost and the session total
    left it out, as if the request had never been sent."""
    with Pinging({"type": "ping"}) as endpoint:
        env = {"ANTHROPIC_BASE_URL": endpoint.url, "API_TIMEOUT": "2"}
        code, out, err, api = run_main(s03_todo, stdin="hi\n/cost\nq\n", env=env)
    assert code == 0 and "went silent" in words(err), err
    said = words(out)
    assert "session so far: 1 model call " in said and "uncached 5,000 x1" in said, out


@pytest.mark.hang_limit(60)       # a bound against hanging, not a claim
def test_context_after_an_abandoned_reply_is_the_conversation_as_it_was(run_main):
    """/context read the abandoned request's count (5,000 tokens, message_start's) as the
    conversation's, though the turn was taken back: the conversation is as it was before."""
    with Pinging({"type": "ping"}) as endpoint:
        env = {"ANTHROPIC_BASE_URL": endpoint.url, "API_TIMEOUT": "2"}
        code, out, err, api = run_main(s03_todo, stdin="hi\n/context\nq\n", env=env)
    assert code == 0 and "went silent" in words(err), err
    said = words(out)
    assert "context now: ~" in said and "the API's count for the last call" not in said, out
    assert "5,001" not in said, out
