"""Layer 1's pieces (harness/layer1.py) and s06's batch rule, checked against the stand-in."""

import copy

import pytest

import s06_compact as s06
from harness import layer1
from harness.run import Run
from harness.stand_in.rules import check_request
from harness.stand_in.script import tool
from harness.stand_in.usage import PromptCache

BIG = "x = 1\n" * 2_000          # 12,000 characters written


def history(*calls):
    """A valid history: one assistant call and its short result per (name, input)."""
    messages = [{"role": "user", "content": "go"}]
    for n, (name, args) in enumerate(calls):
        messages.append({"role": "assistant", "content": [tool(name, args, id=f"t{n}")]})
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"t{n}", "content": f"result {n}"}]})
    return messages


def inputs(view):
    return [m["content"][0]["input"] for m in view[1::2]]


def cleared_inputs(messages, ids):
    cleared = layer1.Cleared()
    batch = layer1.Batch()
    batch.inputs = dict.fromkeys(ids, 1)
    cleared.add(Run(), batch, messages)
    return cleared


pytestmark = pytest.mark.usefixtures("fresh_layers")    # s06's layers new, in a tmp folder


def test_old_big_writes_and_edits_are_worth_clearing_and_the_newest_calls_are_not():
    messages = history(("write_file", {"path": "a.py", "content": BIG}),
                       ("edit_file", {"path": "a.py", "old_text": BIG[:600],
                                      "new_text": BIG[:700]}),
                       ("write_file", {"path": "small.py", "content": "x = 1\n"}),
                       ("bash", {"command": "echo " + "y" * 2_000}),
                       ("write_file", {"path": "b.py", "content": BIG}),     # the newest three
                       ("bash", {"command": "ls"}), ("bash", {"command": "pwd"}))
    worth = layer1.no_longer_needed(messages, 3, 400, layer1.Cleared()).inputs
    assert set(worth) == {"t0", "t1"}          # not short, not bash, not one of the newest 3
    assert 3_400 < worth["t0"] < 3_500         # 14,000 characters of JSON / 4, less the placeholder
    assert worth["t1"] > 300


def test_cleared_inputs_keep_the_call_valid_and_the_history_whole():
    messages = history(("write_file", {"path": "a.py", "content": BIG}),
                       ("edit_file", {"path": "a.py", "old_text": BIG[:600],
                                      "new_text": BIG[:700]}),
                       ("bash", {"command": "ls"}))
    original = copy.deepcopy(messages)
    view = layer1.view(messages, cleared_inputs(messages, {"t0", "t1"}))
    assert messages == original
    now = "read_file shows the file as it is now]"
    assert inputs(view)[0] == {"path": "a.py",
                               "content": f"[cleared from the context: 12,000 characters; {now}"}
    assert inputs(view)[1] == {"path": "a.py",
                               "old_text": f"[cleared from the context: 600 characters; {now}",
                               "new_text": f"[cleared from the context: 700 characters; {now}"}
    assert inputs(view)[2] == {"command": "ls"}
    assert check_request({"model": "m", "max_tokens": 1, "messages": view}) is None
    assert [b["id"] for m in view[1::2] for b in m["content"]] == ["t0", "t1", "t2"]


def test_an_input_that_is_not_text_is_left_alone():
    messages = history(("write_file", {"path": "a.py", "content": ["not", "a", "string"]}),
                       ("bash", {"command": "1"}), ("bash", {"command": "2"}),
                       ("bash", {"command": "3"}))
    assert layer1.no_longer_needed(messages, 3, 400, layer1.Cleared()).inputs == {}
    assert layer1.view(messages, cleared_inputs(messages, {"t0"}))[1] == messages[1]


def test_a_batch_must_free_enough_and_a_fair_share_of_what_it_rewrites(monkeypatch, run):
    """s06's rule: at least CLEAR_AT_LEAST, and REWRITE_SHARE times what it writes again."""
    monkeypatch.setattr(s06, "KEEP_RECENT", 1)
    monkeypatch.setattr(s06, "CLEAR_AT_LEAST", 1_000)
    old = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t0",
                                        "content": "o" * 16_000}]}   # about 4,000 tokens freed

    def cleared_with(after: int) -> bool:
        messages = history(("bash", {"command": "a"}), ("bash", {"command": "b" * after}),
                           ("bash", {"command": "c"}))
        messages[2] = copy.deepcopy(old)
        s06.CLEARED = layer1.Cleared()
        s06.CONTEXT.reported = 1               # a warm cache: the rewrite costs something
        s06.micro_compact(messages, run)
        return "t0" in s06.CLEARED.results
    monkeypatch.setattr(s06, "REWRITE_SHARE", 1.0)
    assert cleared_with(4_000)                  # rewrites about a quarter of what it frees
    assert not cleared_with(40_000)             # rewrites about 2.5 times what it frees
    monkeypatch.setattr(s06, "CLEAR_AT_LEAST", 5_000)
    assert not cleared_with(4_000)              # frees too little, however cheap


def test_a_small_compact_threshold_makes_smaller_batches_worth_it(monkeypatch, run):
    monkeypatch.setattr(s06, "KEEP_RECENT", 1)
    messages = history(("bash", {"command": "a"}), ("bash", {"command": "b"}))
    batch = s06.CLEAR_AT_LEAST * 3 // 4                            # tokens: under CLEAR_AT_LEAST
    messages[2]["content"][0]["content"] = "o" * 4 * batch
    s06.CONTEXT.reported = 1
    s06.micro_compact(messages, run)
    assert s06.CLEARED.results == {}
    s06.CONTEXT.threshold = batch * 5 // 2 - 100                   # 0.4 x it: under the batch
    s06.micro_compact(messages, run)
    assert set(s06.CLEARED.results) == {"t0"}


def test_a_cold_cache_clears_what_is_worth_it_without_counting_a_rewrite(monkeypatch, run):
    """The first call of a resumed session sends everything at full price anyway: a batch
    that frees enough is cleared, whatever comes after it."""
    monkeypatch.setattr(s06, "KEEP_RECENT", 1)
    messages = history(("bash", {"command": "a"}), ("bash", {"command": "b" * 200_000}),
                       ("bash", {"command": "c"}))
    messages[2]["content"][0]["content"] = "o" * 40_000
    s06.CONTEXT.reported = 1
    s06.micro_compact(messages, run)
    assert s06.CLEARED.results == {}               # warm: it would rewrite far more than it frees
    s06.CONTEXT.reported = None
    s06.micro_compact(messages, run)
    assert set(s06.CLEARED.results) == {"t0"}      # cold: nothing to lose


def test_a_placeholder_is_made_once_and_stays_the_same_text(run):
    messages = history(("bash", {"command": "a"}), ("bash", {"command": "b"}),
                       ("bash", {"command": "c"}))
    messages[2]["content"][0]["content"] = "o" * 40_000
    cleared = layer1.Cleared()
    batch = layer1.no_longer_needed(messages, 1, 400, cleared)
    cleared.add(run, batch, messages)
    first = layer1.view(messages, cleared)
    messages += history(("bash", {"command": "d"}))[1:]
    messages[-2]["content"][0]["id"] = messages[-1]["content"][0]["tool_use_id"] = "t9"
    again = layer1.view(messages, cleared)
    assert again[:len(first)] == first
    assert first[2]["content"][0]["content"].startswith("[Previous: used bash; the whole result")


def test_the_cache_point_keeps_the_prefix_read_when_a_batch_starts_far_back():
    """The API looks back at most 20 blocks from a breakpoint: without a second one, clearing
    a result 30 blocks back writes the whole request again, tools and system included."""
    calls = [("bash", {"command": f"cat {n}" + " " * 400}) for n in range(20)]
    body = {"model": "m", "system": "s" * 8_000, "cache_control": {"type": "ephemeral"},
            "messages": history(*calls)}
    changed = copy.deepcopy(body["messages"])
    changed[4]["content"][0]["content"] = "[Previous: used bash]"      # 36 blocks from the end
    for point, read_at_least in ((None, 0), ("t1", 2_000)):
        cache = PromptCache(min_tokens=1_024)
        for end in range(3, len(body["messages"]) + 1, 2):      # the loop's calls so far
            cache.usage({**body, "messages": body["messages"][:end]})
        view = layer1._with_cache_point(changed, point)
        usage = cache.usage({**body, "messages": view})
        assert check_request({**body, "max_tokens": 1, "messages": view}) is None
        if point is None:
            assert usage["cache_read_input_tokens"] == 0
        else:
            assert usage["cache_read_input_tokens"] >= read_at_least
            assert view[2]["content"][-1]["cache_control"] == {"type": "ephemeral"}
            assert changed[2]["content"][-1].get("cache_control") is None    # a copy


def test_no_cache_point_without_a_batch_or_for_the_first_message():
    messages = history(("bash", {"command": "a"}))
    assert layer1._with_cache_point(messages, None) is messages
    assert layer1._with_cache_point(messages, "unknown") is messages
