"""A conversation larger than the model's window, end to end, as a user meets it.

The README's "Honest limits" promise: with a COMPACT_THRESHOLD set above the window, the
conversation grows past it, the summary call fails with one line, the history is kept, and
the session goes on. Here s06's REPL runs (its main(), in process) through the real client,
against a stand-in whose context window is small enough to overflow in one turn.
"""

import json
import re
from types import SimpleNamespace

import pytest

import s03_todo
import s06_compact
import s07_task_system
from harness import config
from harness.session import views
from harness.session.recorder import Recorder
from harness.stand_in.script import error, is_summary_request, reply, text, tool
from harness.stand_in.usage import prompt_tokens
from helpers import conversation, messages, words

WINDOW = 4_000       # tokens: one bulky tool result overflows it
THRESHOLD = 4_500    # above the window, so compaction is first tried when it can no longer work
BULKY = "seq -s ' ' 1 5000"   # about 24,000 characters, 6,000 tokens: more than the whole window


def too_long(request):
    return f"prompt is too long: {prompt_tokens(request)} tokens > {WINDOW} maximum"


def test_a_conversation_over_the_window_fails_to_compact_in_one_line_keeps_its_history_and_goes_on(
        run_lesson, workdir):
    # Turn 1 runs the bulky command, then compaction (layer 2) and the next call both overflow.
    # Turn 2 overflows too. /compact (layer 3) fails the same way. q still ends the session.
    script = [reply(tool("bash", {"command": BULKY}))]
    proc, api = run_lesson("s06_compact", stdin="make some bulky output\ngo on\n/compact\nq\n",
                           script=script, summary="never used: the summary call is refused",
                           env={"COMPACT_THRESHOLD": THRESHOLD},
                           stand_in={"context_window": WINDOW}, in_process=True)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert not api.script   # the one scripted reply was used, and nothing beyond it was asked for

    first, summary, turn1, turn2, manual = api.requests
    assert [is_summary_request(r) for r in api.requests] == [False, True, False, False, True]
    assert prompt_tokens(first) <= WINDOW < prompt_tokens(summary)
    assert api.violations == [too_long(summary), too_long(turn1), too_long(turn2), too_long(manual)]

    # Each compaction attempt is one line that says why, with the API's numbers, and where the
    # transcript is; nothing else about it is printed.
    failed = [line for line in messages(proc.stderr) if "compaction" in line]
    assert len(failed) == 2
    for line, request in zip(failed, (summary, manual), strict=True):
        assert line.startswith("[compaction failed, history kept: the request no longer fits "
                               "the model's window (400 ")
        assert f"({'400 ' + too_long(request)})" in line
        assert "transcript .transcripts/transcript_" in line
    # The turns that overflow say so in one error line each, and say what was kept.
    errors = [line for line in messages(proc.stderr) if line.startswith("error:")]
    assert errors == [f"error: the request no longer fits the model's window (400 "
                      f"{too_long(r)}): the model reads {WINDOW:,} tokens, fewer than "
                      f"CONTEXT_WINDOW (1,000,000): quit, then run again with CONTEXT_WINDOW="
                      f"{WINDOW} and --continue, and layer 2 (s06, s07) summarises what fits (a "
                      "prompt larger than that window must be shorter); /clear starts afresh"
                      for r in (turn1, turn2)]
    assert "[turn failed after 1 tool call: they are kept in the conversation" in proc.stderr
    assert "[turn failed; the conversation is as it was before it]" in proc.stderr

    # The history is kept: /compact, after two failed turns, summarises exactly what the first
    # attempt did (the bulky result in full, the failed "go on" turn gone, nothing rewritten).
    assert manual["messages"] == summary["messages"]
    result = summary["messages"][2]["content"][0]
    assert result["type"] == "tool_result" and "4999 5000" in json.dumps(result)
    # And it is on disk too: each attempt saved the whole history before asking for a summary.
    transcripts = sorted((workdir / ".transcripts").glob("transcript_*.jsonl"))
    assert len(transcripts) == 2
    for path in transcripts:
        lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        assert [m["role"] for m in lines] == ["user", "assistant", "user"]
        assert "4999 5000" in json.dumps(lines[2])


# ---------------------------------------------------------------- /context and the window

def context_with_window(monkeypatch, capsys, window, reported):
    """/context as s06 prints it, with CONTEXT_WINDOW=window and the API's count `reported`."""
    monkeypatch.setenv("CONTEXT_WINDOW", str(window))
    history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    views.print_context(Recorder(), "system", [], history,
                        SimpleNamespace(threshold=THRESHOLD, reported=reported, seen=2))
    return capsys.readouterr().out


def test_context_shows_the_models_window_used_and_free(monkeypatch, capsys):
    report = context_with_window(monkeypatch, capsys, 10_000, 1_234)
    lines = report.splitlines()
    bar = next(n for n, line in enumerate(lines) if line.startswith("  window "))
    assert "1,234 of 10,000 tokens used (12.3%), 8,766 free (87.7%)" in lines[bar + 1]
    columns = 80 - views.LABEL - 2                                # a pipe's 80 columns
    assert re.search(r"\[(#+)(·+)\]", lines[bar])[1] == "#" * round(columns * 0.1234)
    assert report.index("  threshold ") < report.index("  window ")          # beside it


def test_context_says_when_the_context_no_longer_fits_the_window(monkeypatch, capsys):
    report = context_with_window(monkeypatch, capsys, WINDOW, WINDOW + 500)
    assert "over it by 500: the API refuses a request this long" in words(report)


def test_the_window_is_the_default_models_without_context_window(monkeypatch, capsys):
    monkeypatch.delenv("CONTEXT_WINDOW", raising=False)
    views.print_context(Recorder(), "system", [], [{"role": "user", "content": "hi"}])
    assert f"of {config.DEFAULT_WINDOW:,} tokens used" in capsys.readouterr().out


def test_a_threshold_past_the_window_is_lowered_to_fit_and_the_user_is_told(run_main):
    """docs/real-use.md: COMPACT_THRESHOLD past the model's window is lowered to fit it. A
    user who set either number sees, once, which threshold layer 2 uses, and /context says
    the same."""
    import s06_compact
    env = {"COMPACT_THRESHOLD": "2000000"}
    code, out, err, api = run_main(s06_compact, stdin="/context\nq\n", env=env)
    assert code == 0 and api.requests == [], err
    note = ("[COMPACT_THRESHOLD 2,000,000 does not fit the model's window of 1,000,000 tokens: "
            "layer 2 compacts at 984,000]")
    assert words(err).count(note) == 1, err
    assert "COMPACT_THRESHOLD 984,000" in words(out)
    env = {"CONTEXT_WINDOW": "32768"}
    code, out, err, api = run_main(s06_compact, stdin="q\n", env=env)
    assert ("[COMPACT_THRESHOLD 50,000 does not fit the model's window of 32,768 tokens: "
            "layer 2 compacts at 16,768]") in words(err)
    code, out, err, api = run_main(s06_compact, stdin="q\n")
    assert "does not fit" not in err                 # the defaults fit: nothing to say


# ---------------------------------------------------------------- one long turn, a small window

def test_one_long_turn_past_a_small_window_is_summarised_from_its_prompt_and_newest_calls(
        run_lesson):
    """A local model with a 4,096-token window (CONTEXT_WINDOW=4096), and one prompt whose
    turn makes twelve calls: no later prompt to start a shorter summary request at. It starts
    at the prompt, then the newest calls that fit, each result after its call: the API takes
    it, the summary replaces the history, and the turn ends with the model's answer. (A later
    summary starts at the first one, the history's first message then.)"""
    command = "python3 -c \"print('z' * 1500)\""
    script = [reply(tool("bash", {"command": command})) for _ in range(12)]
    script.append(reply(text("done")))
    proc, api = run_lesson("s06_compact", "fix the build", script=script,
                           summary="Summary: ran the build twelve times.",
                           env={"CONTEXT_WINDOW": "4096"}, stand_in={"context_window": 4096},
                           in_process=True)
    assert proc.returncode == 0, proc.stderr
    assert api.violations == []
    summaries = [r for r in api.requests if is_summary_request(r)]
    assert summaries, "layer 2 never asked for a summary"
    assert "fix the build" in json.dumps(summaries[0]["messages"][0])
    for request in summaries:
        sent = request["messages"]
        # The first message, then an assistant turn: a request the API takes.
        assert sent[0]["role"] == "user" and sent[1]["role"] == "assistant"
        assert prompt_tokens(request) <= 4096
    assert "compaction failed" not in proc.stderr
    assert "the summary covers its turn's prompt and newest" in words(proc.stderr)
    assert proc.stdout.strip().endswith("done")


def test_a_summary_request_that_cannot_fit_is_never_sent_broken():
    """Nothing fits the room: the shortest view that keeps every result after its call is
    sent (the API may refuse it: one line, the history kept), never a lone tool_result."""
    from harness import compaction
    big = "x" * 40_000
    view = conversation(("bash", {"command": "a"}, big), ("bash", {"command": "b"}, big),
                        prompt="fix it")
    fitted = compaction.fit_for_summary(view, room=100)
    assert fitted[0] == view[0] and fitted[1:] == view[-2:]


def test_fitting_a_long_conversation_measures_each_message_once(monkeypatch):
    """--continue of a long log past the window waited in silence (17.7 MB of history: 392 s
    of CPU): each place the summary could start was measured by encoding all that followed it
    again. What is encoded to fit 2,000 calls is now about the conversation twice, not 2,000
    times over; and the view chosen is the one the whole-list estimate chose."""
    from harness import compaction, tokens
    view = conversation(*[("bash", {"command": f"step {n}"}, "x" * 400) for n in range(2_000)])
    encoded = []
    real, estimate = tokens.characters, tokens.estimate

    def counting(value):
        encoded.append(len(value) if isinstance(value, list) else 1)
        return real(value)
    monkeypatch.setattr(tokens, "characters", counting)
    fitted = compaction.fit_for_summary(view, room=30_000)
    assert fitted[0] == view[0] and fitted[1:] == view[-len(fitted) + 1:]
    assert 30_000 * 0.9 < estimate(fitted) <= 30_000    # the newest calls that fit, no fewer
    # One message more, and the estimate of the whole list is over the room.
    assert estimate(view[:1] + view[-len(fitted) - 1:]) > 30_000
    assert sum(encoded) <= 3 * len(view), f"{sum(encoded):,} messages encoded"


def test_a_summary_request_that_leaves_nothing_out_says_nothing_left_out(capsys):
    """One call and its result, too big for the room: nothing could be left out, and the
    note said the conversation was past the window and the summary covered 'its turn's
    prompt and newest 2 messages', which were all of them."""
    from harness import compaction
    view = conversation(("bash", {"command": "seq 1 1200"}, "x" * 6_000), prompt="go")
    assert compaction.fit_for_summary(view, room=100) == view
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("window", [300, 800, 2048])
def test_a_window_the_system_prompt_and_tools_all_but_fill_is_refused_in_one_line(run_main,
                                                                                 window):
    """CONTEXT_WINDOW=300 (a typo for 3000, say), or one that leaves layer 2 a few hundred
    tokens beyond the system prompt and the tools: every prompt would be summarised away
    before the model saw it. Refused before anything runs, in one line that says why."""
    import s06_compact
    code, out, err, api = run_main(s06_compact, "fix the build",
                                   env={"CONTEXT_WINDOW": str(window)})
    assert code == 1 and api.requests == []
    [line] = messages(err)
    assert line.startswith(f"error: CONTEXT_WINDOW {window:,} is too small: ")
    assert "the system prompt and tools take about" in line


def test_inside_a_long_turn_the_summary_keeps_its_own_prompt_not_an_older_one():
    """A REPL session: an earlier turn, then a prompt whose turn makes many big calls. The
    summary request starts at the prompt of the turn under way (what the work is now), then
    its newest calls; never the morning's first prompt in its place."""
    from harness import compaction
    big = "x" * 4_000
    earlier = conversation(("bash", {"command": "ls"}), prompt="old task from this morning",
                           answer="Done.")
    now = conversation(*[("bash", {"command": f"step {n}"}, big) for n in range(6)],
                       prompt="NOW: fix the build")
    view = earlier + now
    fitted = compaction.fit_for_summary(view, room=3_000)
    assert fitted[0] == {"role": "user", "content": "NOW: fix the build"}
    assert fitted[1]["role"] == "assistant" and fitted[1:] == view[-len(fitted) + 1:]


def test_a_window_too_small_names_the_smallest_that_works_and_that_one_runs(run_main):
    def refusal(window) -> str:
        code, out, err, api = run_main(s07_task_system, "--demo", key=None,
                                       env={"CONTEXT_WINDOW": str(window)})
        return err if "is too small" in err else ""
    (line,) = messages(refusal(500))
    smallest = re.search(r"set CONTEXT_WINDOW to at least ([\d,]+)", line)
    assert line.startswith("error: CONTEXT_WINDOW 500 is too small") and smallest, line
    smallest = int(smallest[1].replace(",", ""))
    assert refusal(smallest) == "" and refusal(smallest - 1) != ""


def test_after_a_failed_summary_clear_starts_layer_2_afresh(run_main):
    """A failed summary makes layer 2 wait for more work before it tries again; /clear kept
    that wait, so a new conversation as big was never summarised, and outgrew the window."""
    script = [error(400, "no summary now"), reply(text("one")),          # the first turn
              reply(text("Summary: the second prompt.")), reply(text("two"))]
    typed = f"first {'x' * 6000}\n/clear\nsecond {'y' * 6000}\nq\n"
    code, out, err, api = run_main(s06_compact, stdin=typed, script=script,
                                   env={"COMPACT_THRESHOLD": "1400"})
    assert code == 0 and api.violations == [], err
    assert "[compaction failed, history kept" in err and words(err).count("[compacted:") == 1
    assert "two" in out and "Summary: the second prompt." not in out


def test_a_window_smaller_than_context_window_is_named_and_the_way_on_it_gives_works(
        run_lesson):
    """A local model's window, smaller than CONTEXT_WINDOW (unset: 1,000,000): the error said to
    /compact, which sent the whole conversation again and failed the same way, on every try. It
    names the window the API gave, and --continue with it summarises what fits."""
    script = [reply(tool("bash", {"command": BULKY}))]
    proc, api = run_lesson("s06_compact", stdin="make some bulky output\n/compact\nq\n",
                           script=script, stand_in={"context_window": WINDOW}, in_process=True)
    assert proc.returncode == 0, proc.stderr
    said = words(proc.stderr)
    assert (f"the model reads {WINDOW:,} tokens, fewer than CONTEXT_WINDOW (1,000,000): quit, "
            f"then run again with CONTEXT_WINDOW={WINDOW} and --continue") in said
    assert "/compact summarises what fits" not in said
    proc, api = run_lesson("s06_compact", "--continue", "go on", script=[reply(text("went on"))],
                           summary="Summary: bulky output made.", in_process=True,
                           env={"CONTEXT_WINDOW": str(WINDOW)},
                           stand_in={"context_window": WINDOW})
    assert proc.returncode == 0 and api.violations == [], proc.stderr
    assert "[compacted:" in proc.stderr and proc.stdout.strip() == "went on"


def test_a_request_past_the_window_says_how_to_go_on(run_main):
    """The API's 400 "prompt is too long" was one line with no way forward, on every prompt."""
    code, out, err, api = run_main(s03_todo, f"look at {'z' * 20000}", key="k",
                                   stand_in={"context_window": 3000})
    assert code == 1 and len(messages(err)) == 1, err
    said = words(err)
    assert "the request no longer fits the model's window (400 prompt is too long" in said
    assert "run again with CONTEXT_WINDOW=3000 and --continue" in said
    assert "/clear starts afresh" in said
    # CONTEXT_WINDOW already the model's: the prompt alone is too long for it. The line told
    # the user to set CONTEXT_WINDOW to the model's window, which it was.
    code, out, err, api = run_main(s03_todo, f"look at {'z' * 20000}", key="k",
                                   stand_in={"context_window": 3000},
                                   env={"CONTEXT_WINDOW": "3000"})
    assert code == 1 and len(messages(err)) == 1, err
    said = words(err)
    assert "set CONTEXT_WINDOW" not in said
    assert ("the harness counts with that window already (CONTEXT_WINDOW 3,000), so the "
            "conversation outgrew it (s03 never summarises), or its newest part (a prompt, the "
            "last tool results) is too big on its own: /clear starts afresh (the session log "
            "keeps it all); in s06 and s07, /compact summarises what fits") in said
    assert "run again with CONTEXT_WINDOW" not in said
