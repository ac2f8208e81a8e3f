#!/usr/bin/env python3
"""Remake docs/session_page.png, the README's picture of the session page, from today's demo.

    python tools/session_screenshot.py      (about 10 s; needs Chromium: apt-get install chromium)

The picture must show what `python s07_task_system.py --demo` does today: a hand-made one
showed 11 calls while the demo made 10. So this script makes it the way a newcomer would
see it: the demo run in a fresh folder, its page opened in headless Chromium (as
tests/test_session_browser.py drives it), the request of the first call after the
compaction open (the summary, then the board read fresh from disk), the top of the page
drawn. The PNG keeps a note of what it shows ("10 model calls; call 9 open");
tests/test_readme.py checks that note against the README's caption and against a demo run
now, so a demo that changes fails the suite until the picture is made again.

It lives in tools/: the scripts that remake what the repository ships (bench/ measures,
tests/ checks). The test suite imports its Chromium helpers from here.
Without each piece:
- a fresh folder: a demo continued from an earlier board (demo/ left in the repository)
  draws a later run, not the first one the README describes.
- the open request: the picture would not show what the README says it shows.
- the note in the PNG: nothing would tie the picture to the demo it was made from.
"""

import argparse
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PICTURE = ROOT / "docs" / "session_page.png"
WINDOW = (1100, 1800)                # pixels: the page's top, down to the opened request
NOTE_KEY = b"session"                # the PNG text chunk that says what the picture shows
# Headless, offline and quiet: no sync, no updates, no first-run pages, no GPU.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--enable-logging=stderr", "--v=0"]


def find_chromium():
    """The Chromium (or Chrome) on PATH, or None."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


def run_chromium(binary: str, page, *args) -> tuple:
    """One headless run on a fresh profile, opening page (a path, or a file:// URL with a
    fragment); returns (stdout, stderr). RuntimeError if Chromium fails."""
    url = str(page)
    if not url.startswith("file:"):
        url = Path(page).resolve().as_uri()
    with tempfile.TemporaryDirectory() as profile:
        command = [binary, *FLAGS, f"--user-data-dir={profile}", *args, url]
        proc = subprocess.run(command, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise RuntimeError(f"chromium exited {proc.returncode}: {proc.stderr[-2000:]}")
    return proc.stdout, proc.stderr


def demo_page(folder: Path, env: dict = None) -> tuple:
    """Run the s07 demo in folder, as a newcomer does: (its page, its model calls, the first
    call after its compaction). env: the environment (default: this one, without a key)."""
    if env is None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    proc = subprocess.run([sys.executable, str(ROOT / "s07_task_system.py"), "--demo"],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise RuntimeError(f"the demo failed: {proc.stderr[-2000:]}")
    (page,) = (folder / "demo" / ".transcripts").glob("session_s07_*.html")
    calls = len(re.findall(r"^\s*\[(?:tokens|summary call): ", proc.stderr, re.M))
    made_by = re.search(r"Compaction 1</b>, made by call (\d+)", page.read_text(encoding="utf-8"))
    return page, calls, int(made_by[1]) + 1


def note(calls: int, opened: int) -> str:
    return f"{calls} model calls; call {opened} open"


def with_note(png: bytes, text: str) -> bytes:
    """png with a tEXt chunk (NOTE_KEY, text) before its end."""
    body = NOTE_KEY + b"\0" + text.encode("latin-1")
    chunk = struct.pack(">I", len(body)) + b"tEXt" + body
    chunk += struct.pack(">I", zlib.crc32(b"tEXt" + body))
    end = png.rindex(b"IEND") - 4                   # the IEND chunk starts at its length
    return png[:end] + chunk + png[end:]


def read_note(path: Path) -> str:
    """The text of the picture's NOTE_KEY chunk; "" when it has none."""
    data, pos = path.read_bytes(), 8
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"tEXt" and body.startswith(NOTE_KEY + b"\0"):
            return body[len(NOTE_KEY) + 1:].decode("latin-1")
        pos += 12 + length
    return ""


def main() -> int:
    binary = find_chromium()
    if binary is None:
        print("error: Chromium is not installed (apt-get install chromium)", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as folder:
        page, calls, opened = demo_page(Path(folder))
        html = page.read_text(encoding="utf-8")
        # The request of that call open, as a click on its line (or its bar) opens it.
        html = html.replace(f'<details class="request" data-call="{opened}">',
                            f'<details class="request" data-call="{opened}" open>')
        shown = Path(folder) / "page.html"
        shown.write_text(html, encoding="utf-8")
        shot = Path(folder) / "shot.png"
        run_chromium(binary, shown, f"--screenshot={shot}",
                     f"--window-size={WINDOW[0]},{WINDOW[1]}")
        PICTURE.write_bytes(with_note(shot.read_bytes(), note(calls, opened)))
    print(f"{PICTURE.relative_to(ROOT)}: {note(calls, opened)}; the README's caption must say "
          f"{calls} model calls and call {opened}")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.parse_args()                     # --help must not remake the picture
    sys.exit(main())
