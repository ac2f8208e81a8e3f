"""s07's task board as a picture on the session page: a box per task, an arrow per blocker.

Relied on by page.py, which draws the board kept at each compaction and at the end of a run
(recorder.py keeps them). Without each piece:
- chosen(): a big board's picture would be unbounded (3,000 tasks made a 31.6 MB page), and
  the first tasks alone show live blockers as "(not on the board)". It picks at most
  MAX_NODES tasks, each with its blockers while there is room; the picture says how many
  it left out.
- the count on a box: a drawn task whose blockers are not all drawn would seem to wait for fewer.
- ready / blocked: a pending task that can start now would look like one that cannot.
- STATUS_CLASSES: class names are fixed words; no text from a task file reaches an attribute.
"""

from collections import deque

from harness import excerpt
from harness.board import graph
from harness.session.markup import text

MAX_NODES = 60               # tasks drawn, so the picture stays legible (/tasks lists them all)
NODE_W, NODE_H = 220, 64     # pixels of a task's box: three lines of text
COLUMN_GAP, ROW_GAP = 56, 16
LINE_CHARS = 36              # characters of a line in a box
TITLE_CHARS = 600            # a box's tooltip: a subject or owner edited by hand may be huge
STATUS_CLASSES = {"pending", "in_progress", "completed", "missing"}
# The order tasks are picked in when the board is bigger than the picture: the work under way,
# then what waits (it brings its blockers along), then what could start, then what is done.
RANK = {"in_progress": 0, "blocked": 1, "ready": 2}

KEY = ('<p class="legend">The board: an arrow runs from a blocker to the task that waits for '
       'it; dashed, it waited until the blocker finished (s07 then removed it from blockedBy). '
       'A pending task is <b>ready</b> when nothing it waits for is unfinished, else '
       '<b>blocked</b>.</p>')


def state(task: dict, board: dict) -> str:
    """The task's status, with pending split into ready and blocked as s07 splits it."""
    if task["status"] != "pending":
        return task["status"]
    return "blocked" if graph.waiting_on(task, board) else "ready"


def chosen(board: dict, every: dict) -> list:
    """The ids to draw, at most MAX_NODES: each live task (board) followed by its blockers,
    breadth first, while there is room. every: the deleted tasks too, whose status a blocker's
    is read from (a deleted one blocks nobody)."""
    order = sorted(board, key=lambda tid: (RANK.get(state(board[tid], every), 3), tid))
    picked = {}                                         # insertion-ordered: a set that keeps order
    for seed in order:
        queue = deque([seed])
        while queue and len(picked) < MAX_NODES:
            tid = queue.popleft()
            if tid in picked:
                continue
            picked[tid] = True
            if tid in board:
                queue.extend(b for b in board[tid]["blockedBy"] if b not in picked)
        if len(picked) >= MAX_NODES:
            break
    return list(picked)


def board_svg(snapshot: list, name: str) -> str:
    """The picture, and a line saying how many live tasks it left out."""
    every = {t["id"]: t for t in snapshot}
    board = {tid: t for tid, t in every.items() if t["status"] != "deleted"}
    if not board:
        return '<p class="note">The board has no live tasks.</p>'
    tasks = {}
    # A deleted blocker a stopped delete left in a blockedBy is drawn as deleted, not missing.
    for tid in chosen(board, every):
        tasks[tid] = every.get(tid) or {"id": tid, "subject": "(not on the board)",
                                        "status": "missing", "owner": None, "blockedBy": [],
                                        "unblocked": []}
    place = _layout(tasks)
    width = max(x for x, _ in place.values()) + NODE_W + 16
    height = max(y for _, y in place.values()) + NODE_H + 16
    arrows = []
    for task in tasks.values():
        tid = task["id"]
        arrows += [_arrow(place[b], place[tid], b, tid, name, "blocks")
                   for b in dict.fromkeys(task["blockedBy"]) if b in tasks]
        arrows += [_arrow(place[tid], place[d], tid, d, name, "blocked")
                   for d in task["unblocked"] if d in tasks and tid not in tasks[d]["blockedBy"]]
    nodes = [_node(tasks[tid], place[tid], every, tasks) for tid in sorted(tasks)]
    svg = (f'<div class="scroll"><svg class="board" xmlns="http://www.w3.org/2000/svg" '
           f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
           f'aria-label="the task board"><defs><marker id="{name}-head" viewBox="0 0 10 10" '
           'refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto">'
           '<path class="head" d="M0,0 L10,5 L0,10 z"/></marker></defs>'
           + "".join(arrows) + "".join(nodes) + "</svg></div>")
    drawn = sum(tid in board for tid in tasks)
    if drawn < len(board):
        svg += (f'<p class="note">Drawn: {drawn:,} of {len(board):,} live tasks (the work in '
                'progress first, then what waits, with its blockers, then what is ready, then '
                'what is done). <code>/tasks</code> lists them all.</p>')
    return svg


def _layout(tasks: dict) -> dict:
    """(x, y) of each box: a column per dependency depth, in id order down each column."""
    depth = _depths(tasks)
    place, rows = {}, {}
    for tid in sorted(tasks, key=lambda i: (depth[i], i)):
        row = rows[depth[tid]] = rows.get(depth[tid], -1) + 1
        place[tid] = (16 + depth[tid] * (NODE_W + COLUMN_GAP), 16 + row * (NODE_H + ROW_GAP))
    return place


def _depths(tasks: dict) -> dict:
    """Each task's column: 0 with no drawn blocker, else one more than its deepest (cycles cut)."""
    depth, visiting = {}, set()

    def visit(tid: int) -> int:
        if tid in depth:
            return depth[tid]
        if tid in visiting:                     # a hand-made cycle
            return -1
        visiting.add(tid)
        depth[tid] = 1 + max([visit(b) for b in _waited_for(tasks, tid)] + [-1])
        visiting.discard(tid)
        return depth[tid]
    for tid in sorted(tasks):
        visit(tid)
    return depth


def _waited_for(tasks: dict, tid: int) -> list:
    """What tid waits for, or waited for, among the drawn: its blockers, and finished tasks
    that once blocked it."""
    before = [b for b in tasks[tid]["blockedBy"] if b in tasks]
    return before + [t["id"] for t in tasks.values() if tid in t["unblocked"]]


def _arrow(start: tuple, end: tuple, blocker: int, task: int, name: str, kind: str) -> str:
    """kind "blocks": task waits for blocker now; "blocked": it did, until blocker finished."""
    (x1, y1), (x2, y2) = start, end
    x1, y1, y2 = x1 + NODE_W, y1 + NODE_H // 2, y2 + NODE_H // 2
    bend = max(abs(x2 - x1) // 2, 30)
    what = (f"#{blocker} blocks #{task}" if kind == "blocks"
            else f"#{blocker} blocked #{task} until it finished")
    return (f'<path class="{kind}" data-from="{blocker}" data-to="{task}" '
            f'marker-end="url(#{name}-head)" d="M{x1},{y1} C{x1 + bend},{y1} {x2 - bend},{y2} '
            f'{x2},{y2}"><title>{what}</title></path>')


def _node(task: dict, at: tuple, board: dict, drawn: dict) -> str:
    """Three lines: the id and subject; the status and owner; ready, or what it is blocked by."""
    x, y = at
    tid, subject, status = task["id"], task["subject"], task["status"]
    kind = state(task, board) if status == "pending" else ""
    who = f" · {task['owner']}" if task["owner"] else ""
    left_out = len([b for b in dict.fromkeys(task["blockedBy"]) if b not in drawn])
    third = _third_line(task, board, left_out)
    title = f"#{tid}: {subject} ({status}{who})" + (f"; {third}" if third else "")
    count = f' data-not-drawn="{left_out}"' if left_out else ""
    css = status if status in STATUS_CLASSES else "unknown"
    return (f'<g class="task {css}{" " + kind if kind else ""}" data-task="{tid}"{count}>'
            f'<title>{text(excerpt.cut(title, TITLE_CHARS))}</title>'
            f'<rect x="{x}" y="{y}" width="{NODE_W}" height="{NODE_H}" rx="6"/>'
            f'<text x="{x + 10}" y="{y + 19}" class="subject">'
            f'{text(excerpt.cut(f"#{tid} {subject}", LINE_CHARS - 4))}</text>'
            f'<text x="{x + 10}" y="{y + 37}" class="status">'
            f'{text(excerpt.cut(status.replace("_", " ") + who, LINE_CHARS))}</text>'
            f'<text x="{x + 10}" y="{y + 55}" class="waits">{text(third)}</text></g>')


def _third_line(task: dict, board: dict, left_out: int) -> str:
    """"ready", "blocked by #1, #3", "blocked by 99 tasks", and "+40 not drawn" when so."""
    if task["status"] == "missing":
        return ""
    waiting = graph.waiting_on(task, board)
    if task["status"] == "pending" and not waiting:
        line = "ready"
    elif not waiting:
        line = ""
    elif len(waiting) <= 3:
        line = "blocked by " + ", ".join(f"#{b}" for b in waiting)
    else:
        line = f"blocked by {len(waiting):,}"
    if not left_out:
        return excerpt.cut(line, LINE_CHARS)
    count = f"+{left_out:,} not drawn"           # never cut: it is why the arrows are fewer
    return f"{excerpt.cut(line, LINE_CHARS - len(count) - 3)} · {count}" if line else count
