#!/usr/bin/env python3
"""What long sessions cost in input tokens: made-up and real session shapes through each lesson.

    python bench/bench_tokens.py                 (about 3 minutes on 2 cores)
    python bench/bench_tokens.py --sweep         (about 10 minutes) s06 for other constants
    python bench/bench_tokens.py --set KEEP_RECENT=3 [--sweep]   as if s06 had that constant

Each shape is a scripted model driving a lesson's real loop, tools and files in a fresh folder,
against the loopback stand-in of the Messages API. Two kinds of shape:
- made-up: nine families (big outputs, many reads, writes and edits, ...), from fixed seeds;
- real: the shapes of real Claude Code sessions, read from bench/real_sessions.json (sizes
  and tool names only, no content; shipped with the repository, so anyone can replay them),
  replayed model call by model call. A Read becomes a read_file of a file of that size, a
  Write or Edit a write_file or edit_file whose input has that size, anything else (Bash,
  Grep, Task, ...) a bash command printing that many characters; a call marked 'err' fails;
  the calls of one model call stay in one reply, with its text. The data has no paths: each
  Read reads a file of its own, so no read ever makes an earlier one stale. A model call
  with no tool call ends a turn, and the next turn starts with a user prompt.

The table prints, per shape and lesson, billed input as built (prompt caching, s06's batched
layer 1) as a share of the old baseline, and as a multiple of `once`:
- the old baseline is the published lesson's policy: no cache_control, and on every call every
  tool result but the 3 newest (and but read_file's) a placeholder; layer 2 at 50,000 tokens
  (BASELINE_THRESHOLD), whatever s06's COMPACT_THRESHOLD. s03 has no layer 1: its
  baseline is its own requests billed without a cache;
- once is every tool result sent once, whole, at 1x: no layer 1 that lets the model see each
  result whole can bill less. floor plays s06 once more with each long result shown whole in
  one request, never cached, then cleared: near the cheapest such a layer 1 can be.
s07/s06 is s07's bill against s06's on the same shape (the board's tools and its text).

A second table plays s06 with --api-context instead, the API's own context management played by
the stand-in (harness/stand_in/edits.py), beside s06's layers: clearing with the API's defaults
(100,000 tokens, keep 3) and with s06's setting (api_context.API_CLEAR_AT, s06's KEEP_RECENT,
and the inputs too), which is also measured under the other reading of a clearing (measured
again on every call, `again`: the docs do not say which is right); compaction at the API's
default (150,000) and at api_context.API_COMPACT_AT (its 50,000 minimum). best API is the
cheapest of the four under the stand-in's reading; s06/best is s06's bill as a share of it
(under 100%: s06's layers bill less).

The sweep plays every shape through s06 for other values of its constants, and says what each
costs and what the model keeps seeing: in how many calls a long result is shown whole, how
many results layer 1 made placeholders, and how often layer 2 summarised instead.

The numbers are the stand-in's model of the documented billing (uncached input 1x, cache
writes 1.25x, reads 0.1x; a 1,024-token minimum; 20-block lookback; tokens = characters/4),
not a bill. They depend on no machine: the scripts, files and outputs are fixed.

s03 has no compaction: a shape whose context passes the 200,000-token window gets the API's
"prompt is too long" from the stand-in, as the real API would answer, and is marked so.

Everything the bench changes inside the lessons is in lesson_state() (the floor also reads
s06.KEEP_CHARS). docs/cost.md quotes the table and the sweep; tests/test_bench_tokens.py
measures part of each again and holds the quotes to what this script prints.
"""

import argparse
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

import s03_todo  # noqa: E402
import s06_compact  # noqa: E402
import s07_task_system  # noqa: E402
from harness import api_context, errors  # noqa: E402
from harness.run import Run  # noqa: E402
from harness.stand_in import StandInAPI, edits, script, sse, usage  # noqa: E402
from harness.stand_in.script import error, reply, text, tool  # noqa: E402

LESSONS = (s03_todo, s06_compact, s07_task_system)
WINDOW = 200_000          # tokens of context a Sonnet-class model takes; past it the API says 400
BLOB_BYTES = 300_000      # the biggest output a shape asks for
MAX_STEPS = 1_000         # the budget per turn, so that no shape stops before its answer
LONG = 400                # characters: a result longer than this counts as in sight (KEEP_CHARS)
PROMPT = "work through the project as planned"
# Processes, because a run changes the folder and the lessons' state. Two: the bench shares its
# machine, and a run waits on its loopback half the time. The numbers do not depend on it.
WORKERS = 2
REAL_SESSIONS = Path(__file__).resolve().parent / "real_sessions.json"   # shipped with the repo


# ---------------------------------------------------------------- the made-up shapes

@dataclass(frozen=True)
class Shape:
    name: str
    about: str
    calls: int              # tool calls before the answer
    mix: dict               # kind of call -> weight
    output: tuple           # (smallest, largest) bash output in bytes, spread log-uniformly
    files: tuple = (1_000, 24_000)   # sizes of the files read, written and edited

    @property
    def model_calls(self):
        return self.calls + 1

    def turns(self):
        """The scripted replies, one list per user turn; writes the files they need."""
        return Script(self).turns()


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
    words = ("def", "return", "value", "config", "self", "items", "result", "path", "count",
             "name")
    lines, size, n = [], 0, 0
    while size < n_bytes:
        line = f"{seed}.{n}: " + " ".join(words[(seed + n * k) % len(words)]
                                          for k in range(1 + n % 11))
        lines.append(line)
        size += len(line) + 1
        n += 1
    return "\n".join(lines)[:n_bytes] + "\n"


class Script:
    """The scripted model of one made-up shape: its tool calls, made from a fixed seed."""

    def __init__(self, shape):
        self.shape, self.rng = shape, random.Random(shape.name)
        self.files = {}          # path -> the text on disk, as this script last left it

    def pick(self, low, high):
        """A whole number from low to high, spread log-uniformly (random() is stable)."""
        return int(low * (high / low) ** self.rng.random())

    def turns(self):
        self.setup()
        return [self.steps()]

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


# ---------------------------------------------------------------- the real shapes

@dataclass(frozen=True)
class Session:
    """A real session's shape: per model call, its text's characters and its tool calls."""
    name: str
    moves: tuple            # ({"text": n, "tools": [{"name", "in", "out", "err"}, ...]}, ...)

    @property
    def model_calls(self):
        return len(self.moves)

    @property
    def about(self):
        tools = sum(len(move["tools"]) for move in self.moves)
        return f"a real session: {self.model_calls} model calls, {tools} tool calls"

    def turns(self):
        return Replay(self).turns()


def load_sessions(path=REAL_SESSIONS):
    """The real sessions' shapes, or () where the file is not (a copy of the bench without it)."""
    if not path.is_file():
        return ()
    sessions = json.loads(path.read_text(encoding="utf-8"))["sessions"]
    return tuple(Session(name, tuple(moves)) for name, moves in sessions.items())


SESSIONS = load_sessions()


def json_sized(room, seed):
    """Code-like text whose JSON string takes about `room` characters (a newline takes two)."""
    content = code_text(max(room, 1), seed)
    excess = len(json.dumps(content)) - 2 - room
    while excess > 0 and len(content) > 1:
        content = content[:max(len(content) - excess, 1)]
        excess = len(json.dumps(content)) - 2 - room
    return content


class Replay:
    """A real session as a script: each model call's text and tool calls, with the real sizes.
    Making the replies writes the files the calls will need, each call its own file."""

    def __init__(self, session):
        self.session = session
        self.made = 0            # files made so far: each call's own name

    def turns(self):
        Path("blob.txt").write_text(code_text(BLOB_BYTES, 0), encoding="utf-8")
        turns, steps = [], []
        for move in self.session.moves:
            blocks = [self.call(call) for call in move["tools"]]
            if move["text"] or not blocks:        # the API takes no empty text, nor no content
                blocks.insert(0, text(prose(max(move["text"], 1))))
            steps.append(reply(*blocks))
            if not move["tools"]:                 # the turn ended: the user spoke next
                turns.append(steps)
                steps = []
        if steps:
            turns.append(steps + [reply(text("Done."))])
        return turns

    def call(self, call):
        self.made += 1
        size, out, failed = call["in"], call["out"], call["err"]
        if call["name"] == "Read":
            return self.read(size, out, failed)
        if call["name"] == "Write":
            return self.write(size, failed)
        if call["name"] == "Edit":
            return self.edit(size, failed)
        return self.bash(size, out, failed)

    def read(self, size, out, failed):
        folder = "missing/read" if failed else "read"       # failed: no such file
        # The name padded so that the input has about the real size (and stays under 255).
        pad = size - len(json.dumps({"path": f"{folder}/r{self.made}_.txt"}))
        path = f"{folder}/r{self.made}_{'x' * min(max(pad, 0), 200)}.txt"
        if not failed:
            Path(folder).mkdir(exist_ok=True)
            # code_text ends in a newline, which read_file does not show: it shows `out`.
            Path(path).write_text(code_text(out, self.made) if out else "", encoding="utf-8")
        return tool("read_file", {"path": path})

    def write(self, size, failed):
        path = f"{'../' if failed else ''}write/w{self.made}.py"   # outside: refused
        room = size - len(json.dumps({"path": path, "content": ""}))
        Path("write").mkdir(exist_ok=True)
        return tool("write_file", {"path": path, "content": json_sized(room, self.made)})

    def edit(self, size, failed):
        path = f"edit/e{self.made}.py"
        room = (size - len(json.dumps({"path": path, "old_text": "", "new_text": ""}))) // 2
        old = json_sized(room, self.made)
        Path(path).parent.mkdir(exist_ok=True)
        Path(path).write_text("?\n" if failed else old, encoding="utf-8")  # failed: not found
        return tool("edit_file", {"path": path, "old_text": old, "new_text": old.upper()})

    def bash(self, size, out, failed):
        command = f"head -c {out} blob.txt" + ("; exit 1" if failed else "")
        short = size - len(json.dumps({"command": command + " # "}))
        if short > 0:                             # a comment makes up the real input's size
            command += " # " + "x" * short
        return tool("bash", {"command": command})


def prose(n):
    """n characters of a model's text."""
    sentence = "I will look at the next part of the work and then go on. "
    return (sentence * (n // len(sentence) + 1))[:n]


# ---------------------------------------------------------------- the old baseline

def per_call_micro_compact(messages, run=None, clear=True):
    """The published lesson's layer 1 (for comparison only): on every call the newest 3 results
    stay and every older one but read_file's becomes a placeholder, so the prefix changes."""
    names = {b["id"]: b["name"] for m in messages if m["role"] == "assistant"
             for b in m["content"] if b.get("type") == "tool_use"}
    ids = [b["tool_use_id"] for m in messages if m["role"] == "user"
           and isinstance(m["content"], list)
           for b in m["content"] if b.get("type") == "tool_result"]
    old = set(ids[:max(len(ids) - 3, 0)])
    view = []
    for m in messages:
        if m["role"] == "user" and isinstance(m["content"], list):
            content = []
            for b in m["content"]:
                name = names.get(b.get("tool_use_id"))
                long = len(str(b.get("content", ""))) > 100
                if b.get("tool_use_id") in old and name != "read_file" and long:
                    b = {**b, "content": f"[Previous: used {name}]"}
                content.append(b)
            m = {**m, "content": content}
        view.append(m)
    return view


class WithoutCaching:
    """A client whose requests carry no cache_control: how every lesson called the API before."""

    def __init__(self, client):
        self.messages = self
        self._messages = client.messages
        self.base_url = client.base_url

    def create(self, **kwargs):
        kwargs.pop("cache_control", None)
        return self._messages.create(**kwargs)

    def stream(self, **kwargs):
        kwargs.pop("cache_control", None)
        return self._messages.stream(**kwargs)


# ---------------------------------------------------------------- the floor

INPUT_TEXTS = {"write_file": ("content",), "edit_file": ("old_text", "new_text")}


def seen_once(messages, run=None, clear=True):
    """The floor (for comparison only): each result longer than KEEP_CHARS, and each long text a
    write_file or edit_file sent, is shown whole in one request, never written to the cache, and
    a placeholder from the next on. A layer 1 that lets the model see every result whole at
    least once cannot bill much less: that one sending, at 1x, is what it cannot avoid."""
    view = []
    for n, m in enumerate(messages):
        content = m["content"]
        if isinstance(content, list) and m["role"] == "user" and n < len(messages) - 1:
            content = [{**b, "content": "[Previous: used a tool]"} if _long(b) else b
                       for b in content]
        if isinstance(content, list) and m["role"] == "assistant" and n < len(messages) - 2:
            content = [_cleared_input(b) if _long(b) else b for b in content]
        view.append({**m, "content": content})
    return _cache_before_new_long_texts(view)


def _long(block):
    """A result, or the text a write_file or edit_file call sent, longer than KEEP_CHARS."""
    if block.get("type") == "tool_result":
        return len(str(block["content"])) > s06_compact.KEEP_CHARS
    if block.get("type") != "tool_use" or not isinstance(block.get("input"), dict):
        return False
    fields = INPUT_TEXTS.get(block.get("name"), ())
    return sum(len(str(block["input"].get(field, ""))) for field in fields) > s06_compact.KEEP_CHARS


def _cleared_input(block):
    fields = INPUT_TEXTS[block["name"]]
    return {**block, "input": {**block["input"], **{field: "[cleared]" for field in fields}}}


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


# ---------------------------------------------------------------- inside the lessons

LAYERS = {"built": None, "baseline": per_call_micro_compact, "floor": seen_once}
# The old baseline's layer 2 summarises past 50,000 tokens, as the published lesson does (and
# s06 by default), whatever threshold a sweep tries: the baseline is then one fixed policy, and
# a share of it compares settings of s06 with each other.
BASELINE_THRESHOLD = 50_000


def _s06_api(mode):
    """s06's own --api-context setting (api_context's triggers, s06's KEEP_RECENT)."""
    return api_context.setting(mode, s06_compact.KEEP_RECENT)


# s06 with --api-context: mode -> (its Setting, made when played; the stand-in's reading of a
# clearing). "defaults" are the API's own: clear at 100,000 keeping 3, compact at 150,000.
API_MODES = {
    "clear, defaults": (lambda: api_context.Setting(api_context.CLEAR, edits.CLEAR_TRIGGER,
                                                    edits.CLEAR_KEEP), edits.KEPT),
    "clear, s06's": (lambda: _s06_api(api_context.CLEAR), edits.KEPT),
    "clear, again": (lambda: _s06_api(api_context.CLEAR), edits.AGAIN),
    "compact, default": (lambda: api_context.Setting(api_context.COMPACT, edits.COMPACT_TRIGGER),
                         edits.KEPT),
    "compact, s06's": (lambda: _s06_api(api_context.COMPACT), edits.KEPT),
}
BEST_OF = ("clear, defaults", "clear, s06's", "compact, default", "compact, s06's")
# s06's own layers with layer 2 at API_CLEAR_AT instead of COMPACT_THRESHOLD: they keep about as
# much in sight as the API's tuned clearing (the table's seen lines), so the two bills compare
# what the same memory costs. s06's default threshold keeps more in sight, and bills more.
AT_API_TRIGGER = "layers at API_CLEAR_AT"


@contextmanager
def lesson_state(mode="built", setting=None):
    """The one place the bench reaches inside the lessons; adapt it when they change.

    Inside, every lesson starts as a new process would (layer 1 has cleared nothing, no context
    is measured, MAX_STEPS calls a turn), s06 has the constants of `setting` (the others as
    built, COMPACT_THRESHOLD the default), and s06 and s07 use mode's layer 1 (the baseline's
    layer 2 at BASELINE_THRESHOLD; at AT_API_TRIGGER, at API_CLEAR_AT; with one of API_MODES,
    only at the window, as s06 does with --api-context: play() puts the setting on the run).
    Yields the constants in force. After, all is put back and reset: a test finds the lessons
    clean."""
    homes = {"KEEP_RECENT": s06_compact, "KEEP_CHARS": s06_compact,
             "CLEAR_AT_LEAST": s06_compact, "REWRITE_SHARE": s06_compact}
    built = {name: getattr(home, name) for name, home in homes.items()}
    built["COMPACT_THRESHOLD"] = s06_compact.DEFAULT_THRESHOLD
    layers = {s06_compact: s06_compact.micro_compact}   # s07 calls s06.micro_compact
    def reset():
        s06_compact.CLEARED.reset()        # the same objects s07 uses through s06
        s06_compact.CONTEXT.__init__()

    reset()
    in_force = {**built, **(setting or {})}
    for name, home in homes.items():
        setattr(home, name, in_force[name])
    s06_compact.CONTEXT.threshold = in_force["COMPACT_THRESHOLD"]
    if mode == "baseline":          # the published lesson's, whatever s06's is
        s06_compact.CONTEXT.threshold = BASELINE_THRESHOLD
    if mode in API_MODES:           # as s06's start() does with --api-context
        s06_compact.CONTEXT.threshold = WINDOW
    if mode == AT_API_TRIGGER:
        s06_compact.CONTEXT.threshold = api_context.API_CLEAR_AT
    for m, built_layer in layers.items():
        m.micro_compact = LAYERS.get(mode) or built_layer
    try:
        yield in_force
    finally:
        for name, home in homes.items():
            setattr(home, name, built[name])
        for m, built_layer in layers.items():
            m.micro_compact = built_layer
        reset()


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
        if size > WINDOW:
            return error(400, f"prompt is too long: {size} tokens > {WINDOW} maximum")
        return step
    return answer


def play(lesson, shape, mode="built", setting=None):
    """One shape through lesson.agent_loop, turn by turn: {the billing, "compactions", "once",
    "seen"}, or None if s03's context passed the window. mode: "built", "baseline", "floor",
    AT_API_TRIGGER (s06's layers, layer 2 at API_CLEAR_AT) or one of API_MODES (s06 with
    --api-context); setting: s06's constants to use instead of the built ones."""
    api_mode = API_MODES.get(mode)
    with tempfile.TemporaryDirectory() as tmp, inside(tmp), lesson_state(mode, setting):
        turns = shape.turns()
        steps = [within_window(step) for turn in turns for step in turn]
        reading = api_mode[1] if api_mode else edits.KEPT
        if api_mode:                  # the API's window is the stand-in's: it counts the prompt
            steps = [step for turn in turns for step in turn]
        with StandInAPI(steps, summary="Summary: the work so far, files and results.",
                        clearing=reading) as api:
            import anthropic   # here, not at the top: --help needs no SDK (2 s to import)
            client = anthropic.Anthropic(api_key="bench", base_url=api.url, max_retries=0)
            cached = mode in ("built", AT_API_TRIGGER) or api_mode
            caller = client if cached else WithoutCaching(client)
            run = Run()            # one run, as one process plays every turn
            if api_mode:              # as s06's start() does with --api-context
                run.api_context = api_mode[0]()
            run.client = caller       # (with --api-context, the beta Messages API's)
            messages = []
            try:
                with redirect_stderr(io.StringIO()):
                    for _ in turns:
                        messages.append({"role": "user", "content": PROMPT})
                        lesson.agent_loop(messages, run, max_steps=MAX_STEPS)
            except errors.EndpointError as exc:
                if api.violations or lesson is not s03_todo or "too long" not in str(exc):
                    raise
                return None
            finally:
                run.close()
        if api.violations or api.script:
            unplayed = f"{len(api.script)} steps unplayed"
            sys.exit(f"bench_tokens.py: {lesson.__name__} on {shape.name}: "
                     f"{api.violations[0] if api.violations else unplayed}")
        summaries = sum(1 for body in api.requests if script.is_summary_request(body))
        # A summary the API wrote (--api-context compact) is a compaction too.
        summaries += sum(1 for counted in api.usages for step in usage.billed_steps(counted)
                         if step.get("type") == "compaction")
        # What the model read: with --api-context, the prompt after the server's edits.
        read = api.prompts if api_mode else api.requests
        return {**api.billing(), "compactions": summaries, **results_seen(read)}


def results_seen(requests):
    """What the requests showed of the tool results. "once": the tokens of every result, whole,
    counted once: a layer 1 that lets the model see each result whole must send that at least
    once, at 1x at the least. "seen": for each result longer than LONG characters, how many
    model calls showed it whole (a summary call is not one: the model then only summarises).
    "cleared": how many results a model call showed as a placeholder (layer 1's doing)."""
    tokens, whole, seen, cleared = {}, {}, {}, set()
    for body in requests:
        for block in _results(body):
            plain = {k: v for k, v in block.items() if k != "cache_control"}
            size = usage.count_tokens(plain)
            tokens[block["tool_use_id"]] = max(size, tokens.get(block["tool_use_id"], 0))
            whole[block["tool_use_id"]] = max(len(str(block["content"])),
                                              whole.get(block["tool_use_id"], 0))
    for body in requests:
        if script.is_summary_request(body):
            continue
        for block in _results(body):
            chars = whole[block["tool_use_id"]]
            if len(str(block["content"])) < chars:
                cleared.add(block["tool_use_id"])
            elif chars > LONG:
                seen[block["tool_use_id"]] = seen.get(block["tool_use_id"], 0) + 1
    return {"once": sum(tokens.values()), "seen": sorted(seen.values()), "cleared": len(cleared)}


def _results(body):
    return [b for m in body["messages"] if isinstance(m["content"], list) for b in m["content"]
            if b.get("type") == "tool_result"]


def shapes_named(names):
    everything = {shape.name: shape for shape in SHAPES + SESSIONS}
    return [everything[name] for name in names]


def run(job):
    """play() for a job of names, in a pool's worker: (lesson, shape, mode, setting)."""
    lesson, shape, mode, setting = job
    # Whole blocks per stream event: the SDK parses each event (a 24 kB write_file in 20-character
    # pieces is 1,200 of them), and the piece size changes no token of the billing. Only for this
    # run: a test that imports the bench must find the stand-in as it was.
    saved = sse.JSON_PIECE, sse.TEXT_PIECE
    sse.JSON_PIECE = sse.TEXT_PIECE = 1_000_000
    try:
        return play(sys.modules[lesson], shapes_named([shape])[0], mode, dict(setting))
    finally:
        sse.JSON_PIECE, sse.TEXT_PIECE = saved


def run_all(jobs):
    """{job: run(job)}, the longest shapes first so that none runs alone at the end."""
    longest = sorted(set(jobs), key=lambda job: -shapes_named([job[1]])[0].model_calls)
    import anthropic  # noqa: F401  (once, before the workers fork: each then has it)
    with multiprocessing.get_context("fork").Pool(WORKERS) as pool:
        return dict(zip(longest, pool.map(run, longest, chunksize=1), strict=True))


# ---------------------------------------------------------------- the table

NAMES = [lesson.__name__ for lesson in LESSONS]


def measure(shapes, setting=(), lessons=NAMES, floor=True, api=True):
    """{(lesson name, shape name, mode): play()'s result}: each lesson as built, s06's and s07's
    baselines, s06's floor, and s06 with each of API_MODES (api=False: without them).
    setting: (name, value) pairs of s06's constants to use instead."""
    jobs = []
    for shape in shapes:
        for lesson in lessons:
            modes = ["built"] + ["baseline"] * (lesson != "s03_todo")
            modes += ["floor"] * (floor and lesson == "s06_compact")
            modes += [AT_API_TRIGGER, *API_MODES] * (api and lesson == "s06_compact")
            jobs += [(lesson, shape.name, mode, tuple(setting)) for mode in modes]
    return {job[:3]: result for job, result in run_all(jobs).items()}


def report(shapes=None, setting=()):
    """The table this script prints, for these shapes (all of them by default)."""
    shapes = list(shapes or SHAPES + SESSIONS)
    return tables(measure(shapes, setting), shapes, setting)


def tables(results, shapes, setting=()):
    """Both tables, printed from measure()'s results for these shapes."""
    out = HEADER + [f"s06 with {constants(setting)}.", "", COLUMNS]
    for kind, group in (("made-up", [s for s in shapes if isinstance(s, Shape)]),
                        ("real", [s for s in shapes if isinstance(s, Session)])):
        if not group:
            continue
        rows = [figures(results, shape.name) for shape in group]
        out += [""] * (kind == "real")
        for shape, row in zip(group, rows, strict=True):
            out.append(row_line(shape, row))
        out.append(summary_line(f"{kind} worst", max, rows))
        if kind == "made-up":
            out.append(summary_line(f"{kind} median", statistics.median, rows))
    if not SESSIONS:
        out += ["", f"(no real sessions: {REAL_SESSIONS} is not there)"]
    out += ["", "Shapes (calls = model calls):"] + [f"  {s.name:<10}{s.about}" for s in shapes]
    return "\n".join(out + [""] + api_table(results, shapes))


def api_table(results, shapes):
    """The second table: s06's layers (as built, and at AT_API_TRIGGER) beside s06 with each of
    API_MODES, per shape, and the worst share of the best over the made-up and the real shapes."""
    out = API_HEADER + [f"s06 with {api_constants()}.", "", *API_COLUMNS]
    for kind, group in (("made-up", [s for s in shapes if isinstance(s, Shape)]),
                        ("real", [s for s in shapes if isinstance(s, Session)])):
        if not group:
            continue
        rows = [api_figures(results, shape.name) for shape in group]
        out += [""] * (kind == "real")
        out += [api_row(shape.name, row) for shape, row in zip(group, rows, strict=True)]
        line = f"{kind + ' worst':<{API_CELL * 8 + 10}}"
        for share in ("s06/best", "at/best"):
            ahead = [row[share] for row in rows if row[share] is not None]
            line += f"{_figure(ahead and max(ahead), '.0%'):>9}"
        out.append(line)
        line = f"{kind + ' seen':<10}"
        for mode in PLAYED:
            seen = sorted(n for row in rows if row["seen"][mode] for n in row["seen"][mode])
            line += f"{_figure(seen and statistics.median(seen), 'g'):>{API_CELL}}"
        out.append(line)
    return out


API_CELL = 11      # characters of a bill's cell: " 1,234k c12"
API_HEADER = [
    "s06's layers beside the API's own context management (s06 with --api-context, the API",
    "played by the stand-in): billed input in thousands of tokens, c = compactions. The API's",
    "defaults: clear at 100,000 tokens keeping 3, compact at 150,000; again: s06's clearing if",
    "the API measures a clearing again on every call. best: the cheapest API setting but",
    "again; s06/best: s06's bill as a share of it (under 100%: s06's layers bill less).",
    "at trigger: s06's layers with layer 2 at API_CLEAR_AT, as much in sight as the API's",
    "tuned clearing (the seen lines); at/best: its bill as a share of best."]
# The modes each row shows, in order: s06's layers, at the API's trigger, then the API's own.
PLAYED = ("built", AT_API_TRIGGER, *API_MODES)
API_COLUMNS = [f"{'':<10}{'s06 layers':^{API_CELL * 2}}{'API clearing':^{API_CELL * 3}}"
               f"{'API compaction':^{API_CELL * 2}}".rstrip(),
               f"{'shape':<10}{'built':>{API_CELL}}{'at trigger':>{API_CELL}}" + "".join(
                   f"{name:>{API_CELL}}" for name in ("default", "s06's", "again", "default",
                                                      "s06's", "best"))
               + f"{'s06/best':>9}{'at/best':>9}"]


def api_constants():
    """s06's --api-context constants as NAME=value NAME=value ..."""
    return (f"API_CLEAR_AT={api_context.API_CLEAR_AT} API_COMPACT_AT={api_context.API_COMPACT_AT} "
            f"KEEP_RECENT={s06_compact.KEEP_RECENT}")


def api_figures(results, shape):
    """One shape's bills: s06 as built, at AT_API_TRIGGER and with each of API_MODES ((billed,
    compactions), None where not measured), the best of BEST_OF, and the first two as shares
    of it."""
    def bill(mode):
        result = results.get(("s06_compact", shape, mode))
        return result and (result["billed_input"], result["compactions"])

    row = {mode: bill(mode) for mode in PLAYED}
    row["seen"] = {mode: (results.get(("s06_compact", shape, mode)) or {}).get("seen")
                   for mode in PLAYED}
    measured = [row[mode][0] for mode in BEST_OF if row[mode]]
    row["best"] = min(measured) if len(measured) == len(BEST_OF) else None
    row["s06/best"] = row["built"] and row["best"] and row["built"][0] / row["best"]
    at = row[AT_API_TRIGGER]
    row["at/best"] = at and row["best"] and at[0] / row["best"]
    return row


def api_row(name, row):
    line = f"{name:<10}"
    for mode in PLAYED:
        cell = row[mode] and f"{row[mode][0] / 1000:,.0f}k c{row[mode][1]}"
        line += f"{cell or UNKNOWN:>{API_CELL}}"
    line += _figure(row["best"], ",.0f", 1000, "k").rjust(API_CELL)
    return line + f"{_figure(row['s06/best'], '.0%'):>9}{_figure(row['at/best'], '.0%'):>9}"


CELL = 15          # characters of a lesson's cell: " 13%  5.4x c2"
HEADER = ["Billed input as built, per lesson: as a share of the old baseline (no caching;",
          "placeholders on every call for all but the 3 newest results), then as a multiple of",
          "once (each tool result sent once at 1x: no layer 1 that shows results whole bills",
          "less); c = compactions. baseline: s06's, in tokens. floor and once: as shares of it."]
COLUMNS = (f"{'shape':<10}{'calls':>6}{'baseline':>10}"
           + "".join(f"  {name.split('_')[0]:<{CELL}}" for name in NAMES)
           + f"{'s07/s06':>8}{'floor':>7}{'once':>6}")
UNKNOWN = "…"      # a figure this run did not measure (a test measures only part of a row)


def constants(setting=()):
    """s06's constants in force with this setting, as NAME=value NAME=value ..."""
    with lesson_state(setting=dict(setting)) as in_force:
        return " ".join(f"{name}={value}" for name, value in in_force.items())


def figures(results, shape):
    """One shape's figures, None where not measured: per lesson (share of its baseline, multiple
    of once, compactions), "past the window" for s03 past it; s06's baseline tokens, s07/s06,
    floor and once as shares of s06's baseline."""
    def billed(lesson, mode="built"):
        result = results.get((lesson, shape, mode))
        return result and result["billed_input"]

    once = results["s06_compact", shape, "built"]["once"]
    baseline = billed("s06_compact", "baseline")
    row = {"baseline": baseline, "once": once / baseline if baseline else None,
           "floor": billed("s06_compact", "floor") and billed("s06_compact", "floor") / baseline,
           "s07/s06": billed("s07_task_system") and billed("s07_task_system")
           / billed("s06_compact")}
    for lesson in NAMES:
        built = results.get((lesson, shape, "built"), UNKNOWN)
        if built in (None, UNKNOWN):
            row[lesson] = "past the window" if built is None else None
            continue
        cost = billed(lesson, "baseline") or built["input_sent"]   # s03: its own, uncached
        row[lesson] = (built["billed_input"] / cost, built["billed_input"] / once,
                       built["compactions"])
    return row


def row_line(shape, row):
    line = f"{shape.name:<10}{shape.model_calls:>6}" + _figure(row["baseline"], "9,.0f", 1000, "k")
    for lesson in NAMES:
        cell = row[lesson]
        if isinstance(cell, tuple):
            cell = f"{cell[0]:>4.0%} {cell[1]:>5.1f}x c{cell[2]}"
        line += f"  {cell or UNKNOWN:<{CELL}}"
    for key, spec, width in (("s07/s06", "+.0%", 8), ("floor", ".0%", 7), ("once", ".0%", 6)):
        value = row[key] and row[key] - (key == "s07/s06")
        line += f"{_figure(value, spec):>{width}}"
    return line


def summary_line(label, pick, rows):
    """The worst (or median) of each column over these rows: the shapes that fit, for s03."""
    line = f"{label:<26}"
    for lesson in NAMES:
        cells = [row[lesson] for row in rows if isinstance(row[lesson], tuple)]
        share = cells and f"{pick(c[0] for c in cells):>4.0%} {pick(c[1] for c in cells):>5.1f}x"
        line += f"  {share or UNKNOWN:<{CELL}}"
    for key, spec, width in (("s07/s06", "+.0%", 8), ("floor", ".0%", 7), ("once", ".0%", 6)):
        values = [row[key] for row in rows if row[key] is not None]
        value = values and pick(values) - (key == "s07/s06")
        line += f"{_figure(value, spec):>{width}}"
    return line.rstrip()


def _figure(value, spec, per=1, unit=""):
    return UNKNOWN if value in (None, []) else f"{value / per:{spec}}{unit}"


# ---------------------------------------------------------------- choosing the policy

def _grid():
    """What seeing more results costs at the built batch rule; then, with 3 in sight, other
    batch rules, a longer result that stays whole, and other thresholds for layer 2."""
    settings = [{"KEEP_RECENT": keep} for keep in (1, 2, 3, 4, 5)]
    settings += [{"KEEP_RECENT": 3, "CLEAR_AT_LEAST": at_least, "REWRITE_SHARE": share}
                 for at_least in (4_000, 8_000, 12_000) for share in (0.5, 1.0, 1.5, 3.0)]
    settings += [{"KEEP_RECENT": 3, "KEEP_CHARS": 2_000}]
    # Layer 1 clearing all it may, short results too: whether it alone can match the API's bill.
    settings += [{"KEEP_RECENT": 3, "KEEP_CHARS": 0, "CLEAR_AT_LEAST": 2_000}]
    settings += [{"KEEP_RECENT": 3, "COMPACT_THRESHOLD": t} for t in (20_000, 30_000, 40_000)]
    # The constants that bill least beside the API's own context management, and see less.
    settings += [{"KEEP_RECENT": 3, "COMPACT_THRESHOLD": 30_000, "CLEAR_AT_LEAST": 4_000}]
    return settings


SWEEP = _grid()


def sweep(settings=SWEEP, shapes=None, base=()):
    """s06 for other values of its constants (--sweep): for each setting, the worst and median
    made-up shape, the worst real one, the compactions, and what the model keeps seeing.
    base: (name, value) pairs every setting starts from instead of the built constants."""
    shapes = list(shapes or SHAPES + SESSIONS)
    with lesson_state(setting=dict(base)) as start:
        full = [tuple({**start, **setting}.items()) for setting in settings]
    full = list(dict.fromkeys(full))              # in order, once each
    jobs = [("s06_compact", shape.name, "baseline", ()) for shape in shapes]
    jobs += [("s06_compact", shape.name, "built", setting) for setting in full for shape in shapes]
    # The API's settings once a shape, from the base constants: what s06 must stay ahead of.
    jobs += [("s06_compact", shape.name, mode, tuple(base)) for mode in BEST_OF
             for shape in shapes]
    results = run_all(jobs)
    best = {shape.name: min(results["s06_compact", shape.name, mode, tuple(base)]["billed_input"]
                            for mode in BEST_OF) for shape in shapes}
    out = SWEEP_HEADER + ["Each line changes some of these, the others stay:",
                          f"s06 with {constants(base)}.", "", SWEEP_COLUMNS]
    for setting in full:
        runs = {shape.name: results["s06_compact", shape.name, "built", setting]
                for shape in shapes}
        baselines = {shape.name: results["s06_compact", shape.name, "baseline", ()]
                     for shape in shapes}
        out.append(sweep_line(dict(setting), runs, baselines, best))
    return "\n".join(out)


SWEEP_HEADER = [
    "s06 for other constants: billed input as a share of the old baseline, on the worst and the",
    "median made-up shape and on the worst real one; c = compactions, all shapes; seen: model",
    f"calls a result over {LONG} characters is shown whole in (median, 10th percentile, all",
    "shapes); cleared: results layer 1 made placeholders, on the made-up and the real shapes;",
    "vs API: on the real shape where s06 does worst, its bill as a share of the best API",
    "setting's (the second table of the report: under 100%, s06's layers bill less).",
    "keep = KEEP_RECENT, chars = KEEP_CHARS, at least = CLEAR_AT_LEAST, share = REWRITE_SHARE,",
    "threshold = COMPACT_THRESHOLD (tokens)."]
SWEEP_COLUMNS = (f"{'keep':>4}{'chars':>7}{'at least':>10}{'share':>7}{'threshold':>11}"
                 f"  {'made-up worst':<14}{'median':>7}  {'real worst':<14}{'c':>4}{'seen':>5}"
                 f"{'p10':>4}  {'cleared':<11}vs API")


def sweep_line(setting, runs, baselines, best=None):
    """One setting's line of the sweep: runs and baselines are {shape name: play()'s result},
    best {shape name: the best API setting's bill} (None: not measured)."""
    shares = {name: run["billed_input"] / baselines[name]["billed_input"]
              for name, run in runs.items()}
    line = (f"{setting['KEEP_RECENT']:>4}{setting['KEEP_CHARS']:>7,}"
            f"{setting['CLEAR_AT_LEAST']:>10,}{setting['REWRITE_SHARE']:>7}"
            f"{setting['COMPACT_THRESHOLD']:>11,}")
    made_up = {shape.name for shape in SHAPES}
    cleared = []
    for with_median in (True, False):
        group = [name for name in shares if (name in made_up) == with_median]
        worst = max(group, key=shares.get, default=None)
        line += f"  {f'{shares[worst]:.0%} {worst}' if group else UNKNOWN:<14}"
        if with_median:
            line += f"{statistics.median(shares[name] for name in group) if group else 0:>7.0%}"
        cleared.append(f"{sum(runs[name]['cleared'] for name in group)}" if group else UNKNOWN)
    seen = sorted(n for run in runs.values() for n in run["seen"])
    line += f"{sum(run['compactions'] for run in runs.values()):>4}"
    line += f"{statistics.median(seen):>5g}{seen[len(seen) // 10]:>4}"
    line += f"  {' / '.join(cleared):<11}"
    ahead = [runs[name]["billed_input"] / best[name] for name in shares
             if name not in made_up and best and name in best]
    return line + _figure(ahead and max(ahead), ".0%").rjust(6)


def main(sweeping: bool, sets: list) -> str:
    """--sweep, and --set NAME=VALUE (any number): s06's constants for this run."""
    setting = []
    for given in sets:
        name, _, value = given.partition("=")
        setting.append((name, float(value) if "." in value else int(value)))
    return sweep(base=setting) if sweeping else report(setting=setting)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, allow_abbrev=False,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sweep", action="store_true", help="s06 for other constants")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="as if s06 had that constant (any number of them)")
    args = parser.parse_args()
    print(main(args.sweep, args.set))
