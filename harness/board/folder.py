"""The file board: s07's tasks as one JSON file each in a folder, safe to share on one machine.

Relied on by s07 (TaskManager reaches it through the TaskStore interface in record.py), by
live.py and checklist.py. Without each piece:
- the lock (.tasks/.lock) around every read-modify-write: two agents completing blockers at
  once each rewrite the same dependent, and one clear is lost. Opened only as a regular file
  (writer.open_shared): a link there was followed, and creating a task wrote the board's
  stamp into an SSH authorized_keys; a FIFO there ended the call in a traceback.
- atomic writes (writer.replace_in: a temp file under a random name, then os.replace, in the
  folder whose lock we hold): a kill -9 mid-write leaves half a JSON file, and that task is
  gone; a link planted at the old guessable temp name (.tmp_<id>_<pid>_<thread>) was
  written through.
- the exclusive reservation of a new id (writer.create_in: os.link refuses a taken name, and
  O_EXCL does where the file system has no hard links): 8 concurrent creators hand out the
  same id and overwrite each other.
- undoing the reservations of a locked() that fails (Ctrl-C included): a /task import that
  stops at item 3 leaves items 1 and 2, and importing the file again makes them twice.
- the high-water mark (the largest id ever given, kept in .lock after the stamp, and written
  with it in one pwrite under the lock): without it, deleting the highest task file by hand
  gives its id to the next task, and a task that waited for the deleted one now waits for an
  unrelated new one. In .lock rather than a file of its own: a file written beside each new
  task (a temp file, then a rename) doubled the cost of a create; .lock is open and written
  after every change anyway. Only a holder of the lock reads or writes .lock, and a process
  killed mid-pwrite leaves the old bytes or the new.
- validation: a corrupt or hand-broken file takes the board down, or is rewritten and lost.
- regular files only, never through a link, read with a cap: a FIFO named task_2.json hangs
  /tasks, a symlink to /dev/zero reads gigabytes, and a link to another board's task showed
  that task as this board's.
- the cache of parsed files and of the ids: a board of 10,000 tasks takes a second to list,
  and creating thousands of tasks lists the folder once per task (quadratic).
fcntl is POSIX: like the bash tool, this harness expects Linux or macOS. A folder shared over a
network file system is not safe (its locks are unreliable): use a postgresql:// board there.
"""

import fcntl
import json
import os
import re
import secrets
import threading
from contextlib import contextmanager
from pathlib import Path

from harness import writer
from harness.errors import reason
from harness.files import read_bytes
from harness.board.record import MAX_ID, now, task_problem

TASK_FILE = re.compile(r"task_([1-9][0-9]*)\.json", re.ASCII)   # the only names that are tasks
TASK_FILE_MAX = 1_000_000   # bytes: a task is a title and some details; a bigger file is not one
STAMP_BYTES = 32            # .lock: the generation stamp (a random token per change) ...
MARK_BYTES = 16             # ... then the high-water mark, the largest id ever given, in digits
LOCK_MODE = 0o644           # .lock, less the umask: every agent opens it for writing


class TaskFiles:
    """The folder of task files: a TaskStore (record.py) for processes on one machine."""

    def __init__(self, folder):
        self.dir = Path(folder)
        self.name = f"{self.dir}/"
        self.agent = None               # who writes: unused here (a file does not say who wrote it)
        self._mutex = threading.Lock()  # the file lock is per process; this orders our own threads
        self._lock_fd = None            # open while we hold the lock
        self._folder_fd = None          # the folder holding that .lock: every write goes in it
        self._cache = {}                # file name -> ((size, mtime_ns, inode), task)
        self._tasks = {}                # id -> task, in id order: as scan() returns them
        self._stamp = None              # the board's generation when our cache was last complete
        self._known = None              # under the lock: the ids and the mark, as of a generation
        self._made = []                 # the files reserve() made under the lock we hold
        self.board = None               # which board we last locked: (device, inode) of its .lock
        self._wrote = False
        self._swept = None

    # ------------------------------------------------------------ the lock and the generation stamp

    @contextmanager
    def locked(self):
        """Hold the board's lock. Not re-entrant, by contract: only TaskManager's public methods
        take it. If the body raises (Ctrl-C too), the tasks reserve() made in it are removed."""
        with self._mutex:
            folder, fd = self._open_lock()
            self._wrote, self._made = False, []     # (a Ctrl-C in flock must stamp nothing)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)      # waits for other processes
                st = os.fstat(fd)                   # which board, in one call (resolve(): many)
                self._lock_fd, self.board = fd, (st.st_dev, st.st_ino)
                self._folder_fd = folder
                stamp = self._read_stamp()
                if self._stamp != stamp:
                    self._stamp = None              # another process wrote since: revalidate first
                if self._known is not None and self._known.generation != stamp:
                    self._known = None
                if self._swept != self.board:
                    self._sweep_temp_files()
                try:
                    yield
                except BaseException:
                    self._undo_reservations()
                    raise
            finally:
                try:
                    if self._wrote:                 # a new stamp tells every other manager
                        self._new_stamp(fd)         # "changed"
                finally:                            # even when the stamp fails (a full disk):
                    self._lock_fd = None            # else the lock stays held and every agent
                    self._folder_fd = None          # on the board hangs
                    self._made = []
                    os.close(fd)                    # closing releases the lock
                    os.close(folder)

    def _new_stamp(self, fd):
        """A new token in .lock; after it, in the same pwrite, the mark if it grew."""
        new = secrets.token_hex(STAMP_BYTES // 2).encode()
        grew = self._known is not None and self._known.largest > self._known.mark
        mark = str(self._known.largest).rjust(MARK_BYTES).encode() if grew else b""
        try:
            os.pwrite(fd, new + mark, 0)
        except OSError as exc:
            self._stamp = self._known = None        # we scan afresh next time
            try:
                os.ftruncate(fd, 0)                 # needs no space; an empty stamp matches no
            except OSError:                         # token, so others scan afresh too (the
                pass                                # mark goes: the max-scan remains)
            raise ValueError(f"the change was saved, but the board in {self.dir} could not be "
                             f"marked as changed for other agents ({reason(exc)}); free some "
                             "space") from None
        if self._stamp is not None:                 # our cache was complete; our writes kept it
            self._stamp = (self._stamp[0], new)
        if self._known is not None:
            self._known.generation = (self.board, new)
            self._known.mark = max(self._known.largest, self._known.mark)

    def _read_stamp(self):
        """The board's generation: which board, and the token its last writer left in .lock."""
        return (self.board, os.pread(self._lock_fd, STAMP_BYTES, 0))

    def _open_lock(self):
        """(the board's folder, its .lock), both open. The folder is made only when opening
        it fails (that order saves 3 calls), and taken as named, a link too: it may be how a
        board is shared. Inside it, nothing is opened through a link."""
        try:
            folder = writer.open_folder(self.dir, make=False, follow=True)
        except OSError:
            self._ensure_folder()                   # says what is in the way, or makes it
            try:
                folder = writer.open_folder(self.dir, make=False, follow=True)
            except OSError as exc:
                raise ValueError(f"cannot open the board folder {self.dir}: "
                                 f"{reason(exc)}") from None
        try:
            return folder, writer.open_shared(folder, ".lock", LOCK_MODE)
        except OSError as exc:
            os.close(folder)
            raise ValueError(f"cannot lock the board in {self.dir}: {reason(exc)}") from None

    def _ensure_folder(self):
        if self.dir.exists() and not self.dir.is_dir():
            raise ValueError(f"the board {self.dir} cannot be used: a file of that name is in "
                             "the way")
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ValueError(f"cannot create the board folder {self.dir}: {reason(exc)}") from None

    def _sweep_temp_files(self):
        """Under the lock nobody is mid-write: a temp file left is from a writer that was killed
        (.task_<n>.json.<random>.tmp, or .tmp_* from a harness before writer.py)."""
        self._swept = self.board
        for pattern in (".task_*.tmp", ".tmp_*"):
            for tmp in self.dir.glob(pattern):
                tmp.unlink(missing_ok=True)

    def _undo_reservations(self):
        """Remove the files reserve() made under this lock: the failed operation leaves none.
        (A task replaced by write() stays replaced: one file at a time is all a folder does.)"""
        for path in reversed(self._made):
            try:
                path.unlink(missing_ok=True)
            except OSError:
                pass                                # best effort: a listing will show what is left
            self._cache.pop(path.name, None)
            self._tasks.pop(int(TASK_FILE.fullmatch(path.name)[1]), None)
        if self._made:
            self._stamp = self._known = None        # our cache had them: read the folder again

    # ------------------------------------------------------------ the high-water mark

    def _read_mark(self):
        """The mark in .lock, or 0 when there is none or it is not a number below MAX_ID (a
        hand edit): the max-scan alone then, which never goes below a task that exists."""
        try:
            if self._lock_fd is not None:
                raw = os.pread(self._lock_fd, MARK_BYTES, STAMP_BYTES)
            else:                                   # outside the lock: a look, no lock taken
                raw = read_bytes(self.dir / ".lock", ".lock", STAMP_BYTES + MARK_BYTES,
                                 follow=False)
                raw = raw[STAMP_BYTES:]
        except (OSError, ValueError):               # no .lock yet (or not a file): no mark
            return 0
        text = raw.decode("ascii", "replace").strip()
        if not text.isdigit() or int(text) >= MAX_ID:
            return 0
        return int(text)

    # ------------------------------------------------------------ writing

    def write(self, task):
        """Replace a task's file atomically: a reader or a kill -9 sees old or new, never half."""
        # No fsync: a kill -9 cannot tear a file, but a power cut may lose the last writes
        # (a production store would fsync the file and the folder).
        self._put(task, writer.replace_in)

    def reserve(self, task):
        """Create a task's file only if its id is free (os.link never replaces). False if taken."""
        if self._known is None:
            self.ids()                              # known, so that the mark follows this task
        try:
            self._put(task, writer.create_in)
        except FileExistsError:
            self._known = None                      # a name we did not know: list the folder again
            return False
        self._made.append(self.dir / f"task_{task['id']}.json")
        return True

    def _put(self, task, place):
        assert self._lock_fd is not None, "task files are written only under the board's lock"
        task = {**task, "updated_at": now()}
        problem = task_problem(task, task["id"])   # never write what a read would flag
        if problem:
            raise ValueError(f"task #{task['id']} cannot be saved: {problem}")
        data = json.dumps(task, indent=2, ensure_ascii=False) + "\n"
        try:
            data = data.encode("utf-8")
        except UnicodeEncodeError:  # checked before any file exists, so nothing is left behind
            raise ValueError("the task contains characters that are not valid text "
                             "(a lone surrogate)") from None
        path = self.dir / f"task_{task['id']}.json"
        try:   # st: scan()'s key; placing the file keeps its size, mtime and inode
            st = place(self._folder_fd, path.name, data, None)   # None: the umask's mode
        except FileExistsError:
            raise
        except OSError as exc:
            raise ValueError(f"could not save task #{task['id']} in {self.dir}: "
                             f"{reason(exc)}") from None
        self._wrote = True
        self._cache[path.name] = ((st.st_size, st.st_mtime_ns, st.st_ino), task)
        below = self._tasks and task["id"] < next(reversed(self._tasks))
        if below and task["id"] not in self._tasks:
            self._stamp = None              # an id below ours appeared: the next scan sorts again
        self._tasks[task["id"]] = task
        if self._known is not None:
            self._known.add(task["id"])

    # ------------------------------------------------------------ reading

    def ids(self):
        """The id of every task file, a corrupt one included (its name still holds its id): what
        s07's max-scan takes the largest of. A read-only view, in no order.

        A name past MAX_ID (task_1000000000000000.json) is left out, and scan() flags it: else
        the next id would be one that every tool refuses, and the board could take no new task.
        Under the lock, when no other manager wrote since we last listed the folder (the stamp
        says so), the answer is remembered: creating thousands of tasks lists the folder once.
        """
        if self._lock_fd is not None and self._known is not None:
            return self._known.ids.keys()
        found = {}
        for name in self._names():
            if _is_task_name(name):
                found[int(TASK_FILE.fullmatch(name)[1])] = None
        if self._lock_fd is not None:
            self._known = _Known(self._read_stamp(), found, self._read_mark())
        return found.keys()

    def high_water(self):
        """The largest id this board ever gave (kept in .lock), or 0: a task file deleted by
        hand must not give its id to a new task."""
        if self._lock_fd is not None and self._known is not None:
            return self._known.mark
        return self._read_mark()

    def load(self, task_id):
        """One task, read from its file now, or ValueError saying what is wrong."""
        path = self.dir / f"task_{task_id}.json"
        if not path.exists():
            existing = ", ".join(f"#{i}" for i in self.scan()[0]) or "none yet"
            raise ValueError(f"no task #{task_id}; existing tasks: {existing}")
        return read_task(path)

    def try_load(self, task_id):
        try:
            return read_task(self.dir / f"task_{task_id}.json")
        except ValueError:
            return None

    def status_of(self, task_id):
        return (self.try_load(task_id) or {}).get("status")

    def dependents(self, task_id):
        """The tasks waiting for task_id: found in the cached board (under the lock, when no
        other manager wrote, no file is even stat'ed), each read again from its file, so that
        a hand edit made since is what gets written back, not our older copy."""
        found = []
        for tid, task in self.scan()[0].items():
            if task_id in task["blockedBy"]:
                fresh = self.try_load(tid)
                if fresh and task_id in fresh["blockedBy"]:
                    found.append(fresh)
        return found

    def scan(self, validate=False):
        """Every task by id, and the problems found (corrupt files, odd names).

        Parsed tasks are cached by (size, mtime_ns, inode). Under the lock, when the stamp in
        .lock shows no other manager wrote since our last complete scan, the cache is the
        board (no stat at all): another process's write is seen by our very next call.
        A hand edit (no stamp) can count on: the next list_all, get or post-compaction board
        (every file stat'ed, a changed one re-read), every update() of that task or of a task
        it frees, and the cycle check (those files are read). It cannot count on an edit that
        keeps the size within one mtime tick of our own write (a few ms): touch it again.
        """
        if not validate and self._lock_fd is not None and self._stamp is not None:
            return dict(self._tasks), []
        tasks, problems, cache, folder = {}, [], {}, os.fspath(self.dir)
        for name in self._names():
            hit = self._cache.get(name)   # a cached name passed the checks below when first read
            if hit is None and not (name.startswith("task_") and name.endswith(".json")):
                continue
            if hit is None and not _is_task_name(name):
                problems.append(f"{self.dir / name} is not a task file name (expected "
                                f"task_<n>.json with n below {MAX_ID:,}); it was left as it is")
                continue
            try:
                st = os.stat(f"{folder}/{name}")   # a str, not a Path: 10,000 Paths cost more
                key = (st.st_size, st.st_mtime_ns, st.st_ino)
                task = hit[1] if hit and hit[0] == key else read_task(self.dir / name)
                cache[name] = (key, task)
                tasks[task["id"]] = task
            except (OSError, ValueError) as exc:
                problems.append(str(exc) if isinstance(exc, ValueError)
                                else f"{self.dir / name}: {reason(exc)}")
        self._cache, self._tasks = cache, dict(sorted(tasks.items()))
        if self._lock_fd is not None:
            self._stamp = self._read_stamp()   # the cache is complete as of this generation
        return dict(self._tasks), sorted(problems)

    def _names(self):
        """The file names in the folder; a board that cannot be read says so, not looks empty."""
        if not self.dir.exists():
            return []
        try:
            return os.listdir(self.dir)
        except NotADirectoryError:
            raise ValueError(f"the board {self.dir} cannot be read: it is a file, not a "
                             "folder") from None
        except OSError as exc:
            raise ValueError(f"the board {self.dir} cannot be read: {reason(exc)}") from None


class _Known:
    """What the folder held as of one generation of the board: the ids of its task files (a
    dict used as an ordered set), the largest of them, and the high-water mark in .lock."""

    def __init__(self, generation, ids, mark):
        self.generation, self.ids, self.mark = generation, ids, mark
        self.largest = max(ids, default=0)

    def add(self, task_id):
        self.ids[task_id] = None
        self.largest = max(self.largest, task_id)


def _is_task_name(name):
    m = TASK_FILE.fullmatch(name)
    return bool(m) and len(m[1]) < 16 and int(m[1]) < MAX_ID


def read_task(path):
    """A task from its file, or ValueError naming the file and the field. Never repairs or
    deletes it."""
    try:
        # A FIFO, /dev/zero or a link is refused, unread
        data = read_bytes(path, "it", TASK_FILE_MAX + 1, follow=False)
        if len(data) > TASK_FILE_MAX:
            raise ValueError(f"it is over {TASK_FILE_MAX:,} bytes: too big for a task")
        task = json.loads(data)  # bytes: json decodes UTF-8 itself
    except OSError as exc:
        raise ValueError(f"{path} is unreadable ({reason(exc)}); it was left as it is") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, not a regular file, too big
        raise ValueError(f"{path} is unreadable ({exc}); it was left as it is") from None
    problem = task_problem(task, int(TASK_FILE.fullmatch(path.name)[1]))
    if problem:
        raise ValueError(f"{path} is unreadable (not a valid task: {problem}); it was left as "
                         "it is")
    return task
