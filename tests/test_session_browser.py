"""The session page in a real browser: headless Chromium from the system's packages.

It opens the page from disk as a learner would, and checks what the browser made of it: the
bars and the board in its DOM, no console error (no script ran, none failed), and screenshots
in the light and the dark scheme that show the bars' colours on a matching background.
Skipped with a reason when Chromium is missing; a failure when CI=true (.ci/run installs it).
"""

import os
import shutil
import struct
import subprocess
import tempfile
import zlib
from pathlib import Path

import pytest

from harness.session.page import write_page
from test_session_page import HOSTILE, Elements, synthetic_record

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--enable-logging=stderr", "--v=0"]
WRITTEN_LIGHT, WRITTEN_DARK = (0xEF, 0x8A, 0x17), (0xF6, 0xB2, 0x6B)   # "written to the cache"


@pytest.fixture(scope="module")
def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    if os.environ.get("CI") == "true":
        pytest.fail("Chromium is missing on CI: .ci/run must install it (apt-get install -y chromium)")
    pytest.skip("Chromium is not installed (apt-get install -y chromium)")


def run_chromium(binary, page, *args):
    """One headless run on a fresh profile; returns (stdout, stderr)."""
    with tempfile.TemporaryDirectory() as profile:
        command = [binary, *FLAGS, f"--user-data-dir={profile}", *args, page.resolve().as_uri()]
        proc = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout, proc.stderr


def console_errors(stderr):
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_page_renders_from_disk_in_both_schemes_with_no_console_error(chromium, tmp_path, scheme):
    """One run per scheme: the DOM the browser built, its console, and what it painted."""
    rec = synthetic_record(subject=HOSTILE, output=HOSTILE)
    shot = tmp_path / f"{scheme}.png"
    dom, log = run_chromium(chromium, write_page(rec.data, tmp_path), "--dump-dom", f"--screenshot={shot}",
                            "--window-size=640,560",
                            f"--blink-settings=preferredColorScheme={0 if scheme == 'dark' else 1}")
    seen = Elements(dom)
    assert len(seen.having("g", "call")) == len(rec.data.calls)              # one bar per model call
    assert len(seen.having("rect", "written")) == sum(c.cache_written > 0 for c in rec.data.calls)
    assert len(seen.having("g", "task")) == 8                                # two boards of four
    assert len(seen.having("path", "blocks")) == 2 and len(seen.having("path", "blocked")) == 4
    assert not seen.having("img") and not seen.having("script")              # the hostile text stayed text
    assert console_errors(log) == []
    width, rows = decode_png(shot.read_bytes())
    corner = rows[0][:3]                                                     # the page's background
    assert (sum(corner) > 600) if scheme == "light" else (sum(corner) < 150), corner
    colour = WRITTEN_LIGHT if scheme == "light" else WRITTEN_DARK
    painted = sum(1 for row in rows for x in range(0, width * 3, 3) if tuple(row[x:x + 3]) == colour)
    assert painted > 3_000                                                   # call 2's bar: 40 x 200 px


def test_the_console_check_sees_a_script_error(chromium, tmp_path):
    """The check above can fail: a page with a broken script is caught."""
    page = tmp_path / "broken.html"
    page.write_text("<!DOCTYPE html><p>x</p><script>no_such_function()</script>", encoding="utf-8")
    _, log = run_chromium(chromium, page, "--dump-dom")
    assert any("no_such_function" in line for line in console_errors(log))


def decode_png(data):
    """(width, rows of RGB bytes) of an 8-bit RGB or RGBA PNG, with the standard library only."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks, header = 8, [], None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        header = body if kind == b"IHDR" else header
        chunks += [body] if kind == b"IDAT" else []
        pos += 12 + length
    width, height, depth, colour_type = struct.unpack(">IIBB", header[:10])
    assert depth == 8 and colour_type in (2, 6), (depth, colour_type)
    step = 3 if colour_type == 2 else 4
    raw, stride, rows, prior = zlib.decompress(b"".join(chunks)), width * step, [], bytearray(width * step)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if kind == 2:                            # Up, the common case: one pass, no per-byte branches
            line = bytearray((a + b) & 0xFF for a, b in zip(line, prior))
        elif kind:
            for i in range(stride):
                left, up_left = (line[i - step], prior[i - step]) if i >= step else (0, 0)
                line[i] = (line[i] + _predict(kind, left, prior[i], up_left)) & 0xFF
        rows.append(bytes(line) if step == 3 else bytes(b for i, b in enumerate(line) if i % 4 < 3))
        prior = line
    return width, rows


def _predict(kind, left, up, up_left):
    if kind == 0:
        return 0
    if kind == 1:
        return left
    if kind == 2:
        return up
    if kind == 3:
        return (left + up) // 2
    guess = left + up - up_left                  # Paeth
    near = min((abs(guess - left), 0, left), (abs(guess - up), 1, up), (abs(guess - up_left), 2, up_left))
    return near[2]
