"""The stand-in's play of the API's own context management (stand_in/edits.py), and its rules
for the two betas (stand_in/rules.py), through the real SDK's beta Messages API.

What a test here shows is what --api-context's tests and the bench rely on: a request the real
API would refuse is refused, in the API's words where they are documented; a clearing and a
compaction change what the model reads, and the bill, as the docs say they do.
"""

import anthropic
import pytest

from harness.stand_in import StandInAPI, edits
from harness.stand_in.rules import check_request
from harness.stand_in.script import reply, text
from harness.stand_in.usage import bill
from helpers import conversation

CLEAR_BETA, COMPACT_BETA = "context-management-2025-06-27", "compact-2026-01-12"
TOOLS = [{"name": "bash", "description": "run", "input_schema": {"type": "object"}}]


def body(messages, *edit_list, **extra):
    request = {"model": "m", "max_tokens": 10, "messages": messages, "tools": TOOLS, **extra}
    if edit_list:
        request["context_management"] = {"edits": list(edit_list)}
    return request


def clear(**fields):
    return {"type": "clear_tool_uses_20250919", **fields}


def compact(**fields):
    return {"type": "compact_20260112", **fields}


def tokens(value):
    return {"type": "input_tokens", "value": value}


HI = [{"role": "user", "content": "hi"}]


def history(*results):
    """A prompt, then one bash call a result, each result that many characters."""
    return conversation(*[("bash", {"command": "x" * 40}, "r" * size) for size in results])


# ---------------------------------------------------------------- the rules

def test_context_management_without_its_beta_header_is_refused_in_the_apis_words():
    assert check_request(body(HI, compact())) == f'"anthropic-beta: {COMPACT_BETA}" required'
    assert check_request(body(HI, clear())) == f'"anthropic-beta: {CLEAR_BETA}" required'
    assert check_request(body(HI, clear()), betas=[CLEAR_BETA]) is None
    assert check_request(body(HI, compact()), betas=[CLEAR_BETA]) is not None


@pytest.mark.parametrize("edit, rule", [
    (compact(keep={"type": "tool_uses", "value": 3}),
     "context_management.edits.0.compact_20260112.keep: Extra inputs are not permitted"),
    (compact(trigger=tokens(49_999)), "trigger.value: Input should be greater than or equal "
                                      "to 50000"),
    (compact(trigger={"type": "tool_uses", "value": 60_000}), "trigger.type: Input should be "
                                                              "'input_tokens'"),
    (compact(pause_after_compaction="yes"), "pause_after_compaction: Input should be a valid "
                                            "boolean"),
    (clear(keep=tokens(3)), "keep.type: Input should be 'tool_uses'"),
    (clear(clear_at_least={"type": "percentage", "value": 5}),
     "clear_at_least.type: Input should be 'input_tokens'"),
    (clear(clear_tool_inputs="yes"), "clear_tool_inputs: Input should be a valid list"),
    (clear(exclude_tools="bash"), "exclude_tools: Input should be a valid list of strings"),
    (clear(trigger=tokens(True)), "trigger.value: Input should be a valid integer"),
    ({"type": "clear_everything"}, "does not match any of the expected tags"),
])
def test_each_edit_takes_only_its_own_fields_with_their_types_and_bounds(edit, rule):
    refused = check_request(body(HI, edit), betas=[CLEAR_BETA, COMPACT_BETA])
    assert refused is not None and rule in refused
    good = compact(trigger=tokens(50_000), pause_after_compaction=False, instructions="Sum up.")
    assert check_request(body(HI, good), betas=[COMPACT_BETA]) is None
    good = clear(trigger={"type": "tool_uses", "value": 5}, keep={"type": "tool_uses", "value": 2},
                 clear_at_least=tokens(1_000), exclude_tools=["bash"], clear_tool_inputs=["bash"])
    assert check_request(body(HI, good), betas=[CLEAR_BETA]) is None


def test_a_compaction_block_is_sent_back_only_with_the_compaction_edit_and_never_empty():
    summary = {"type": "compaction", "content": "the story so far"}
    back = [*HI, {"role": "assistant", "content": [summary, text("ok")]},
            {"role": "user", "content": "more"}]
    assert "needs the compact_20260112 edit" in check_request(body(back))
    assert check_request(body(back, compact()), betas=[COMPACT_BETA]) is None
    # It may open the messages: it stands for all that came before it.
    assert check_request(body(back[1:], compact()), betas=[COMPACT_BETA]) is None
    empty = [*HI, {"role": "assistant", "content": [{"type": "compaction", "content": ""}]}]
    assert "Empty string content is not allowed" in check_request(body(empty, compact()),
                                                                  betas=[COMPACT_BETA])
    users = [{"role": "user", "content": [summary]}]
    assert "only be in assistant messages" in check_request(body(users, compact()),
                                                            betas=[COMPACT_BETA])


def test_on_demand_compaction_needs_its_beta_never_with_context_management_and_is_not_played():
    on_demand = {"compaction": {"type": "summarize"}}
    assert check_request(body(HI, **on_demand)) == '"anthropic-beta: compact-2026-09-04" required'
    both = body(HI, compact(), **on_demand)
    assert check_request(both, betas=[COMPACT_BETA, "compact-2026-09-04"]) == (
        "compaction: cannot be combined with context_management")
    assert "not played by this stand-in" in check_request(body(HI, **on_demand),
                                                          betas=["compact-2026-09-04"])


# ---------------------------------------------------------------- clearing

def test_past_the_trigger_every_tool_use_but_the_newest_keep_is_cleared_and_said():
    server = edits.Edits()
    request = body(history(4_000, 4_000, 4_000, 4_000),
                   clear(trigger=tokens(3_000), keep={"type": "tool_uses", "value": 2}))
    seen = server.apply(request)
    results = [b["content"] for m in seen.prompt["messages"] for b in m["content"]
               if isinstance(m["content"], list) and b.get("type") == "tool_result"]
    assert results == [edits.CLEARED, edits.CLEARED, "r" * 4_000, "r" * 4_000]
    (edit,) = seen.applied_edits
    assert edit["type"] == "clear_tool_uses_20250919" and edit["cleared_tool_uses"] == 2
    assert edit["cleared_input_tokens"] > 1_900        # two results of 4,000 characters
    assert request["messages"][2]["content"][0]["content"] == "r" * 4_000   # the body: as sent


def test_clear_at_least_and_exclude_tools_hold_a_clearing_back():
    grown = history(4_000, 4_000, 4_000, 4_000)
    at_least = clear(trigger=tokens(3_000), keep={"type": "tool_uses", "value": 2},
                     clear_at_least=tokens(5_000))
    assert edits.Edits().apply(body(grown, at_least)).applied_edits == []
    excluded = clear(trigger=tokens(3_000), exclude_tools=["bash"])
    assert edits.Edits().apply(body(grown, excluded)).applied_edits == []
    # Without either, the same trigger clears: what held it back was each setting.
    plain = clear(trigger=tokens(3_000), keep={"type": "tool_uses", "value": 2})
    (applied,) = edits.Edits().apply(body(grown, plain)).applied_edits
    assert applied["cleared_tool_uses"] == 2                 # all but the two it keeps


def test_clear_tool_inputs_clears_the_calls_input_too():
    seen = edits.Edits().apply(body(history(4_000, 4_000, 4_000, 4_000, 4_000),
                                    clear(trigger=tokens(3_000), clear_tool_inputs=True)))
    inputs = [b["input"] for m in seen.prompt["messages"] for b in m["content"]
              if isinstance(m["content"], list) and b.get("type") == "tool_use"]
    assert inputs[:2] == [{}, {}] and inputs[2:] == [{"command": "x" * 40}] * 3


def test_a_clearing_is_kept_and_the_trigger_measured_after_it_unless_read_again():
    """KEPT (the stand-in's reading): the next request repeats the clearing and, under the
    trigger once cleared, clears nothing more. AGAIN: the whole history is measured on every
    request, so every request past the trigger clears up to the newest `keep`."""
    edit = clear(trigger=tokens(5_000), keep={"type": "tool_uses", "value": 1})
    first = history(12_000, 12_000, 12_000, 12_000)          # some 3,000 tokens a result
    after = history(12_000, 12_000, 12_000, 12_000, 12_000)
    kept = edits.Edits(edits.KEPT)
    assert kept.apply(body(first, edit)).applied_edits[0]["cleared_tool_uses"] == 3
    # 3 cleared + 2 whole is over 5,000 tokens again: one more, a batch the trigger asks for
    assert kept.apply(body(after, edit)).applied_edits[0]["cleared_tool_uses"] == 4
    loose = clear(trigger=tokens(9_000), keep={"type": "tool_uses", "value": 1})
    kept = edits.Edits(edits.KEPT)
    kept.apply(body(first, loose))
    assert kept.apply(body(after, loose)).applied_edits[0]["cleared_tool_uses"] == 3
    again = edits.Edits(edits.AGAIN)
    again.apply(body(first, loose))
    assert again.apply(body(after, loose)).applied_edits[0]["cleared_tool_uses"] == 4


def test_a_clearing_rewrites_the_cache_from_its_first_cleared_block_on():
    """The server clears after the last cached request: what follows the first cleared block is
    written again, and no breakpoint a client can set stands before it (here: none at all)."""
    script = [reply(text("a"))] * 3
    edit = {"edits": [clear(trigger=tokens(1_000), keep={"type": "tool_uses", "value": 1})]}
    with StandInAPI(script, min_cache_tokens=1) as api:
        client = anthropic.Anthropic(api_key="k", base_url=api.url, max_retries=0)
        # Under the trigger; then over it (the first result is cleared); then under it again.
        for results in ((3_000,), (3_000, 3_000), (3_000, 3_000, 30)):
            client.beta.messages.create(model="m", max_tokens=10, tools=TOOLS, betas=[CLEAR_BETA],
                                        messages=history(*results), context_management=edit,
                                        cache_control={"type": "ephemeral"})
    first, cleared, next_one = api.usages
    assert first["cache_creation_input_tokens"] > 0
    assert cleared["cache_read_input_tokens"] == 0     # no breakpoint stood before the clearing
    assert cleared["cache_creation_input_tokens"] > first["cache_creation_input_tokens"] // 2
    assert next_one["cache_read_input_tokens"] == cleared["cache_creation_input_tokens"]
    assert api.violations == []


# ---------------------------------------------------------------- compaction

def test_past_the_trigger_the_reply_opens_with_the_summary_and_its_cost_is_only_in_iterations():
    big = [{"role": "user", "content": "x " * 120_000}]
    with StandInAPI([reply(text("after the summary"))], summary="the story so far") as api:
        client = anthropic.Anthropic(api_key="k", base_url=api.url, max_retries=0)
        with client.beta.messages.stream(model="m", max_tokens=100, messages=big, tools=TOOLS,
                                         betas=[COMPACT_BETA],
                                         context_management={"edits": [compact(
                                             trigger=tokens(50_000))]}) as stream:
            message = stream.get_final_message()
    assert [b.type for b in message.content] == ["compaction", "text"]
    assert message.content[0].content == "the story so far"
    steps = message.usage.iterations
    assert [s.type for s in steps] == ["compaction", "message"]
    # The top-level counts are the reply's alone; the summary step read the whole prompt.
    assert message.usage.input_tokens == steps[1].input_tokens
    assert steps[0].input_tokens + steps[0].cache_creation_input_tokens > 60_000
    assert message.context_management.applied_edits == []
    billed = bill(api.usages)
    top_level = message.usage.input_tokens + message.usage.cache_creation_input_tokens
    assert billed["input_sent"] > top_level + 60_000            # the summary step is billed


def test_under_the_trigger_nothing_is_summarised_and_no_iterations_are_reported():
    with StandInAPI([reply(text("fine"))]) as api:
        client = anthropic.Anthropic(api_key="k", base_url=api.url, max_retries=0)
        message = client.beta.messages.create(
            model="m", max_tokens=10, messages=HI, tools=TOOLS, betas=[COMPACT_BETA],
            context_management={"edits": [compact()]})
    assert [b.type for b in message.content] == ["text"] and message.usage.iterations is None


def test_a_later_request_is_read_from_its_last_summary_on():
    summary = {"type": "compaction", "content": "the story so far"}
    messages = [{"role": "user", "content": "x " * 120_000},
                {"role": "assistant", "content": [summary, text("ok")]},
                {"role": "user", "content": "more"}]
    seen = edits.Edits().apply(body(messages, compact()))
    assert seen.prompt["messages"] == messages[1:] and seen.compaction is None
    failed = [*messages[:1], {"role": "assistant", "content": [{"type": "compaction",
                                                                "content": None}, text("ok")]}]
    assert edits.after_compaction(body(failed)) == body(failed)   # a null one is skipped


def test_pause_after_compaction_returns_the_block_alone_and_keeps_the_scripts_step():
    big = [{"role": "user", "content": "x " * 120_000}]
    pausing = compact(trigger=tokens(50_000), pause_after_compaction=True)
    with StandInAPI([reply(text("then this"))], summary="so far") as api:
        client = anthropic.Anthropic(api_key="k", base_url=api.url, max_retries=0)
        paused = client.beta.messages.create(model="m", max_tokens=10, messages=big, tools=TOOLS,
                                             betas=[COMPACT_BETA],
                                             context_management={"edits": [pausing]})
        go_on = big + [{"role": "assistant", "content": [b.model_dump() for b in
                                                          paused.content]}]
        after = client.beta.messages.create(model="m", max_tokens=10, messages=go_on,
                                            tools=TOOLS, betas=[COMPACT_BETA],
                                            context_management={"edits": [pausing]})
    assert paused.stop_reason == "compaction" and [b.type for b in paused.content] == ["compaction"]
    assert paused.usage.input_tokens == 0 and paused.usage.iterations[0].type == "compaction"
    assert after.content[0].text == "then this" and after.usage.iterations is None
