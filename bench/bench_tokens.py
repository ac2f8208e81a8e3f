#!/usr/bin/env python3
"""What one long session costs in input tokens, through the real loops and the stand-in's billing model.

    python bench/bench_tokens.py

The session: 45 tool calls, `bash cat` and `read_file` in turn over seven 4.8 kB files
(some read again), then an answer: 46 model calls. Each lesson plays it as built (prompt
caching, s06's batched layer 1) and as it was before (no cache_control, layer 1 clearing
one more result on every call). The numbers are the stand-in's model of the documented
billing (uncached input at 1x, cache writes at 1.25x, cache reads at 0.1x; a 1,024-token
minimum; 20-block lookback), not a bill: they depend on no machine, and a real tokenizer
counts differently from the stand-in's characters / 4.
"""

import contextlib
import io
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import anthropic  # noqa: E402

import s03_todo  # noqa: E402
import s06_compact  # noqa: E402
import s07_task_system  # noqa: E402
from harness.stand_in_api import StandInAPI, reply, text, tool  # noqa: E402

FILES = 7            # files the session reads
FILE_BYTES = 4_800   # bytes per file
CALLS = 45           # tool calls before the answer
PROMPT = "read the seven notes files and tell me what they have in common"


def session():
    """The scripted model's replies: cat, read, cat, read ... over the files, then an answer."""
    steps = []
    for n in range(CALLS):
        name = f"notes_{n % FILES + 1}.txt"
        steps.append(reply(tool("bash", {"command": f"cat {name}"}) if n % 2 == 0
                           else tool("read_file", {"path": name})))
    return steps + [reply(text("They are all notes about the same project."))]


def per_call_micro_compact(messages):
    """Layer 1 as it was before (for comparison only): on every call the newest 3 results stay
    and every older one but read_file's becomes a placeholder, so the prefix changes each time."""
    names = {b["id"]: b["name"] for m in messages if m["role"] == "assistant"
             for b in m["content"] if b.get("type") == "tool_use"}
    ids = [b["tool_use_id"] for m in messages if m["role"] == "user" and isinstance(m["content"], list)
           for b in m["content"] if b.get("type") == "tool_result"]
    old = set(ids[:max(len(ids) - 3, 0)])
    view = []
    for m in messages:
        if m["role"] == "user" and isinstance(m["content"], list):
            m = {**m, "content": [{**b, "content": f"[Previous: used {names[b['tool_use_id']]}]"}
                                  if b.get("tool_use_id") in old and names[b["tool_use_id"]] != "read_file"
                                  and len(str(b["content"])) > 100 else b for b in m["content"]]}
        view.append(m)
    return view


class WithoutCaching:
    """A client whose requests carry no cache_control: how every lesson called the API before."""

    def __init__(self, client):
        self.messages = self
        self._messages = client.messages

    def create(self, **kwargs):
        kwargs.pop("cache_control", None)
        return self._messages.create(**kwargs)

    def stream(self, **kwargs):
        kwargs.pop("cache_control", None)
        return self._messages.stream(**kwargs)


def play(lesson, before):
    """Run the session through lesson.agent_loop in a fresh folder; return the stand-in's billing."""
    saved = {m: m.micro_compact for m in (s06_compact, s07_task_system)}
    with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(tmp):
        for n in range(1, FILES + 1):
            line = f"note {n}: the project ships on Friday; the tests pass; the docs need work.\n"
            Path(f"notes_{n}.txt").write_text(line * (FILE_BYTES // len(line)), encoding="utf-8")
        s06_compact._CLEARED.clear()
        s06_compact.CONTEXT.reset()
        if before:
            for m in saved:
                m.micro_compact = per_call_micro_compact
        try:
            with StandInAPI(session(), summary="Summary: read the notes files.") as api:
                client = anthropic.Anthropic(api_key="bench", base_url=api.url, max_retries=0)
                with contextlib.redirect_stderr(io.StringIO()):
                    lesson.agent_loop([{"role": "user", "content": PROMPT}], WithoutCaching(client) if before else client)
        finally:
            for m, fn in saved.items():
                m.micro_compact = fn
        if api.violations:
            sys.exit(f"bench_tokens.py: {lesson.__name__} sent an invalid request: {api.violations[0]}")
        return api.billing()


def main():
    os.environ.pop("COMPACT_THRESHOLD", None)   # the default threshold, as a user has it
    print(f"session: {CALLS} tool calls over {FILES} files of {FILE_BYTES:,} bytes, then an answer")
    print(f"{'lesson':<8}{'as':<40}{'calls':>6}{'input sent':>12}{'billed input':>14}{'from cache':>12}"
          f"{'billed vs before':>18}")
    for lesson in (s03_todo, s06_compact, s07_task_system):
        rows = {before: play(lesson, before) for before in (True, False)}
        for before, b in rows.items():
            label = ("before: no caching" + (", per-call layer 1" if lesson is not s03_todo else "")) if before \
                else ("built: caching" + (" + batched layer 1" if lesson is not s03_todo else ""))
            share = b["cache_read"] / b["input_sent"] if b["input_sent"] else 0
            ratio = b["billed_input"] / rows[True]["billed_input"]
            print(f"{lesson.__name__.split('_')[0]:<8}{label:<40}{b['calls']:>6}{b['input_sent']:>12,}"
                  f"{b['billed_input']:>14,.0f}{share:>12.0%}{ratio:>18.0%}")


if __name__ == "__main__":
    main()
