"""What s07's TaskFolder needs beyond its mechanism: safe to share, and fast on a big board.

board.open_store makes the folder store as remembering(TaskFolder): s07's methods do the work,
and Remembering, mixed in around them, guards and remembers. What each override adds:

    Remembering's        adds to s07's TaskFolder method
    locked()             a thread mutex; a note when the wait is long; forgets the ids and the
                         board it remembers when .lock's stamp (another agent wrote) or the
                         folder's times (a hand edit) changed; the sweep, once per board; a
                         new stamp after a write; on an exception, removes what reserve() made
    ids(), scan()        under the lock, in the thread holding it, from memory while no other
                         agent wrote and the folder's times held (scan: not with recheck,
                         which lists the folder and checks each file's stat)
    read()               the task remembered while its file's (size, mtime_ns, inode) is the same
    load(), try_load()   from the file even when remembered; a copy, to change freely
    write(), reserve()   only under the lock, and only while it is still the file named .lock;
                         an OSError as one line; remembers what it wrote (reserve: for
                         locked()'s undo too; a lost one lists the ids again)

Without each piece:
- open_lock: .lock only as a regular file: a link there made a create write the stamp into
  an SSH authorized_keys; a FIFO ended in a traceback. A file in the folder's place is said.
- read: regular files only, never through a link, at most TASK_FILE_MAX: a FIFO named
  task_2.json hung /tasks; a link to /dev/zero read gigabytes. unreadable() words every
  refusal of a task file, s07's too: which file, why, and that it was kept.
- listing: a board that cannot be read says so, rather than look empty.
- the stamp (a random token in .lock, renewed by every writer under the lock): without it
  nothing may be remembered, and creating 10,000 tasks listed the folder once per task.
- a file remembered by its stat: a board of 10,000 tasks took a second to list. A hand edit
  that keeps the size within one mtime tick of our write is seen by a listing only once the
  file changes again; a change reads its tasks with load and try_load, so it never writes
  over such an edit. A task file made or removed by hand moves the folder's times: the ids
  and the board are listed again at the next lock (once another agent writes, if made in the
  clock tick of our last write or while we held the lock; reserve refuses a taken name).
- the undo: a /task import that stops at item 3 left items 1 and 2, and a second import made
  them twice. (A write() stays done: a folder replaces one file at a time.)
- the sweep (once per process and board): a writer killed mid-write leaves a temporary file.
  Only writer.py's temporary names go, never the user's (--board . shares their folder): a
  task's, or LITTER, at once (task files are written only under the lock); any other once
  unwritten for writer.STALE seconds (a write_file in flight holds no board lock; older harnesses
  gave task temporaries that name).
- the note while waiting: an agent stopped with Ctrl-Z while it held the lock kept the others
  waiting with a bare prompt, in silence.
- the mutex: the flock orders processes; two threads of one process share this object (and
  only the thread holding the lock keeps what it read: another's listing may predate a write).
- _still_the_lock: a person removed .lock while alice held it; bob locked a new one, and both
  claimed the same task.
fcntl is POSIX (Linux, macOS). A network file system's locks are unreliable: use a
postgresql:// board there.
"""

import contextlib
import fcntl
import os
import re
import secrets
import threading

from harness import terminal, writer
from harness.board import record
from harness.errors import reason
from harness.files import read_bytes

STAMP_BYTES = 32            # .lock: the stamp, then s07's high-water mark (TaskFolder.high_water)
AFTER_STAMP = 64            # bytes of .lock kept after the stamp: s07's mark takes 16 of them
LOCK_MODE = 0o644           # .lock, less the umask: every agent opens it for writing
WAIT_NOTE_AFTER = 3         # seconds waiting for the lock before a note says so (not a limit)
# Older harnesses' names for a task's temporary file: .task_1.json.<hex>.tmp, .tmp_<id>_<pid>_<n>.
LITTER = re.compile(r"\.task_[1-9][0-9]{0,14}\.json\.[0-9a-f]+\.tmp"
                    r"|\.tmp_[1-9][0-9]{0,14}_[0-9]+_[0-9]+", re.ASCII)


def open_lock(folder) -> int:
    """The board's .lock, open to read and write; made, with the folder, if missing (only then
    is the folder looked at)."""
    lock = os.fspath(folder / ".lock")
    try:
        return writer.open_shared(None, lock, LOCK_MODE)
    except (FileNotFoundError, NotADirectoryError):
        pass
    except OSError as exc:
        raise ValueError(f"cannot lock the board in {folder}: {reason(exc)}") from None
    blocking = None if folder.is_dir() else writer.what_is_at(folder)   # a link to a folder: used
    if blocking:
        raise ValueError(f"the board {folder} cannot be used: {blocking} of that name is in the "
                         "way")
    try:
        folder.mkdir(parents=True, exist_ok=True)    # a link to a folder on purpose: kept
        return writer.open_shared(None, lock, LOCK_MODE)
    except OSError as exc:
        raise ValueError(f"cannot open the board folder {folder}: {reason(exc)}") from None


def listing(folder) -> list:
    """The names in the board's folder ([] while there is none)."""
    try:
        return os.listdir(folder)
    except FileNotFoundError:
        # No board yet, but a link to nothing is no empty board: a write there is refused.
        if os.path.islink(folder):
            raise ValueError(f"the board {folder} cannot be read: it is a symbolic link to "
                             "nothing") from None
        return []
    except NotADirectoryError:
        what = writer.what_is_at(folder) or "something else"
        raise ValueError(f"the board {folder} cannot be read: it is {what}, not a "
                         "folder") from None
    except OSError as exc:
        raise ValueError(f"the board {folder} cannot be read: {reason(exc)}") from None


def read(path) -> bytes:
    """A task file's bytes, or ValueError: never through a link, never past TASK_FILE_MAX."""
    try:
        data = read_bytes(path, "it", record.TASK_FILE_MAX + 1, follow=False)
    except OSError as exc:
        raise unreadable(path, reason(exc)) from None
    except ValueError as exc:                       # a link, a FIFO, a device
        raise unreadable(path, exc) from None
    if len(data) > record.TASK_FILE_MAX:
        raise unreadable(path, f"it is over {record.TASK_FILE_MAX:,} bytes: too big for a task")
    return data


def unreadable(path, why) -> ValueError:
    return ValueError(f"{path} is unreadable ({why}); it was left as it is")


def sweep(where) -> None:
    """Remove, under the lock, what a killed writer left: a regular file named as LITTER or
    writer.TASK_TEMPORARY, and what writer.sweep removes anywhere. Nothing else."""
    writer.sweep(where, also=_task_litter)


def _task_litter(name: str) -> bool:
    return bool(LITTER.fullmatch(name) or writer.TASK_TEMPORARY.fullmatch(name))


def remembering(lesson_folder: type) -> type:
    """s07's TaskFolder with Remembering mixed in: the store board.open_store makes."""
    return type(f"Remembering{lesson_folder.__name__}", (Remembering, lesson_folder), {})


class Remembering:
    """Around s07's TaskFolder (the table above)."""

    def __init__(self, location):
        super().__init__(location)
        self.agent = None           # who writes (postgres.TaskStore): a file does not say
        self._mutex = threading.Lock()
        self._holder = None         # the thread that holds the lock now
        self._stamp = None          # the board's generation as we last left it
        self._folder = None         # and the folder's times then: a file added by hand moves them
        self._wrote = False         # a task written under the lock held now
        self._made = []             # the files reserve() made under it
        self._swept = None          # the board whose temporary files were swept
        self._files = {}            # file name -> ((size, mtime_ns, inode), task)
        self._ids = None            # remembered while held: the ids in the folder
        self._tasks = None          # and the board, in id order
        self._problems = []         # and its line for each unreadable file

    # ------------------------------------------------------------ the lock

    @contextlib.contextmanager
    def locked(self):
        with self._mutex:
            waiting = self._note_if_busy()
            try:
                with super().locked() as fd:
                    _stop(waiting)
                    self._holder = threading.get_ident()
                    self._enter(fd)
                    try:
                        yield fd
                    except BaseException:
                        self._undo()
                        raise
                    finally:
                        self._holder = None
                        if self._wrote:             # a new stamp tells every other agent
                            self._new_stamp(fd)
                        self._folder = _folder_times(self.dir)
            finally:
                _stop(waiting)

    def _note_if_busy(self):
        """None while the lock is free; else a started timer that says so after
        WAIT_NOTE_AFTER seconds (a thread only then: a create must not pay for one)."""
        try:
            fd = open_lock(self.dir)
        except ValueError:
            return None                             # s07's locked() says what is wrong
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return None                             # free now; released as fd closes
        except OSError:
            pass
        finally:
            os.close(fd)
        waiting = threading.Timer(WAIT_NOTE_AFTER, terminal.show_note, [
            f"[waiting for the board's lock in {self.dir}/: another agent holds it; Ctrl-C "
            "stops waiting]"])
        waiting.daemon = True
        waiting.start()
        return waiting

    def _enter(self, fd: int) -> None:
        st = os.fstat(fd)
        board = (st.st_dev, st.st_ino)
        stamp = (board, os.pread(fd, STAMP_BYTES, 0))
        # Another agent wrote, or a person added or removed a file: forget the folder.
        if stamp != self._stamp or _folder_times(self.dir) != self._folder:
            self._ids = self._tasks = None
        self._stamp = stamp
        self._wrote, self._made = False, []
        if self._swept != board:
            self._swept = board
            sweep(self.dir)

    def _new_stamp(self, fd: int) -> None:
        new = secrets.token_hex(STAMP_BYTES // 2).encode()
        try:
            os.pwrite(fd, new, 0)
        except OSError as exc:
            self._forget()
            # A stamp of zeros matches no token, so others read afresh too. Truncating needs no
            # space and frees the file's block for what followed the stamp (s07's high-water
            # mark), written back: without it, an id deleted by hand would be given again.
            rest = os.pread(fd, AFTER_STAMP, STAMP_BYTES)
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
                os.pwrite(fd, rest, STAMP_BYTES)
            raise ValueError(f"the change was saved, but the board in {self.dir} could not be "
                             f"marked as changed for other agents ({reason(exc)}); free some "
                             "space") from None
        # What we remember followed our own writes (unless _undo forgot it): it is the board.
        if self._stamp is not None:
            self._stamp = (self._stamp[0], new)

    def _undo(self) -> None:
        """A change that failed (Ctrl-C too) leaves no new task: remove what reserve() made.
        Its ids are not given again: a listing takes no lock, so another agent may have seen
        them (PostgreSQL's rollback gives them back: no other session saw them)."""
        for path in reversed(self._made):
            with contextlib.suppress(OSError):      # a listing will show what is left
                path.unlink(missing_ok=True)
        self._forget()

    def _forget(self) -> None:
        self._stamp = self._ids = self._tasks = None

    # ------------------------------------------------------------ reading

    def _holding(self) -> bool:
        """This thread holds the lock: only then may memory answer, or be kept. Another
        thread's listing takes no lock, and what it read may predate the holder's writes."""
        return self.lock_fd is not None and self._holder == threading.get_ident()

    def ids(self):
        if self._holding() and self._ids is not None:
            return self._ids
        found = super().ids()
        if self._holding():
            self._ids = found
        return found

    def scan(self, recheck: bool = False) -> tuple:
        if not recheck and self._holding() and self._tasks is not None:
            return dict(self._tasks), list(self._problems)
        tasks, problems = super().scan(recheck)
        if self._holding():
            self._tasks, self._problems = dict(tasks), list(problems)
        return tasks, problems

    def read(self, task_id: int) -> dict:
        name = _file_name(task_id)
        try:     # a str, not a Path: on 10,000 files the Paths cost a third of a listing
            st = os.stat(f"{os.fspath(self.dir)}/{name}", follow_symlinks=False)
        except OSError:
            return super().read(task_id)            # which says what is wrong
        key = (st.st_size, st.st_mtime_ns, st.st_ino)
        hit = self._files.get(name)
        if hit is not None and hit[0] == key:
            return hit[1]
        task = super().read(task_id)
        self._files[name] = (key, task)
        return task

    def load(self, task_id: int) -> dict:
        # The caller is about to change the task: a hand edit that kept the size and the time
        # must not be written over.
        self._files.pop(_file_name(task_id), None)
        return _copied(super().load(task_id))

    def try_load(self, task_id: int):
        self._files.pop(_file_name(task_id), None)          # from the file, as load
        task = super().try_load(task_id)
        return None if task is None else _copied(task)

    # ------------------------------------------------------------ writing

    def write(self, task: dict) -> None:
        with self._saving(task):
            super().write(task)
        self._remember(task)

    def reserve(self, task: dict) -> bool:
        with self._saving(task):
            made = super().reserve(task)
        if not made:
            self._ids = None                        # a file we did not know of: list again
            return False
        self._made.append(self.path(task["id"]))
        self._remember(task)
        return True

    @contextlib.contextmanager
    def _saving(self, task: dict):
        assert self.lock_fd is not None, "task files are written only under the board's lock"
        self._still_the_lock()
        try:
            yield
        except OSError as exc:
            raise ValueError(f"could not save task #{task['id']} in {self.dir}: "
                             f"{reason(exc)}") from None

    def _still_the_lock(self) -> None:
        """The lock held is still the file named .lock. A person who removed it (thinking it
        stale) let another agent lock a new .lock: this one then orders nothing."""
        held = os.fstat(self.lock_fd)
        try:
            named = os.stat(self.dir / ".lock", follow_symlinks=False)
        except OSError:
            named = None
        if named is None or (named.st_dev, named.st_ino) != (held.st_dev, held.st_ino):
            raise ValueError(f"{self.dir}/.lock was removed during this change, so another "
                             "agent may be changing the board too: nothing was written; try "
                             "again. (Never remove .lock: no lock outlives its process, and it "
                             "holds the largest id given.)")

    def _remember(self, task: dict) -> None:
        """What we just wrote, as the folder now holds it."""
        task = _copied(task)
        name = _file_name(task["id"])
        st = os.stat(self.dir / name, follow_symlinks=False)
        self._files[name] = ((st.st_size, st.st_mtime_ns, st.st_ino), task)
        self._wrote = True
        if self._ids is not None:
            self._ids.add(task["id"])
        known = self._tasks
        if known and task["id"] not in known and task["id"] < next(reversed(known)):
            self._tasks = None                      # an id below the last: read in order again
        elif known is not None:
            known[task["id"]] = task


def _stop(waiting) -> None:
    """The wait's note, if one was set, cancelled; no thread left behind (a fork would copy it)."""
    if waiting:
        waiting.cancel()
        waiting.join()


def _folder_times(folder):
    """(mtime, ctime): a file made, renamed or removed in the folder moves them; None: unread."""
    with contextlib.suppress(OSError):
        st = os.stat(folder)
        return st.st_mtime_ns, st.st_ctime_ns
    return None


def _file_name(task_id: int) -> str:
    """As s07's TaskFolder.path names it, as a str (see read())."""
    return f"task_{task_id}.json"


def _copied(task: dict) -> dict:
    """A task to give away or keep: its lists copied too (a deepcopy cost a create 40 us)."""
    copied = dict(task)
    for field in ("blockedBy", "unblocked"):
        if isinstance(copied.get(field), list):
            copied[field] = list(copied[field])
    return copied
