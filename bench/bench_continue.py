#!/usr/bin/env python3
"""How long --continue takes to read a long session log: the time grows with its lines, linearly.

    python bench/bench_continue.py              logs of 20,000 and 80,000 lines (about 30 s)
    python bench/bench_continue.py 5000 20000   other sizes: the second should be 4 times the first

A session log as the lessons write it (harness/session/log.py), made up: a prompt, then for each
round an assistant message with a bash call, that call's own tool_result line, and the user
message of results (three lines a round), with no compaction, so the history grows with every
line (the worst case: s03 never compacts). Each log is continued as `--continue` does it,
through session_log.resume_latest: read, rebuilt valid for the API, and written to a new log.
Each size is timed REPEAT times, taking turns, and the best time is kept: the least disturbed
by other work on the machine. No model, no network.
"""

import argparse
import contextlib
import io
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from harness.session import log as session_log  # noqa: E402

SIZES = (20_000, 80_000)   # lines; the second is 4 times the first
REPEAT = 3                 # runs of each size; the best is kept
OUTPUT = "PASSED test_module.py::test_case\n" * 6     # a tool result of about 200 characters


def write_log(folder: Path, lines: int) -> Path:
    """A session log of about `lines` lines (three a round), as SessionLog writes one."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "session_20260101-120000_1.jsonl"
    records = [{"role": "user", "content": "fix the failing tests, one module at a time"}]
    for n in range((lines - 1) // 3):
        call = {"type": "tool_use", "id": f"toolu_{n:06d}", "name": "bash",
                "input": {"command": f"python -m pytest -q tests/test_module_{n}.py"}}
        result = {"type": "tool_result", "tool_use_id": call["id"], "content": OUTPUT}
        records += [{"role": "assistant", "content": [{"type": "text", "text": f"Step {n}."},
                                                      call]},
                    {"tool_result": result},
                    {"role": "user", "content": [result]}]
    with path.open("w", encoding="utf-8") as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    return path


def continue_seconds(folder: Path, clock=time.perf_counter) -> tuple[float, int]:
    """(seconds, messages) of one --continue of the only session log in folder. The new log it
    starts is removed afterwards, so that the next run continues the same one. clock: wall
    time by default; the test takes this process's CPU time, which other processes leave be."""
    before = set(folder.iterdir())
    started = clock()
    with contextlib.redirect_stderr(io.StringIO()):     # its one note: "[continuing ...]"
        log, messages = session_log.resume_latest(folder)
    log.close()
    seconds = clock() - started
    for path in set(folder.iterdir()) - before:
        path.unlink()
    return seconds, len(messages)


def best_times(sizes: tuple, repeat: int = REPEAT,
               clock=time.perf_counter) -> list[tuple[int, float, int]]:
    """(lines, best seconds, messages) for each size, the sizes taking turns run by run."""
    with tempfile.TemporaryDirectory(prefix="bench_continue_") as tmp:
        folders = []
        for lines in sizes:
            folder = Path(tmp) / str(lines)
            write_log(folder, lines)
            folders.append(folder)
        best, messages = [float("inf")] * len(sizes), [0] * len(sizes)
        for _ in range(repeat):
            for k, folder in enumerate(folders):
                seconds, messages[k] = continue_seconds(folder, clock)
                best[k] = min(best[k], seconds)
    return list(zip(sizes, best, messages, strict=True))


def machine() -> str:
    return (f"machine: {platform.machine()}, {os.cpu_count()} cores, Python "
            f"{platform.python_version()}, {platform.system()} {platform.release()}")


def report(timed: list) -> str:
    lines = [machine(), f"--continue of a session log (read, repaired, written to a new log), "
             f"best of {REPEAT} runs",
             f"{'lines':>8} {'messages':>9} {'seconds':>8} {'ms per 1,000 lines':>19}"]
    for size, seconds, messages in timed:
        lines.append(f"{size:>8,} {messages:>9,} {seconds:>8.2f} {1e6 * seconds / size:>19.1f}")
    (small, low, _), (big, high, _) = timed[0], timed[-1]
    lines.append(f"{big / small:.0f}x the lines: {high / low:.1f}x the time (linear: "
                 f"{big / small:.0f}x; quadratic: {(big / small) ** 2:.0f}x)")
    return "\n".join(lines)


def main(argv: list) -> int:
    sizes = tuple(int(a) for a in argv) if argv else SIZES
    if len(sizes) < 2:
        print("give two sizes or none (the second is usually 4 times the first)", file=sys.stderr)
        return 2
    print(report(best_times(sizes)))
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sizes", nargs="*", type=int, help="log sizes in lines: two, or none")
    sys.exit(main(parser.parse_args().sizes))
