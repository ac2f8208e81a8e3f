"""File safety for the file tools (read_file, write_file, edit_file) and the file board.

Relied on by s03's file tools (and so by s06 and s07) and by board_files.py.
Without each piece:
- reason: a user or a model reads "[Errno 28]" where "the disk is full" says what to do.
"""

import errno

# An OSError as a sentence a user can act on. By errno name: the numbers differ between systems.
REASONS = {errno.EACCES: "permission denied", errno.ENOSPC: "the disk is full",
           errno.EROFS: "the file system is read-only", errno.EDQUOT: "the disk quota is exceeded",
           errno.ENOTDIR: "a file is in the way where a folder should be",
           errno.ENOENT: "a folder on the way does not exist",
           errno.EEXIST: "a file of that name is in the way", errno.EISDIR: "it is a folder",
           errno.ENAMETOOLONG: "the file name is too long", errno.ELOOP: "too many symbolic links"}


def reason(exc: OSError) -> str:
    """An OSError as a sentence, not an errno."""
    return REASONS.get(exc.errno, exc.strerror or str(exc))
