"""The session page in a real browser: headless Chromium from the system's packages.

It opens the page from disk as a learner would, and checks what the browser made of it: the
bars, the board and what the model saw in its DOM, no console error (no script ran, none
failed), and screenshots in the light and the dark scheme, in a narrow and a wide window, that
show the bars' colours on a matching background and the chart as wide as the page; that a link
to a call opens its request; and, measured in a 600-pixel window, that nothing is cut.
Chromium is driven as tools/session_screenshot.py drives it for the README's picture.
Skipped with a reason when Chromium is missing; a failure when CI=true (.ci/run installs it).
"""

import html as html_module
import json
import re
import struct
import sys
import zlib

import pytest

from harness.session.page import BAR_WIDTH_MAX, CHART_MIN, CHART_WIDTH, write_page
from helpers import HOSTILE, ROOT, Elements, synthetic_record

sys.path.insert(0, str(ROOT / "tools"))
import session_screenshot  # noqa: E402  (the screenshot script's way to drive Chromium)

WRITTEN_LIGHT, WRITTEN_DARK = (0xEF, 0x8A, 0x17), (0xF6, 0xB2, 0x6B)   # "written to the cache"
PAGE_MAX, PADDING = 1200, 15         # the page's CSS: max-width 1200px, padding 1em (15px)


def test_a_link_to_a_call_opens_its_request(chromium, tmp_path):
    """A bar, and each "as in call 3", links to #call-N: following one opens that request, and
    only that one. No script does it: the target is inside the <details>, which the browser
    opens to show it (a target on the <details> itself scrolled to it and left it closed)."""
    page = write_page(synthetic_record().data, tmp_path)
    url = page.resolve().as_uri() + "#call-3"
    dom, log = session_screenshot.run_chromium(chromium, url, "--dump-dom")
    sections = Elements(dom).having("details", "request")
    assert len(sections) == 6 and [s["data-call"] for s in sections if "open" in s] == ["3"]
    assert console_errors(log) == []


MEASURE = """<script>
addEventListener("load", () => {
  const box = (e) => e.getBoundingClientRect();
  const facts = {page: document.documentElement.scrollWidth, window: innerWidth,
    chart: box(document.querySelector("svg.chart").closest(".scroll")).right,
    chartText: Math.min(...[...document.querySelectorAll("svg.chart text")].map((t) => {
      const svg = t.closest("svg");
      return parseFloat(getComputedStyle(t).fontSize) * box(svg).width / svg.viewBox.baseVal.width;
    })),
    legendItems: document.querySelectorAll(".legend .item").length,
    legendSplit: [...document.querySelectorAll(".legend .item")]
      .filter((e) => box(e).height > 2 * parseFloat(getComputedStyle(e).fontSize))
      .map((e) => e.textContent),
    table: box(document.querySelector("table.tools")).right,
    boards: [...document.querySelectorAll("svg.board")].map((svg) => {
      const scroller = svg.closest(".scroll"), style = getComputedStyle(scroller);
      return {width: box(svg).width, room: scroller.clientWidth, reach: scroller.scrollWidth,
              overflow: style.overflowX, attachment: style.backgroundAttachment};
    })};
  const out = document.createElement("pre");
  out.id = "measured";
  out.textContent = JSON.stringify(facts);
  document.body.append(out);
});
</script>"""


def layout(chromium, page, width):
    """Facts about the page's layout in a window `width` pixels wide, measured by a script in
    a copy of the page (the copy leaves out the Content-Security-Policy that forbids it)."""
    html = page.read_text(encoding="utf-8")
    html = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", html)
    measured = page.with_name("measured.html")
    measured.write_text(html.replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    dom, _ = session_screenshot.run_chromium(chromium, measured, "--dump-dom",
                                             f"--window-size={width},800")
    return json.loads(html_module.unescape(re.search(r'<pre id="measured">(.*?)</pre>', dom)[1]))


@pytest.mark.parametrize("width", [600, 400])
def test_in_a_narrow_window_the_charts_words_stay_readable_and_no_legend_entry_splits(
        chromium, tmp_path, width):
    """The chart is drawn to the page's width: at 600 px its labels were 6 to 7 px tall, and
    the legend broke an entry (a swatch and its words) across two lines."""
    facts = layout(chromium, write_page(synthetic_record().data, tmp_path), width)
    assert facts["chartText"] >= 10, facts["chartText"]        # pixels, as drawn
    assert facts["legendItems"] >= 8 and facts["legendSplit"] == []


def test_at_600_px_nothing_is_cut_and_a_wide_board_scrolls_in_its_box(chromium, tmp_path):
    facts = layout(chromium, write_page(synthetic_record().data, tmp_path), 600)
    assert facts["window"] == 600 and facts["page"] <= 600        # no sideways page scroll
    assert facts["chart"] <= 600 and facts["table"] <= 600
    boards = facts["boards"]
    assert len(boards) == 2 and all(b["width"] > b["room"] for b in boards)   # wider than it
    for board in boards:                 # ... so it scrolls, all of it reachable, with a cue
        assert board["overflow"] == "auto" and board["reach"] >= board["width"], board
        # the edge shadows: fixed to the box (scroll) under covers that move with it (local)
        assert "local" in board["attachment"] and "scroll" in board["attachment"], board


def console_errors(stderr):
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


@pytest.mark.parametrize("scheme, window", [("light", 640), ("dark", 1280)])
def test_the_page_renders_from_disk_in_both_schemes_with_no_console_error(
        chromium, tmp_path, scheme, window):
    """One run per scheme: the DOM the browser built, its console, and what it painted."""
    rec = synthetic_record(subject=HOSTILE, output=HOSTILE)
    shot = tmp_path / f"{scheme}.png"
    dark = 0 if scheme == "dark" else 1
    page = write_page(rec.data, tmp_path)
    dom, log = session_screenshot.run_chromium(
        chromium, page, "--dump-dom", f"--screenshot={shot}", f"--window-size={window},560",
        f"--blink-settings=preferredColorScheme={dark}")
    seen = Elements(dom)
    assert len(seen.having("g", "call")) == len(rec.data.calls)        # one bar per model call
    assert len(seen.having("rect", "written")) == sum(c.cache_written > 0 for c in rec.data.calls)
    assert len(seen.having("g", "task")) == 8                          # two boards of four
    assert len(seen.having("path", "blocks")) == 2 and len(seen.having("path", "blocked")) == 4
    assert {"3"} == {t["data-task"] for t in seen.having("g", "ready")}
    assert {"4"} == {t["data-task"] for t in seen.having("g", "blocked")}
    assert not seen.having("img") and not seen.having("script")        # hostile text stayed text
    assert console_errors(log) == []
    # What the model saw: a collapsed section per call, new blocks and placeholders marked, the
    # summary and the board after the compaction.
    sections = seen.having("details", "request")
    assert len(sections) == len(rec.data.calls) and not [s for s in sections if "open" in s]
    assert seen.having("li", "cleared") and len(seen.having("span", "new")) > 6
    assert seen.having("span", "summary") and seen.having("pre", "board-text")
    width, rows = decode_png(shot.read_bytes())
    corner = rows[0][:3]                                               # the page's background
    assert (sum(corner) > 600) if scheme == "light" else (sum(corner) < 150), corner
    colour = WRITTEN_LIGHT if scheme == "light" else WRITTEN_DARK
    runs = [len(run) // 3 for row in rows for run in pixel_runs(row, colour)]
    assert sum(runs) > 1_500                                           # call 2's bar
    # The chart is as wide as the page, or CHART_MIN in a narrow window (it then scrolls in its
    # box): its bars are as much wider as it is.
    chart_width = max(min(window - 2 * PADDING, PAGE_MAX), CHART_MIN)
    assert abs(max(runs) - BAR_WIDTH_MAX * chart_width / CHART_WIDTH) <= 2


def test_the_console_check_sees_a_script_error(chromium, tmp_path):
    """The check above can fail: a page with a broken script is caught."""
    page = tmp_path / "broken.html"
    page.write_text("<!DOCTYPE html><p>x</p><script>no_such_function()</script>", encoding="utf-8")
    _, log = session_screenshot.run_chromium(chromium, page, "--dump-dom")
    assert any("no_such_function" in line for line in console_errors(log))


def pixel_runs(row, colour):
    """The runs of pixels of exactly `colour` side by side in a row of RGB bytes."""
    pattern = re.compile(b"(?:" + re.escape(bytes(colour)) + b")+")
    return [m.group() for m in pattern.finditer(row) if m.start() % 3 == 0]


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
    raw, stride, rows = zlib.decompress(b"".join(chunks)), width * step, []
    prior = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        if kind == 2:                        # Up, the common case: one pass, no per-byte branches
            line = bytearray((a + b) & 0xFF for a, b in zip(line, prior, strict=True))
        elif kind:
            for i in range(stride):
                left, up_left = (line[i - step], prior[i - step]) if i >= step else (0, 0)
                line[i] = (line[i] + _predict(kind, left, prior[i], up_left)) & 0xFF
        rows.append(bytes(line) if step == 3
                    else bytes(b for i, b in enumerate(line) if i % 4 < 3))
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
    near = min((abs(guess - left), 0, left), (abs(guess - up), 1, up),
               (abs(guess - up_left), 2, up_left))
    return near[2]
