"""How s07's board reads as text: one line per task, names, and a board cut to a size.

Relied on by s07 (list_all, the tool results, the board after a compaction) and by the REPL's
/task commands. Without each piece:
- render_line / names: a newline in a subject forges a line of the board ("[x] #9 done").
- fit: a board of 10,000 tasks, or one task with a huge title, makes the message that follows
  a compaction bigger than the context it replaced (a 440 kB subject once grew a compaction
  from 123,495 to 220,085 tokens); cutting it blindly would drop "Ready to start".
"""

from harness.board.record import STATUSES, one_line


def names(tasks: list) -> str:
    return ", ".join(f"#{t['id']} {one_line(t['subject'])}" for t in tasks)


def render_line(task: dict, waiting: list) -> str:
    """`[ ] #4: Write the API tests (owner: bob) blocked by #2`; waiting: its unfinished blockers."""
    line = f"{STATUSES[task['status']]} #{task['id']}: {one_line(task['subject'])}"
    if task.get("owner"):
        line += f" (owner: {one_line(task['owner'])})"
    return line + (f" blocked by {', '.join(f'#{b}' for b in waiting)}" if waiting else "")


def fit(text: str, limit: int) -> str:
    """text within limit characters, its first lines and its last (what can start now) kept."""
    *lines, last = text.splitlines()
    kept, room = [], limit - min(len(last), limit // 4) - 60
    for line in lines:
        room -= len(line) + 1
        if room < 0:
            kept.append(f"... (cut to {limit:,} characters: task_list shows the whole board)")
            break
        kept.append(line)
    return "\n".join(kept + [last[:limit // 4]])


def none_readable(n: int) -> str:
    """For a board whose every record is unreadable: "No tasks yet" would make a model plan the
    work again."""
    return (f"No readable tasks: {n} file{'s' * (n != 1)} above could not be used; fix or remove "
            f"{'them' if n != 1 else 'it'}, then list again")


def reopen_notes(task: dict, unblocked: list) -> list:
    """Reopening a finished task does not re-block what it freed: say so, and how to."""
    if not unblocked:
        return []
    freed = ", ".join(f"#{i}" for i in unblocked)
    return [f"Reopened #{task['id']}: {freed} stopped waiting for it when it finished and do not "
            f"wait again; to make one wait, task_update it with addBlockedBy [{task['id']}]"]
