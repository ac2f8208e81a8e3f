"""The one token estimate: about 4 characters a token, wherever the API has not counted.

Relied on by s06 (layer 2's ContextSize, layer 1's batch rule), /context (views.py), the
session record and page, and terminal (the dropped-tools warning). Without each piece:
- estimate: each would count its own way, and /context would contradict the compaction note.
- request: /context's total and the page's "sent ~N tokens" would not be the number layer 2
  compares with COMPACT_THRESHOLD (the kinds /context lists, each counted apart, add up to
  about that total, not to the token).
- usage_counts / as_count: each reader of a reply's usage would read it its own way, and a
  missing field or a count sent as "12" would break one of them.
The stand-in counts alike, apart (stand_in/usage.py): it plays the API this is set beside.
"""

import functools
import json

CHARS_PER_TOKEN = 4     # the usual estimate for English and code; the API's count is exact


def estimate(value: object) -> int:
    """About how many tokens a value holds as a request sends it: its JSON's characters / 4,
    rounded down (a text is counted with its quotes and escapes, as it is sent)."""
    return characters(value) // CHARS_PER_TOKEN


def characters(value: object) -> int:
    """The characters of value's JSON as a request sends it. A list's are its items', each
    + 2: the brackets, and a ", " between each two."""
    return len(json.dumps(value, ensure_ascii=False, default=str))


def request(system: object, tools: object, messages: list) -> int:
    """A whole request: system prompt and tools together (ContextSize.prefix), then messages."""
    return estimate([system, tools]) + estimate(messages)


# Far past any context window: a larger count is an endpoint's nonsense, read as 0.
MAX_COUNT = 10**9
USAGE_FIELDS = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens",
                "output_tokens")


def usage_counts(usage: object) -> tuple:
    """(uncached input, read from cache, written to cache, output) of a reply's usage (a dict
    or an object), each as_count: a token line never stops a lesson."""
    found = usage.get if isinstance(usage, dict) else functools.partial(getattr, usage)
    return tuple(as_count(found(name, None)) for name in USAGE_FIELDS)


def as_count(value: object) -> int:
    """value as a count: 0 unless a positive number up to MAX_COUNT (or one sent as text)."""
    if value is None or isinstance(value, bool):
        return 0
    try:
        number = float(str(value).strip()) if not isinstance(value, int) else value
    except ValueError:
        return 0
    # NaN fails both comparisons; an int of 400 digits is compared exactly, never as a float.
    if not 0 < number <= MAX_COUNT:
        return 0
    return int(number)
