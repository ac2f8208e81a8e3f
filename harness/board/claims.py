"""Who owns a task: the claims of several agents (and people) that share one board.

s07's TaskManager calls check() in every task_update, before anything is written. Starting or
completing a task claims it; another agent's task in progress, or completed, is theirs, unless
a person takes it over or reopens it (/task start, /task done: force); back to pending frees
it. A lone agent never meets these rules. Without each rule:
- theirs: a model that started a task another agent had just completed reopened it without a
  word, and that agent's work, and its record of whom it freed, were lost.
- in your own name: a model could start, complete or delete a task as "bob", or name bob the
  owner of the task it had started, and the board would say bob did it.
- the owner moves on: a task deleted while in progress would still name the agent that
  started it, not the one that deleted it.
- done again: a person's /task done on a task another agent completed said "reopened" (it was
  not) and put the work in that person's name.
"""

from harness.board import text

CLAIMING = ("in_progress", "completed")      # the statuses that make a task someone's


def check(task: dict, status, owner, force: bool, agent: str) -> tuple:
    """({the status and owner to set}, notes), or ValueError. agent: who makes the change."""
    holder, tid, notes = task.get("owner"), task["id"], []
    if task["status"] in CLAIMING and holder and holder != agent:
        if not force:
            raise ValueError(text.theirs(task, holder))
        # Done, and done again: nothing to take over; the work stays in its doer's name.
        if status == task["status"] == "completed" and owner is None:
            return {}, [f"#{tid} was already completed by {text.one_line(holder)}; it stays in "
                        "their name"]
        notes.append(text.taken_over(task, holder))
    # Only a pending task may be put in another agent's name: one in progress, done or
    # deleted is in the name of whoever did it. (Its holder may let it go: owner ''.)
    after = status or task["status"]
    if owner and owner != agent and after != "pending" and not force:
        if status == "in_progress":
            raise ValueError(f"you are {agent}: start #{tid} in your own name (leave owner "
                             "out), or let that agent start it")
        raise ValueError(f"#{tid} stays in the name of whoever works on it; to hand it on, set "
                         "it back to pending in the same call (that frees it)")
    change = {"status": status} if status else {}
    if owner is not None:
        change["owner"] = owner or None         # '' clears it
    elif status == "pending":
        change["owner"] = None
    # Starting or completing it, or moving it on from in progress (deleting it): whoever does
    # it is its owner.
    elif status in CLAIMING or (status and task["status"] == "in_progress"):
        change["owner"] = agent
    return change, notes
