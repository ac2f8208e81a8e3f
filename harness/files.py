"""File safety for s03's file tools (read_file, write_file, edit_file) and for the file board.

s03's run_read, run_write and run_edit (and so s06's and s07's) are a few lines that call here.
Without each piece:
- workspace(): a folder deleted mid-session made each tool say only "No such file or directory".
- inside(): a model's "../../etc/passwd", or a symlink out of the folder, is read or
  overwritten. (bash can still do anything you can: this stops accidents; it is no sandbox.)
  A 5,000-byte path came back whole in its error; "~/x" made x in a folder named ~.
- open_regular(): read_file on a FIFO hangs, a link to /dev/zero fills the memory, and a folder
  is "no such file"; with follow=False (the harness's own files) a link is not opened at all.
- read_lines(): `limit=10` on a 2 GB file reads all of it, a binary file reaches the model as
  NULs, a read the cap cuts again skips lines for good, and a sparse file's hole is read whole.
- write_and_note(), through harness/writer.py: a full disk leaves half a file, a file the
  user made read-only is replaced, "new/" makes a file named new, and the model is not told
  what of the old file (its owner, its attributes) was lost.
- edit_text(): a one-line edit of a CRLF file turns every line ending into LF, or adds
  bare LFs; an old_text found twice overlapping is edited at the first.
- encode(): a lone surrogate from a model's JSON leaves an empty file behind.
- reason(): "[Errno 28]" where "the disk is full" says what to do.
"""

import codecs
import errno
import itertools
import os
import re
import shlex
import stat
from pathlib import Path

from harness import terminal, writer
from harness.errors import reason

SNIFF_BYTES = 8192           # a NUL in the first 8 kB marks a binary file (as git decides)
COUNT_REST_UP_TO = 1_000_000  # bytes left after a read: counted as lines; past it, not counted
SKIP_PART = 1 << 20          # bytes read at once on the way to the offset
EDIT_MAX = 10_000_000        # bytes: edit_file holds the whole file in memory; past this, use bash
READ_ON = "read on with offset="   # how a read that stops before the end says so (layer 1 reads it)
NOTES_ROOM = 200             # characters of read_file's cap kept for its closing notes
CUT_STEP = 20_000            # characters of a long line a note says to read at once: within the cap
PATH_MAX = 4096              # bytes (UTF-8): Linux's longest path; a longer one is no file's
# A part of a path that a shell would have replaced: ~ or ~user first, $NAME, ${NAME}, $(...).
SHELL_EXPANDED = re.compile(r"(?:^(~[\w.-]*)|(?:^|/)(\$\{?[A-Za-z_]\w*\}?|\$\([^/]*\)))(?=/|$)")
# A line's end, any kind (read_file shows none of them); a CRLF is one end, never a CR and an LF.
LINE_BREAK = r"(?:\r\n|\r(?!\n)|(?<!\r)\n)"
SAID_UP_TO = 1_000                # occurrences of an old_text counted: "1,000 or more" past it

def workspace() -> Path:
    """The current folder, or FileNotFoundError saying it was deleted (getcwd's says neither)."""
    try:
        return Path.cwd()
    except FileNotFoundError:
        raise FileNotFoundError(
            "the folder this session works in was deleted while it ran, so no tool can work "
            "there: tell the user to start the session again in a folder that exists") from None


def inside(folder: Path, path: str) -> Path:
    """`path` resolved (following symlinks) under `folder`, or ValueError if it leaves it (or
    is longer than any path the system takes: the error would repeat it whole)."""
    size = len(path.encode("utf-8", "surrogatepass"))
    if size > PATH_MAX:
        raise ValueError(f"the path is {size:,} bytes long, more than a path may be "
                         f"({PATH_MAX:,}); give a shorter one")
    # "" is the workspace itself ("is a folder"); a NUL and a loop were Python's own words.
    if not path.strip():
        raise ValueError("the path is empty; give a file's path")
    if "\0" in path:
        raise ValueError(f"the path {path!r} holds a NUL character, which no file name may")
    _as_a_shell_would_not(path)
    try:
        resolved = (folder / path).resolve()
    except (RuntimeError, OSError):            # a loop: Python 3.10 to 3.12 raise RuntimeError
        raise ValueError(f"the path {path!r} runs into a loop of symbolic links") from None
    if not resolved.is_relative_to(folder):
        raise ValueError(f"path {path!r} is outside the workspace {folder}; use a path inside it")
    return resolved


def _as_a_shell_would_not(path: str) -> None:
    """ValueError for ~ or $HOME, which only a shell expands (write_file made a folder named ~),
    and for a control character or an edge space a JSON string carried ("hello.py\\n")."""
    expanded = SHELL_EXPANDED.search(path)
    if expanded:
        part = expanded[1] or expanded[2]
        raise ValueError(f"the path {path!r} holds {part}: a shell expands {part}; the tools "
                         "do not: give the path itself")
    if path != path.strip(" ") or any(ord(c) < 32 or ord(c) == 127 for c in path):
        raise ValueError(f"the path {path!r} begins or ends with a space, or holds a control "
                         "character (a line break, a tab); give the name without them")


def open_regular(path: Path, shown: str, follow: bool = True) -> int:
    """An fd open for reading on a regular file, or ValueError saying what the path is instead.
    O_NONBLOCK: a FIFO opens without waiting for a writer, and fstat refuses it (and devices
    and folders) before a byte is read. follow=False: a symbolic link at path is refused too."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags if follow else flags | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise ValueError(f"{shown}: no such file") from None
    except OSError as exc:
        if not follow and os.path.islink(path):
            raise ValueError(f"{shown} is a symbolic link, not a regular file") from None
        raise ValueError(f"{shown}: {reason(exc)}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise ValueError(f"{shown} is {writer.kind_of(mode)}, not a regular file")
    if shown.endswith(("/", "/.")):       # pathlib dropped it; `cat a.txt/` is refused
        os.close(fd)
        raise ValueError(f"{shown} ends in /, so it names a folder; {os.path.normpath(shown)} "
                         "is a file: give it without the /")
    return fd


def read_bytes(path: Path, shown: str, limit: int, follow: bool = True) -> bytes:
    """At most `limit` bytes of a regular file (follow=False: not through a link)."""
    with os.fdopen(open_regular(path, shown, follow), "rb") as f:
        return f.read(limit)


def read_text(path: Path, shown: str) -> str:
    """A whole UTF-8 text file (for edit_file), every byte kept, \r included."""
    data = read_bytes(path, shown, EDIT_MAX + 1)
    if len(data) > EDIT_MAX:
        raise ValueError(f"{shown} is over {EDIT_MAX:,} bytes, too big for edit_file; use bash "
                         "(e.g. sed -i) instead")
    if b"\0" in data[:SNIFF_BYTES]:
        raise ValueError(f"{shown} is a binary file; edit_file edits text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{shown}: not UTF-8 text; inspect it with bash (e.g. `file {shown}`) "
                         "instead") from None


def read_lines(path: Path, shown: str, offset: int, limit, cap: int) -> str:
    """Lines offset.. (1-based) of a UTF-8 text file: at most `limit` lines, and the whole
    result within `cap` characters, notes included, so nothing after it cuts it again.

    It stops before the line that would pass the cap, ending with "read on with offset=N" (N
    the first line not shown), so following it shows every line once. A line too long for the
    cap alone is shown cut, with how to read the rest (sed, tail, head); N is the line after it. A
    line holding a NUL ends the read, saying where the file looks binary. A CRLF file says so.

    It reads a bounded prefix: the lines it shows, at most 4 * cap + 2 bytes of a line it cuts,
    and the rest only when at most COUNT_REST_UP_TO bytes are left (to count its lines); the
    lines before the offset SKIP_PART bytes at a time, stopping at a NUL.
    """
    if offset < 1 or (limit is not None and limit < 1):
        raise ValueError("limit and offset must be positive numbers of lines")
    room = cap - NOTES_ROOM                   # what the lines may use; the notes fit in the rest
    window = 4 * cap + 2                      # 4 bytes a character at most, and \r\n
    with os.fdopen(open_regular(path, shown), "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if _binary(f.read(SNIFF_BYTES)):
            return (f"{shown} is a binary file ({size:,} bytes): not shown as text; inspect it "
                    f"with bash (e.g. `file {shown}`, `xxd {shown} | head`)")
        f.seek(0)
        skipped = _skip_lines(f, offset - 1, shown, offset)   # to the first line asked for
        if skipped < offset - 1:
            return _past_the_end(shown, skipped, offset)
        lines, used, crlf = [], 0, False
        for number in itertools.count(offset):
            start = f.tell()
            if limit is not None and len(lines) >= limit:
                return _with_rest(lines, f, size, number, crlf)
            raw = f.readline(window)
            if not raw:
                break
            if b"\0" in raw:                  # from here on the file is not text: stop
                if not lines:
                    raise ValueError(f"{shown}: {_binary_from(number, start, shown)}")
                return _joined(lines + [f"[{_binary_from(number, start, shown)}]"], crlf)
            whole = raw.endswith(b"\n") or not f.peek(1)
            text = _decode(raw, shown, number, whole)
            crlf = crlf or text.endswith("\r\n")
            text = text.rstrip("\n").removesuffix("\r")
            if whole and used + len(text) + 1 <= room:
                lines.append(text)
                used += len(text) + 1
                continue
            if whole and len(text) + 1 <= room:    # it fits a read of its own: the next one
                f.seek(start)
                return _with_rest(lines, f, size, number, crlf)
            lines.append(_cut_line(text, raw, whole, number, shown, room - used))  # never fits
            return _with_rest(lines, f, size, number + 1, crlf, in_line=not whole)
    if offset > 1 and not lines:
        return _past_the_end(shown, offset - 1, offset)
    return _joined(lines, crlf) or "(empty file)"


def _binary(head: bytes) -> bool:
    """A NUL in a file's first bytes makes it binary (as git decides), unless whole UTF-8 lines
    come before it (a sparse file's text, before its hole)."""
    nul = head.find(b"\0")
    if nul < 0:
        return False
    text = head[:head.rfind(b"\n", 0, nul) + 1]     # the whole lines before the NUL
    if not text:                                     # none: a GIF, an ELF binary, UTF-16
        return True
    try:
        text.decode("utf-8")
    except UnicodeDecodeError:                       # a PNG's header, say
        return True
    return False


def _skip_lines(f, count: int, shown: str, offset: int) -> int:
    """Past the first `count` lines, SKIP_PART bytes at a time (one at a time took 14 s to reach
    line 20,000,000); returns how many there were, if fewer. A NUL raises: a hole is not read."""
    passed, line_start = 0, f.tell()
    while passed < count:
        at = f.tell()
        block = f.read(SKIP_PART)
        if not block:                          # a last line with no newline is a line too
            return passed + (at > line_start)
        # The block up to its line break number `need`, or all of it if it holds fewer.
        need = count - passed
        part = block
        if block.count(b"\n") >= need:
            after = block.split(b"\n", need)[need]
            part = block[:len(block) - len(after)]
        nul = part.find(b"\0")
        if nul >= 0:
            before = part.rfind(b"\n", 0, nul)
            start = at + before + 1 if before >= 0 else line_start
            number = passed + part.count(b"\n", 0, nul) + 1
            raise ValueError(f"{shown}: offset {offset} is past where its text ends: "
                             f"{_binary_from(number, start, shown)}")
        passed += part.count(b"\n")
        if b"\n" in part:
            line_start = at + part.rfind(b"\n") + 1
        f.seek(at + len(part))
    return passed


def _binary_from(number: int, start: int, shown: str) -> str:
    return (f"line {number} holds NUL bytes: from there the file looks binary; inspect it "
            f"with bash: xxd -s {start} {shlex.quote(shown)} | head")


def _cut_line(text: str, raw: bytes, whole: bool, number: int, shown: str, room: int) -> str:
    """A line too long to show whole: its start, and how to read the rest with bash."""
    length = len(raw.rstrip(b"\r\n"))
    said = f"{length:,} bytes long" if whole else f"longer than {length:,} bytes"

    # In bytes, as tail and head count (GNU cut -c counts bytes too, not characters).
    def note(start: int) -> str:
        return (f"\n[line {number} is {said}, cut here; read the rest with bash: "
                f"sed -n '{number}p' {shlex.quote(shown)} | tail -c +{start + 1} | head -c "
                f"{CUT_STEP}]")
    keep = max(room - len(note(4 * room)), 0)  # no start is past 4 bytes a character
    return text[:keep] + note(len(text[:keep].encode("utf-8")))


def _past_the_end(shown: str, lines: int, offset: int) -> str:
    return f"{shown} has {terminal.plural(lines, 'line')}; offset {offset} is past the end"


def _decode(raw: bytes, shown: str, number: int, whole: bool = True) -> str:
    """A line as text; with whole=False, a line cut short, whose last character may be cut too."""
    try:
        return codecs.getincrementaldecoder("utf-8")().decode(raw, final=whole)
    except UnicodeDecodeError:
        raise ValueError(f"{shown}: not UTF-8 text (line {number}); inspect it with bash "
                         f"(e.g. `file {shown}`) instead") from None


def _with_rest(lines: list, f, size: int, next_line: int, crlf: bool,
               in_line: bool = False) -> str:
    """The lines shown, and how many follow from f's place (counted up to COUNT_REST_UP_TO
    bytes). in_line: f is inside the line before next_line (one cut short), not a new line."""
    if not f.peek(1):
        return _joined(lines, crlf)
    if size - f.tell() > COUNT_REST_UP_TO and in_line:    # not looked through: lines unknown
        more = (f"... (the file is {size:,} bytes; any lines after line {next_line - 1}: "
                f"{READ_ON}{next_line})")
        return _joined(lines + [more], crlf)
    if size - f.tell() > COUNT_REST_UP_TO:
        more = f"... (more lines follow: the file is {size:,} bytes; {READ_ON}{next_line})"
        return _joined(lines + [more], crlf)
    rest = f.read(COUNT_REST_UP_TO + 1)       # bounded, should the file have grown since
    count = rest.count(b"\n") + (not rest.endswith(b"\n")) - in_line   # a last line with no
    if count < 1:                                                      # newline counts too
        return _joined(lines, crlf)
    more = terminal.plural(count, "more line")
    return _joined(lines + [f"... ({more}; {READ_ON}{next_line})"], crlf)


def _joined(lines: list, crlf: bool) -> str:
    note = ["(this file's lines end in CRLF; edit_file keeps them)"] if crlf else []
    return "\n".join(lines + note)


def encode(text: str, field: str) -> bytes:
    """Encode before opening any file, so text that cannot be stored leaves nothing behind."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate from a model's JSON (e.g. "\\ud800")
        raise ValueError(f"{field} contains characters that are not valid text "
                         "(a lone surrogate)") from None


def write_and_note(path: Path, content, shown: str, field: str = "content") -> tuple:
    """Replace path with content whole: a full disk or a kill -9 leaves the old file, never
    half. Returns (bytes written, a clause saying what of the old file was not kept, or "").
    content: text (encoded before any file is opened; `field` names it in the error) or bytes.
    The new file (writer.replace) keeps the old one's mode, and its owner, group and extended
    attributes as far as this process may set them. A hard link to the old file is broken.
    """
    # "new/", "new/." or "new/..": a folder's name, never a file's (pathlib drops a "/.").
    ending = "/" + shown.rsplit("/", 1)[-1]
    if "/" in shown and ending in ("/", "/.", "/.."):
        raise ValueError(f"{shown} ends in {ending}, so it names a folder; give a file's path")
    data = content if isinstance(content, bytes) else encode(content, field)
    try:
        was = _regular_or_none(path, shown)  # in the try: a file in the way of a folder, in words
        before = writer.attributes(path) if was else {}
        made = writer.replace(path, data, None if was is None else stat.S_IMODE(was.st_mode))
    except OSError as exc:
        # os.path.exists, not Path.exists: a name too long for the system is False, not raised.
        kept = "the file is unchanged" if os.path.exists(path) else "nothing was written"
        why, how = _why_not(path, exc)
        raise ValueError(f"could not write {shown}: {why}; {kept}{how}") from None
    return len(data), _not_kept(was, made, before, writer.attributes(path))


def _why_not(path: Path, exc: OSError) -> tuple:
    """(why a file was not replaced, how to write it in place, or ""): the tools write beside
    it, then rename, and a folder or a mount point may allow neither."""
    how = ("; the tools write a new file beside it, then rename it over the old (no half file "
           "is ever left): to write it in place, do it with bash (cat > file)")
    if exc.errno == errno.EBUSY:
        return "it is a mount point (a file mounted on its own, as docker -v does)", how
    # EACCES, not EPERM: a sticky folder (/tmp) refuses replacing another's file so.
    if exc.errno == errno.EACCES and os.access(path, os.W_OK):
        return "its folder lets no new file be made in it", how
    return reason(exc), ""


def _regular_or_none(path: Path, shown: str) -> os.stat_result | None:
    """The existing file's stat, or None for a new file (it gets 0o666 less the umask);
    ValueError if it is not a regular file, or this user may not write it."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):  # writing to a FIFO would block; to a device, worse
        raise ValueError(f"{shown} is {writer.kind_of(st.st_mode)}, not a regular file; "
                         "nothing was written")
    # A rename needs only the folder's permission: without this, a file the user made
    # read-only would be replaced, where the shell's > is refused.
    if not os.access(path, os.W_OK):
        raise ValueError(f"permission denied: {shown} is read-only for this user (mode "
                         f"{stat.S_IMODE(st.st_mode):04o}); nothing was written")
    return st


def _not_kept(was, made: os.stat_result, before: dict, after: dict) -> str:
    """What the new file did not keep of the old one, as a clause: "" if it kept all."""
    lost = []
    if was is not None and (was.st_uid, was.st_gid) != (made.st_uid, made.st_gid):
        lost.append(f"its owner {was.st_uid}:{was.st_gid}; it is now {made.st_uid}:"
                    f"{made.st_gid}, and only root can give a file to another user")
    attributes = [name for name, value in before.items() if after.get(name) != value]
    if attributes:
        lost.append(f"its extended attribute{'s' * (len(attributes) > 1)} "
                    f"{', '.join(attributes)}")
    return f" (not kept: {'; nor '.join(lost)})" if lost else ""


def edit_text(text: str, old: str, new: str, shown: str) -> str:
    """text with the one occurrence of old replaced by new, keeping every other byte. read_file
    shows lines without their \\r, so each line break of old matches any line ending (LF, CRLF,
    old-Mac CR, or a mix), and each of new gets the ending of the text it replaces (else the
    file's first). Found twice, overlapping or not: refused, as not unique."""
    if not old:
        raise ValueError("old_text is empty; give the exact text to replace")
    # Both as read_file shows them, each line break one \n: a plain search is linear, where a
    # regex tried at every start of a 6 MB file of alike lines took 300 s.
    wanted, plain = _as_lf(old), _as_lf(text)
    # Every start, overlapping ones too ("aa" twice in "aaa"); counted up to SAID_UP_TO, so
    # that " " in a 10 MB log holds no list of millions.
    found = []
    at = plain.find(wanted)
    while at >= 0 and len(found) < SAID_UP_TO:
        found.append(at)
        at = plain.find(wanted, at + 1)
    if len(found) > 1:
        times = f"{len(found):,}" + (" or more" if len(found) == SAID_UP_TO else "")
        raise ValueError(f"old_text occurs {times} times in {shown}; include more lines so it "
                         "is unique")
    if not found:
        raise ValueError(f"old_text not found in {shown}; read the file and copy the text "
                         "exactly")
    start = _in_text(text, found[0])
    end = _in_text(text, found[0] + len(wanted))
    # new_text's lines end as the text it replaces does, or else as the file's first line.
    ending = re.search(LINE_BREAK, text[start:end]) or re.search(LINE_BREAK, text)
    eol = ending[0] if ending else "\n"
    put = _as_lf(new).replace("\n", eol)
    return text[:start] + put + text[end:]


def _as_lf(text: str) -> str:
    """text with each line break (CRLF, CR or LF) one \n: a CRLF is one character less."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _in_text(text: str, at: int) -> int:
    """Where position `at` of _as_lf(text) is in text: the first place before which text holds
    `at` characters once each CRLF counts one; past a CRLF, never between its \r and \n."""
    low, high = at, min(len(text), 2 * at)
    while low < high:
        middle = (low + high) // 2
        if middle - text.count("\r\n", 0, middle) < at:
            low = middle + 1
        else:
            high = middle
    if text[low - 1:low + 1] == "\r\n":
        low += 1
    return low
