"""The run's record: the token counts every line and total is made of, whatever the endpoint."""

from types import SimpleNamespace

import pytest

from harness.session.recorder import Recorder
from harness.tokens import usage_counts
from helpers import usage


@pytest.mark.parametrize("given, counts", [
    (dict(input_tokens=12, cache_read_input_tokens=3, cache_creation_input_tokens=4,
          output_tokens=5), (12, 3, 4, 5)),
    (dict(input_tokens=12, output_tokens=5), (12, 0, 0, 5)),                   # fields missing
    (dict(input_tokens=None, cache_read_input_tokens=None, output_tokens=None), (0, 0, 0, 0)),
    (dict(input_tokens="12", output_tokens=" 7 ", cache_read_input_tokens=2.0), (12, 2, 0, 7)),
    (dict(input_tokens="lots", output_tokens=-3, cache_read_input_tokens=True), (0, 0, 0, 0)),
    # Past any context window: an endpoint's nonsense (10**400 is no float: it overflowed).
    (dict(input_tokens=10**400, output_tokens=1e308, cache_read_input_tokens=float("nan"),
          cache_creation_input_tokens="1e999"), (0, 0, 0, 0)),
])
def test_usage_counts_are_whole_numbers_whatever_the_endpoint_sends(given, counts):
    assert usage_counts(SimpleNamespace(**given)) == counts
    assert usage_counts(given) == counts                     # a usage sent as a plain dict
    assert all(type(n) is int for n in usage_counts(SimpleNamespace(**given)))


def test_no_usage_at_all_counts_as_zero():
    assert usage_counts(None) == (0, 0, 0, 0)


def test_totals_add_up_every_call_of_the_run():
    rec = Recorder()
    rec.call(usage(uncached=100, read=20, written=30, out=5))
    rec.call(SimpleNamespace(input_tokens="7", output_tokens=None), "summary call")
    rec.call(usage(read=1_000, out=50), "summary call tokens")
    assert rec.data.totals == {"calls": 3, "fresh": 107, "read": 1_020, "written": 30, "out": 55}
    assert [c.is_summary for c in rec.data.calls] == [False, True, True]   # either label


def test_the_last_calls_count_covers_what_it_sent_and_its_reply():
    rec = Recorder()
    assert rec.context_tokens() is None and rec.context_covers() is None
    sent = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
            {"role": "user", "content": "c"}]
    rec.call(usage(uncached=300, out=40), sent=sent)
    assert rec.context_tokens() == 340 and rec.context_covers() == 4
    rec.call(usage(uncached=10, out=40))                      # a call whose request is not given
    assert rec.context_tokens() == 50 and rec.context_covers() is None


def test_a_block_sent_again_is_kept_once_and_cache_control_does_not_make_it_new():
    rec = Recorder()
    block = {"type": "text", "text": "the same words"}
    rec.call(usage(), sent=[{"role": "user", "content": [block]}])
    marked = {**block, "cache_control": {"type": "ephemeral"}}
    rec.call(usage(), sent=[{"role": "user", "content": [marked]},
                            {"role": "assistant", "content": "the same words"}])
    texts = [b for b in rec.data.blocks.values() if b.text == "the same words"]
    assert len(texts) == 1
    second = rec.data.calls[1].request
    assert second.same == 1 and len(second.messages) == 1   # only the new message is stored
