"""The token benchmark's own pieces: the floor it compares every shape with, and the policy
sweep the README quotes. (The token table itself is checked in test_readme.py.)"""

import re
import sys

import s06_compact
from conftest import ROOT
from harness import layer1
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
        s06_compact._CLEARED_INPUTS.clear()
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
    calls = [b for m in requests[-1]["messages"] if m["role"] == "assistant" for b in m["content"]
             if b.get("type") == "tool_use"]
    # Every output (2-6 kB) and every file written (1-24 kB) is long: each must have been shown.
    expected = {(c["id"], "result" if c["name"] == "bash" else "input") for c in calls}
    assert {kind for _, kind in expected} == {"result", "input"}, "the shape made no long text to check"
    assert set(long) == expected
    for key, value in long.items():
        shown = [(body, n) for body in requests for n, block in enumerate(cache_blocks(body)[0])
                 if _text_of(block) == (key, value)]
        assert len(shown) == 1, f"{key}: shown whole in {len(shown)} requests"
        body, n = shown[0]
        assert max(breakpoints(body), default=-1) < n, f"{key}: written to the cache, cleared next time"


def _text_of(block):
    """((tool_use id, kind), text) of a result or of the content a write_file call sent."""
    if block.get("type") == "tool_result" and isinstance(block.get("content"), str):
        return (block["tool_use_id"], "result"), block["content"]
    if block.get("type") == "tool_use" and isinstance((block.get("input") or {}).get("content"), str):
        return (block["id"], "input"), block["input"]["content"]
    return None, None


def test_the_sweep_in_the_readme_is_of_the_built_constants_and_agrees_with_the_token_table():
    """The sweep takes about three minutes, too long for the suite; its row for the built values
    must be the token table's s06 column (which test_readme.py checks against the benchmark)."""
    section = re.search(r"^## How layer 1's numbers were chosen\n(.*?)(?=^## )", README, re.S | re.M)[1]
    block = re.search(r"```text\n(.*?)```", section, re.S)[1]
    built = (f"KEEP_RECENT={s06_compact.KEEP_RECENT}, CLEAR_AT_LEAST={s06_compact.CLEAR_AT_LEAST}, "
             f"REWRITE_SHARE={layer1.REWRITE_SHARE}")
    assert f"(built: {built})" in block
    rows = re.findall(r"^  (\S.*?)\s+worst\s+(\d+%) \((\w+) c\d+\), median (\d+%), c(\d+)$", block, re.M)
    assert [row[0] for row in rows] == [", ".join(f"{k}={v}" for k, v in setting.items())
                                        for setting in bench_tokens.SWEEP]
    _, worst, _, median, compactions = {row[0]: row for row in rows}[built]
    table = checked_block(README, "token-table")
    s06_end = next(line for line in table if line.startswith("shape ")).index("s06") + 3
    column = [line[:s06_end].split()[-1] for line in table if line.startswith(("worst", "median"))]
    assert column == [worst, median]
    shapes = [line[:s06_end] for line in table if re.match(r"[a-z]+ +\d+ ", line)]
    assert int(compactions) == sum(int(re.search(r" c(\d+) *$", line)[1]) for line in shapes)


def test_a_sweep_run_puts_the_constants_back(monkeypatch):
    """A pool's worker runs many settings one after another: each must start from the built ones."""
    before = s06_compact.KEEP_RECENT, s06_compact.CLEAR_AT_LEAST, layer1.REWRITE_SHARE
    monkeypatch.setattr(bench_tokens, "_run_job", lambda job: (s06_compact.KEEP_RECENT,
                                                               layer1.REWRITE_SHARE))
    setting = {"KEEP_RECENT": 7, "CLEAR_AT_LEAST": 1, "REWRITE_SHARE": 9.0}
    assert bench_tokens._run_setting(("s06_compact", "steady", "built", setting)) == (7, 9.0)
    assert (s06_compact.KEEP_RECENT, s06_compact.CLEAR_AT_LEAST, layer1.REWRITE_SHARE) == before
