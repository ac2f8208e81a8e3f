"""The one token estimate: about 4 characters a token, wherever the API has not counted.

Relied on by s06 (layer 2's ContextSize measures with it; layer 1 weighs what a batch frees
and rewrites), /context (views.py), the session record and page
(each block's size and each request's), and terminal (the warning about dropped tools).
Without each piece:
- estimate: each would count its own way. Four did, rounding three ways, with and without
  JSON's quotes; right after a compaction that said `→ ~942 tokens`, /context said `~932`
  for the same history.
- request: /context's estimated total and the page's "sent ~N tokens" would not be the
  number layer 2 compares with COMPACT_THRESHOLD: ContextSize counts the system prompt and
  the tools together (its prefix), then the messages, each as one JSON value, and so does
  request(). The kinds /context lists count each block apart, so they add up to about the
  total, not to the token.
- usage_counts: the token line, the session total and the API's compaction note would each
  read a reply's usage their own way; a missing field or a count sent as "12" by an odd
  endpoint broke one of them.
The stand-in counts alike but with a function of its own (harness/stand_in/usage.py): it plays
the API, whose count this estimate is set beside.
"""

import functools
import json
import math

CHARS_PER_TOKEN = 4     # the usual estimate for English and code; the API's count is exact


def estimate(value: object) -> int:
    """About how many tokens a value holds as a request sends it: its JSON's characters / 4,
    rounded down (a text is counted with its quotes and escapes, as it is sent)."""
    sent = json.dumps(value, ensure_ascii=False, default=str)
    return len(sent) // CHARS_PER_TOKEN


def request(system: object, tools: object, messages: list) -> int:
    """A whole request: its system prompt and tools (together, as s06's ContextSize.prefix),
    then its messages."""
    return estimate([system, tools]) + estimate(messages)


USAGE_FIELDS = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens",
                "output_tokens")


def usage_counts(usage: object) -> tuple:
    """(uncached input, read from cache, written to cache, output) of a reply's usage.

    A missing or null field is 0; a count sent as text ("12", by an odd endpoint) is a number;
    anything else that is not a count is 0, so that a token line never stops a lesson.
    """
    found = usage.get if isinstance(usage, dict) else functools.partial(getattr, usage)
    return tuple(_count(found(name, None)) for name in USAGE_FIELDS)


def _count(value: object) -> int:
    if value is None or isinstance(value, bool):
        return 0
    try:
        number = float(str(value).strip()) if not isinstance(value, int) else value
    except ValueError:
        return 0
    return int(number) if math.isfinite(number) and number > 0 else 0
