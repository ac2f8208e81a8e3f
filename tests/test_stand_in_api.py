"""The stand-in must reject what the real API rejects, or the end-to-end tests prove nothing."""

import anthropic
import pytest

from stand_in_api import StandInAPI, check_request, error, reply, text, tool


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
    ([{"role": "user", "content": "hi"}, USE, {"role": "user", "content": "no result"}], "without `tool_result`"),
    ([{"role": "user", "content": "hi"}, USE], "without `tool_result`"),
    ([{"role": "user", "content": [RESULT]}], "unexpected `tool_use_id`"),
    ([{"role": "user", "content": "hi"}, USE, {"role": "user", "content": [text("x"), RESULT]}], "must come first"),
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
        call = lambda: client.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "hi"}])
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
        response = client.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "hi"}])
    assert response.content[0].text == "ok" and len(api.requests) == 3
