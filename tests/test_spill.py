"""Big results kept whole on disk: the model sees head and tail and can read all the rest."""

import errno
import os
import subprocess
from pathlib import Path

import pytest

from harness import spill

CAP = 50_000


@pytest.fixture
def results(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(spill, "_saved_by_hash", {})
    return spill.RESULTS


def big_output(chars=300_000):
    lines = [f"line {n}: " + "abcdefghij" * (n % 7) for n in range(chars // 20)]
    return "\n".join(lines)[:chars]


def test_a_300000_character_output_can_be_read_back_in_full_from_the_saved_file(results):
    text = big_output()
    shown = spill.keep_whole(text, CAP, "bash")
    assert len(shown) <= CAP + 500                     # what the model sees stays near the cap
    assert shown.startswith(text[:20_000]) and text[-20_000:] in shown
    path = spill.saved_path_in(shown)
    assert path and path.startswith(".transcripts/results/") and "_bash_" in path
    assert Path(path).read_text(encoding="utf-8") == text
    # as the model would: sed -n in pieces of lines, as the note suggests
    total = text.count("\n") + 1
    assert f"{total:,} lines" in shown
    pieces = [subprocess.run(["sed", "-n", f"{a},{a + 999}p", path], capture_output=True, text=True,
                             check=True).stdout for a in range(1, total + 1, 1000)]
    assert "".join(pieces).rstrip("\n") == text
    assert not list(Path(results).glob(".*.tmp"))


def test_a_result_within_the_cap_is_left_alone_and_saves_nothing(results):
    assert spill.keep_whole("short", CAP, "bash") == "short"
    assert spill.saved_path_in("short") is None
    assert not Path(results).exists()


def test_only_the_note_on_the_last_line_names_a_saved_file(results):
    shown = spill.keep_whole(big_output(80_000), CAP, "read_file")
    path = spill.saved_path_in(shown)
    assert path and "_read_file_" in path
    assert spill.saved_path_in(shown + "\nmore output") is None     # a quoted note is not ours


def test_the_oldest_saved_results_go_first_past_the_file_count(results, monkeypatch):
    monkeypatch.setattr(spill, "MAX_FILES", 3)
    paths = []
    for n in range(5):
        paths.append(Path(spill.spill_for_placeholder(f"result {n} " + "z" * 5_000, "bash")))
        os.utime(paths[-1], ns=(n * 10**9, n * 10**9))       # distinct ages, oldest first
    assert [p.exists() for p in paths] == [False, False, True, True, True]
    assert len(set(paths)) == 5        # a removed file's name is not given to another output


def test_the_oldest_saved_results_go_first_past_the_total_size(results, monkeypatch):
    monkeypatch.setattr(spill, "MAX_TOTAL_BYTES", 25_000)
    paths = []
    for n in range(4):
        paths.append(Path(spill.save_result(f"{n}" * 10_000, "bash")))
        os.utime(paths[-1], ns=(n * 10**9, n * 10**9))
    spill.prune()
    assert [p.exists() for p in paths] == [False, False, True, True]
    newest = spill.save_result("n" * 24_000, "bash")       # the newest is kept, whatever its size
    assert newest.exists() and sum(p.exists() for p in paths) == 0


def test_a_full_disk_falls_back_to_a_plain_cut_with_a_clear_note(results, monkeypatch):
    def full(self, data):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(Path, "write_bytes", full)
    text = big_output()
    shown = spill.keep_whole(text, CAP, "bash")
    assert shown.startswith(text[:CAP])
    assert shown.endswith(f"[output cut: {len(text) - CAP:,} more characters; the whole output could "
                          f"not be saved in {results}/ (the disk is full)]")
    assert spill.saved_path_in(shown) is None
    assert spill.spill_for_placeholder(text, "bash") is None
    assert list(Path(results).iterdir()) == []          # no empty or partial file left behind


def test_a_cleared_result_is_saved_once_and_named_the_same_way_every_time(results):
    text = "x" * 3_000
    first = spill.spill_for_placeholder(text, "bash")
    assert first == spill.spill_for_placeholder(text, "bash")      # same text, same file
    assert Path(first).read_text() == text
    assert spill.spill_for_placeholder("tiny", "bash") is None      # cheaper to run again
    shown = spill.keep_whole(big_output(), CAP, "bash")
    assert spill.spill_for_placeholder(shown, "bash") == spill.saved_path_in(shown)   # no copy
    assert len(list(Path(results).iterdir())) == 2
