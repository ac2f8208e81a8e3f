#!/usr/bin/env python3
"""What layer 1 costs per model call in a long session, and whether its placeholders hold still.

    python bench/bench_layer1.py            # 1,500 results of 3-6 kB (about a minute)
    python bench/bench_layer1.py 3000       # another number of results

A session of N tool results (bash outputs of 3,000-6,000 characters, a read_file every tenth
call) grows call by call; before each call s06's micro_compact builds the view, as the loop
does. It prints the time micro_compact takes per call (median and worst of the last 100 calls),
how many results are placeholders by the end, how many files the placeholders name and whether
each exists, and whether every request between two batches began with the previous one byte
for byte (what the prompt cache needs). The tokens of the view are estimated as s06 does.

No model and no network: only layer 1 runs, in a fresh folder, so the numbers say what the
harness adds to each call, on this machine.
"""

import argparse
import io
import json
import os
import random
import statistics
import sys
import tempfile
import time
from contextlib import redirect_stderr
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import s06_compact  # noqa: E402
from harness.run import Run  # noqa: E402


def result_text(n: int, rng: random.Random) -> str:
    size = rng.randint(3_000, 6_000)
    line = f"output of step {n}: " + "x" * 60 + "\n"
    return (line * (size // len(line) + 1))[:size]


def main(count: int) -> int:
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as folder:
        os.chdir(folder)
        s06_compact.CLEARED.__init__()
        s06_compact.CONTEXT.__init__()
        s06_compact.CONTEXT.reported = 1          # a warm cache: batches must pay for themselves
        run = Run()                               # one run: its saved results pinned throughout
        messages = [{"role": "user", "content": "work through the project"}]
        times, previous, stable, batches = [], None, True, 0
        for n in range(count):
            name = "read_file" if n % 10 == 0 else "bash"
            args = {"path": f"file{n}.py"} if name == "read_file" else {"command": f"step {n}"}
            messages.append({"role": "assistant", "content": [
                {"type": "tool_use", "id": f"t{n}", "name": name, "input": args}]})
            messages.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": f"t{n}", "content": result_text(n, rng)}]})
            cleared_before = len(s06_compact.CLEARED.results)
            with redirect_stderr(io.StringIO()):         # layer 1's notes, one a batch
                start = time.perf_counter()
                view = s06_compact.micro_compact(messages, run)
                times.append(time.perf_counter() - start)
            sent = json.dumps(view, ensure_ascii=False)
            if len(s06_compact.CLEARED.results) != cleared_before:
                batches += 1                      # a batch rewrites the request from its start
            elif previous is not None and not sent.startswith(previous[:-2]):
                stable = False
            previous = sent
        named = set()
        for text in s06_compact.CLEARED.results.values():
            if "the whole result is in " in text:
                named.add(text.split("the whole result is in ")[1].rstrip("]"))
        missing = [path for path in named if not Path(path).is_file()]
    last = times[-100:]
    print(f"{count:,} results; {len(s06_compact.CLEARED.results):,} are placeholders, made in "
          f"{batches} batches")
    print(f"micro_compact per call, last 100 calls: median {statistics.median(last) * 1000:.1f} ms,"
          f" worst {max(last) * 1000:.1f} ms")
    print(f"placeholders name {len(named):,} saved files; {len(missing)} of them missing")
    print("between batches every request began with the one before it: "
          + ("yes" if stable else "NO"))
    return 0 if stable and not missing else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("count", nargs="?", type=int, default=1_500, help="tool results")
    sys.exit(main(parser.parse_args().count))
