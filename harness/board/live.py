"""The live board: before each prompt, one line for each change other agents made to the board.

Relied on by s07's REPL. The API, all of it:

    watcher = BoardWatcher(TASKS.store, TASKS.agent)   # once, after the board is chosen
    for line in watcher.changes():                     # before each prompt: [] when nothing changed
        print(line)                                    # [board: bob started #3]
    watcher.close()                                    # when the REPL ends

changes(wait=0.0) returns the changes since the last call (or since the watcher was made), made
by OTHER agents, oldest first, as lines like
    [board: #5 added by bob]   [board: bob started #3]   [board: carol completed #2]
    [board: bob deleted #4]    [board: bob reopened #2]   [board: #6 now waits for #5]
    [board: #4 is ready to start]
wait is how long to wait for a first change (seconds; 0 reports only what has arrived). It never
raises: a board that cannot be read gives one line saying so, and the next call tries again.
Without each piece:
- skipping our own changes: every /task command would be echoed back before the next prompt.
  On PostgreSQL a notification carries the session that sent it (our sessions are the store's
  backend_pids). The folder has no such thing, so the watcher notes what this process writes
  (it wraps the store's write and claim; close() puts them back).
- LISTEN/NOTIFY on PostgreSQL: polling a shared server before every prompt costs a full read of
  the board; the trigger (board_postgres.py) sends each change once, after its commit, so a
  rolled-back change is never announced.
- a scan compared with the last one, on the folder: there is no one to tell us; a scan with
  validate=True also sees a hand edit.
- the agent's name: a task record does not say who changed it. On PostgreSQL the watcher sets
  store.agent, which each transaction passes to the trigger; elsewhere, and for writers that did
  not set it, the owner is the best guess (a start always names its owner), or no name at all.
"""

import json
import time
from typing import Optional

from harness.board.record import FINISHED

POLL_EVERY = 0.05   # seconds between scans of a folder while changes(wait) waits


def describe(change: dict) -> list:
    """The lines for one change: {op, id, agent, status, owner, blocked_by, was_...} (None when absent)."""
    tid, op = change["id"], change["op"]
    who = change.get("agent") or change.get("owner") or change.get("was_owner")
    if op == "INSERT":
        return [f"[board: #{tid} added" + (f" by {who}]" if who else "]")]
    if op == "DELETE":
        return [f"[board: #{tid} was removed from the board]"]
    status, was, lines = change.get("status"), change.get("was_status"), []
    if status != was:
        verb = {"in_progress": "started", "completed": "completed", "deleted": "deleted"}.get(status)
        verb = verb or ("reopened" if was in FINISHED else "released")
        lines.append(f"[board: {who} {verb} #{tid}]" if who else f"[board: #{tid} was {verb}]")
    elif change.get("owner") != change.get("was_owner") and change.get("owner"):
        lines.append(f"[board: #{tid} is now held by {change['owner']}]")
    blocked, was_blocked = change.get("blocked_by") or [], change.get("was_blocked_by") or []
    added = [b for b in blocked if b not in was_blocked]
    if added:
        lines.append(f"[board: #{tid} now waits for {', '.join(f'#{b}' for b in added)}]")
    elif was_blocked and not blocked and status == "pending" and status == was:
        lines.append(f"[board: #{tid} is ready to start]")
    return lines


def _fingerprint(task: dict) -> tuple:
    return task["status"], task.get("owner"), tuple(task["blockedBy"])


class BoardWatcher:
    """Changes other agents made since the last call: LISTEN/NOTIFY on PostgreSQL, scans on a folder."""

    def __init__(self, store, me: str):
        self.store, self.me = store, me
        self._listener, self._broken = None, False
        if hasattr(store, "listen"):              # the PostgreSQL board
            if getattr(store, "agent", None) is None:
                store.agent = me                  # so that the others' watchers can name us
            self._listener = store.listen()
        else:
            self._mine, self._originals = {}, {}  # id -> what we last wrote; the store's own methods
            self._note_own_writes()
            self._seen = self._snapshot()

    def changes(self, wait: float = 0.0) -> list:
        try:
            return self._heard(wait) if self._listener is not None or self._broken else self._compared(wait)
        except (ValueError, OSError) as exc:
            return [f"[board: the live board cannot read {self.store.name}: {exc}]"]

    def close(self) -> None:
        if self._listener is not None:
            self._listener.close()
        for method, original in getattr(self, "_originals", {}).items():
            setattr(self.store, method, original)

    # ------------------------------------------------------------ PostgreSQL: notifications

    def _heard(self, wait: float) -> list:
        import psycopg
        try:
            if self._listener is None:            # lost last time: listen again
                self._listener, self._broken = self.store.listen(), False
            heard = list(self._listener.notifies(timeout=wait, stop_after=1)) if wait else []
            heard += list(self._listener.notifies(timeout=0))
        except psycopg.Error as exc:
            self._listener, self._broken = None, True
            raise ValueError(f"the connection was lost ({str(exc).strip().splitlines()[0]})") from None
        lines = []
        for note in heard:
            if note.pid not in self.store.backend_pids:   # our own sessions' news is no news
                lines += describe(json.loads(note.payload))
        return lines

    # ------------------------------------------------------------ the folder: compare scans

    def _note_own_writes(self) -> None:
        for method in ("write", "claim"):
            original = self._originals[method] = getattr(self.store, method)

            def noting(task, _original=original):
                result = _original(task)
                if result is not False:           # a claim that lost wrote nothing
                    self._mine[task["id"]] = _fingerprint(task)
                return result
            setattr(self.store, method, noting)

    def _snapshot(self) -> dict:
        return {tid: t for tid, t in self.store.scan(validate=True)[0].items()}

    def _compared(self, wait: float) -> list:
        deadline = time.monotonic() + wait
        while True:
            now = self._snapshot()
            lines = [line for tid, task in now.items() for line in self._news(self._seen.get(tid), task)]
            self._seen = now
            if lines or time.monotonic() >= deadline:
                return lines
            time.sleep(POLL_EVERY)

    def _news(self, before: Optional[dict], task: dict) -> list:
        if before is not None and _fingerprint(before) == _fingerprint(task):
            return []
        if self._mine.get(task["id"]) == _fingerprint(task):
            return []                             # this is what we wrote ourselves
        if before is None:   # a record does not say who added it; what else happened to it since, it does
            before = {"status": "pending", "owner": None, "blockedBy": task["blockedBy"]}
            return describe({"op": "INSERT", "id": task["id"]}) + self._news(before, task)
        return describe({"op": "UPDATE", "id": task["id"], "status": task["status"],
                         "owner": task.get("owner"), "blocked_by": task["blockedBy"],
                         "was_status": before["status"], "was_owner": before.get("owner"),
                         "was_blocked_by": before["blockedBy"]})
