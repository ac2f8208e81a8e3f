"""The scripted sessions behind each lesson's --demo: what the stand-in model says, step by step.

Each lesson's main() hands its demo's arguments to cli.run_cli, which runs inside demo/ and has
played() start the stand-in (harness/stand_in/) with the lesson's script: the real loop, tools
and files run, with no key and no network. A script is data, a list of replies, some a
function of the request so far; this module imports no lesson. Without each piece:
- the demos: a learner needs a key, and money, to see a lesson run once.
- running in demo/: the s07 demo would add its plan to your own ./.tasks on every run.
- the reacting steps: a script would narrate "my first result is a placeholder now" whether or
  not it is, or plan the same four tasks again on a second run.
- saying what it sets: a learner wonders why a compaction came at 10,000 tokens when the
  default is 50,000.
- s06_api_demo: `--demo --api-context clear|compact` would play outputs too small for the
  API's trigger (30,000 or 50,000 tokens), and the learner would see the API do nothing.
- _s07_story: a second s07 run printed the first run's prompt to plan, then did not plan;
  it says first which task it picks up (its own an earlier run was cut off in, else the next
  ready one), and why it plans nothing. LEFT_IN_PROGRESS: after a run cut off mid-task, every
  later run stopped at "a task is still in progress".
"""

import contextlib
import json
import os
import re
import shlex
import shutil
import sys

from harness import compaction, stand_in, terminal
from harness.session import blocks
from harness.stand_in.script import reply, text, tool

S07_THRESHOLD = 50_000    # s07's demo compacts on purpose (its compact call), never by size
PLAN = [("Design the data model", "tables and fields"),
        ("Implement the API", "endpoints on the model"),
        ("Write the docs", "how to use the API"),
        ("Write the API tests", "one per endpoint")]


@contextlib.contextmanager
def played(lesson_name: str, demo_args: tuple, run):
    """Yields (the stand-in playing the lesson's script, e.g. s03_demo's, the demo's prompt)."""
    demo = globals()[lesson_name.split("_")[0] + "_demo"]
    script, prompt, summary = demo(*demo_args, run)
    with stand_in.StandInAPI(script, summary=summary) as api:
        yield api, prompt


def s03_demo(run) -> tuple:
    """A plan, a refused second in_progress, the nag, a finished plan."""
    def todos(*statuses):
        steps = ["Write hello.py", "Run it", "Add a docstring"]
        items = [{"id": str(n), "text": step, "status": status}
                 for n, (step, status) in enumerate(zip(steps, statuses, strict=True), 1)]
        return tool("todo", {"items": items})
    script = [
        reply(text("I'll plan first."), todos("in_progress", "pending", "pending")),
        reply(text("Trying to start two items at once (the todo tool should refuse)."),
              todos("in_progress", "in_progress", "pending")),
        reply(tool("write_file", {"path": "hello.py", "content": "print('hello')\n"})),
        reply(tool("bash", {"command": f"{_python()} hello.py"})),
        reply(tool("read_file", {"path": "hello.py"})),
        reply(text("The harness reminded me; updating the plan."),
              todos("completed", "completed", "in_progress")),
        reply(tool("edit_file", {"path": "hello.py", "old_text": "print(",
                                 "new_text": '"""Say hello."""\nprint('})),
        reply(todos("completed", "completed", "completed")),
        reply(text("Done: hello.py prints hello and has a docstring.")),
    ]
    return script, "write hello.py, run it, add a docstring, and track your steps", None


def _python() -> str:
    """The command that runs this Python, as a learner types it: python, when that is it."""
    found = shutil.which("python")
    if found and os.path.realpath(found) == os.path.realpath(sys.executable):
        return "python"
    return shlex.quote(sys.executable)


def s06_demo(context, run) -> tuple:
    """Each layer in turn: placeholders, an automatic compaction, a manual one (with
    --api-context, s06_api_demo). context: s06's ContextSize, whose low threshold it says."""
    if run.api_context is not None:
        return s06_api_demo(run)
    why = "s06's DEMO_THRESHOLD: low, so that layer 2 compacts within ten calls; set "
    why += "COMPACT_THRESHOLD to change it"
    if os.environ.get("COMPACT_THRESHOLD", "").strip():
        why = "your COMPACT_THRESHOLD; the demo's own is s06's DEMO_THRESHOLD"
    # Said: a learner wonders why a compaction came early.
    terminal.show_note(f"[demo] COMPACT_THRESHOLD is {context.threshold:,} tokens for this demo "
                       f"({why})")

    def first_result(body) -> str:
        for message in body["messages"]:
            for block in message["content"] if isinstance(message["content"], list) else []:
                if block.get("type") == "tool_result":
                    return str(block.get("content"))
        return ""

    def summarised(body) -> bool:
        return compaction.is_summary_message(body["messages"][0])

    def narrate(body):
        seen = first_result(body)
        if summarised(body):
            # A low COMPACT_THRESHOLD: layer 2 summarised before layer 1 cleared anything.
            said = "Layer 2 has summarised my first result: the summary is in its place."
        elif seen.startswith(blocks.PLACEHOLDER):
            # Quoted from the request: the placeholder is what the model really saw.
            said = ("Layer 1 has cleared my first result. I see in its place (I work in "
                    f"demo/):\n{seen}")
        else:
            said = "My first result is still whole: layer 1 has not needed to clear it."
        return reply(text(said), tool("bash", {"command": "seq -s ' ' 20000 23000"}))

    def went_on(body):
        if summarised(body):
            said = "I go on from the summary layer 2 wrote."
        else:
            said = "Layer 2 has not compacted yet: the context is under COMPACT_THRESHOLD."
        return reply(text(said), tool("bash", {"command": "wc -l notes.md"}))

    script = [
        reply(text("I'll generate some bulky output."),
              tool("bash", {"command": "seq -s ' ' 1 7000"})),
        reply(tool("write_file", {"path": "notes.md",
                                  "content": "# Notes\n" + "- a finding\n" * 30})),
        reply(tool("read_file", {"path": "notes.md"})),
        reply(tool("bash", {"command": "ls -l notes.md"})),
        narrate,
        reply(tool("bash", {"command": "seq -s ' ' 30000 33000"})),
        went_on,
        reply(text("A phase is done; compacting on purpose."),
              tool("compact", {"focus": "the notes file"})),
        reply(tool("bash", {"command": "wc -c notes.md"})),
        reply(text("Done. I carried on from the summary after each compaction.")),
    ]
    summary = ("Summary: generated bulky output with bash, wrote notes.md (31 lines), read it "
               "back. Next: check the notes file and finish.")
    return script, "produce some bulky output, take notes in notes.md, and keep working", summary


def s06_api_demo(run) -> tuple:
    """--api-context: outputs that pass the API's trigger (s06's own: the API takes none under
    50,000 for a compaction), then the server clears old results, or summarises."""
    setting = run.api_context
    terminal.show_note(f"[demo] --api-context {setting.mode}: the stand-in plays the API's own "
                       f"context management, past {setting.trigger:,} tokens (s06's setting)")

    def bulky(first, said=None):
        # About 45,000 characters, under OUTPUT_CAP: some 11,000 tokens a result.
        command = f"seq -s ' ' {first} {first + 8000}"
        return reply(*([text(said)] if said else []), tool("bash", {"command": command}))

    def after(body):
        if any(b.get("type") == "compaction" for m in body["messages"]
               for b in m["content"] if isinstance(m["content"], list)):
            said = ("I went on from the summary the API wrote: its compaction block opens what "
                    "I see, and the harness sends it back with every request.")
        else:
            said = ("The API showed my oldest results as placeholders, on the server; the "
                    "history (and the session log) keeps them whole.")
        return reply(text(f"Done. {said} /cost counts what the API billed."))

    script = [bulky(10_000, "I'll generate some bulky output.")]
    script += [bulky(first) for first in (20_000, 30_000, 40_000, 50_000)]
    script += [reply(text("One more step."), tool("bash", {"command": "echo the work goes on"})),
               after]
    summary = ("Summary: generated five bulky outputs with bash (seq); nothing else was "
               "asked. Next: finish.")
    return script, "produce some bulky output, and keep working", summary


# A task of the demo's in progress on the board (a run cut off midway): its id and subject.
LEFT_IN_PROGRESS = r"^\[>\] #(\d+): (.+) \(owner: demo\)$"


def s07_demo(tasks, context, run) -> tuple:
    """Plan four tasks (or, on a later run, pick up the next ready one), be refused, compact,
    see the board come back, complete a task and see what waited for it freed, on disk.
    tasks: s07's TaskManager, put on the demo's own board (demo/.tasks) as agent "demo"."""
    tasks.use(".tasks")                     # relative: cli runs the demo inside demo/
    tasks.agent = "demo"
    listing = tasks.list_all()
    continuing = _s07_story(listing)
    # Its script compacts on purpose (a compact call), and is written for no other: a
    # threshold low enough to compact by size would break its story.
    context.threshold = S07_THRESHOLD
    run.recorder.threshold(S07_THRESHOLD)
    mine = os.environ.get("COMPACT_THRESHOLD", "").strip()
    # A finished board: this run compacts nothing, so nothing is said of compacting.
    compacts = "none (all done)" not in listing
    if mine and compacts:
        terminal.show_note(f"[demo] your COMPACT_THRESHOLD={mine} is ignored, and any note on "
                           "it above: this demo compacts on purpose, with a compact call (s06's "
                           "--demo takes it)")
    if run.api_context is not None and compacts:
        terminal.show_note(f"[demo] --api-context {run.api_context.mode}: every request asks "
                           f"the API to act past {run.api_context.trigger:,} tokens, which this "
                           "demo never reaches; its compaction is the model's compact call "
                           "(s06's --demo shows the API's)")
    summary = ("Summary: the plan is on the task board (data model, then the API and the "
               "docs; the tests after the API). Next: finish the task in progress.")
    if continuing:
        prompt = "continue the plan on the task board: take the next ready task"
    else:
        prompt = "plan a small project on the task board, with dependencies"
    return _script(_s07_steps(continuing)), prompt, summary


def _s07_story(listing: str) -> bool:
    """Say, before anything else, what this run does with the board it finds; True when it
    continues an earlier run's plan."""
    if _plan_ids(listing) is None:
        found = "empty" if listing.startswith("No tasks yet") else "without the demo's plan"
        terminal.show_note(f"[demo] its board is demo/.tasks, {found}: it plans a small "
                           "project there (any --board or TASK_BOARD is left alone)")
        return False
    left = re.search(LEFT_IN_PROGRESS, listing, re.M)
    ready = re.search(r"Ready to start: (#\d+ [^,\n]+)", listing)
    if left:
        what = (f"it picks up #{left[1]} {left[2]}, which an earlier run left in progress, and "
                "plans nothing (the plan is on disk, not in a conversation)")
    elif ready:
        what = (f"it picks up {ready[1]}, the next ready task, and plans nothing (the plan is "
                "on disk, not in a conversation)")
    elif "none (all done)" in listing:
        what = "every task of it is done (delete demo/ to start over)"
    else:
        what = "nothing on it can start: a task is still in progress"
    terminal.show_note(f"[demo] it continues the plan an earlier --demo left on demo/.tasks: "
                       f"{what}")
    return True


def _s07_steps(continuing: bool):
    """The s07 demo as a generator: it yields each reply and is sent the next request."""
    if continuing:
        said = "The plan is on the board already: what can start now?"
    else:
        said = "First, what is on the board already?"
    body = yield reply(text(said), tool("task_list", {}))
    if _plan_ids(_last_result(body)) is None:
        body = yield reply(text("The board is empty: planning four tasks."),
                           *[tool("task_create", {"subject": s, "description": d})
                             for s, d in PLAN])
        made = re.findall(r"Created task #(\d+)", json.dumps(body["messages"][-1]))
        a, b, c, d = [int(n) for n in made]
        yield reply(text("Now the order: the API and the docs wait for the model; the tests,\n"
                         "for the API. (An id as models send it: 2, \"#3\" and \"4\" all work.)"),
                    tool("task_update", {"task_id": b, "addBlockedBy": [a]}),
                    tool("task_update", {"task_id": f"#{c}", "addBlockedBy": [f"#{a}"]}),
                    tool("task_update", {"task_id": str(d), "addBlockedBy": [b]}))
        body = yield reply(text("What can start now?"), tool("task_list", {}))
    listing = _last_result(body)
    # Its own task an earlier run was cut off in (Ctrl-C, a closed pipe) comes first.
    ready = re.search(LEFT_IN_PROGRESS, listing, re.M)
    if ready is None:
        ready = re.search(r"Ready to start: #(\d+)", listing)
    if ready is None and "none (all done)" in listing:
        yield reply(text("Everything on the board is done. Delete demo/ to start over."))
        return
    if ready is None:
        theirs = re.search(r"^\[>\] #(\d+)", listing, re.M)
        number = theirs[1] if theirs else "N"
        yield reply(text(f"Nothing can start: #{number} is in progress, not in the demo's "
                         "name.\nTo finish it: python s07_task_system.py --board demo/.tasks, "
                         f"then /task done {number}"))
        return
    ready = int(ready[1])
    waiting = re.search(rf"#(\d+): .* blocked by (#\d+, )*#{ready}\b", listing)
    blocked = re.search(r"#(\d+): .* blocked by", listing)
    if blocked:
        yield reply(text(f"Trying to start #{blocked[1]} before its blockers are done (this "
                         "must be refused)."),
                    tool("task_update", {"task_id": int(blocked[1]), "status": "in_progress"}))
    start = [tool("task_update", {"task_id": ready, "status": "in_progress"})]
    said = f"Starting #{ready}: it is mine now."
    if waiting:
        said += f" #{waiting[1]} waits for it, on disk:"
        start.append(tool("bash", {"command": f"cat .tasks/task_{waiting[1]}.json"}))
    yield reply(text(said), *start)
    body = yield reply(text("Forcing a compaction: the conversation is replaced by a summary."),
                       tool("compact", {"focus": "the task board"}))
    # What the model is given now: the summary, and the board read fresh from disk.
    board = re.search(r"<task-board>\n(.*?)\n</task-board>", body["messages"][0]["content"], re.S)
    quoted = board[1] if board else "(no board came back)"
    done = [tool("task_update", {"task_id": ready, "status": "completed"})]
    if waiting:
        done.append(tool("bash", {"command": f"cat .tasks/task_{waiting[1]}.json"}))
    yield reply(text(f"Compacted: my first message is now the summary, and the board came "
                     f"back whole:\n{quoted}"), *done)
    left = len(re.findall(r"^\[[ >]\] #", listing, re.M)) - 1
    if left:
        yield reply(text(f"#{ready} is done. Run --demo again: it picks up the next ready task."))
    else:
        yield reply(text(f"#{ready} is done, and so is the whole plan."))


def _script(steps) -> list:
    """A stand-in script from a generator of replies: each step sends it the request."""
    started = []

    def step(body):
        if not started:
            started.append(True)
            return next(steps)
        return steps.send(body)
    return [step] * 20


def _last_result(body) -> str:
    """The text of the last tool result in a request."""
    for block in reversed(body["messages"][-1]["content"]):
        if isinstance(block, dict) and block.get("type") == "tool_result":
            return str(block.get("content"))
    return ""


def _plan_ids(listing: str):
    """The ids of the demo's four tasks on the board, or None if they are not all there."""
    found = {}
    for number, subject in re.findall(r"#(\d+): (.+?)(?: \(owner| blocked by|$)", listing,
                                      re.M):
        found.setdefault(subject, int(number))
    ids = [found.get(subject) for subject, _ in PLAN]
    return None if None in ids else ids
