"""The live board: before each REPL prompt, one line for each change other agents made.

Relied on by s07's REPL (commands.Live). The API, all of it:

    watcher = BoardWatcher(TASKS.store, TASKS.agent)   # once the board is chosen
    for line in watcher.changes():                     # before each prompt: [] if none
        print(line)                                    # [board: bob started #3]
    watcher.close()                                    # when the REPL ends

changes(wait=0.0): the changes OTHER agents made since the last call (or since the watcher was
made), oldest first, at most MAX_LINES and then a line counting the rest; wait: seconds to wait
for a first change. It never raises: a board that cannot be read gives one line saying so, and
the next call tries again. Without each piece:
- skipping our own changes: every /task command would be echoed back. On PostgreSQL a
  notification names its session (ours are store.backend_pids); on a folder the watcher wraps
  the store's write and reserve to note what this process writes (close() puts them back).
- LISTEN/NOTIFY on PostgreSQL: polling would read the whole board before every prompt; the
  trigger (postgres.py) sends each change once, after its commit, so a rolled-back change is
  never told.
- decoded(): anyone who can connect may NOTIFY on the board's channel. A payload that is not
  a change is counted and left out, never hiding the news beside it nor ending in a
  traceback; a name is shown as one printable line, so it cannot forge a `[board: ...]` line.
  A well-formed message is shown whoever sent it: /tasks is the truth.
- MAX_LINES: another agent's /task import of 20,000 tasks would print 20,000 lines.
- AGAIN: its connection lost (a restart, an idle timeout), the watcher listened again in
  silence, and what other agents did meanwhile was never told.
- on a folder, a scan compared with the last (recheck=True: a hand edit too): nobody tells.
- the agent's name: a record does not say who changed it. On PostgreSQL the watcher sets
  store.agent, which each transaction passes to the trigger; otherwise the owner is the best
  guess (a start always names its owner), or no name at all.
"""

import json
import time
from typing import Optional

from harness.board.record import FINISHED, STATUSES, is_id
from harness.excerpt import cut, one_line
from harness.terminal import printable

POLL_EVERY = 0.05   # seconds between scans of a folder while changes(wait) waits
MAX_LINES = 20      # lines of news before one prompt; the rest are counted
NAME_CHARS = 40     # of an agent's or an owner's name, as shown
OPS = ("INSERT", "UPDATE", "DELETE", "TRUNCATE")


def decoded(payload: str) -> Optional[dict]:
    """A notification's payload as a change, or None unless it is what our trigger sends: a
    JSON object with a known op, an id (but for TRUNCATE), and fields of the right types."""
    try:
        change = json.loads(payload)
    except ValueError:
        return None
    if not isinstance(change, dict) or change.get("op") not in OPS:
        return None
    if change["op"] != "TRUNCATE" and not is_id(change.get("id")):
        return None
    for field in ("status", "was_status"):
        if change.get(field) is not None and change[field] not in STATUSES:
            return None
    for field in ("agent", "owner", "was_owner"):
        if change.get(field) is not None and not isinstance(change[field], str):
            return None
    for field in ("blocked_by", "was_blocked_by"):
        value = change.get(field)
        if value is not None and not (isinstance(value, list) and all(map(is_id, value))):
            return None
    return change


def shown_name(name: str) -> str:
    """A name as one printable line of at most NAME_CHARS: it cannot start a line of its own."""
    return cut(printable(one_line(name)), NAME_CHARS)


def describe(change: dict) -> list:
    """The lines for one change: {op, id, agent, status, owner, blocked_by, was_...}, None
    where absent."""
    tid, op = change.get("id"), change["op"]
    who = change.get("agent") or change.get("owner") or change.get("was_owner")
    who = shown_name(who) if who else None
    if op == "TRUNCATE":
        return ["[board: every task was removed from the board (TRUNCATE, by hand?)]"]
    if op == "INSERT":
        return [f"[board: #{tid} added" + (f" by {who}]" if who else "]")]
    if op == "DELETE":
        return [f"[board: #{tid} was removed from the board]"]
    status, was, lines = change.get("status"), change.get("was_status"), []
    if status != was:
        verbs = {"in_progress": "started", "completed": "completed", "deleted": "deleted"}
        verb = verbs.get(status)
        verb = verb or ("reopened" if was in FINISHED else "released")
        lines.append(f"[board: {who} {verb} #{tid}]" if who else f"[board: #{tid} was {verb}]")
    elif change.get("owner") != change.get("was_owner") and change.get("owner"):
        lines.append(f"[board: #{tid} is now held by {shown_name(change['owner'])}]")
    blocked, was_blocked = change.get("blocked_by") or [], change.get("was_blocked_by") or []
    added = [b for b in blocked if b not in was_blocked]
    if added:
        lines.append(f"[board: #{tid} now waits for {', '.join(f'#{b}' for b in added)}]")
    elif was_blocked and not blocked and status == "pending" and status == was:
        lines.append(f"[board: #{tid} is ready to start]")
    return lines


def _fingerprint(task: dict) -> tuple:
    return task["status"], task.get("owner"), tuple(task["blockedBy"])


# Said when the live board listens again after a lost connection: what happened meanwhile
# reached no listener.
AGAIN = ("[board: listening to the other agents again; what they did while it could not is not "
         "shown: /tasks shows the board]")


class BoardWatcher:
    """Other agents' changes: LISTEN/NOTIFY on PostgreSQL, scans compared on a folder."""

    def __init__(self, store, me: str):
        self.store, self.me = store, me
        self._listener, self._broken = None, False
        if hasattr(store, "listen"):              # the PostgreSQL board
            if getattr(store, "agent", None) is None:
                store.agent = me                  # so that the others' watchers can name us
            self._listener = store.listen()
        else:
            self._mine = {}                       # id -> what we last wrote
            self._originals = {}                  # the store's own write and reserve
            self._note_own_writes()
            self._seen = self._snapshot()

    def changes(self, wait: float = 0.0) -> list:
        try:
            if self._listener is not None or self._broken:
                lines = self._heard(wait)
            else:
                lines = self._compared(wait)
        except (ValueError, OSError) as exc:
            return [f"[board: the live board cannot read {self.store.name}: {one_line(exc)}]"]
        if len(lines) > MAX_LINES:
            more = len(lines) - MAX_LINES + 1
            lines = lines[:MAX_LINES - 1] + [f"[board: ... and {more:,} more changes: /tasks "
                                             "shows the board]"]
        return lines

    def close(self) -> None:
        if self._listener is not None:
            self._listener.close()
        for method, original in getattr(self, "_originals", {}).items():
            setattr(self.store, method, original)

    # ------------------------------------------------------------ PostgreSQL: notifications

    def _heard(self, wait: float) -> list:
        import psycopg
        lines = []
        try:
            if self._listener is None:            # lost last time: listen again
                self._listener, self._broken = self.store.listen(), False
                lines.append(AGAIN)
            heard = list(self._listener.notifies(timeout=wait, stop_after=1)) if wait else []
            heard += list(self._listener.notifies(timeout=0))
        except psycopg.Error as exc:
            self._listener, self._broken = None, True
            raise ValueError(f"the connection was lost ({one_line(exc)})") from None
        bad = 0
        for note in heard:
            if note.pid in self.store.backend_pids:   # our own sessions' news is no news
                continue
            change = decoded(note.payload)
            if change is None:
                bad += 1                              # counted, never shown: it is not ours
            else:
                lines += describe(change)
        if bad:
            what = "message" if bad == 1 else "messages"
            lines.append(f"[board: {bad} {what} on the board's channel ignored: not sent by "
                         "a board]")
        return lines

    # ------------------------------------------------------------ the folder: compare scans

    def _note_own_writes(self) -> None:
        for method in ("write", "reserve"):
            original = self._originals[method] = getattr(self.store, method)

            def noting(task, _original=original):
                result = _original(task)
                if result is not False:           # a reserve that lost wrote nothing
                    self._mine[task["id"]] = _fingerprint(task)
                return result
            setattr(self.store, method, noting)

    def _snapshot(self) -> dict:
        return self.store.scan(recheck=True)[0]

    def _compared(self, wait: float) -> list:
        deadline = time.monotonic() + wait
        while True:
            now = self._snapshot()
            lines = []
            for tid, task in now.items():
                lines += self._news(self._seen.get(tid), task)
            self._seen = now
            if lines or time.monotonic() >= deadline:
                return lines
            time.sleep(POLL_EVERY)

    def _news(self, before: Optional[dict], task: dict) -> list:
        if before is not None and _fingerprint(before) == _fingerprint(task):
            return []
        if self._mine.get(task["id"]) == _fingerprint(task):
            return []                             # this is what we wrote ourselves
        if before is None:   # a record does not say who added it; what else happened, it does
            before = {"status": "pending", "owner": None, "blockedBy": task["blockedBy"]}
            return describe({"op": "INSERT", "id": task["id"]}) + self._news(before, task)
        return describe({"op": "UPDATE", "id": task["id"], "status": task["status"],
                         "owner": task.get("owner"), "blocked_by": task["blockedBy"],
                         "was_status": before["status"], "was_owner": before.get("owner"),
                         "was_blocked_by": before["blockedBy"]})
