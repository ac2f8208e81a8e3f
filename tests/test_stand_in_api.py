"""The stand-in must reject what the real API rejects, or the end-to-end tests prove nothing."""

import threading
import time

import anthropic
import pytest

from harness.stand_in import StandInAPI
from harness.stand_in.rules import check_request
from harness.stand_in.script import error, reply, text, tool
from helpers import within


def req(messages, tools=None):
    body = {"model": "m", "max_tokens": 10, "messages": messages}
    if tools is not None:
        body["tools"] = tools
    return body


USE = {"role": "assistant", "content": [tool("bash", {"command": "ls"}, id="t1")]}
RESULT = {"type": "tool_result", "tool_use_id": "t1", "content": "ok"}


def test_a_valid_tool_round_trip_passes():
    assert check_request(req([{"role": "user", "content": "hi"}, USE,
                              {"role": "user", "content": [RESULT, text("more")]}])) is None


@pytest.mark.parametrize("messages, rule", [
    ([{"role": "user", "content": "hi"}, USE, {"role": "user", "content": "no result"}],
     "without `tool_result`"),
    ([{"role": "user", "content": "hi"}, USE], "without `tool_result`"),
    ([{"role": "user", "content": [RESULT]}], "unexpected `tool_use_id`"),
    ([{"role": "user", "content": "hi"}, USE, {"role": "user", "content": [text("x"), RESULT]}],
     "must come first"),
    ([{"role": "user", "content": []}], "non-empty content"),
    ([{"role": "user", "content": [text("  ")]}], "non-whitespace text"),
    ([{"role": "user", "content": ""}], "non-whitespace text"),
    ([{"role": "assistant", "content": "hi"}], "first message"),
    ([], "at least one message"),
])
def test_broken_histories_are_rejected(messages, rule):
    assert rule in check_request(req(messages))


def test_a_tool_schema_that_is_not_an_object_is_rejected():
    bad = [{"name": "x", "description": "", "input_schema": {"type": "string"}}]
    assert "input_schema.type" in check_request(req([{"role": "user", "content": "hi"}], bad))


def test_the_real_client_sees_the_real_error_shapes():
    script = [error(401, "invalid x-api-key"), error(400, "bad"), reply(text("hello"))]
    with StandInAPI(script) as api:
        client = anthropic.Anthropic(api_key="k", base_url=api.url, max_retries=0)
        call = lambda: client.messages.create(model="m", max_tokens=5,
                                              messages=[{"role": "user", "content": "hi"}])
        with pytest.raises(anthropic.AuthenticationError):
            call()
        with pytest.raises(anthropic.BadRequestError):
            call()
        assert call().content[0].text == "hello"
        with pytest.raises(anthropic.BadRequestError, match="script exhausted"):
            call()


def test_transient_failures_are_retried_by_the_client():
    with StandInAPI([error(529), error(429), reply(text("ok"))]) as api:
        client = anthropic.Anthropic(api_key="k", base_url=api.url, max_retries=2)
        response = client.messages.create(model="m", max_tokens=5,
                                          messages=[{"role": "user", "content": "hi"}])
    assert response.content[0].text == "ok" and len(api.requests) == 3


# ------------------------------------------------------------- caching and billing, hand-computed

from harness.stand_in.script import is_summary_request, message, raw  # noqa: E402
from harness.stand_in.usage import PromptCache, count_tokens  # noqa: E402

SYSTEM = "You are a careful agent. " * 20
TOOLS = [{"name": "bash", "description": "run a command",
          "input_schema": {"type": "object", "properties": {}}}]


def body(*user_texts, system=SYSTEM, tool_choice=None, system_mark=False):
    messages = []
    for n, t in enumerate(user_texts):
        if n:
            messages.append({"role": "assistant", "content": [text(f"answer {n}")]})
        messages.append({"role": "user", "content": [text(t)]})
    mark = {"cache_control": {"type": "ephemeral"}} if system_mark else {}
    b = {"model": "m", "max_tokens": 5, "tools": TOOLS, "messages": messages,
         "cache_control": {"type": "ephemeral"},
         "system": [{"type": "text", "text": system, **mark}]}
    if tool_choice:
        b["tool_choice"] = tool_choice
    return b


def tokens(*blocks):
    return sum(count_tokens(b) for b in blocks)


class Clock:
    now = 0.0

    def __call__(self):
        return self.now


def test_the_cache_writes_then_reads_the_same_prefix_and_only_the_new_part_is_written():
    cache = PromptCache(min_tokens=10)
    first = body("hello there")
    total = tokens(*TOOLS, text(SYSTEM), text("hello there"))
    assert cache.usage(first) == {"input_tokens": 0, "cache_creation_input_tokens": total,
                                  "cache_read_input_tokens": 0}
    assert cache.usage(first) == {"input_tokens": 0, "cache_creation_input_tokens": 0,
                                  "cache_read_input_tokens": total}
    longer = body("hello there", "and more")
    new = tokens(text("answer 1"), text("and more"))
    assert cache.usage(longer) == {"input_tokens": 0, "cache_creation_input_tokens": new,
                                   "cache_read_input_tokens": total}


def test_a_changed_early_block_invalidates_everything_after_it():
    cache = PromptCache(min_tokens=10)
    cache.usage(body("hello there"))
    changed = cache.usage(body("hello there", system=SYSTEM + "!"))
    assert changed["cache_read_input_tokens"] == 0 and changed["cache_creation_input_tokens"] > 0


def test_a_changed_tool_choice_keeps_tools_and_system_cached_but_not_the_messages():
    cache = PromptCache(min_tokens=10)
    cache.usage(body("hello there", system_mark=True))
    after = cache.usage(body("hello there", system_mark=True, tool_choice={"type": "none"}))
    assert after["cache_read_input_tokens"] == tokens(*TOOLS, text(SYSTEM))
    assert after["cache_creation_input_tokens"] == tokens(text("hello there"))


def test_below_the_minimum_nothing_is_cached_and_nothing_says_so():
    cache = PromptCache(min_tokens=100_000)
    for _ in range(2):
        usage = cache.usage(body("hello there"))
        assert usage["cache_read_input_tokens"] == usage["cache_creation_input_tokens"] == 0
        assert usage["input_tokens"] == tokens(*TOOLS, text(SYSTEM), text("hello there"))


def test_entries_expire_after_five_minutes_unless_used():
    clock = Clock()
    cache = PromptCache(min_tokens=10, clock=clock)
    cache.usage(body("hi you"))
    clock.now = 299
    # a read refreshes the entry
    assert cache.usage(body("hi you"))["cache_read_input_tokens"] > 0
    clock.now = 299 + 301
    assert cache.usage(body("hi you"))["cache_read_input_tokens"] == 0


def test_a_hit_is_found_at_most_20_blocks_before_the_breakpoint():
    cache = PromptCache(min_tokens=10)
    cache.usage(body("start"))
    near = body("start", *[f"m{n}" for n in range(9)])      # 18 blocks more: within reach
    assert cache.usage(near)["cache_read_input_tokens"] > 0
    far = body("start", *[f"x{n}" for n in range(11)])      # 22 blocks after the last cached prefix
    assert cache.usage(far)["cache_read_input_tokens"] == 0


def test_more_than_four_breakpoints_are_rejected_like_the_real_api():
    b = body("a", "b", "c", "d", system_mark=True)
    for m in b["messages"][::2][:3]:
        m["content"][0]["cache_control"] = {"type": "ephemeral"}
    assert "A maximum of 4 blocks with cache_control may be provided. Found 5." == check_request(b)


def test_billing_sums_the_session_at_the_documented_prices():
    with StandInAPI([reply(text("one")), reply(text("two"))], min_cache_tokens=10) as api:
        client = anthropic.Anthropic(api_key="k", base_url=api.url)
        for _ in range(2):
            client.messages.create(model="m", max_tokens=5, system=SYSTEM,
                                   cache_control={"type": "ephemeral"},
                                   messages=[{"role": "user", "content": "the same question"}])
    bill, size = api.billing(), tokens(text(SYSTEM), text("the same question"))
    assert bill["calls"] == 2 and bill["input_sent"] == 2 * size and bill["cache_read"] == size
    assert bill["billed_input"] == 1.25 * size + 0.1 * size


def test_summary_requests_are_recognised_in_all_three_forms():
    assert is_summary_request({"messages": [{"role": "user", "content": "x"}]})
    assert is_summary_request({"tools": TOOLS, "tool_choice": {"type": "none"},
                               "messages": [{"role": "user", "content": "x"}]})
    asked = {"tools": TOOLS,
             "messages": [{"role": "user", "content": [text("x"), text("<summary-request>now")]}]}
    assert is_summary_request(asked)
    assert not is_summary_request({"tools": TOOLS, "messages": [{"role": "user", "content": "x"}]})


# ---------------------------------------------------------------- streaming and deviations

def test_a_streamed_reply_is_the_same_message_through_the_real_sdk():
    blocks = [{"type": "thinking", "thinking": "let me think " * 5, "signature": "sig"},
              text("Here is a longer answer that arrives in pieces."),
              tool("bash", {"command": "ls -la"}, id="t9")]
    with StandInAPI([reply(*blocks), reply(*blocks)]) as api:
        client = anthropic.Anthropic(api_key="k", base_url=api.url)
        kwargs = dict(model="m", max_tokens=50, messages=[{"role": "user", "content": "hi"}])
        plain = client.messages.create(**kwargs)
        with client.messages.stream(**kwargs) as stream:
            pieces = [e.text for e in stream if e.type == "text"]
            streamed = stream.get_final_message()
    assert len(pieces) > 1                                   # text arrives in several deltas
    dump = lambda m: [b.model_dump(exclude_none=True) for b in m.content]
    assert dump(streamed) == dump(plain)
    assert streamed.stop_reason == plain.stop_reason == "tool_use"
    assert streamed.usage.output_tokens == plain.usage.output_tokens


def test_history_may_carry_thinking_blocks_and_consecutive_user_turns():
    thinking = {"type": "thinking", "thinking": "hmm", "signature": "s"}
    assert check_request(req([{"role": "user", "content": "a"}, {"role": "user", "content": "b"},
                              {"role": "assistant", "content": [thinking, text("ok")]}])) is None
    mystery = req([{"role": "user", "content": [{"type": "mystery"}]}])
    assert "unknown content block type" in check_request(mystery)


def test_raw_and_overridden_replies_are_sent_as_scripted():
    import json
    import urllib.request
    script = [raw(200, "<html>proxy login</html>", "text/html"), message(content=None)]
    with StandInAPI(script) as api:
        def post():
            data = json.dumps({"model": "m", "max_tokens": 1,
                               "messages": [{"role": "user", "content": "x"}]})
            request = urllib.request.Request(api.url + "/v1/messages", data=data.encode(),
                                             method="POST")
            with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request) as r:
                return r.read().decode(), r.headers["content-type"]
        assert post() == ("<html>proxy login</html>", "text/html")
        assert json.loads(post()[0])["content"] is None


def events_of(api, **fields):
    """The raw server-sent events of one streamed request: [(event name, data)], and the
    content type."""
    import json
    import urllib.request
    data = json.dumps({"model": "m", "max_tokens": 9, "stream": True,
                       "messages": [{"role": "user", "content": "x"}], **fields}).encode()
    request = urllib.request.Request(api.url + "/v1/messages", data=data, method="POST")
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request) as r:
        raw_text, kind = r.read().decode(), r.headers["content-type"]
    events = []
    for chunk in raw_text.strip().split("\n\n"):
        name, payload = chunk.split("\n")
        assert name.startswith("event: ") and payload.startswith("data: ")
        events.append((name[7:], json.loads(payload[6:])))
        assert events[-1][1]["type"] == events[-1][0]
    return events, kind


def test_the_stream_has_the_documented_event_order_and_shapes():
    blocks = [text("a text long enough for three deltas at least"),
              tool("bash", {"command": "ls -la /tmp"}, id="t1")]
    with StandInAPI([reply(*blocks)]) as api:
        events, kind = events_of(api)
    assert kind == "text/event-stream"
    names = [n for n, _ in events]
    assert names[:3] == ["message_start", "content_block_start", "ping"]
    assert names[-2:] == ["message_delta", "message_stop"]
    start = events[0][1]["message"]
    assert start["content"] == [] and start["stop_reason"] is None
    assert start["usage"]["output_tokens"] == 1
    assert set(start["usage"]) == {"input_tokens", "cache_creation_input_tokens",
                                   "cache_read_input_tokens", "output_tokens"}
    starts = [d["content_block"] for n, d in events if n == "content_block_start"]
    assert starts == [{"type": "text", "text": ""},
                      {"type": "tool_use", "id": "t1", "name": "bash", "input": {}}]
    deltas = [d["delta"] for n, d in events if n == "content_block_delta"]
    texts = [d["text"] for d in deltas if d["type"] == "text_delta"]
    parts = [d["partial_json"] for d in deltas if d["type"] == "input_json_delta"]
    assert len(texts) >= 3 and "".join(texts) == blocks[0]["text"]
    assert len(parts) >= 2 and "".join(parts) == '{"command": "ls -la /tmp"}'
    assert names.count("content_block_stop") == 2
    end = events[-2][1]
    assert end["delta"] == {"stop_reason": "tool_use", "stop_sequence": None}
    assert end["usage"]["output_tokens"] > 1


def test_thinking_streams_as_deltas_then_a_signature_and_other_blocks_arrive_whole():
    thinking = {"type": "thinking", "thinking": "first this, then that, and so on",
                "signature": "sig=="}
    redacted = {"type": "redacted_thinking", "data": "opaque"}
    with StandInAPI([reply(thinking, redacted, text("ok"))]) as api:
        events, _ = events_of(api)
    starts = [d["content_block"] for n, d in events if n == "content_block_start"]
    assert starts[:2] == [{"type": "thinking", "thinking": ""}, redacted]
    first = [d["delta"] for n, d in events if n == "content_block_delta" and d["index"] == 0]
    assert [d["type"] for d in first[-2:]] == ["thinking_delta", "signature_delta"]
    assert len(first) >= 3
    assert first[-1]["signature"] == "sig=="
    assert "".join(d.get("thinking", "") for d in first) == thinking["thinking"]
    assert not [d for n, d in events if n == "content_block_delta" and d["index"] == 1]


def test_through_the_sdk_a_stream_gives_the_json_message_with_usage_and_odd_inputs_intact():
    blocks = [{"type": "redacted_thinking", "data": "opaque"}, text("calling"),
              tool("todo", '{"items": [1, 2]}', id="s"), tool("todo", [1, 2], id="l"),
              tool("noop", {}, id="e")]
    with StandInAPI([reply(*blocks, stop_reason="end_turn")] * 2, min_cache_tokens=1) as api:
        client = anthropic.Anthropic(api_key="k", base_url=api.url)
        kwargs = dict(model="m", max_tokens=50, messages=[{"role": "user", "content": "hi"}])
        plain = client.messages.create(**kwargs)
        with client.messages.stream(**kwargs) as stream:
            streamed = stream.get_final_message()
    dump = lambda m: [b.to_dict(exclude_none=True, warnings=False) for b in m.content]  # noqa: E731
    assert dump(streamed) == dump(plain) == blocks
    assert streamed.stop_reason == "end_turn" and streamed.usage == plain.usage


def test_errors_stay_json_with_their_status_even_for_a_stream_request():
    with StandInAPI([error(400, "prompt is too long")]) as api:
        client = anthropic.Anthropic(api_key="k", base_url=api.url, max_retries=0)
        with pytest.raises(anthropic.BadRequestError, match="prompt is too long"):
            with client.messages.stream(model="m", max_tokens=5,
                                        messages=[{"role": "user", "content": "hi"}]) as s:
                s.get_final_message()


def test_overridden_fields_reach_the_stream_too():
    with StandInAPI([message(usage={"input_tokens": None, "output_tokens": None},
                             stop_reason="max_tokens", content=[text("cut")])]) as api:
        events, _ = events_of(api)
    assert events[0][1]["message"]["usage"] == {"input_tokens": None, "output_tokens": 1}
    assert events[-2][1]["delta"]["stop_reason"] == "max_tokens"
    assert events[-2][1]["usage"] == {"output_tokens": None}


def test_a_delayed_reply_keeps_the_server_responsive_and_shutdown_prompt_after_a_client_gave_up():
    """A reply the client gave up on sleeps 600 s in the stand-in; meanwhile the next request
    is answered, and the shutdown wakes the sleeper. Waiting for it would take the 600 s, so
    each step gets 60 s: a bound against hanging, far above what a loaded machine takes."""
    before = threading.active_count()
    api = StandInAPI([reply(text("late"), delay=600), reply(text("prompt"))]).__enter__()
    try:
        impatient = anthropic.Anthropic(api_key="k", base_url=api.url, max_retries=0, timeout=0.3)
        ask = dict(model="m", max_tokens=5, messages=[{"role": "user", "content": "hi"}])
        with pytest.raises(anthropic.APITimeoutError):
            impatient.messages.create(**ask)              # hangs up while the stand-in sleeps
        patient = anthropic.Anthropic(api_key="k", base_url=api.url, max_retries=0, timeout=60)
        assert patient.messages.create(**ask).content[0].text == "prompt"
    finally:
        within(60, lambda: api.__exit__(None, None, None))   # the sleeper wakes for the shutdown
    deadline = time.monotonic() + 60
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threading.active_count() <= before           # no thread of the stand-in is left


def test_history_accepts_what_the_api_accepts_from_a_model_and_rejects_the_rest():
    user = {"role": "user", "content": "q"}
    served = [{"type": "thinking", "thinking": "hm", "signature": "s"},
              {"type": "redacted_thinking", "data": "d"},
              {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search",
               "input": {"query": "x"}},
              {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
              text("found it")]
    assert check_request(req([user, {"role": "assistant", "content": served}])) is None
    unsigned = [{"type": "thinking", "thinking": "hm"}, text("x")]
    assert "signature: Field required" in check_request(
        req([user, {"role": "assistant", "content": unsigned}]))
    user_sends_it = req([{"role": "user", "content": [served[1]]}])
    assert "only be in assistant messages" in check_request(user_sends_it)


@pytest.mark.parametrize("choice, ok", [({"type": "auto"}, True), ({"type": "any"}, True),
                                        ({"type": "none"}, True),
                                        ({"type": "tool", "name": "bash"}, True),
                                        ({"type": "required"}, False), ("auto", False)])
def test_tool_choice_takes_the_four_documented_forms(choice, ok):
    b = {**req([{"role": "user", "content": "hi"}], TOOLS), "tool_choice": choice}
    assert (check_request(b) is None) == ok


def test_cache_control_is_accepted_where_the_api_takes_it_and_refused_on_empty_text():
    mark = {"type": "ephemeral"}
    good = {**req([{"role": "user", "content": [text("hi") | {"cache_control": mark}]}],
                  [{**TOOLS[0], "cache_control": mark}]),
            "system": [{"type": "text", "text": "be brief", "cache_control": mark}],
            "cache_control": mark}
    assert check_request(good) is None
    assert "cache_control.type" in check_request({**good, "cache_control": {"type": "forever"}})
    empty = {**good, "system": [{"type": "text", "text": "", "cache_control": mark}]}
    assert "cache_control cannot be set for empty text blocks" in check_request(empty)
    empty = req([{"role": "user", "content": [text("") | {"cache_control": mark}]}])
    assert "cache_control cannot be set for empty text blocks" in check_request(empty)


# ---------------------------------------------------------------- more hand-computed caching cases

def test_a_changed_first_message_keeps_the_marked_system_prefix_and_rewrites_from_there():
    cache = PromptCache(min_tokens=10)
    cache.usage(body("hello there", "second", system_mark=True))
    after = cache.usage(body("hello THERE", "second", system_mark=True))
    head = tokens(*TOOLS, text(SYSTEM))
    rest = tokens(text("hello THERE"), text("answer 1"), text("second"))
    assert after == {"input_tokens": 0, "cache_read_input_tokens": head,
                     "cache_creation_input_tokens": rest}


def extended(k):
    """body("start") followed by one assistant block and a user message of k blocks."""
    b = body("start")
    b["messages"] += [{"role": "assistant", "content": [text("answer")]},
                      {"role": "user", "content": [text(f"part {n}") for n in range(k)]}]
    return b


@pytest.mark.parametrize("k, hit", [(19, True), (20, False)])
def test_the_lookback_reaches_exactly_20_blocks_before_the_breakpoint(k, hit):
    cache = PromptCache(min_tokens=10)
    cache.usage(body("start"))                       # cached up to block 2 ("start")
    usage = cache.usage(extended(k))                 # the breakpoint is 1 + k blocks later
    cached = tokens(*TOOLS, text(SYSTEM), text("start"))
    assert usage["cache_read_input_tokens"] == (cached if hit else 0)


def test_a_breakpoint_under_the_minimum_is_not_stored_while_a_longer_one_is():
    cache = PromptCache(min_tokens=tokens(*TOOLS, text(SYSTEM)) + 5)
    first = cache.usage(body("a question long enough to pass the minimum", system_mark=True))
    everything = tokens(*TOOLS, text(SYSTEM), text("a question long enough to pass the minimum"))
    assert first == {"input_tokens": 0, "cache_read_input_tokens": 0,
                     "cache_creation_input_tokens": everything}
    other = cache.usage(body("another question, just as long as the first one", system_mark=True))
    # tools + system alone were too short to be stored
    assert other["cache_read_input_tokens"] == 0


def test_the_server_reports_all_four_usage_fields_and_defaults_to_a_1024_token_minimum():
    small, large = "short " * 10, "word " * 1200
    script = [reply(text("fine"))] * 4
    with StandInAPI(script) as api:
        client = anthropic.Anthropic(api_key="k", base_url=api.url)
        ask = lambda t: client.messages.create(  # noqa: E731
            model="m", max_tokens=5, cache_control={"type": "ephemeral"},
            messages=[{"role": "user", "content": t}])
        u = [ask(small).usage, ask(small).usage, ask(large).usage, ask(large).usage]
    assert (u[1].input_tokens, u[1].cache_read_input_tokens, u[1].cache_creation_input_tokens) == (
        tokens(text(small)), 0, 0)
    assert u[2].cache_creation_input_tokens == u[3].cache_read_input_tokens == tokens(text(large))
    assert u[3].input_tokens == 0 and u[3].output_tokens == count_tokens([text("fine")])


def test_an_expired_entry_is_written_again_at_exactly_300_seconds():
    clock = Clock()
    cache = PromptCache(min_tokens=10, clock=clock)
    size = cache.usage(body("hi you"))["cache_creation_input_tokens"]
    clock.now = 300
    assert cache.usage(body("hi you")) == {"input_tokens": 0, "cache_read_input_tokens": 0,
                                           "cache_creation_input_tokens": size}


def test_a_summary_request_is_answered_with_the_summary_without_using_a_script_step():
    with StandInAPI([reply(tool("bash", {"command": "ls"}))], summary="the summary") as api:
        client = anthropic.Anthropic(api_key="k", base_url=api.url)
        ask = lambda content, **kw: client.messages.create(  # noqa: E731
            model="m", max_tokens=5, tools=TOOLS,
            messages=[{"role": "user", "content": content}], **kw)
        summary = ask([text("history"), text("<summary-request>summarise</summary-request>")])
        forced = ask("x", tool_choice={"type": "none"})
        scripted = ask("go on")
    assert summary.content[0].text == forced.content[0].text == "the summary"
    assert summary.stop_reason == "end_turn"
    assert scripted.stop_reason == "tool_use" and api.violations == []


def test_the_summary_marker_counts_in_the_last_user_message_even_before_an_assistant_prefill():
    asked = {"tools": TOOLS, "messages": [{"role": "user", "content": "<summary-request>"},
                                          {"role": "assistant", "content": "Summary:"}]}
    earlier = {"tools": TOOLS, "messages": [{"role": "user", "content": "<summary-request>"},
                                            {"role": "assistant", "content": "ok"},
                                            {"role": "user", "content": "next"}]}
    assert is_summary_request(asked) and not is_summary_request(earlier)


def test_a_scripted_usage_is_what_the_client_sees_but_the_cache_still_sees_the_request():
    script = [reply(text("one"), usage={"input_tokens": 7, "output_tokens": 1}),
              message(content=[text("two, with more words")]), message(usage=None)]
    with StandInAPI(script, min_cache_tokens=10) as api:
        client = anthropic.Anthropic(api_key="k", base_url=api.url)
        ask = lambda: client.messages.create(  # noqa: E731
            model="m", max_tokens=5, system=SYSTEM, cache_control={"type": "ephemeral"},
            messages=[{"role": "user", "content": "the same question"}])
        first, second, third = ask(), ask(), ask()
    assert first.usage.input_tokens == 7 and third.usage is None
    assert second.usage.cache_read_input_tokens == tokens(text(SYSTEM), text("the same question"))
    assert second.usage.output_tokens == count_tokens([text("two, with more words")])
    assert api.billing()["calls"] == 3 and api.billing()["uncached"] == 7


# ----------------------------------------------------------- the stricter rules, in the API's words

from harness.stand_in.rules import CONTEXT_WINDOW, MAX_OUTPUT_TOKENS, REQUEST_FIELDS  # noqa: E402
from harness.stand_in.usage import prompt_tokens  # noqa: E402

HI = {"role": "user", "content": "hi"}


def calls(*ids):
    return {"role": "assistant", "content": [tool("bash", {"command": "ls"}, id=i) for i in ids]}


def results(*ids, content="ok"):
    return {"role": "user",
            "content": [{"type": "tool_result", "tool_use_id": i, "content": content}
                        for i in ids]}


def test_an_unknown_top_level_field_is_refused_and_the_client_sees_why():
    refused = check_request({**req([HI]), "temprature": 0.5})
    assert refused == "temprature: Extra inputs are not permitted"
    assert check_request({**req([HI]), "temperature": 0.5, "top_p": 0.9, "top_k": 5}) is None
    with StandInAPI([reply(text("never sent"))]) as api:
        client = anthropic.Anthropic(api_key="k", base_url=api.url, max_retries=0)
        with pytest.raises(anthropic.BadRequestError,
                           match="temprature: Extra inputs are not permitted"):
            client.messages.create(model="m", max_tokens=5, messages=[HI],
                                   extra_body={"temprature": 0.5})
    assert api.violations == ["temprature: Extra inputs are not permitted"]


def test_every_field_the_installed_sdk_can_put_in_the_body_is_accepted():
    import inspect
    from anthropic.resources.beta.messages import Messages as BetaMessages
    from anthropic.resources.messages import Messages
    # Not body fields: the SDK sends these as headers (anthropic-beta, anthropic-user-profile-id,
    # anthropic-workspace-id) or uses them itself.
    not_body = {"self", "betas", "user_profile_id", "workspace_id", "extra_headers", "extra_query",
                "extra_body", "timeout"}
    for create in (Messages.create, BetaMessages.create):
        assert set(inspect.signature(create).parameters) - not_body <= REQUEST_FIELDS
    with StandInAPI([reply(text("fine"))] * 2) as api:
        client = anthropic.Anthropic(api_key="k", base_url=api.url, max_retries=0)
        common = dict(model="m", max_tokens=50, messages=[HI], system="be brief", tools=TOOLS,
                      tool_choice={"type": "auto"}, metadata={"user_id": "u1"},
                      stop_sequences=["STOP"], service_tier="auto",
                      cache_control={"type": "ephemeral"}, output_config={"effort": "low"})
        client.messages.create(**common)
        with client.messages.stream(**common) as stream:
            stream.get_final_message()
    assert api.violations == [] and len(api.requests) == 2


def test_max_tokens_over_the_models_output_limit_is_refused_naming_the_limit():
    assert check_request({**req([HI]), "max_tokens": 10**9}) == (
        f"max_tokens: 1000000000 > {MAX_OUTPUT_TOKENS}, which is the maximum allowed number of "
        "output tokens for m")
    assert check_request({**req([HI]), "max_tokens": MAX_OUTPUT_TOKENS}) is None
    assert "positive integer" in check_request({**req([HI]), "max_tokens": True})
    with StandInAPI([reply(text("ok"))], max_output=64_000) as api:
        client = anthropic.Anthropic(api_key="k", base_url=api.url, max_retries=0)
        ask = lambda n: client.messages.stream(model="m", max_tokens=n, messages=[HI])  # noqa: E731
        with pytest.raises(anthropic.BadRequestError, match="max_tokens: 64001 > 64000"):
            with ask(64_001) as stream:     # the SDK streams a request this large
                stream.get_final_message()
        with ask(64_000) as stream:
            assert stream.get_final_message().content[0].text == "ok"


@pytest.mark.parametrize("messages, rule", [
    ([HI, calls("t1", "t1"), results("t1")], "messages.1.content.1: `tool_use` ids must be unique"),
    ([HI, calls("t1"), results("t1"), calls("t2", "t1"), results("t2", "t1")],
     "messages.3.content.1: `tool_use` ids must be unique"),
    ([HI, calls("t1"), results("t1", "t1")],
     "messages.2.content.1: each tool_use must have a single result. "
     "Found multiple `tool_result` blocks with id: t1"),
])
def test_tool_use_ids_are_unique_in_the_conversation_and_answered_once(messages, rule):
    assert check_request(req(messages)) == rule


def test_distinct_ids_each_answered_once_pass():
    messages = [HI, calls("t1", "t2"), results("t1", "t2"), calls("t3"), results("t3")]
    assert check_request(req(messages)) is None


def test_tool_names_are_unique_and_a_forced_tool_must_exist():
    twice = req([HI], TOOLS + [{**TOOLS[0], "description": "the same name again"}])
    assert check_request(twice) == "tools: Tool names must be unique."
    forced = {**req([HI], TOOLS), "tool_choice": {"type": "tool", "name": "nope"}}
    assert check_request(forced) == "Tool 'nope' not found in provided tools"
    assert check_request({**forced, "tool_choice": {"type": "tool", "name": "bash"}}) is None


def test_a_tool_result_may_be_empty_but_may_not_hold_an_empty_text_block():
    empty_text = [text("ok"), {"type": "text", "text": ""}]
    assert check_request(req([HI, calls("t1"), results("t1", content=empty_text)])) == (
        "messages.2.content.0.content.1: text content blocks must be non-empty")
    for fine in ("", [], [text("ok")]):
        assert check_request(req([HI, calls("t1"), results("t1", content=fine)])) is None


def test_a_thinking_block_with_an_empty_signature_is_refused():
    thought = {"type": "thinking", "thinking": "hm", "signature": ""}
    assert check_request(req([HI, {"role": "assistant", "content": [thought, text("x")]}])) == (
        "messages.1.content.0: Invalid `signature` in `thinking` block")


# ---------------------------------------------------------------- the context window

def test_the_prompt_is_counted_over_tools_system_and_every_block():
    b = {**req([HI, {"role": "assistant", "content": [text("answer")]},
                {"role": "user", "content": "more"}], TOOLS),
         "system": "be brief"}
    every_block = tokens(*TOOLS, text("be brief"), text("hi"), text("answer"), text("more"))
    assert prompt_tokens(b) == every_block


def test_a_prompt_over_the_window_is_refused_with_both_numbers():
    b = req([{"role": "user", "content": "word " * 400}])
    size = prompt_tokens(b)
    assert check_request(b, context_window=size) is None
    too_long = f"prompt is too long: {size} tokens > {size - 1} maximum"
    assert check_request(b, context_window=size - 1) == too_long
    assert check_request(b) is None and size < CONTEXT_WINDOW   # the default window takes it
    with StandInAPI([reply(text("never sent"))], context_window=size - 1) as api:
        client = anthropic.Anthropic(api_key="k", base_url=api.url, max_retries=0)
        with pytest.raises(anthropic.BadRequestError,
                           match=f"prompt is too long: {size} tokens > {size - 1}"):
            with client.messages.stream(model="m", max_tokens=10,
                                        messages=b["messages"]) as stream:
                stream.get_final_message()
    assert api.script and api.violations == [too_long]


def test_a_prompt_that_fits_is_answered_and_a_reply_that_fills_the_window_stops_there():
    long_answer = "a sentence that goes on. " * 40
    # max_tokens alone is more than the window
    ask = dict(model="m", max_tokens=5000, messages=[HI])
    window = prompt_tokens(req([HI])) + 30                   # room for 30 tokens of reply
    script = [reply(text("short")), reply(text(long_answer))] * 2
    with StandInAPI(script, context_window=window) as api:
        client = anthropic.Anthropic(api_key="k", base_url=api.url, max_retries=0)
        short, cut = client.messages.create(**ask), client.messages.create(**ask)
        with client.messages.stream(**ask) as s:
            s.get_final_message()
        with client.messages.stream(**ask) as s:
            streamed = s.get_final_message()
    assert short.stop_reason == "end_turn" and short.content[0].text == "short"
    assert cut.stop_reason == streamed.stop_reason == "model_context_window_exceeded"
    kept = cut.content[0].text
    assert kept == streamed.content[0].text
    assert long_answer.startswith(kept) and 0 < len(kept) < len(long_answer)
    # it filled, not overflowed
    assert prompt_tokens(req([HI])) + count_tokens(text(kept)) <= window
    assert api.violations == []


def test_a_tool_use_id_of_other_characters_is_refused_as_the_api_does():
    history = [{"role": "user", "content": "go"},
               {"role": "assistant", "content": [
                   {"type": "tool_use", "id": "call 1", "name": "bash", "input": {}}]},
               {"role": "user", "content": [
                   {"type": "tool_result", "tool_use_id": "call 1", "content": "ok"}]}]
    assert check_request(req(history)) == (
        "messages.1.content.0.id: String should match pattern '^[a-zA-Z0-9_-]+$'")


def test_a_block_changed_between_two_counts_outside_a_request_is_counted_as_it_is_now():
    """The stand-in remembers a block's count only while it answers one request: a test that
    builds a history, counts it, then changes a block, gets the new count."""
    block = {"type": "text", "text": "hi"}
    request = {"messages": [{"role": "user", "content": [block]}]}
    before = prompt_tokens(request)
    block["text"] = "x" * 4_000
    assert prompt_tokens(request) >= before + 900
