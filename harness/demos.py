"""The scripted sessions behind each lesson's --demo: what the stand-in model says, step by step.

Each lesson's main() hands one of these to cli.run_cli, which plays it through the real loop,
tools and files against harness/stand_in_api.py: no key, no network. They are data (a list of
replies, some a function of the request so far), so this module imports no lesson.
Without it a learner needs a key, and money, to see a lesson run once.
"""

import json
import os
import re
import shlex
import sys
from pathlib import Path
from typing import Optional

from harness.errors import SetupError
from harness.stand_in_api import reply, text, tool

S06_THRESHOLD = "9500"   # tokens: low, so s06's layer 2 fires within its demo
S07_MIN_THRESHOLD = 5_000  # below this s07's demo would compact before it has linked its tasks


def s03_demo() -> tuple:
    """A plan, a refused second in_progress, the nag, a finished plan."""
    def todos(*statuses):
        steps = ["Write hello.py", "Run it", "Add a docstring"]
        return tool("todo", {"items": [{"id": str(n), "text": t, "status": s}
                                       for n, (t, s) in enumerate(zip(steps, statuses), 1)]})
    script = [
        reply(text("I'll plan first."), todos("in_progress", "pending", "pending")),
        reply(text("Trying to start two items at once (the todo tool should refuse)."),
              todos("in_progress", "in_progress", "pending")),
        reply(tool("write_file", {"path": "demo/hello.py", "content": "print('hello')\n"})),
        reply(tool("bash", {"command": f"{shlex.quote(sys.executable)} demo/hello.py"})),
        reply(tool("read_file", {"path": "demo/hello.py"})),
        reply(text("The harness reminded me; updating the plan."),
              todos("completed", "completed", "in_progress")),
        reply(tool("edit_file", {"path": "demo/hello.py", "old_text": "print(",
                                 "new_text": '"""Say hello."""\nprint('})),
        reply(todos("completed", "completed", "completed")),
        reply(text("Done: demo/hello.py prints hello and has a docstring.")),
    ]
    return script, "write demo/hello.py, run it, add a docstring, and track your steps", None


def s06_demo() -> tuple:
    """Each layer in turn: placeholders, an automatic compaction, a manual one."""
    if not os.environ.get("COMPACT_THRESHOLD", "").strip():   # an empty value counts as unset
        os.environ["COMPACT_THRESHOLD"] = S06_THRESHOLD
    script = [
        reply(text("I'll generate some bulky output."), tool("bash", {"command": "seq -s ' ' 1 7000"})),
        reply(tool("write_file", {"path": "demo/notes.md",
                                  "content": "# Notes\n" + "- a finding\n" * 30})),
        reply(text("My first result is a placeholder now; its whole text is saved under .transcripts/."),
              tool("read_file", {"path": "demo/notes.md"})),
        reply(tool("bash", {"command": "ls -la demo"})),
        reply(tool("bash", {"command": "seq -s ' ' 20000 23000"})),
        reply(tool("bash", {"command": "seq -s ' ' 30000 33000"})),
        reply(tool("bash", {"command": "wc -l demo/notes.md"})),
        reply(text("A phase is done; compacting on purpose."),
              tool("compact", {"focus": "the notes file"})),
        reply(tool("bash", {"command": "wc -c demo/notes.md"})),
        reply(text("Done. I carried on from the summary after each compaction.")),
    ]
    summary = ("Summary: generated bulky output with bash, wrote demo/notes.md (31 lines), "
               "read it back. Next: check the notes file and finish.")
    return script, "produce some bulky output, take notes in demo/notes.md, and keep working", summary


S07_PLAN = [("Design the data model", "tables and fields"),
            ("Implement the API", "endpoints on the model"),
            ("Write the docs", "how to use the API"), ("Write the API tests", "one per endpoint")]


def s07_demo(threshold: int, tasks) -> tuple:
    """Plan four tasks, be refused, compact, see the board come back, complete and unblock.

    tasks: s07's TaskManager; its agent becomes "demo". A board in a folder is shown with bash.
    """
    tasks.agent = "demo"
    folder: Optional[Path] = getattr(tasks.store, "dir", None)   # None: a postgresql:// board
    if folder is not None and folder.exists() and not folder.is_dir():
        raise SetupError(f"the demo needs a folder {folder}/ here, and a file of that name is in the way")
    if threshold < S07_MIN_THRESHOLD:  # the script reads its task ids from the recent messages
        raise SetupError(f"the demo needs COMPACT_THRESHOLD of at least {S07_MIN_THRESHOLD:,} tokens "
                         f"(it is {threshold:,}); unset it for the demo")
    ids = []

    def link(body):
        ids.extend(int(n) for n in re.findall(r"Created task #(\d+)", json.dumps(body["messages"][-1])))
        if len(ids) != 4:
            raise RuntimeError("the demo's tasks were not created; see the tool results above")
        a, b, c, d = ids
        return reply(text("Now the order: the API and the docs wait for the model; "
                          "the tests wait for the API."),
                     tool("task_update", {"task_id": b, "addBlockedBy": [a]}),
                     tool("task_update", {"task_id": f"#{c}", "addBlockedBy": [f"#{a}"]}),
                     tool("task_update", {"task_id": str(d), "addBlockedBy": [b]}))

    def show(task_id=None):   # the files on disk, or the record where the board is no folder
        if folder is None:
            return tool("task_get", {"task_id": task_id or ids[0]})
        return tool("bash", {"command": f"cat {folder}/task_{task_id}.json" if task_id
                             else f"ls {folder}"})

    script = [
        reply(text("First, what is on the board already?"), tool("task_list", {})),
        reply(text("Planning four tasks."),
              *[tool("task_create", {"subject": s, "description": d}) for s, d in S07_PLAN]),
        link,
        lambda body: reply(text("Trying to start the API before the data model (this must be refused)."),
                           tool("task_update", {"task_id": ids[1], "status": "in_progress"})),
        lambda body: reply(text("Refused, as it should be. Starting the data model; the files are on disk:"),
                           tool("task_update", {"task_id": ids[0], "status": "in_progress"}), show()),
        reply(text("Forcing a compaction: the conversation is replaced by a summary."),
              tool("compact", {"focus": "the task board"})),
        reply(text("The board is on disk, so it came back whole:"), tool("task_list", {})),
        lambda body: reply(text("The data model is done."),
                           tool("task_update", {"task_id": ids[0], "status": "completed"}),
                           show(ids[0])),
        reply(text("Done: the data model is complete and the API and the docs are ready to start. "
                   "Run --demo again: the board continues.")),
    ]
    summary = ("Summary: planned four tasks on the board (data model, then API and docs, tests after the "
               "API) and started the data model. Next: finish the data model.")
    return script, "plan a small project on the task board, with dependencies", summary
