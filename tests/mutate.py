#!/usr/bin/env python3
"""The mutation check: break one idea at a time in a copy of the repo; the tests must notice.

    python tests/mutate.py              # every mutation, each against the tests it names
    python tests/mutate.py claim order  # only the mutations whose name contains a word given
    python tests/mutate.py --suite      # each against the whole suite (slow: minutes per mutation)

A suite can pass and still not test an idea: a mutation that leaves every test green shows
where. Each entry below is (name, file, the exact text to replace, what replaces it, the tests
that must fail: files, or single tests as file::name). The working tree is copied (uncommitted
changes included) to a temporary folder, the one change is made there, and the tests run there
(stopping at the first failure); the repo is never touched. First every snippet is looked for:
one that is not in its file exactly once is a stale entry, and the check fails at once, before
any test runs (a stale entry would silently test nothing). Then the named tests run on an
unchanged copy: a test that already fails cannot catch anything, so it is left out of the runs.
The PostgreSQL mutations need a server (TEST_DATABASE_URL, or the binaries for a throwaway
one): without it their tests skip, and the mutation is reported MISSED. See tests/MUTATIONS.md.
Not collected by pytest (no test_ names).
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SKIP = shutil.ignore_patterns(".git", "__pycache__", ".pytest_cache", ".tasks", ".transcripts",
                              "demo", ".venv")   # what a run leaves behind is not the code
TIMEOUT = 300   # seconds for one pytest run: a mutation that makes the tests hang is caught


@dataclass
class Mutation:
    name: str
    file: str
    old: str
    new: str
    tests: list


S03_E2E = "tests/test_s03_e2e.py"
S06 = "tests/test_s06_compact.py"
STREAMS = "tests/test_stream_shapes.py"
SENDABLE = "tests/test_sendable_text.py"
CONTRACT = "tests/test_board_contract.py"
DURABILITY = "tests/test_s07_durability.py"
WAITS = CONTRACT + "::test_while_one_agent_changes_the_board_another_agents_change_waits_for_it"

MUTATIONS = [
    # ---------------------------------------------------------------- s03: the loop and tools
    Mutation("the todo nag comes a round late", "s03_todo.py",
             "        if rounds_without_todo >= NAG_AFTER:",
             "        if rounds_without_todo > NAG_AFTER:",
             [S03_E2E]),
    Mutation("call_tool returns a tool's exception as a result that worked", "s03_todo.py",
             '        return f"{type(exc).__name__}: {exc}", True',
             '        return f"{type(exc).__name__}: {exc}", False',
             [S03_E2E, "tests/test_s03_tools.py"]),
    Mutation("tool_results come back in reverse order of the calls", "s03_todo.py",
             "            results.append(tool_calls.result(run, call, output, is_error))",
             "            results.insert(0, tool_calls.result(run, call, output, is_error))",
             [S03_E2E, "tests/test_endpoint_table.py"]),
    Mutation("the note about a cut call goes before the tool_results", "s03_todo.py",
             "        results = run_tool_calls(run, reply.calls, TOOL_HANDLERS) + reply.notes",
             "        results = reply.notes + run_tool_calls(run, reply.calls, TOOL_HANDLERS)",
             [S03_E2E]),
    Mutation("a tool call cut by max_tokens is run anyway", "harness/pairing.py",
             'CUT = {"max_tokens", "model_context_window_exceeded", ENDED_EARLY}',
             'CUT = {"model_context_window_exceeded", ENDED_EARLY}',
             [S03_E2E]),
    Mutation("a tool call cut by an early end of the stream is run anyway",
             "harness/pairing.py",
             'CUT = {"max_tokens", "model_context_window_exceeded", ENDED_EARLY}',
             'CUT = {"max_tokens", "model_context_window_exceeded"}',
             [STREAMS + "::test_a_task_update_cut_off_inside_its_input_is_not_run"]),
    Mutation("a stream that ended before message_delta is taken as a whole reply",
             "harness/endpoints.py",
             "        if not self.ended:",
             "        if False:",
             [STREAMS]),
    Mutation("a delta is taken for the block it names without checking that block started",
             "harness/endpoints.py",
             "        if not started or not 0 <= index < len(self.blocks):",
             "        if not started:",
             [STREAMS]),
    Mutation("a tool input sent as JSON text is decoded without mending half an emoji",
             "harness/endpoints.py",
             "        return clean_json(json.loads(text))",
             "        return json.loads(text)",
             [SENDABLE]),
    Mutation("a tool result joins the history without being mended", "harness/tool_calls.py",
             "    output = clean_text(output)\n",
             "",
             [SENDABLE + "::test_a_task_file_name_that_is_not_utf8_leaves_the_session_working"]),
    Mutation("a result over OUTPUT_CAP is cut, not saved whole", "s03_todo.py",
             "            output = spill.keep_whole(output, OUTPUT_CAP, call.name, run.saved)",
             "            output = output[:OUTPUT_CAP]",
             ["tests/test_spill.py", "tests/test_long_sessions.py::test_a_300000_character_"
                                     "output_is_read_back_whole_after_layer_1_clears_it"]),
    Mutation("write_file copies its temp file over the file instead of os.replace",
             "harness/files.py",
             "        os.replace(tmp, path)\n",
             "        shutil.copyfile(tmp, path)\n"
             "        os.unlink(tmp)\n",
             ["tests/test_atomic_file_tools.py"]),

    # ---------------------------------------------------------------- s06: the three layers
    Mutation("layer 1 clears batches of 2,000 tokens instead of CLEAR_AT_LEAST (8,000)",
             "s06_compact.py",
             "    at_least = min(CLEAR_AT_LEAST, CONTEXT.threshold * 2 // 5)",
             "    at_least = min(CLEAR_AT_LEAST // 4, CONTEXT.threshold * 2 // 5)",
             [S06]),
    Mutation("layer 1 ignores the cache a batch rewrites", "s06_compact.py",
             "    if batch.tokens < at_least or batch.tokens < REWRITE_SHARE * rewritten:",
             "    if batch.tokens < at_least:",
             [S06]),
    Mutation("layer 1 keeps one result fewer than KEEP_RECENT", "harness/layer1.py",
             "    later_whole, old = set(), len(results) - keep_recent\n",
             "    later_whole, old = set(), len(results) - keep_recent + 1\n",
             [S06, "tests/test_layer1.py"]),
    Mutation("layer 1 clears results of the newest turn, which the model has not seen",
             "harness/layer1.py",
             "        if n < old and long and stale and tid not in newest_turn and not cleared",
             "        if n < old and long and stale and not cleared",
             [S06, "tests/test_layer1.py"]),
    Mutation("layer 1 writes its placeholders into the history instead of a copy",
             "harness/layer1.py",
             '            message = {**message, "content": blocks}',
             '            message["content"] = blocks',
             [S06, "tests/test_layer1.py"]),
    Mutation("a cleared result is not saved whole on disk", "harness/layer1.py",
             '    path = spill.save_for_placeholder(block.get("content"), name, saved)',
             "    path = None",
             [S06, "tests/test_layer1.py"]),
    Mutation("layer 2 compacts again without the half-threshold growth", "s06_compact.py",
             "    return size > CONTEXT.threshold and grown > CONTEXT.threshold // 2",
             "    return size > CONTEXT.threshold",
             [S06]),

    # ---------------------------------------------------------------- s07: the rules
    Mutation("_clear_dependency drops the last blocker, not the finished one",
             "s07_task_system.py",
             '            task["blockedBy"] = [b for b in blockers if b != finished["id"]]',
             '            task["blockedBy"] = blockers[:-1]',
             ["tests/test_s07_tasks.py"]),
    Mutation("the claim refusal lets an agent finish another agent's task",
             "harness/board/claims.py",
             '    if task["status"] == "in_progress" and holder and holder != agent:',
             '    if task["status"] == "in_progress" and holder and holder != agent '
             'and not status:',
             ["tests/test_s07_tasks.py", "tests/test_s07_board.py", CONTRACT]),
    Mutation("a blocked task may start", "s07_task_system.py",
             '        if status in ("in_progress", "completed") and waiting:',
             '        if status == "completed" and waiting:',
             [CONTRACT, "tests/test_s07_tasks.py"]),
    Mutation("the cycle check is skipped", "s07_task_system.py",
             "                    graph.refuse_cycle(tasks, tid, dep)",
             "                    pass",
             [CONTRACT, "tests/test_s07_tasks.py"]),
    Mutation("a deleted task is accepted as a blocker (a note, not a refusal)",
             "s07_task_system.py",
             '            if other["status"] == "deleted":\n'
             '                raise ValueError(f"task #{dep} was deleted; it cannot block "\n'
             '                                 "anything")\n',
             "",
             [CONTRACT + "::test_a_deleted_task_cannot_become_a_blocker",
              "tests/test_s07_tasks.py"]),
    Mutation("starting a task does not make the agent its owner", "harness/board/claims.py",
             '        change["owner"] = agent            # starting (or taking over) claims it',
             "        pass",
             [CONTRACT, "tests/test_s07_tasks.py"]),
    Mutation("a blocker that cannot be read counts as finished", "harness/board/graph.py",
             '        if tasks.get(blocker, {}).get("status") not in FINISHED:',
             '        if tasks.get(blocker, {"status": "completed"})["status"] not in FINISHED:',
             ["tests/test_s07_tasks.py", "tests/test_board_hostile.py", CONTRACT]),
    Mutation("s07's automatic compaction (layer 2) leaves the board out", "s07_task_system.py",
             "            compact_with_board(messages, run)                  # layer 2 + board",
             "            s06.auto_compact(messages, run)                    # layer 2 + board",
             [CONTRACT, "tests/test_s07_e2e.py"]),
    Mutation("the board is not added after a compaction", "s07_task_system.py",
             "                            attach=board_message)",
             "                            attach=None)",
             [CONTRACT, "tests/test_s07_e2e.py"]),

    # ---------------------------------------------------------------- s07: the file board
    Mutation("the high-water mark is ignored: a new task takes an id deleted by hand",
             "harness/board/folder.py",
             "        return max(names, mark)",
             "        return names",
             [CONTRACT]),
    Mutation("the cross-process stamp check is removed: a warm cache misses another's task",
             "harness/board/folder.py",
             "                if self._stamp != stamp:\n"
             "                    self._stamp = None              # another process wrote since: "
             "revalidate first\n",
             "",
             [CONTRACT + "::test_a_blocker_completed_by_a_warm_manager_frees_what_another_"
                         "manager_created"]),
    Mutation("the folder's lock is not taken", "harness/board/folder.py",
             "                fcntl.flock(fd, fcntl.LOCK_EX)      # waits for other processes",
             "                pass",
             [WAITS, DURABILITY]),
    Mutation("a task file is written in place, not through a temp file and os.replace",
             "harness/board/folder.py",
             '            with open(tmp, "wb") as f:\n'
             "                f.write(data)\n"
             "                f.flush()\n"
             "                st = os.fstat(f.fileno())  # scan()'s key: place() keeps size, "
             "mtime, inode\n"
             "            place(tmp, path)\n",
             '            with open(tmp if place is os.link else path, "wb") as f:\n'
             "                f.write(data)\n"
             "                f.flush()\n"
             "                st = os.fstat(f.fileno())\n"
             "            if place is os.link:\n"
             "                place(tmp, path)\n",
             [DURABILITY]),
    Mutation("a task file is copied over from its temp file instead of os.replace",
             "harness/board/folder.py",
             "        self._put(task, lambda tmp, path: os.replace(tmp, path))",
             "        self._put(task, lambda tmp, path: shutil.copyfile(tmp, path))",
             [DURABILITY]),

    # ---------------------------------------------------------------- s07: the PostgreSQL board
    Mutation("PostgreSQL writes unblocked as NULL: a reopening cannot say who stopped waiting",
             "harness/board/postgres.py",
             '                  task["blockedBy"], task["owner"], task.get("unblocked"), '
             'task["created_at"],',
             '                  task["blockedBy"], task["owner"], None, task["created_at"],',
             [CONTRACT + "::test_reopening_a_completed_task_says_who_no_longer_waits"]),
    Mutation("PostgreSQL's row lock (FOR UPDATE on task_board) is not taken",
             "harness/board/postgres.py",
             '        "FOR UPDATE")',
             '        "")',
             [WAITS, CONTRACT + "::test_of_eight_concurrent_starters_exactly_one_wins_each_round"]),
]

# Names a mutation's new text uses that its file does not import.
IMPORTS = {"shutil.": "import shutil\n"}


def copy_of_repo(into: Path) -> Path:
    copy = into / "repo"
    shutil.copytree(ROOT, copy, ignore=SKIP, symlinks=True)
    return copy


def run_tests(repo: Path, tests: list, extra: list) -> tuple:
    """(the ids of the tests that failed, how many were skipped, pytest's exit code, its last
    lines) in this copy; exit code None when the run did not end within TIMEOUT."""
    command = [sys.executable, "-m", "pytest", "-q", "-rfEs", "-p", "no:cacheprovider", *extra,
               *tests]
    env = {**_env(), "PYTHONDONTWRITEBYTECODE": "1"}
    try:
        proc = subprocess.run(command, cwd=repo, capture_output=True, text=True, timeout=TIMEOUT,
                              env=env)
    except subprocess.TimeoutExpired:
        return set(), 0, None, f"still running after {TIMEOUT} s"
    failed = set(re.findall(r"^(?:FAILED|ERROR) (.+?)(?: - .*)?$", proc.stdout, re.M))
    skipped = re.search(r"(\d+) skipped", proc.stdout)
    tail = "\n".join(proc.stdout.strip().splitlines()[-3:])
    return failed, int(skipped[1]) if skipped else 0, proc.returncode, tail


def _env() -> dict:
    return {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}


def problem_with(mutation: Mutation, source: str):
    """None if the snippet is in the file exactly once; else why the entry is stale."""
    found = source.count(mutation.old)
    if found == 1:
        return None
    if found == 0:
        return f"the snippet is not in {mutation.file}: the code changed; update the entry"
    return f"the snippet is in {mutation.file} {found} times: make it longer"


def missing_test(test: str):
    """None if the named test file (and test, for file::name) is there; else what is not."""
    path, _, name = test.partition("::")
    if not (ROOT / path).exists():
        return f"there is no {path}"
    if name and not re.search(rf"^def {re.escape(name.split('[')[0])}\(",
                               (ROOT / path).read_text(encoding="utf-8"), re.M):
        return f"there is no test {name} in {path}"
    return None


def stale(chosen: list) -> list:
    """(mutation, why) for every entry whose snippet is not in its file exactly once, or that
    names a test that is not there."""
    found = []
    for mutation in chosen:
        path = ROOT / mutation.file
        source = path.read_text(encoding="utf-8") if path.is_file() else ""
        problems = [problem_with(mutation, source)] + [missing_test(t) for t in mutation.tests]
        for problem in filter(None, problems):
            found.append((mutation, problem))
    return found


def apply(mutation: Mutation, repo: Path) -> None:
    """Make the change in the copy (the snippet was checked: it is there once)."""
    path = repo / mutation.file
    source = path.read_text(encoding="utf-8").replace(mutation.old, mutation.new)
    for used, line in IMPORTS.items():
        if used in mutation.new and line not in source:
            source = line + source          # a docstring first is fine: it is then no docstring
    path.write_text(source, encoding="utf-8")


def check(mutation: Mutation, tests: list, baseline: set) -> bool:
    deselect = [f"--deselect={test}" for test in sorted(baseline)]
    with tempfile.TemporaryDirectory(prefix="mutate_") as tmp:
        repo = copy_of_repo(Path(tmp))
        apply(mutation, repo)
        failed, skipped, code, tail = run_tests(repo, tests, ["-x", *deselect])
    new = sorted(failed - baseline)
    if new or code not in (0, 1, 5):     # 2-4: pytest could not even run (an import error)
        print(f"caught  {mutation.name}")
        for test in new:
            print(f"        by {test}")
        if not new:
            print(f"        pytest exit code {code}: {tail}")
        return True
    print(f"MISSED  {mutation.name}\n        every test in {' '.join(tests)} still passes")
    if skipped:
        print(f"        ({skipped} skipped: {tail.splitlines()[-1]})")
    return False


def main(argv: list) -> int:
    started = time.monotonic()
    suite = "--suite" in argv
    words = [a for a in argv if a != "--suite"]
    chosen = [m for m in MUTATIONS if not words or any(w.lower() in m.name.lower() for w in words)]
    if not chosen:
        print(f"no mutation matches {' '.join(words)!r}; the names are:\n  " +
              "\n  ".join(m.name for m in MUTATIONS))
        return 2
    problems = stale(chosen)
    for mutation, why in problems:
        print(f"STALE   {mutation.name}\n        {why}")
    if problems:
        print(f"{len({m.name for m, _ in problems})} of {len(chosen)} mutations are stale: "
              "nothing was run")
        return 2
    every = ["tests"] if suite else sorted({t for m in chosen for t in m.tests})
    with tempfile.TemporaryDirectory(prefix="mutate_") as tmp:
        baseline, skipped, _, _ = run_tests(copy_of_repo(Path(tmp)), every, [])
    if baseline:
        print("already failing without any mutation (left out of the runs below):")
        for test in sorted(baseline):
            print(f"        {test}")
    if skipped:
        print(f"{skipped} of the named tests skip here (see -rs): a mutation only they would "
              "catch is MISSED")
    caught = sum(check(m, ["tests"] if suite else m.tests, baseline) for m in chosen)
    minutes = (time.monotonic() - started) / 60
    print(f"{caught} of {len(chosen)} mutations caught, {len(chosen) - caught} missed "
          f"({minutes:.1f} minutes)")
    return 0 if caught == len(chosen) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
