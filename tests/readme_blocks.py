"""The checked blocks of README.md and docs/*.md, compared with a program's output line by line.

A block is marked with `<!-- checked: NAME -->` above a ```text fence, in README.md or in any
docs/*.md file; tests/test_docs.py holds that every marker has a test. The rules:
- every line of the block must equal a line of the output, in the same order, with no line
  of the output left out or put in between (trailing spaces are ignored, indentation is not);
- `…` inside a line stands for any text (a port, a timestamp, a path that differs per machine);
  a number written next to it must still be the whole number (`…1,763` does not match `21,763`);
- a line holding only `…` (indented or not) stands for any number of lines, none included;
- `$ cmd` starts a new run: the lines after it are that command's output;
- `s07 >> text` is a REPL prompt followed by what the user typed. In a pipe the program prints
  the prompt and the typed text is not echoed, so terminal_view() puts it back after each prompt.

Every number in a quoted line is text, so it is checked: a quote that drifts fails, loudly.
"""

import re
from dataclasses import dataclass, field
from pathlib import Path

ELLIPSIS = "…"
COMMAND = "$ "
MARKER = re.compile(r"^<!-- checked: ([\w-]+) -->$", re.M)   # on a line of its own
ROOT = Path(__file__).resolve().parent.parent


def quoting_files() -> list[Path]:
    """The files that may hold checked blocks: README.md, then docs/*.md."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def markers(text: str) -> list[str]:
    """The names of the checked blocks in a file's text, in order (a marker quoted inside a
    sentence, as the README does to explain them, is not one)."""
    return MARKER.findall(text)


@dataclass
class Run:
    """One command of a block: what was typed after `$ ` (None: the block has no `$` line),
    the lines typed at REPL prompts, and the lines the terminal shows (prompts included)."""
    command: str | None
    inputs: list[str] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)


def checked_block(readme: str, name: str) -> list[str]:
    """The lines of the block marked <!-- checked: name -->; AssertionError if there is none."""
    pattern = rf"^<!-- checked: {re.escape(name)} -->\n```text\n(.*?)```"
    block = re.search(pattern, readme, re.S | re.M)
    assert block, f"no checked block {name!r} (or no ```text fence right after its marker)"
    return block[1].rstrip("\n").splitlines()


def runs(lines: list[str], prompts: tuple[str, ...] = ()) -> list[Run]:
    """Split a block into its runs at `$ ` lines; collect what was typed after each prompt."""
    found = []
    for line in lines:
        if line.startswith(COMMAND):
            found.append(Run(line[len(COMMAND):]))
            continue
        if not found:
            found.append(Run(None))
        found[-1].lines.append(line)
        prompt = next((p for p in prompts if line.startswith(p)), None)
        if prompt is not None:
            found[-1].inputs.append(line[len(prompt):])
    return found


def terminal_view(output: str, prompt: str, inputs: list[str]) -> str:
    """The output as a terminal shows it: each prompt followed by the line typed at it."""
    pieces = output.split(prompt)
    shown = [pieces[0]]
    for n, piece in enumerate(pieces[1:]):
        typed = inputs[n] + "\n" if n < len(inputs) else ""   # after the last input: end of file
        shown.append(prompt + typed + piece)
    return "".join(shown)


def _pattern(line: str) -> re.Pattern:
    """One README line as a regular expression: literal text, `…` for any text."""
    parts = line.rstrip().split(ELLIPSIS)
    regex = re.escape(parts[0])
    for before, part in zip(parts, parts[1:], strict=False):
        guard_before = r"(?<!\d)(?<!\d[,.])" if part[:1].isdigit() else ""   # 763 is not 1,763
        guard_after = r"(?![,.]?\d)" if before[-1:].isdigit() else ""          # 1,7 is not 1,763
        regex += guard_after + ".*?" + guard_before + re.escape(part)
    return re.compile(regex)


def _is_skip(line: str) -> bool:
    return line.strip() == ELLIPSIS


def mismatch(expected: list[str], actual: list[str]) -> str | None:
    """None if the lines `actual` match the block lines `expected`; else where and how not."""
    patterns = [None if _is_skip(line) else _pattern(line) for line in expected]
    actual = [line.rstrip() for line in actual]
    memo, deepest = {}, [(-1, 0, 0)]   # (how far the block matched, block line, output line)

    def match(i, j):
        if (i, j) in memo:
            return memo[i, j]
        deepest[0] = max(deepest[0], (i, i, j))
        if i == len(patterns):
            result = j == len(actual)
        elif patterns[i] is None:        # a `…` line: any number of lines, none included
            result = any(match(i + 1, k) for k in range(j, len(actual) + 1))
        else:
            result = (j < len(actual) and bool(patterns[i].fullmatch(actual[j]))
                      and match(i + 1, j + 1))
        memo[i, j] = result
        return result

    if match(0, 0):
        return None
    _, i, j = deepest[0]
    if i == len(patterns):
        return f"the output goes on after the block's last line: {actual[j]!r}"
    printed = repr(actual[j]) if j < len(actual) else "nothing more"
    return (f"block line {i + 1} {expected[i]!r} was expected, the program printed {printed} "
            f"(line {j + 1})")


def assert_matches(name: str, expected: list[str], output: str) -> None:
    """AssertionError naming the first difference, with the whole output to copy from."""
    problem = mismatch(expected, output.splitlines())
    assert problem is None, (f"checked block {name!r} differs from the output: {problem}\n"
                             f"--- the output ---\n{output}")
