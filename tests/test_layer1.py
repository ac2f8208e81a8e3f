"""s06's layer 1 (its choice, its placeholders, the batch rule) and its bookkeeping in
harness/compaction.py, checked against the stand-in."""

import copy

import pytest

import s06_compact as s06
from harness import compaction
from harness.run import Run
from harness.stand_in.rules import check_request
from harness.stand_in.usage import PromptCache
from helpers import conversation

BIG = "x = 1\n" * 2_000          # 12,000 characters written


def inputs(view):
    return [m["content"][0]["input"] for m in view[1::2]]


def cleared_inputs(messages, ids):
    """Layer 1's memory with the inputs of these calls cleared."""
    cleared = s06.Cleared()
    for message in messages[1::2]:
        call = message["content"][0]
        if call["id"] in ids:
            cleared.placeholders[id(call)] = (call, s06.placeholder(call, call, Run()))
    return cleared


def view(messages, cleared):
    """What the model sees of messages, with `cleared` as layer 1's memory."""
    s06.CLEARED = cleared
    return s06.micro_compact(messages, Run(), clear=False)


def clearable_inputs(messages):
    """The calls whose inputs layer 1 would clear (KEEP_RECENT: 3), and what each frees."""
    assert s06.KEEP_RECENT == 3
    return {call["id"]: s06.tokens_freed(call, call)
            for block, call in s06.clearable(messages) if block is call}


def cleared_ids():
    return {b.get("tool_use_id") or b.get("id") for b, _ in s06.CLEARED.placeholders.values()}


pytestmark = pytest.mark.usefixtures("fresh_layers")    # s06's layers new, in a tmp folder


def test_old_big_writes_and_edits_are_worth_clearing_and_the_newest_calls_are_not():
    messages = conversation(("write_file", {"path": "a.py", "content": BIG}),
                       ("edit_file", {"path": "a.py", "old_text": BIG[:600],
                                      "new_text": BIG[:700]}),
                       ("write_file", {"path": "small.py", "content": "x = 1\n"}),
                       ("read_file", {"path": "a.py"}),          # a.py, whole, later
                       ("bash", {"command": "echo " + "y" * 2_000}),
                       ("write_file", {"path": "b.py", "content": BIG}),     # the newest three
                       ("bash", {"command": "ls"}), ("bash", {"command": "pwd"}))
    worth = clearable_inputs(messages)
    assert set(worth) == {"t0", "t1"}          # not short, not bash, not one of the newest 3
    assert 3_400 < worth["t0"] < 3_600         # 14,000 characters of JSON / 4
    assert worth["t1"] > 300


def test_the_newest_whole_view_of_a_file_stays_in_sight():
    """A read of a.py, then a write of it whole, then other work: the read may go (the write
    shows the file as it now is), the write's text may not, until a later call shows a.py
    whole; else the model would see a.py nowhere, though it may be about to edit it."""
    listing = "y" * 3_000
    calls = [("read_file", {"path": "a.py"}, BIG[:3_000]),
             ("write_file", {"path": "a.py", "content": BIG[:3_000]})]
    calls += [("bash", {"command": f"ls {n}"}, listing) for n in range(4)]
    chosen = {call["id"] for block, call in s06.clearable(conversation(*calls))}
    assert "t0" in chosen and "t1" not in chosen
    # Read again later, a.py is in sight there: the write's text may go too.
    calls.insert(2, ("read_file", {"path": "a.py"}, BIG[:3_000]))
    chosen = {call["id"] for block, call in s06.clearable(conversation(*calls))}
    assert {"t0", "t1"} <= chosen and "t2" not in chosen


def test_cleared_inputs_keep_the_call_valid_and_the_history_whole():
    messages = conversation(("write_file", {"path": "a.py", "content": BIG}),
                       ("edit_file", {"path": "a.py", "old_text": BIG[:600],
                                      "new_text": BIG[:700]}),
                       ("bash", {"command": "ls"}))
    original = copy.deepcopy(messages)
    seen = view(messages, cleared_inputs(messages, {"t0", "t1"}))
    assert messages == original
    now = "read_file shows the file as it is now]"
    assert inputs(seen)[0] == {"path": "a.py",
                               "content": f"[cleared from the context: 12,000 characters; {now}"}
    assert inputs(seen)[1] == {"path": "a.py",
                               "old_text": f"[cleared from the context: 600 characters; {now}",
                               "new_text": f"[cleared from the context: 700 characters; {now}"}
    assert inputs(seen)[2] == {"command": "ls"}
    assert check_request({"model": "m", "max_tokens": 1, "messages": seen}) is None
    assert [b["id"] for m in seen[1::2] for b in m["content"]] == ["t0", "t1", "t2"]


def test_an_input_that_is_not_text_is_left_alone():
    messages = conversation(("write_file", {"path": "a.py", "content": ["not", "a", "string"]}),
                       ("bash", {"command": "1"}), ("bash", {"command": "2"}),
                       ("bash", {"command": "3"}))
    assert clearable_inputs(messages) == {}


def test_a_batch_must_free_enough_and_a_fair_share_of_what_it_rewrites(monkeypatch, run):
    """s06's rule: at least CLEAR_AT_LEAST, and REWRITE_SHARE times what it writes again."""
    monkeypatch.setattr(s06, "KEEP_RECENT", 1)
    monkeypatch.setattr(s06, "CLEAR_AT_LEAST", 1_000)
    old = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t0",
                                        "content": "o" * 16_000}]}   # about 4,000 tokens freed

    def cleared_with(after: int) -> bool:
        messages = conversation(("bash", {"command": "a"}), ("bash", {"command": "b" * after}),
                           ("bash", {"command": "c"}))
        messages[2] = copy.deepcopy(old)
        s06.CLEARED = s06.Cleared()
        s06.CONTEXT.reported = 1               # a warm cache: the rewrite costs something
        s06.micro_compact(messages, run)
        return "t0" in cleared_ids()
    monkeypatch.setattr(s06, "REWRITE_SHARE", 1.0)
    assert cleared_with(4_000)                  # rewrites about a quarter of what it frees
    assert not cleared_with(40_000)             # rewrites about 2.5 times what it frees
    monkeypatch.setattr(s06, "CLEAR_AT_LEAST", 5_000)
    assert not cleared_with(4_000)              # frees too little, however cheap


def test_a_small_compact_threshold_makes_smaller_batches_worth_it(monkeypatch, run):
    monkeypatch.setattr(s06, "KEEP_RECENT", 1)
    messages = conversation(("bash", {"command": "a"}), ("bash", {"command": "b"}))
    batch = s06.CLEAR_AT_LEAST * 3 // 4                            # tokens: under CLEAR_AT_LEAST
    messages[2]["content"][0]["content"] = "o" * 4 * batch
    s06.CONTEXT.reported = 1
    s06.micro_compact(messages, run)
    assert cleared_ids() == set()
    s06.CONTEXT.threshold = batch * 5 // 2 - 100                   # 0.4 x it: under the batch
    s06.micro_compact(messages, run)
    assert cleared_ids() == {"t0"}


def test_a_cold_cache_clears_what_is_worth_it_without_counting_a_rewrite(monkeypatch, run):
    """The first call of a resumed session sends everything at full price anyway: a batch
    that frees enough is cleared, whatever comes after it."""
    monkeypatch.setattr(s06, "KEEP_RECENT", 1)
    messages = conversation(("bash", {"command": "a"}), ("bash", {"command": "b" * 200_000}),
                       ("bash", {"command": "c"}))
    messages[2]["content"][0]["content"] = "o" * 40_000
    s06.CONTEXT.threshold = 100_000                # under it: layer 2 has nothing to do
    s06.CONTEXT.reported = 1
    s06.micro_compact(messages, run)
    assert cleared_ids() == set()                  # warm: it would rewrite far more than it frees
    s06.CONTEXT.reported = None
    s06.micro_compact(messages, run)
    assert cleared_ids() == {"t0"}                 # cold: nothing to lose


def test_no_batch_is_cleared_just_before_layer_2_summarises(run):
    """Over the threshold even once the batch is cleared, layer 2 summarises in this step: the
    summary should see those results whole, and a batch cleared first would only cost a cache
    write. Under it once cleared, the batch is cleared (and layer 2 waits)."""
    messages = conversation(("bash", {}, "o" * 40_000), *[("bash", {}, "ok")] * s06.KEEP_RECENT,
                            ("bash", {"command": "b" * 200_000}))
    s06.CONTEXT.threshold = 48_000                 # about 60,000 tokens now, 50,000 cleared
    assert s06.needs_compaction(s06.micro_compact(messages, run)) and cleared_ids() == set()
    s06.CONTEXT.threshold = 55_000
    assert not s06.needs_compaction(s06.micro_compact(messages, run))
    assert cleared_ids() == {"t0"}


def test_a_batch_held_for_layer_2_is_cleared_when_the_summary_fails(monkeypatch, run):
    """The loop runs layer 1 again after layer 2: if the summary failed (a 529 on its call,
    say), the batch held back for it is cleared then, before the step's request goes out."""
    messages = conversation(("bash", {}, "o" * 40_000), *[("bash", {}, "ok")] * s06.KEEP_RECENT,
                            ("bash", {"command": "b" * 200_000}))
    s06.CONTEXT.threshold = 48_000
    assert s06.needs_compaction(s06.micro_compact(messages, run)) and cleared_ids() == set()

    def fails(*args):
        raise ValueError("the summary came back empty")
    monkeypatch.setattr(s06, "summarize", fails)
    assert s06.auto_compact(messages, run) is False
    s06.micro_compact(messages, run)
    assert cleared_ids() == {"t0"}


def test_a_placeholder_is_made_once_and_stays_the_same_text(monkeypatch, run):
    monkeypatch.setattr(s06, "KEEP_RECENT", 1)
    messages = conversation(("bash", {"command": "a"}), ("bash", {"command": "b"}),
                       ("bash", {"command": "c"}))
    messages[2]["content"][0]["content"] = "o" * 40_000
    s06.CONTEXT.reported = None
    first = s06.micro_compact(messages, run)
    messages += conversation(("bash", {"command": "d"}))[1:]
    messages[-2]["content"][0]["id"] = messages[-1]["content"][0]["tool_use_id"] = "t9"
    again = s06.micro_compact(messages, run, clear=False)
    assert again[:len(first) - 1] == first[:-1]
    assert first[2]["content"][0]["content"].startswith("[Previous: used bash; the whole result")


def test_the_cache_point_keeps_the_prefix_read_when_a_batch_starts_far_back():
    """The API looks back at most 20 blocks from a breakpoint: without a second one, clearing
    a result 30 blocks back writes the whole request again, tools and system included."""
    calls = [("bash", {"command": f"cat {n}" + " " * 400}) for n in range(20)]
    body = {"model": "m", "system": "s" * 8_000, "cache_control": {"type": "ephemeral"},
            "messages": conversation(*calls)}
    changed = copy.deepcopy(body["messages"])
    changed[4]["content"][0]["content"] = "[Previous: used bash]"      # 36 blocks from the end
    for point, read_at_least in ((None, 0), (changed[4]["content"][0], 2_000)):
        cache = PromptCache(min_tokens=1_024)
        for end in range(3, len(body["messages"]) + 1, 2):      # the loop's calls so far
            cache.usage({**body, "messages": body["messages"][:end]})
        view = compaction.breakpoint_before(changed, point)
        usage = cache.usage({**body, "messages": view})
        assert check_request({**body, "max_tokens": 1, "messages": view}) is None
        if point is None:
            assert usage["cache_read_input_tokens"] == 0
        else:
            assert usage["cache_read_input_tokens"] >= read_at_least
            assert view[2]["content"][-1]["cache_control"] == {"type": "ephemeral"}
            assert changed[2]["content"][-1].get("cache_control") is None    # a copy


def test_no_cache_point_without_a_batch_or_for_the_first_message():
    messages = conversation(("bash", {"command": "a"}))
    assert compaction.breakpoint_before(messages, None) is messages
    unknown = {"type": "tool_result", "tool_use_id": "unknown", "content": "x"}
    assert compaction.breakpoint_before(messages, unknown) is messages
