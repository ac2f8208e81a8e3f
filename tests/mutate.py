#!/usr/bin/env python3
"""The mutation check: break one idea at a time in a copy of the repo; the tests must notice.

    python tests/mutate.py              # every mutation, each against the tests it names
    python tests/mutate.py claim order  # only the mutations whose name contains a word given
    python tests/mutate.py --suite      # each against the whole suite (slow: minutes per mutation)

A suite can pass and still not test an idea: a mutation that leaves every test green shows
where. Each entry below is (name, file, the exact text to replace, what replaces it, the tests
that must fail). The working tree is copied (uncommitted changes included) to a temporary
folder, the one change is made there, and the tests run there; the repo is never touched.
First the named tests run on an unchanged copy: a test that already fails cannot catch anything.
A snippet no longer in its file is reported as a stale mutation: update the entry, or the
check silently tests nothing. See tests/MUTATIONS.md. Not collected by pytest (no test_ names).
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SKIP = shutil.ignore_patterns(".git", "__pycache__", ".pytest_cache", ".tasks", ".transcripts", "demo",
                              ".venv")   # what a run leaves behind is not the code under test
TIMEOUT = 900   # seconds for one pytest run; the whole suite takes about two minutes


@dataclass
class Mutation:
    name: str
    file: str
    old: str
    new: str
    tests: list[str]


MUTATIONS = [
    Mutation("_clear_dependency drops the last blocker, not the finished one", "s07_task_system.py",
             'task["blockedBy"] = [b for b in task["blockedBy"] if b != finished["id"]]',
             'task["blockedBy"] = task["blockedBy"][:-1]',
             ["tests/test_s07_tasks.py"]),
    Mutation("the claim refusal lets an agent finish another agent's task", "s07_task_system.py",
             'if task["status"] == "in_progress" and holder and holder != self.agent:',
             'if task["status"] == "in_progress" and holder and holder != self.agent and not status:',
             ["tests/test_s07_tasks.py", "tests/test_s07_board.py", "tests/test_s07_e2e.py"]),
    Mutation("layer 1 clears batches of 2,000 tokens instead of CLEAR_AT_LEAST (8,000)", "s06_compact.py",
             "    if not layer1.batch_worth_clearing(messages, set(fresh), freed, CLEAR_AT_LEAST,",
             "    if not layer1.batch_worth_clearing(messages, set(fresh), freed, CLEAR_AT_LEAST // 4,",
             ["tests/test_s06_compact.py", "tests/test_readme.py"]),
    Mutation("a task file is written in place, not through a temp file and os.replace",
             "harness/board/folder.py",
             '            with open(tmp, "wb") as f:\n'
             "                f.write(data)\n"
             "                f.flush()\n"
             "                st = os.fstat(f.fileno())  # scan()'s key: os.replace and os.link keep size, mtime, inode\n"
             "            place(tmp, path)\n",
             '            with open(tmp if place is os.link else path, "wb") as f:\n'
             "                f.write(data)\n"
             "                f.flush()\n"
             "                st = os.fstat(f.fileno())\n"
             "            if place is os.link:\n"
             "                place(tmp, path)\n",
             ["tests/test_s07_durability.py"]),
    Mutation("tool_results come back in reverse order of the calls", "s03_todo.py",
             "        results.append(result)\n",
             "        results.insert(0, result)\n",
             ["tests/test_s03_e2e.py", "tests/test_endpoint_table.py", "tests/test_cli.py"]),
    Mutation("the note about a cut call goes before the tool_results", "s03_todo.py",
             "        results = run_tool_calls(calls, TOOLS, TOOL_HANDLERS) + cut_note(response)",
             "        results = cut_note(response) + run_tool_calls(calls, TOOLS, TOOL_HANDLERS)",
             ["tests/test_s03_e2e.py"]),
]


def copy_of_repo(into: Path) -> Path:
    copy = into / "repo"
    shutil.copytree(ROOT, copy, ignore=SKIP, symlinks=True)
    return copy


def failed_tests(repo: Path, tests: list[str]) -> tuple[set[str], int, str]:
    """(the ids of the tests that failed, pytest's exit code, its last lines) in this copy."""
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider", *tests],
                          cwd=repo, capture_output=True, text=True, timeout=TIMEOUT,
                          env={**_env(), "PYTHONDONTWRITEBYTECODE": "1"})
    failed = set(re.findall(r"^(?:FAILED|ERROR) (.+?)(?: - .*)?$", proc.stdout, re.M))
    return failed, proc.returncode, "\n".join(proc.stdout.strip().splitlines()[-3:])


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}


def apply(mutation: Mutation, repo: Path) -> str | None:
    """Make the change in the copy; None, or why it could not be made."""
    path = repo / mutation.file
    source = path.read_text(encoding="utf-8")
    found = source.count(mutation.old)
    if found != 1:
        return (f"stale mutation: the snippet is not in {mutation.file} (the code changed; update the entry)"
                if found == 0 else f"ambiguous mutation: the snippet is in {mutation.file} {found} times")
    path.write_text(source.replace(mutation.old, mutation.new), encoding="utf-8")
    return None


def check(mutation: Mutation, tests: list[str], baseline: set[str]) -> bool:
    with tempfile.TemporaryDirectory(prefix="mutate_") as tmp:
        repo = copy_of_repo(Path(tmp))
        problem = apply(mutation, repo)
        if problem:
            print(f"STALE   {mutation.name}\n        {problem}")
            return False
        failed, code, tail = failed_tests(repo, tests)
    new = sorted(failed - baseline)
    if new or code not in (0, 1):              # 2-4: pytest could not even run (an import error): caught
        print(f"caught  {mutation.name}")
        for test in new[:6]:
            print(f"        by {test}")
        if len(new) > 6:
            print(f"        and {len(new) - 6} more")
        if not new:
            print(f"        pytest exit code {code}: {tail}")
        return True
    print(f"MISSED  {mutation.name}\n        every test in {' '.join(tests)} still passes")
    return False


def main(argv: list[str]) -> int:
    suite = "--suite" in argv
    words = [a for a in argv if a != "--suite"]
    chosen = [m for m in MUTATIONS if not words or any(w.lower() in m.name.lower() for w in words)]
    if not chosen:
        print(f"no mutation matches {' '.join(words)!r}; the names are:\n  " +
              "\n  ".join(m.name for m in MUTATIONS))
        return 2
    every = ["tests"] if suite else sorted({t for m in chosen for t in m.tests})
    with tempfile.TemporaryDirectory(prefix="mutate_") as tmp:
        baseline, _, _ = failed_tests(copy_of_repo(Path(tmp)), every)
    if baseline:
        print("already failing without any mutation (these cannot catch one):")
        for test in sorted(baseline):
            print(f"        {test}")
    caught = sum(check(m, ["tests"] if suite else m.tests, baseline) for m in chosen)
    print(f"{caught} of {len(chosen)} mutations caught")
    return 0 if caught == len(chosen) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
