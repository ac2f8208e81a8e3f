"""/task import of a file that is no checklist (a .env, a file of credentials): the refusal
names the bad lines by number and why, and never shows what they hold."""

from pathlib import Path

import s07_task_system
from helpers import words

KEY = "sk-ant-api03-" + "Fake0Key1For2The3Test" * 3
TOKEN = "ghp_" + "F4keT0kenF0rTheTest" * 2


def test_importing_a_file_of_secrets_shows_none_of_them(run_main, workdir):
    (workdir / "keys.env").write_text(f"# keys\nANTHROPIC_API_KEY={KEY}\n")
    (workdir / "creds.txt").write_text(f"user: me\nGITHUB_TOKEN={TOKEN}\n  - [ ] {TOKEN}\n")
    stdin = "/task import keys.env\n/task import creds.txt\nq\n"
    code, out, err, api = run_main(s07_task_system, stdin=stdin)
    assert code == 0 and api.requests == []
    said = words(err)
    assert "nothing imported: 1 bad line: line 2: not a checklist item" in said
    assert ("nothing imported: 3 bad lines: line 1: not a checklist item ('- [ ] text' or "
            "'- [x] text'); line 2: not a checklist item") in said
    assert "line 3: an indented item (nested lists are not imported)" in said
    for secret in (KEY, TOKEN, KEY[:20], TOKEN[:12]):
        assert secret not in out + err
    # Nothing was imported: no task file holds a line of either file.
    assert not list(Path(workdir).rglob("task_*.json"))
