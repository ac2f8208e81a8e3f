#!/usr/bin/env python3
"""What long sessions cost in input tokens: a family of session shapes through each lesson's loop.

    python bench/bench_tokens.py           (about 25 s; report() returns the same text)

Each shape is a scripted model driving the real loop, tools and files in a fresh folder,
against the loopback stand-in. Each lesson plays it as built (prompt caching, s06's batched
layer 1) and as the old baseline (no cache_control, layer 1 clearing on every call); the
table shows billed input as built, as a share of the baseline. Then the worst shape and
the median, per lesson: the policy is chosen by the worst (targets: worst <= 30%, median
<= 25%). s03 has no layer 1: its baseline is its own requests billed without a cache.

    python bench/bench_tokens.py --sweep   (about 3 minutes) s06 for other layer-1 constants:
                                           how KEEP_RECENT, CLEAR_AT_LEAST, REWRITE_SHARE were chosen

The floor column plays each shape through s06 once more with seen_once() as layer 1: every
long result shown whole in one request, never cached, then cleared. A policy that lets the
model see each result whole at least once cannot bill much less, so a target below the floor
cannot be met by choosing when to clear; only by showing the model less.

The numbers are the stand-in's model of the documented billing (uncached input 1x, cache
writes 1.25x, reads 0.1x; a 1,024-token minimum; 20-block lookback; tokens = characters/4),
not a bill. They depend on no machine: the scripts, files and outputs are fixed.

s03 has no compaction: a shape whose context passes the 200,000-token window gets the API's
"prompt is too long" from the stand-in, as the real API would answer, and is marked so.
"""

import io
import json
import multiprocessing
import os
import random
import statistics
import sys
import tempfile
from contextlib import contextmanager, redirect_stderr
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import anthropic  # noqa: E402

import s03_todo  # noqa: E402
import s06_compact  # noqa: E402
import s07_task_system  # noqa: E402
import harness.stand_in_api as stand_in  # noqa: E402
from harness import layer1, layer1, spill  # noqa: E402
from harness.stand_in_api import StandInAPI, error, reply, text, tool  # noqa: E402


LESSONS = (s03_todo, s06_compact, s07_task_system)
WINDOW = 200_000          # tokens of context a Sonnet-class model takes; past it the API says 400
BLOB_BYTES = 300_000      # the biggest output a shape asks for
MAX_STEPS = 1_000         # the budget per turn, so that no shape stops before its answer
PROMPT = "work through the project as planned"
WORKERS = min(4, 2 * (os.cpu_count() or 1))  # a run waits on its loopback half the time
                                             # (the numbers do not depend on it)


# ---------------------------------------------------------------- the session shapes

@dataclass(frozen=True)
class Shape:
    name: str
    about: str
    calls: int              # tool calls before the answer
    mix: dict               # kind of call -> weight
    output: tuple           # (smallest, largest) bash output in bytes, spread log-uniformly
    files: tuple = (1_000, 24_000)   # sizes of the files read, written and edited


SHAPES = (
    Shape("explore", "reads 12 files of 1-24 kB, some again; small greps", 50,
          {"read": 6, "bash": 4}, (50, 2_000)),
    Shape("build", "writes 1-24 kB files, edits them, runs the tests", 50,
          {"write": 2, "edit": 5, "bash": 3}, (200, 5_000)),
    Shape("logs", "outputs from 50 B to 300 kB", 40, {"bash": 8, "read": 2}, (50, BLOB_BYTES)),
    Shape("steady", "4-30 kB outputs every call", 60, {"bash": 1}, (4_000, 30_000)),
    Shape("medium", "2-8 kB outputs every call", 60, {"bash": 1}, (2_000, 8_000)),
    Shape("huge", "30-50 kB outputs every call", 60, {"bash": 1}, (30_000, 50_000)),
    Shape("marathon", "all of the above, 150 calls, compacts", 150,
          {"read": 3, "write": 1, "edit": 2, "bash": 4}, (50, BLOB_BYTES)),
    Shape("chatty", "many short outputs (50-600 B)", 40, {"bash": 7, "read": 3}, (50, 600),
          (1_000, 3_000)),
    Shape("reads", "reads 12 files of 8-24 kB again and again", 60, {"read": 1}, (50, 100),
          (8_000, 24_000)),
)


def code_text(n_bytes, seed):
    """Deterministic file-like text of about n_bytes: numbered lines of varied length."""
    words = ("def", "return", "value", "config", "self", "items", "result", "path", "count", "name")
    lines, size, n = [], 0, 0
    while size < n_bytes:
        line = f"{seed}.{n}: " + " ".join(words[(seed + n * k) % len(words)] for k in range(1 + n % 11))
        lines.append(line)
        size += len(line) + 1
        n += 1
    return "\n".join(lines)[:n_bytes] + "\n"


class Script:
    """The scripted model of one shape: its tool calls, made from a fixed seed."""

    def __init__(self, shape):
        self.shape, self.rng = shape, random.Random(shape.name)
        self.files = {}          # path -> the text on disk, as this script last left it

    def pick(self, low, high):
        """A whole number from low to high, spread log-uniformly (random() is stable)."""
        return int(low * (high / low) ** self.rng.random())

    def setup(self):
        Path("blob.txt").write_text(code_text(BLOB_BYTES, 0), encoding="utf-8")
        for n in range(12):
            size = self.pick(*self.shape.files)
            self.files[f"src/m{n}.py"] = code_text(size, n + 1)
        for path, content in self.files.items():
            Path(path).parent.mkdir(exist_ok=True)
            Path(path).write_text(content, encoding="utf-8")

    def steps(self):
        kinds = [k for k, weight in self.shape.mix.items() for _ in range(weight)]
        calls = [getattr(self, kinds[int(self.rng.random() * len(kinds))])()
                 for _ in range(self.shape.calls)]
        return [reply(c) for c in calls] + [reply(text("Done: the work is finished."))]

    def read(self):
        return tool("read_file", {"path": self._some_file()})

    def bash(self):
        return tool("bash", {"command": f"head -c {self.pick(*self.shape.output)} blob.txt"})

    def write(self):
        path = f"src/new{len(self.files)}.py"
        self.files[path] = code_text(self.pick(*self.shape.files), len(self.files) + 1)
        return tool("write_file", {"path": path, "content": self.files[path]})

    def edit(self):
        path = self._some_file()
        lines = self.files[path].splitlines(keepends=True)
        start = int(self.rng.random() * len(lines))
        old = "".join(lines[start:start + 1 + int(self.rng.random() * 40)])
        new = old.replace(":", ": edited", 1)
        if self.files[path].count(old) != 1:     # not unique: a read instead keeps the script valid
            return self.read()
        self.files[path] = self.files[path].replace(old, new, 1)
        return tool("edit_file", {"path": path, "old_text": old, "new_text": new})

    def _some_file(self):
        names = sorted(self.files)
        return names[int(self.rng.random() * len(names))]


# ---------------------------------------------------------------- the old baseline

def per_call_micro_compact(messages, batch=True):
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


# ---------------------------------------------------------------- the floor

def seen_once(messages, batch=True):
    """The floor (for comparison only): each result longer than KEEP_CHARS is shown whole in
    one request, never written to the cache, and cleared in the next; so is each big input.
    A policy that lets the model see every result whole at least once cannot bill much less:
    that one sending, at 1x, is what it cannot avoid, and the baseline sends each result 3 times."""
    calls = {b["id"]: b for m in messages if m["role"] == "assistant"
             for b in m["content"] if b.get("type") == "tool_use"}
    for m in messages[:-1]:                       # every result the model has answered
        if m["role"] == "user" and isinstance(m["content"], list):
            s06_compact._CLEARED.update(b["tool_use_id"] for b in m["content"]
                                        if b.get("type") == "tool_result" and _long(b))
    s06_compact._CLEARED_INPUTS.update(layer1.inputs_worth_clearing(
        messages, 1, s06_compact.KEEP_CHARS, s06_compact._CLEARED_INPUTS))
    view = [{**m, "content": [s06_compact._placeholder(b, calls)
                              if b.get("tool_use_id") in s06_compact._CLEARED else b
                              for b in m["content"]]}
            if m["role"] == "user" and isinstance(m["content"], list) else m for m in messages]
    return _cache_before_new_long_texts(layer1.clear_inputs(view, s06_compact._CLEARED_INPUTS))


def _long(block):
    """A result, or the text a write_file or edit_file call sent, longer than KEEP_CHARS."""
    if block.get("type") == "tool_result":
        return len(str(block["content"])) > s06_compact.KEEP_CHARS
    fields = layer1.INPUT_FIELDS.get(block.get("name"), ()) if block.get("type") == "tool_use" else ()
    given = block.get("input") if isinstance(block.get("input"), dict) else {}
    return sum(len(str(given.get(field, ""))) for field in fields) > s06_compact.KEEP_CHARS


def _cache_before_new_long_texts(view):
    """One breakpoint, on the last block before the first long text of the newest turn or its
    results: each is cleared in the next request, so writing it to the cache would be wasted."""
    blocks = [(n, i, b) for n, m in enumerate(view)
              for i, b in enumerate(m["content"] if isinstance(m["content"], list) else [{}])]
    first = next((k for k, (n, _, b) in enumerate(blocks) if n >= len(view) - 2 and _long(b)),
                 len(blocks))
    n, i, _ = blocks[max(first - 1, 0)]
    message = view[n]
    content = message["content"]
    content = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
    content[i] = {**content[i], "cache_control": {"type": "ephemeral"}}
    return view[:n] + [{**message, "content": content}] + view[n + 1:]


# ---------------------------------------------------------------- playing a shape

@contextmanager
def inside(folder):
    """contextlib.chdir for Python 3.10."""
    before = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


def within_window(step):
    """The step, unless the request is past the context window: then the API's 400."""
    def answer(body):
        size = len(json.dumps(body["messages"])) // 4
        return error(400, f"prompt is too long: {size} tokens > {WINDOW} maximum") if size > WINDOW else step
    return answer


def play(lesson, shape, mode):
    """(billing, compactions) of one shape through lesson.agent_loop, or None past the window.
    mode: "built" (as the lesson is), "baseline" or "floor"."""
    with tempfile.TemporaryDirectory() as tmp, inside(tmp), _fresh_lesson_state(mode):
        script = Script(shape)
        script.setup()
        steps = [within_window(s) for s in script.steps()]
        with StandInAPI(steps, summary="Summary: the work so far, files and results.") as api:
            client = anthropic.Anthropic(api_key="bench", base_url=api.url, max_retries=0)
            try:
                with redirect_stderr(io.StringIO()):
                    lesson.agent_loop([{"role": "user", "content": PROMPT}],
                                      client if mode == "built" else WithoutCaching(client))
            except anthropic.BadRequestError:
                if api.violations or lesson is not s03_todo:
                    raise
                return None
        if api.violations or api.script:
            sys.exit(f"bench_tokens.py: {lesson.__name__} on {shape.name}: "
                     f"{api.violations[0] if api.violations else f'{len(api.script)} steps unplayed'}")
        summaries = sum(1 for r in api.requests if "<summary-request>" in json.dumps(r["messages"][-1]))
        once = {"results_once": results_once(api.requests)} if mode == "floor" else {}
        return {**api.billing(), **once}, summaries


def results_once(requests):
    """The tokens of every tool result, whole, counted once: what a layer 1 that lets the model
    see each result whole must send at least once, at 1x at the least (the floor comes near)."""
    whole = {}
    for body in requests:
        for block in (b for m in body["messages"] if isinstance(m["content"], list) for b in m["content"]):
            if block.get("type") == "tool_result":
                size = stand_in.estimate_tokens({k: v for k, v in block.items() if k != "cache_control"})
                whole[block["tool_use_id"]] = max(size, whole.get(block["tool_use_id"], 0))
    return sum(whole.values())


@contextmanager
def _fresh_lesson_state(mode):
    """Each run starts as a new process would: nothing cleared, no context measured."""
    saved = {m: m.micro_compact for m in (s06_compact, s07_task_system)}
    steps = {m: getattr(m, "MAX_STEPS", None) for m in LESSONS}
    os.environ.pop("COMPACT_THRESHOLD", None)       # the default threshold, as a user has it
    os.environ["MAX_STEPS"] = str(MAX_STEPS)
    for m in LESSONS:
        if isinstance(steps[m], int):
            m.MAX_STEPS = MAX_STEPS
    s06_compact._CLEARED.clear()
    s06_compact._CLEARED_INPUTS.clear()
    s06_compact._LATEST[0] = None
    spill._saved_by_hash.clear()
    s06_compact.CONTEXT.reported, s06_compact.CONTEXT.seen = None, 0
    s06_compact.CONTEXT.after_compaction = 0
    try:
        for m in saved:
            m.micro_compact = {"built": saved[m], "baseline": per_call_micro_compact,
                               "floor": seen_once}[mode]
        yield
    finally:
        for m, fn in saved.items():
            m.micro_compact = fn
        for m, value in steps.items():
            if value is not None:
                m.MAX_STEPS = value


# ---------------------------------------------------------------- the table

def measure():
    """{(lesson name, shape name): (built billing, baseline billed input, compactions) or None},
    and {shape name: (s06's floor, its results sent once) as shares of s06's baseline}."""
    # s03 has no layer 1: its baseline is the same requests billed without a cache.
    jobs = [(lesson.__name__, shape.name, mode) for shape in SHAPES for lesson in LESSONS
            for mode in ("built", "baseline", "floor")
            if mode == "built" or (mode == "baseline" and lesson is not s03_todo)
            or (mode == "floor" and lesson is s06_compact)]
    jobs.sort(key=lambda job: -next(s.calls for s in SHAPES if s.name == job[1]))  # no long run last
    # Processes, not threads: a run changes the folder and s06's layer-1 state.
    with multiprocessing.get_context("fork").Pool(WORKERS) as pool:
        results = dict(zip(jobs, pool.map(_run_job, jobs, chunksize=1)))
    rows = {}
    for lesson, shape, mode in jobs:
        built = results[lesson, shape, "built"]
        if mode != "built" or built is None:
            rows.setdefault((lesson, shape), None)
            continue
        before = results.get((lesson, shape, "baseline")) or built
        cost = before[0]["billed_input"] if before is not built else built[0]["input_sent"]
        rows[lesson, shape] = (built[0], cost, built[1])
    floors = {shape.name: results[s06_compact.__name__, shape.name, "floor"][0] for shape in SHAPES}
    before = {shape.name: rows[s06_compact.__name__, shape.name][1] for shape in SHAPES}
    return rows, {name: (floor["billed_input"] / before[name], floor["results_once"] / before[name])
                  for name, floor in floors.items()}


def _run_job(job):
    lesson, shape, mode = job
    # Whole blocks per stream event: the SDK parses each event (a 24 kB write_file in 20-character
    # pieces is 1,200 of them), and the piece size changes no token of the billing. Only for this
    # run: a test that imports the bench must find the stand-in as it was.
    saved = stand_in.JSON_PIECE, stand_in.TEXT_PIECE
    stand_in.JSON_PIECE = stand_in.TEXT_PIECE = 1_000_000
    try:
        return play(sys.modules[lesson], next(s for s in SHAPES if s.name == shape), mode)
    finally:
        stand_in.JSON_PIECE, stand_in.TEXT_PIECE = saved


def report():
    """The table this script prints."""
    rows, floor = measure()
    names = [m.__name__ for m in LESSONS]
    out = ["Billed input as built, as a share of the old baseline (no caching, layer 1 on every call),",
           "in the stand-in's billing model; 'of' is the baseline's billed input tokens, c = compactions.",
           "floor: s06 showing each result whole in one request, never cached; once: those results",
           "alone, each sent once at 1x, below which no layer 1 that shows them whole can bill.",
           "", f"{'shape':<10}{'calls':>6}" + "".join(f"{n.split('_')[0]:>22}" for n in names)
           + f"{'floor':>7}{'once':>6}"]
    shares = {n: [] for n in names}
    for shape in SHAPES:
        cells = []
        for n in names:
            row = rows[n, shape.name]
            if row is None:
                cells.append(f"{'past the window':>22}")
                continue
            built, before, compactions = row
            shares[n].append(built["billed_input"] / before)
            cells.append(f"{shares[n][-1]:>6.0%} of {before / 1000:>7,.0f}k" + f"{f' c{compactions}':<4}")
        out.append(f"{shape.name:<10}{shape.calls + 1:>6}" + "".join(f"{c:>22}" for c in cells)
                   + f"{floor[shape.name][0]:>7.0%}{floor[shape.name][1]:>6.0%}")
    for label, pick in (("worst", max), ("median", statistics.median)):
        out.append(f"{label:<16}" + "".join(f"{pick(shares[n]):>18.0%}{'':4}" for n in names)
                   + "".join(f"{pick(f[k] for f in floor.values()):>{w}.0%}" for k, w in ((0, 7), (1, 6))))
    out += ["", "Shapes (model calls = tool calls + the answer):"]
    out += [f"  {s.name:<10}{s.about}" for s in SHAPES]
    return "\n".join(out)


# ---------------------------------------------------------------- choosing the policy

SWEEP = [{"KEEP_RECENT": keep, "CLEAR_AT_LEAST": at_least, "REWRITE_SHARE": share}
         for keep in (1, 2, 3) for at_least in (4_000, 8_000, 16_000) for share in (0.5, 1.0, 1.5, 3.0)]


def sweep():
    """s06's worst and median share for other values of its layer-1 constants (--sweep)."""
    baseline = {shape.name: ("s06_compact", shape.name, "baseline", {}) for shape in SHAPES}
    jobs = list(baseline.values()) + [("s06_compact", shape.name, "built", setting)
                                      for setting in SWEEP for shape in SHAPES]
    with multiprocessing.get_context("fork").Pool(WORKERS) as pool:
        results = dict(zip([str(job) for job in jobs], pool.map(_run_setting, jobs, chunksize=1)))
    out = ["s06, billed input as a share of the old baseline, for other layer-1 constants",
           f"(built: KEEP_RECENT={s06_compact.KEEP_RECENT}, CLEAR_AT_LEAST={s06_compact.CLEAR_AT_LEAST}, "
           f"REWRITE_SHARE={layer1.REWRITE_SHARE});"
           " c = compactions, all shapes:", ""]
    for setting in SWEEP:
        runs = {shape.name: results[str(("s06_compact", shape.name, "built", setting))]
                for shape in SHAPES}
        shares = {name: run[0]["billed_input"] / results[str(baseline[name])][0]["billed_input"]
                  for name, run in runs.items()}
        worst = max(shares, key=shares.get)
        out.append(f"  {', '.join(f'{k}={v}' for k, v in setting.items()):<56}worst "
                   f"{shares[worst]:>4.0%} ({worst} c{runs[worst][1]}), median "
                   f"{statistics.median(shares.values()):.0%}, c{sum(r[1] for r in runs.values())}")
    return "\n".join(out)


def _run_setting(job):
    """One run with other constants, put back after it: a pool's worker runs many jobs."""
    lesson, shape, mode, setting = job
    homes = {name: layer1 if name == "REWRITE_SHARE" else s06_compact for name in setting}
    before = {name: getattr(home, name) for name, home in homes.items()}
    try:
        for name, value in setting.items():
            setattr(homes[name], name, value)
        return _run_job((lesson, shape, mode))
    finally:
        for name, value in before.items():
            setattr(homes[name], name, value)


if __name__ == "__main__":
    print(sweep() if sys.argv[1:] == ["--sweep"] else report())
