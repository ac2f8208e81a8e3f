"""Who may start or change a task another agent holds: the ownership rule of s07's board.

Relied on by s07's TaskManager.check_update(), which calls check() in one line. The rule:
- an agent starts a task only in its own name (it cannot start one for another agent);
- a task another agent has in progress is theirs: no other agent may change it;
- a person may take one over on purpose (force: /task start, /task done), and is told whose
  it was;
- starting (or taking over) a task makes you its owner; setting it back to pending frees it.
Without it, two agents on one board both work on the same task, or one completes (or drops)
the other's task in progress, and neither knows. ("Claim" means only this: taking a task.
Reserving a new task's id is store.reserve().)
"""


def check(task: dict, status, owner, agent: str, force: bool) -> tuple:
    """(the status and owner to set, notes), or ValueError saying whose task it is."""
    holder, tid, notes = task.get("owner"), task["id"], []
    if status == "in_progress" and owner and owner != agent and not force:
        raise ValueError(f"you are {agent}: start #{tid} in your own name (leave owner "
                         "out), or let that agent start it")
    if task["status"] == "in_progress" and holder and holder != agent:
        if not force:
            raise ValueError(f"#{tid} is in progress by {holder}; pick another task, or ask "
                             f"{holder} (a person can take it over with /task start {tid})")
        notes.append(f"took #{tid} over from {holder}")
    change = {"status": status} if status else {}
    if owner is not None:
        change["owner"] = owner or None
    elif status == "pending":
        change["owner"] = None             # back to pending releases it
    elif status == "in_progress" or (status and task["status"] == "in_progress"):
        change["owner"] = agent            # starting (or taking over) claims it
    return change, notes
