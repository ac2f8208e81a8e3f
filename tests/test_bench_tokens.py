"""The token benchmark's own pieces: the floor it compares every shape with, and the policy
sweep the README quotes. (The token table itself is checked in test_readme.py.)"""

import re
import sys

import s06_compact
from conftest import ROOT
from harness import layer1_policy
from harness.stand_in_api import StandInAPI, breakpoints, cache_blocks, is_summary_request
from readme_blocks import checked_block

sys.path.insert(0, str(ROOT / "bench"))
import bench_tokens  # noqa: E402

README = (ROOT / "README.md").read_text(encoding="utf-8")


def floor_requests(monkeypatch, shape):
    """The requests s06 makes when it plays shape with the benchmark's floor as layer 1."""
    requests = []

    class Recording(StandInAPI):
        def __exit__(self, *exc):
            requests.extend(self.requests)
            return super().__exit__(*exc)

    monkeypatch.setattr(bench_tokens, "StandInAPI", Recording)
    monkeypatch.setenv("MAX_STEPS", "50")          # play() sets both; monkeypatch puts them back
    monkeypatch.delenv("COMPACT_THRESHOLD", raising=False)
    try:
        assert bench_tokens.play(s06_compact, shape, "floor") is not None
    finally:
        s06_compact._CLEARED.clear()               # layer 1's memory of this run, for later tests
        s06_compact._LATEST[0] = None
    return [r for r in requests if not is_summary_request(r)]


def whole_texts(requests):
    """{(tool_use id, "result" or "input"): the longest text any request carried for it}."""
    longest = {}
    for body in requests:
        for key, value in map(_text_of, cache_blocks(body)[0]):
            if key and len(value) > len(longest.get(key, "")):
                longest[key] = value
    return longest


def test_the_floor_shows_each_long_text_whole_in_one_request_and_never_caches_it(monkeypatch):
    shape = bench_tokens.Shape("test", "bash and writes", 8, {"bash": 1, "write": 1}, (2_000, 6_000))
    requests = floor_requests(monkeypatch, shape)
    longest = whole_texts(requests)
    long = {key: value for key, value in longest.items() if len(value) > s06_compact.KEEP_CHARS}
    assert {kind for _, kind in long} == {"result", "input"}, "the shape made no long text to check"
    for key, value in long.items():
        shown = []
        for body in requests:
            blocks, _ = cache_blocks(body)
            where = [n for n, block in enumerate(blocks) for k, v in [_text_of(block)] if k == key
                     and v == value]
            shown += [(body, n) for n in where]
        assert len(shown) == 1, f"{key}: shown whole in {len(shown)} requests"
        if key[1] == "result":     # a result is new in its request: it must not be written to the cache
            body, n = shown[0]
            assert max(breakpoints(body), default=-1) < n, f"{key}: shown whole under a breakpoint"


def _text_of(block):
    """((tool_use id, kind), text) of a result or of the content a write_file call sent."""
    if block.get("type") == "tool_result" and isinstance(block.get("content"), str):
        return (block["tool_use_id"], "result"), block["content"]
    if block.get("type") == "tool_use" and isinstance((block.get("input") or {}).get("content"), str):
        return (block["id"], "input"), block["input"]["content"]
    return None, None


def test_the_sweep_in_the_readme_is_of_the_built_constants_and_agrees_with_the_token_table():
    """The sweep takes a minute, too long for the suite; its row for the built values must be the
    token table's s06 column (which test_readme.py checks against the benchmark)."""
    section = re.search(r"^## How layer 1's numbers were chosen\n(.*?)(?=^## )", README, re.S | re.M)[1]
    block = re.search(r"```text\n(.*?)```", section, re.S)[1]
    assert (f"CLEAR_AT_LEAST={s06_compact.CLEAR_AT_LEAST}, REWRITE_SHARE={layer1_policy.REWRITE_SHARE}, "
            f"KEEP_RECENT={s06_compact.KEEP_RECENT}") in block
    rows = re.findall(r"^  (\S.*?)\s+worst\s+(\d+%) \((\w+) c\d+\), median (\d+%), c\d+$", block, re.M)
    assert [row[0] for row in rows] == [", ".join(f"{k}={v}" for k, v in setting.items())
                                        for setting in bench_tokens.SWEEP]
    built = {row[0]: row for row in rows}[f"CLEAR_AT_LEAST={s06_compact.CLEAR_AT_LEAST}, "
                                          f"REWRITE_SHARE={layer1_policy.REWRITE_SHARE}"]
    table = checked_block(README, "token-table")
    header = next(line for line in table if line.startswith("shape "))
    s06_end = header.index("s06") + 3
    worst, median = (next(line for line in table if line.startswith(label)) for label in ("worst", "median"))
    assert built[1] == worst[:s06_end].split()[-1] and built[3] == median[:s06_end].split()[-1]
