#!/usr/bin/env python3
"""How long read_file takes to reach a line deep in a big file: the offset costs little.

    python bench/bench_read_file.py            a log of 20,000,000 lines (169 MB; about 30 s)
    python bench/bench_read_file.py 1000000    another number of lines

A log of short numbered lines ("1", "2", ... one a line: the most lines a megabyte can hold,
short of empty ones), read as the model pages through it: read_file with limit=2 at the start,
the middle and the end (harness/files.py, read_lines). Each read is timed REPEAT times; the
best time is kept. No model, no network; the file is made in a temporary folder and removed.
"""

import os
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from harness import files  # noqa: E402

LINES = 20_000_000    # a 169 MB log
REPEAT = 3            # runs of each read; the best is kept
CAP = 50_000          # s03's OUTPUT_CAP: what one read may show


def best_seconds(path: Path, offset: int) -> float:
    times = []
    for _ in range(REPEAT):
        start = time.perf_counter()
        files.read_lines(path, path.name, offset, 2, CAP)
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    lines = int(sys.argv[1]) if len(sys.argv) > 1 else LINES
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "big.log"
        with open(path, "w", encoding="utf-8") as f:
            f.writelines(f"{n}\n" for n in range(1, lines + 1))
        print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python "
              f"{platform.python_version()}, {platform.system()} {platform.release()}")
        print(f"read_file, limit=2, on a log of {lines:,} lines ({path.stat().st_size:,} bytes),"
              f" best of {REPEAT}")
        print("      offset  seconds")
        for offset in (1, lines // 2, lines - 1):
            print(f"{offset:>12,}  {best_seconds(path, offset):7.3f}")


if __name__ == "__main__":
    main()
