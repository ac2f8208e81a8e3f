#!/usr/bin/env python3
"""How big the session page gets, and what the record costs, on long sessions and big boards.

    python bench/bench_page.py          (about a minute)

Synthetic runs fed to harness.session.recorder as the lessons feed it (each call's request as
sent, after layer 1), then rendered by harness.session.page:
- 200 calls of an s06-like session: results of 2 to 40 kB, layer 1 every 8 calls, a
  compaction every 60; the page's size, the record's memory, the time a call's record takes;
- 2,000 calls of the same (a long REPL session): memory must stay bounded;
- a 3,000-task s07 board, each task waiting for the next 30 and the first for all, drawn at
  six compactions and at the end: the page's size and its tallest picture;
- 3,000 calls of the same session, for the chart: how many bars it draws, how wide the
  narrowest is (at full width a unit of the chart is a pixel), its size, the time to render
  the page, and, where Chromium is installed, the time a headless Chromium takes to open
  and draw it (a screenshot of the top of the page, wall clock, its start-up included).
No model, no network; the numbers depend only on this machine's speed (the times).
"""

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from harness.session.page import render  # noqa: E402
from harness.session.recorder import Recorder  # noqa: E402

SYSTEM = "You are a coding agent working in the current folder. " * 20
TOOLS = [{"name": f"tool_{n}", "description": "Does one thing well. " * 12,
          "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}
         for n in range(8)]


def usage(read, written, uncached, out):
    return SimpleNamespace(input_tokens=uncached, cache_read_input_tokens=read,
                           cache_creation_input_tokens=written, output_tokens=out)


def session(calls: int) -> Recorder:
    """An s06-like run: every call adds a tool call and its result (1 in 10 adds four)."""
    rec = Recorder("s06_compact")
    rec.threshold(50_000)
    history, cleared = [{"role": "user", "content": "work through the backlog"}], 0
    for n in range(1, calls + 1):
        if n % 60 == 0:
            rec.call(usage(40_000, 500, 0, 900), "summary call",
                     sent=[*history, {"role": "user", "content": "Summarise."}], system=SYSTEM,
                     tools=TOOLS)
            summary = f"Summary after call {n}: " + "what was done, and why. " * 80
            rec.compacted(52_000, 700, summary, f"transcript_{n}.jsonl", counted=50_000)
            history, cleared = [{"role": "user", "content": f"[compacted] {summary}"}], 0
        if n % 8 == 0:
            cleared = max(cleared, len(history) - 6)
            rec.cleared(3, 9_000)
        view = [_placeholder(m) if i < cleared else m for i, m in enumerate(history)]
        rec.call(usage(30_000, 2_000, 50, 200), sent=view, system=SYSTEM, tools=TOOLS)
        uses, results = [], []
        for k in range(4 if n % 10 == 0 else 1):
            size = 2_000 + (n * 7919 + k * 104_729) % 38_000       # 2 to 40 kB, spread evenly
            lines = (f"line {i} of {n}.{k}\n" for i in range(size // 16))
            body = f"output {n}.{k}:\n" + "".join(lines)
            uses.append({"type": "tool_use", "id": f"t{n}_{k}", "name": "bash",
                         "input": {"command": f"make step-{n}-{k}"}})
            results.append({"type": "tool_result", "tool_use_id": f"t{n}_{k}", "content": body})
            rec.tool("bash", {"command": f"make step-{n}-{k}"}, body, False)
        history += [{"role": "assistant", "content": [{"type": "text", "text": f"Step {n}."},
                                                      *uses]},
                    {"role": "user", "content": results}]
    return rec


def _placeholder(message: dict) -> dict:
    if message["role"] != "user" or not isinstance(message["content"], list):
        return message
    return {**message, "content": [{**b, "content": "[Previous: used bash]"}
                                   for b in message["content"]]}


def measure_session(calls: int) -> str:
    """The page's size and the record's memory (tracemalloc slows the run down, so the time a
    call takes to record is measured on a second run without it)."""
    tracemalloc.start()
    rec = session(calls)                   # its history is freed on return: the record stays
    kept, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    started = time.perf_counter()
    page = render(rec.data).encode("utf-8")
    rendering = time.perf_counter() - started
    shown = page.count(b'<details class="request"')
    return (f"{calls:>5} calls: page {len(page) / 1e6:.2f} MB ({shown} calls' requests shown); "
            f"the record holds {kept / 1e6:.1f} MB (peak {peak / 1e6:.1f} MB with the session's "
            f"own history); {rendering:.2f} s to render")


def measure_time(calls: int) -> str:
    started = time.perf_counter()
    session(calls)
    with_record = time.perf_counter() - started
    real_call = Recorder.call
    Recorder.call = lambda self, *args, **kwargs: None          # the same run, recording nothing
    try:
        started = time.perf_counter()
        session(calls)
        without = time.perf_counter() - started
    finally:
        Recorder.call = real_call
    return (f"{calls:>5} calls: recording each call's request takes "
            f"{1000 * (with_record - without) / calls:.1f} ms a call")


def measure_board() -> str:
    board = {n: {"id": n, "subject": f"step {n} of the migration", "status": "pending",
                 "blockedBy": list(range(n + 1, min(n + 31, 3_001))), "owner": None}
             for n in range(1, 3_001)}
    board[1]["blockedBy"] = list(range(2, 3_001))
    rec = Recorder("s07_task_system")
    rec.watch_board(lambda: board)
    rec.call(usage(0, 0, 1_000, 10))
    for n in range(6):
        rec.call(usage(0, 0, 1_000, 10), "summary call")
        rec.compacted(60_000, 900, f"summary {n}", f"t{n}.jsonl")
    rec.finish()
    page = render(rec.data)
    heights = [int(h) for h in re.findall(r'<svg class="board"[^>]* height="(\d+)"', page)]
    return (f"3,000-task board: page {len(page.encode('utf-8')) / 1e6:.2f} MB, "
            f"{len(heights)} pictures, the tallest {max(heights):,} px")


def measure_chart(calls: int) -> str:
    """The chart of a long session: its bars, the narrowest, its bytes; the page's render
    time, and Chromium's time to open and draw it."""
    rec = session(calls)
    started = time.perf_counter()
    page = render(rec.data)
    rendering = time.perf_counter() - started
    chart = page[page.index('<svg class="chart"'):page.index("</svg>") + 6]
    widths = [float(w) for w in re.findall(r'<rect class="\w+" x="[\d.]+" y="[\d.]+" '
                                           r'width="([\d.]+)"', chart)]
    bars = chart.count('<g class="call')
    line = (f"{calls:>5} calls: the chart draws {bars:,} bars, the narrowest "
            f"{min(widths):.1f} units wide, in {len(chart.encode('utf-8')) / 1e3:,.0f} kB; "
            f"the page renders in {rendering:.2f} s")
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser:
        line += f"; Chromium opens and draws it in {draw_seconds(browser, page):.1f} s"
    return line


def draw_seconds(browser: str, page: str) -> float:
    """Wall-clock seconds of one headless Chromium run that opens the page and screenshots it."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "page.html"
        path.write_text(page, encoding="utf-8")
        started = time.perf_counter()
        subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu",
                        f"--user-data-dir={folder}/profile", f"--screenshot={folder}/shot.png",
                        "--window-size=1280,900", path.as_uri()],
                       capture_output=True, timeout=300, check=True)
        return time.perf_counter() - started


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.parse_args()                     # no options: --help says what it measures
    print(measure_time(200), flush=True)
    for calls in (200, 1_000, 2_000):
        print(measure_session(calls), flush=True)
    print(measure_board(), flush=True)
    for calls in (10, 3_000):
        print(measure_chart(calls), flush=True)
