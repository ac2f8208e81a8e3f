"""The board on the session page: s07's task graph, drawn truthfully and at a bounded size."""

import re

from harness.session.board_picture import MAX_NODES
from harness.session.page import BOARD_BYTES, render
from harness.session.recorder import BOARDS_KEPT, Recorder
from helpers import Elements, synthetic_record, task, usage

PAGE_LIMIT = 5_000_000      # bytes: the page must open quickly in any browser, whatever the board


def board_page(board, compactions=0):
    """A page whose board is `board`, drawn at `compactions` compactions and at the end."""
    rec = Recorder("s07_task_system")
    rec.watch_board(lambda: (board, []))
    rec.call(usage(uncached=10))
    for n in range(compactions):
        rec.call(usage(read=10), "summary call")
        rec.compacted(1_000, 100, f"summary {n}", f"t{n}.jsonl")
    rec.finish()
    return render(rec.data)


def drawn_tasks(page):
    """{task id: its node's attributes} for the board drawn at the end (the last picture)."""
    nodes = {}
    for tag, attrs in page.tags:
        if tag == "svg" and "board" in attrs.get("class", ""):
            nodes = {}
        elif tag == "g" and "task" in attrs.get("class", "").split():
            nodes[int(attrs["data-task"])] = attrs
    return nodes


def test_a_task_with_a_huge_owner_or_subject_is_drawn_its_title_cut():
    """An owner edited by hand to 300,000 characters took the whole picture's budget: the page
    said the pictures already took about 1 MB, though it was the first, and drew nothing."""
    huge = {**task(1, "x" * 100_000), "owner": "&" * 300_000}
    page = board_page({1: huge, 2: task(2, "Write the docs")})
    assert set(drawn_tasks(Elements(page))) == {1, 2}
    assert len(page.encode("utf-8")) < 200_000


def test_every_blocker_of_a_drawn_task_is_drawn_or_counted_on_its_box():
    """The first task waits for all the others, more than the picture draws (MAX_NODES, 40
    more): each box's blockers are arrows or counted on it, and the page says how many tasks
    it left out, whatever the limit is."""
    size = MAX_NODES + 40
    board = {1: task(1, "the release", blocked=range(2, size + 1))}
    board.update({n: task(n, f"step {n}") for n in range(2, size + 1)})
    page = Elements(board_page(board))
    nodes = drawn_tasks(page)
    assert not page.having("g", "missing")            # every blocker is on the board
    arrows = {(int(a["data-from"]), int(a["data-to"])) for a in page.having("path", "blocks")}
    for tid, attrs in nodes.items():
        blockers = set(board[tid]["blockedBy"])
        shown = {b for b in blockers if b in nodes}
        assert {(b, tid) for b in shown} <= arrows
        assert len(shown) + int(attrs.get("data-not-drawn", 0)) == len(blockers), tid
    assert 1 in nodes and len(nodes) == MAX_NODES      # the release, and as many as fit
    left = size - MAX_NODES                            # what the release waits for, not drawn
    assert int(nodes[1]["data-not-drawn"]) == left
    assert any(f"{MAX_NODES:,} of {size:,} live tasks" in t for t in page.text)
    assert any(f"+{left} not drawn" in t for t in page.text)


def test_a_three_thousand_task_board_keeps_the_page_small_and_the_picture_legible():
    board = {n: task(n, f"step {n} of the migration", blocked=range(n + 1, min(n + 31, 3_001)))
             for n in range(1, 3_001)}
    board[1]["blockedBy"] = list(range(2, 3_001))      # the first task waits for all the others
    text = board_page(board, compactions=6)
    assert len(text.encode("utf-8")) < PAGE_LIMIT
    pictures = re.findall(r'<svg class="board"[^>]* width="(\d+)" height="(\d+)"(.*?)</svg>', text)
    assert pictures
    for width, height, picture in pictures:
        assert int(height) < 6_000 and int(width) < 20_000                   # pixels
        assert picture.count('<g class="task') < 100
    assert "of 3,000 live tasks" in text


def test_a_pending_task_says_whether_it_is_blocked_or_ready():
    board = {1: task(1, "design", "in_progress"), 2: task(2, "build", blocked=[1]),
             3: task(3, "docs"), 4: {**task(4, "old", "completed"), "unblocked": [5]},
             5: task(5, "freed", blocked=[4])}     # a finished blocker left in blockedBy
    page = Elements(board_page(board))
    classes = {tid: set(a["class"].split()) for tid, a in drawn_tasks(page).items()}
    assert {"pending", "blocked"} <= classes[2] and "ready" not in classes[2]
    assert {"pending", "ready"} <= classes[3] and {"pending", "ready"} <= classes[5]
    assert not {"ready", "blocked"} & (classes[1] | classes[4])
    shown = " ".join(page.text)
    assert "blocked by #1" in shown and "ready" in shown


def test_the_board_is_a_graph_of_live_tasks_and_blockers_at_the_compaction_and_at_the_end():
    page = Elements(render(synthetic_record().data))
    boards = page.having("svg", "board")
    assert len(boards) == 2                                  # at compaction 1, at the end
    nodes = page.having("g", "task")
    assert sorted({n["data-task"] for n in nodes}) == ["1", "2", "3", "4"]   # #5 was deleted
    assert {n["data-task"]: n["class"] for n in nodes[:4]}["2"] == "task in_progress"
    arrows = {(a["data-from"], a["data-to"]) for a in page.having("path", "blocks")}
    assert arrows == {("2", "4")}                            # waiting now
    done = {(a["data-from"], a["data-to"]) for a in page.having("path", "blocked")}
    assert done == {("1", "2"), ("1", "3")}                  # until #1 was completed
    assert any("in progress · alice" in t for t in page.text)


def test_columns_follow_dependency_depth_and_a_cycle_or_missing_blocker_still_draws():
    rec = Recorder()
    rec.call(usage(uncached=10))
    board = {1: task(1, "a"), 2: task(2, "b", blocked=[1]), 3: task(3, "c", blocked=[2]),
             7: task(7, "loop", blocked=[8]), 8: task(8, "back", blocked=[7]),
             9: task(9, "x", blocked=[42]),
             10: {**task(10, "done", "completed"), "unblocked": [11]}, 11: task(11, "freed")}
    rec.watch_board(lambda: (board, []))
    rec.finish()
    page = Elements(render(rec.data))
    x = {}
    for tag, attrs in page.tags:
        if tag == "g" and "task" in attrs.get("class", ""):
            current = attrs["data-task"]
        elif tag == "rect" and "rx" in attrs:
            x[current] = float(attrs["x"])
    assert x["1"] < x["2"] < x["3"]
    assert x["10"] < x["11"]                                 # a finished blocker keeps its place
    assert {"7", "8", "9", "42"} <= set(x)                   # 42: not on the board, drawn
    assert [n["data-task"] for n in page.having("g", "missing")] == ["42"]


def test_only_the_latest_compactions_keep_their_board_and_the_page_says_so():
    page = Elements(board_page({1: task(1, "a")}, compactions=BOARDS_KEPT + 2))
    assert len(page.having("svg", "board")) == BOARDS_KEPT + 1          # and the one at the end
    assert sum("board at this compaction is not kept" in t for t in page.text) == 2


def test_dense_boards_at_many_compactions_share_a_bounded_part_of_the_page():
    """Every drawn task waits for every drawn task after it: the densest picture there is."""
    board = {n: task(n, f"step {n}", blocked=range(n + 1, 61)) for n in range(1, 61)}
    for n in range(1, 61):
        board[n]["unblocked"] = list(range(1, n))              # and once waited for the others
    text = board_page(board, compactions=BOARDS_KEPT + 2)
    pictures = re.findall(r'<svg class="board".*?</svg>', text)
    assert sum(len(p.encode("utf-8")) for p in pictures) <= BOARD_BYTES
    assert "Not drawn: the pictures of the board on this page" in text
    assert '<svg class="board"' in text.split("The board at the end")[1]   # the end's is drawn


def test_a_task_whose_only_blocker_was_deleted_is_drawn_ready_as_s07_lists_it():
    """A delete stopped before it cleared its dependents (a kill, a full disk) leaves #2 waiting
    for a deleted #1: s07 lists #2 as ready (a deleted task blocks nobody); so does the page."""
    board = {1: task(1, "Design", "deleted"), 2: task(2, "Build", blocked=[1])}
    page = Elements(board_page(board))
    nodes = drawn_tasks(page)
    assert "ready" in nodes[2]["class"].split() and "blocked" not in nodes[2]["class"].split()
    assert not page.having("g", "missing")            # #1 is on the board, deleted


def test_a_prompt_that_names_the_board_tag_is_counted_as_its_words_not_as_a_board():
    """/context and the page split s07's board from the text around it: a prompt asking what
    <task-board> is for had all that followed the tag counted (and drawn) as the board."""
    from harness.session import blocks
    prompt = "What is the <task-board> tag for? Keep my notes: step A, step B, step C."
    assert blocks.split_board(prompt) == (prompt, "")
    board = "<task-board>\nThe task board (.tasks/), just read:\n[ ] #1: Alpha\n</task-board>"
    assert blocks.split_board(f"Summary.\n\n{board}") == ("Summary.\n\n", board)
