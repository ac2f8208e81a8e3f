"""s06: the three compaction layers, as units and run as a user runs them."""

import copy
import json
import os
from pathlib import Path

import anthropic
import pytest

import s06_compact as s06
from harness import compaction, config
from harness.run import Run
from helpers import conversation, tool_results
from harness.stand_in import StandInAPI
from harness.stand_in.rules import check_request
from harness.stand_in.script import error, reply, text, tool
from helpers import words


# Each test with s06's layers made new, in a tmp folder (a cleared result is saved whole
# under .transcripts/ there).
pytestmark = pytest.mark.usefixtures("fresh_layers")


LONG = "x" * 401                     # just over KEEP_CHARS
BIG = "y" * (4 * s06.CLEAR_AT_LEAST)  # one result worth a whole batch


def contents(view):
    return [m["content"][0]["content"] for m in view[2::2]]


# ---------------------------------------------------------------- layer 1

def test_layer1_clears_old_long_results_in_one_worthwhile_batch_and_keeps_the_newest(capsys, run):
    history = conversation(("bash", {}, BIG), ("bash", {}, "short"),
                           ("edit_file", {"path": "a.py"}, LONG),
                           ("bash", {}, LONG), ("bash", {}, LONG), ("bash", {}, LONG))
    original = copy.deepcopy(history)
    view = s06.micro_compact(history, run)
    first, *rest = contents(view)
    kept = s06.KEEP_RECENT                          # of the three long bash results at the end
    cleared = ["[Previous: used bash]"] * (3 - kept)
    assert rest == ["short", "[Previous: used edit_file]"] + cleared + [LONG] * kept
    saved = first.removeprefix("[Previous: used bash; the whole result is in ").removesuffix("]")
    assert Path(saved).read_text() == BIG           # cleared from the context, kept whole on disk
    assert history == original                      # the history keeps every result
    # The calls and results still pair up.
    assert check_request({"model": "m", "max_tokens": 1, "messages": view}) is None
    ids = lambda msgs: [(b.get("id"), b.get("tool_use_id")) for m in msgs[1:] for b in m["content"]]
    assert ids(view) == ids(history)
    note = capsys.readouterr().err
    freed = s06.tokens.estimate(BIG) + (4 - kept) * s06.tokens.estimate(LONG)
    assert (f"micro_compact: {5 - kept} old tool results (or inputs) are now placeholders "
            f"(about {freed:,} tokens cleared)") in words(note)


def test_layer1_never_clears_what_the_model_has_not_answered_yet(run):
    """Calls made at once come back in one message: the model has seen none of those results,
    and wrote those inputs in its newest turn, so none is cleared, whatever KEEP_RECENT says:
    here the turn holds more calls than KEEP_RECENT, its first results big enough to clear."""
    history = conversation(("bash", {}, BIG), ("bash", {}, BIG))
    turn = [tool("bash", {}, id="p0"),
            tool("write_file", {"path": "a.py", "content": BIG}, id="p1")]
    turn += [tool("bash", {}, id=f"p{n}") for n in range(2, s06.KEEP_RECENT + 2)]
    results = [{"type": "tool_result", "tool_use_id": b["id"], "content": LONG} for b in turn]
    results[0]["content"] = BIG
    history += [{"role": "assistant", "content": turn}, {"role": "user", "content": results}]
    view = s06.micro_compact(history, run)
    assert view[1:5] != history[1:5]                       # the old results went in this batch
    assert view[-2:] == history[-2:]                       # the newest turn and its results did not


def test_a_call_whose_result_and_input_are_both_cleared_counts_both(capsys, run):
    """One id clears both a result and its call's input: what the batch frees is their sum."""
    history = conversation(("write_file", {"path": "a.py", "content": BIG}, LONG),
                           ("read_file", {"path": "a.py"}, "x = 1"),    # a.py in sight later
                           *[("bash", {}, "ok")] * (s06.KEEP_RECENT - 1))
    (call,) = [call for block, call in s06.clearable(history) if block is call]
    input_freed = s06.tokens_freed(call, call)
    s06.micro_compact(history, run)
    freed = s06.tokens.estimate(LONG) + input_freed
    assert f"(about {freed:,} tokens cleared)" in words(capsys.readouterr().err)


def test_clearing_a_calls_input_keeps_its_short_result_and_claims_nothing_about_the_file(run):
    """The content of a write that failed, and the texts of an edit, are cleared from view; the
    short results saying what happened ("old_text not found") stay, and the placeholder of the
    input does not say the file was written."""
    failed = {"type": "tool_result", "tool_use_id": "t0", "content": "Error: outside the workspace",
              "is_error": True}
    history = conversation(("write_file", {"path": "/proc/no/a.py", "content": BIG}, "x"),
                           ("edit_file", {"path": "b.py", "old_text": BIG, "new_text": BIG + "!"},
                            "Error: old_text not found in b.py"),
                           *[("bash", {}, "ok")] * s06.KEEP_RECENT)
    history[2]["content"] = [failed]
    view = s06.micro_compact(history, run)
    assert view[2]["content"][0]["content"] == "Error: outside the workspace"
    assert view[4]["content"][0]["content"] == "Error: old_text not found in b.py"
    written, edited = view[1]["content"][0]["input"], view[3]["content"][0]["input"]
    assert written["content"].startswith("[cleared from the context")
    assert "written" not in written["content"]
    for field in ("old_text", "new_text"):
        assert "read_file shows the file as it is now" in edited[field]


def test_only_a_whole_read_or_write_that_worked_makes_an_earlier_read_stale(monkeypatch):
    whole = "line\n" * 2_000
    history = conversation(("read_file", {"path": "a.py"}, whole),
                           ("read_file", {"path": "a.py", "offset": 50}, "line\n" * 100),
                           ("read_file", {"path": "b.py"}, whole),
                           ("write_file", {"path": "b.py", "content": "y"},
                            "Error: the disk is full"),
                           ("read_file", {"path": "c.py"}, whole),
                           ("write_file", {"path": "c.py", "content": "y"}, "Wrote 1 byte to c.py"),
                           ("read_file", {"path": "d.py"}, whole),
                           ("read_file", {"path": "d.py", "limit": 0}, "(no lines)"),
                           ("read_file", {"path": "e.py", "offset": 900}, whole),
                           ("read_file", {"path": "e.py"},
                            whole + "... (9 more lines; read on with offset=2001)"),
                           ("bash", {}, BIG), ("bash", {}, "ok"))
    history[8]["content"][0]["is_error"] = True
    monkeypatch.setattr(s06, "KEEP_RECENT", 1)
    gone = {block["tool_use_id"] for block, call in s06.clearable(history) if block is not call}
    # A part read, a failed write: a.py and b.py are still whole.
    assert "t0" not in gone and "t2" not in gone
    assert "t4" in gone                              # c.py was written anew
    assert "t6" not in gone                          # a read of no lines of d.py
    assert "t8" not in gone                          # a read cut short shows only the start of e.py
    assert "t10" in gone


def test_an_old_failed_read_is_cleared_without_claiming_a_read(run):
    """An old read_file that failed with a long error may be cleared like any result; its
    placeholder must not say the file was read, nor that a later read of it follows."""
    error = "Error: " + "cannot read a.py; " * 40
    history = conversation(("read_file", {"path": "a.py"}, error),
                           *[("bash", {}, "ok")] * s06.KEEP_RECENT)
    history[2]["content"][0]["is_error"] = True
    ((block, call),) = s06.clearable(history)
    assert s06.placeholder(block, call, run)["content"] == "[Previous: used read_file]"


def test_layer1_never_clears_a_batch_smaller_than_clear_at_least(run):
    """Even where a rewrite would be cheap (small results after it), a batch under CLEAR_AT_LEAST
    waits: each batch throws the cache away from its first block, so batches must be rare."""
    just_under = "z" * (4 * s06.CLEAR_AT_LEAST - 200)        # one old result a little under
    history = conversation(("bash", {}, just_under), *[("bash", {}, "ok")] * s06.KEEP_RECENT)
    assert contents(s06.micro_compact(history, run))[0] == just_under
    history = conversation(("bash", {}, just_under + "z" * 400),
                           *[("bash", {}, "ok")] * s06.KEEP_RECENT)
    assert contents(s06.micro_compact(history, run))[0].startswith("[Previous: used bash")


def test_a_batch_waits_while_clearing_it_would_rewrite_more_cache_than_it_frees(run):
    """An old result worth CLEAR_AT_LEAST, followed by three times as much: clearing it would
    make the API write all that again (1.25 x) to free less than REWRITE_SHARE x of it. With a
    cold cache (nothing counted yet: a resumed session's first call) nothing is lost: it goes."""
    history = conversation(("bash", {}, BIG), *[("bash", {}, BIG + str(n)) for n in range(3)])
    s06.CONTEXT.record(Usage(40_000, 100), history)          # the API has read all of it
    assert contents(s06.micro_compact(history, run)) == [BIG] + [BIG + str(n) for n in range(3)]
    s06.CONTEXT.reported = None                              # a cold cache
    assert contents(s06.micro_compact(history, run))[0].startswith("[Previous: used bash")


def test_layer1_waits_until_a_batch_is_worth_the_cache_it_throws_away(run):
    history = conversation(*[("bash", {}, LONG)] * 8)        # 5 old results of ~100 tokens each
    assert s06.micro_compact(history, run) == history


def test_between_batches_every_request_repeats_the_last_one_as_its_prefix(run):
    history = conversation(("bash", {}, BIG), ("bash", {}, LONG), ("bash", {}, LONG),
                           ("bash", {}, LONG))
    views = []
    for n in range(6):                    # six more calls, each adding a result too small to batch
        views.append(s06.micro_compact(history, run))
        history += conversation(("bash", {}, LONG))[1:]
        history[-2]["content"][0]["id"] = history[-1]["content"][0]["tool_use_id"] = f"more{n}"
    assert contents(views[0])[0].startswith("[Previous: used bash")
    for before, after in zip(views, views[1:], strict=False):
        # Byte for byte: the API reads it all from its cache.
        assert after[:len(before)] == before


def test_a_file_stays_visible_until_a_later_read_or_write_supersedes_it(run):
    history = conversation(("read_file", {"path": "a.py"}, BIG),
                           ("read_file", {"path": "b.py"}, LONG),
                           ("write_file", {"path": "./a.py"}, "Wrote"),
                           ("bash", {}, "1"), ("bash", {}, "2"), ("bash", {}, "3"))
    view = contents(s06.micro_compact(history, run))
    assert view[0] == "[Previous: read a.py; a later read or write of it follows]"
    assert view[1] == LONG          # b.py was never read again: its contents are current


# ---------------------------------------------------------------- the summary call

def test_the_summary_call_repeats_the_loops_prefix_and_asks_for_no_tool(in_tmp, run):
    history = conversation(("bash", {}, LONG), ("bash", {}, "done"))
    view = s06.micro_compact(history, run)
    answer = reply(tool("bash", {"command": "ls"}), text("SUMMARY: ran bash twice"))
    with StandInAPI([answer]) as api:
        run.client = anthropic.Anthropic(api_key="k", base_url=api.url)
        assert s06.auto_compact(history, run, focus="the bash runs") is True
    (request,) = api.requests
    assert request["system"] == s06.SYSTEM and request["tools"] == s06.TOOLS
    assert "tool_choice" not in request
    assert request["messages"][:-1] == view[:-1]          # the cached prefix, unchanged
    last = request["messages"][-1]["content"]
    assert last[:-1] == view[-1]["content"] and "<summary-request>" in last[-1]["text"]
    assert "Above all, preserve: the bash runs" in last[-1]["text"]
    # The tool call is ignored.
    assert len(history) == 1 and "SUMMARY: ran bash twice" in history[0]["content"]
    assert ".transcripts/transcript_" in history[0]["content"]
    (transcript,) = (in_tmp / ".transcripts").iterdir()
    assert len(transcript.read_text().splitlines()) == 5


# ---------------------------------------------------------------- measuring

class Usage:
    def __init__(self, i, o, cache_read=None, cache_creation=None):
        self.input_tokens, self.output_tokens = i, o
        self.cache_read_input_tokens, self.cache_creation_input_tokens = cache_read, cache_creation


def test_context_size_prefers_the_reported_count_and_estimates_only_the_rest():
    size = s06.ContextSize()
    messages = [{"role": "user", "content": "a" * 400}]
    assert size.estimate(messages) == s06.tokens.estimate(messages)  # nothing reported yet
    messages.append({"role": "assistant", "content": [text("ok")]})
    size.record(Usage(1000, 20, cache_read=300), messages)
    assert size.estimate(messages) == 1320
    extra = {"role": "user", "content": "b" * 4000}
    messages.append(extra)
    assert size.estimate(messages) == 1320 + s06.tokens.estimate([extra])


@pytest.mark.parametrize("value", ["lots", "²", "0", "1" * 4400])
def test_a_threshold_that_is_not_a_positive_whole_number_is_one_clear_line(run_main, value):
    """4,400 digits: past Python's limit for int(), a traceback."""
    code, out, err, api = run_main(s06, "hi", env={"COMPACT_THRESHOLD": value})
    assert code == 1 and api.requests == [] and "Traceback" not in err
    said = f"COMPACT_THRESHOLD must be a positive whole number of tokens, got '{value[:30]}"
    assert said in words(err) and len(err) < 400


def test_the_threshold_comes_from_the_environment_when_a_run_starts(run_main):
    code, out, err, api = run_main(s06, "hi", script=[reply(text("ok"))],
                                   env={"COMPACT_THRESHOLD": "4321"})
    assert code == 0 and s06.CONTEXT.threshold == 4321


def test_a_threshold_the_system_prompt_fills_is_raised_with_a_note_not_summarised_every_call(
        run_main):
    """COMPACT_THRESHOLD=200, under what the system prompt and tools take: every request was
    over it, and layer 2 summarised before nearly every call, the model losing all it had."""
    big = "head -c 1200 /dev/zero | tr '\\0' x"          # 300 tokens of output a call
    script = [reply(tool("bash", {"command": big})) for _ in range(6)] + [reply(text("done"))]
    code, out, err, api = run_main(s06, "go", script=script, summary="Summary: six outputs",
                                   env={"COMPACT_THRESHOLD": "200"})
    floor = s06.CONTEXT.prefix + compaction.MIN_ROOM
    assert code == 0 and api.violations == [] and s06.CONTEXT.threshold == floor, err
    assert (f"[COMPACT_THRESHOLD 200 is under what layer 2 needs: the system prompt and tools "
            f"(about {s06.CONTEXT.prefix:,} tokens) plus 1,000; it compacts at {floor:,}]"
            ) in words(err)
    summaries = [r for r in api.requests if "<summary-request>" in json.dumps(r["messages"][-1])]
    # Half the threshold of growth apart at least (7 before: one a call).
    assert 1 <= len(summaries) <= 2 and "done" in out


# ---------------------------------------------------------------- layer 2

def test_transcripts_are_jsonl_of_plain_data_and_never_overwritten(in_tmp):
    history = conversation(("bash", {}, "héllo ✓"), ("read_file", {}, LONG))
    first = compaction.save(config.TRANSCRIPTS, history)
    second = compaction.save(config.TRANSCRIPTS, history[:1])
    assert first != second and first.parent.name == ".transcripts"
    lines = first.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == history and "héllo ✓" in lines[2]
    lines = second.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == history[:1]


@pytest.mark.parametrize("answer, why", [
    (error(400, "prompt is too long"), "prompt is too long"),
    (reply(), "the summary came back empty"),
    # A refusal's words are no summary; nor is one longer than the conversation, from an
    # endpoint that ignored max_tokens: each became the new history.
    (reply(text("no"), stop_reason="refusal"), "the model refused to summarise"),
    (reply(text("word " * 5000)), "the summary is no smaller than the conversation")],
    ids=["api-error", "empty", "refused", "bigger-than-the-conversation"])
def test_a_failed_summary_loses_nothing(in_tmp, capsys, answer, why):
    history = conversation(("bash", {}, LONG))
    before = copy.deepcopy(history)
    with StandInAPI([answer]) as api:
        client = anthropic.Anthropic(api_key="k", base_url=api.url, max_retries=0)
        assert s06.auto_compact(history, Run(client)) is False
    assert history == before
    assert len(list((in_tmp / ".transcripts").iterdir())) == 1
    err = capsys.readouterr().err
    assert err.count("compaction failed, history kept") == 1 and why in words(err), err


# ---------------------------------------------------------------- end to end

def test_the_model_calls_compact_mid_task_and_keeps_working(run_lesson, workdir):
    script = [reply(tool("bash", {"command": "seq 1 100"})),
              reply(tool("write_file", {"path": "a.txt", "content": "A"}),
                    tool("compact", {"focus": "a.txt"})),
              reply(text("SUMMARY: wrote a.txt"), stop_reason="end_turn"),   # the summary call
              reply(tool("read_file", {"path": "a.txt"})),
              reply(text("finished after compaction"))]
    proc, api = run_lesson("s06_compact", "work", script=script, in_process=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "finished after compaction" and api.violations == []
    summary_req, after = api.requests[2], api.requests[3]
    assert "<summary-request>" in json.dumps(summary_req["messages"][-1])
    assert summary_req["tools"] == api.requests[0]["tools"]
    assert after["messages"][0]["role"] == "user"
    assert "SUMMARY: wrote a.txt" in after["messages"][0]["content"]
    assert len(after["messages"]) == 1
    said = words(proc.stderr)
    assert "[compacted: " in said and "transcript .transcripts/transcript_" in said
    assert len(list((workdir / ".transcripts").glob("transcript_*.jsonl"))) == 1


def test_a_low_threshold_triggers_auto_compact_and_the_turn_completes(run_lesson, workdir):
    # Bash results become placeholders (layer 1); reads of four files stay (each is current) and
    # grow the context until layer 2 compacts it.
    for n in range(10):
        (workdir / f"big{n}.txt").write_text("word " * 5000)
    script = ([reply(tool("bash", {"command": "seq 1 6000"})) for _ in range(4)]
              + [reply(tool("read_file", {"path": f"big{n}.txt"})) for n in range(10)]
              + [reply(text("done"))])
    proc, api = run_lesson("s06_compact", "work", script=script, summary="SUMMARY: printed numbers",
                           env={"COMPACT_THRESHOLD": "60000"}, in_process=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "done" and api.violations == []
    summaries = [r for r in api.requests if "<summary-request>" in json.dumps(r["messages"][-1])]
    assert len(summaries) >= 1 and "[compacted: " in proc.stderr
    after = api.requests[api.requests.index(summaries[0]) + 1]
    assert "SUMMARY: printed numbers" in after["messages"][0]["content"]
    # Layer 1 was at work too: old bash results went to the model as placeholders.
    first_compaction = api.requests.index(summaries[0])
    before = api.requests[:first_compaction]
    assert any("[Previous: used bash" in json.dumps(r["messages"]) for r in before)
    assert "micro_compact: " in proc.stderr


def test_a_session_shorter_than_keep_recent_loses_nothing(run_lesson, workdir):
    """Two calls, fewer than KEEP_RECENT: however big the first one's input, every request
    sends it whole (layer 1 keeps the newest KEEP_RECENT, and here that is all of them)."""
    big = "line of the report\n" * 1_000          # twice, about 9,500 tokens: worth clearing
    (workdir / "report.txt").write_text(big)
    # An edit's texts, unlike a write's, may go once old: only KEEP_RECENT keeps them here.
    edit = {"path": "report.txt", "old_text": big, "new_text": big + "the end\n"}
    script = [reply(tool("edit_file", edit)),
              reply(tool("write_file", {"path": "notes.txt", "content": "short"})),
              reply(text("both written"))]
    proc, api = run_lesson("s06_compact", "finish the report", script=script, in_process=True)
    assert proc.returncode == 0 and api.violations == [], proc.stderr
    assert len(api.requests) == 3 and s06.KEEP_RECENT > 2
    for request in api.requests[1:]:
        (sent,) = [b for b in request["messages"][1]["content"] if b["type"] == "tool_use"]
        assert sent["input"] == edit
    assert "micro_compact" not in proc.stderr
    assert (workdir / "report.txt").read_text() == big + "the end\n"


def test_what_layer_1_just_cleared_does_not_push_layer_2_to_compact(run_lesson):
    """The API's last count still holds the result layer 1 has just cleared: taken as it is,
    it would put the context over the threshold and compact (a summary call, details lost)
    a conversation that, as sent, is well under it."""
    commands = [f"printf '%{size}s' | tr ' ' {c}" for size, c in ((40_000, "a"), (3_000, "b"),
                                                                 (3_000, "c"), (12_000, "d"))]
    script = [reply(tool("bash", {"command": command})) for command in commands]
    script.append(reply(text("all four looked at")))
    proc, api = run_lesson("s06_compact", "look at the logs", script=script,
                           summary="SUMMARY: four logs", env={"COMPACT_THRESHOLD": "14000"},
                           in_process=True)
    assert proc.returncode == 0 and api.violations == [], proc.stderr
    assert "micro_compact: an old tool result is now a placeholder" in proc.stderr
    assert "[compacted" not in proc.stderr and len(api.requests) == 5
    assert not any("<summary-request>" in json.dumps(r["messages"]) for r in api.requests)
    assert sum(api.usages[3].values()) + 3_000 > 14_000    # the count before it was cleared


def test_slash_compact_in_the_repl_and_a_failing_summary_in_a_turn(run_main, workdir):
    script = [reply(tool("bash", {"command": "seq 1 50"})), reply(text("first")),
              reply(text("SUMMARY of the first turn")),                                 # /compact
              reply(tool("compact", {})), error(400, "summary refused"), reply(text("second"))]
    code, out, err, api = run_main(s06, stdin="one\n/compact\ntwo\nq\n", script=script)
    assert code == 0 and api.violations == [], err
    assert "first" in out and "second" in out
    assert "SUMMARY of the first turn" in api.requests[3]["messages"][0]["content"]
    assert ("compaction failed, history kept: the API refused the request (400 summary "
            "refused)") in words(err)
    # The failed compaction kept the whole history, and the turn went on; the model that asked
    # for it is told it did not happen (else it would go on as if its context were free).
    assert [m["role"] for m in api.requests[5]["messages"]] == ["user", "user", "assistant", "user"]
    result, told = api.requests[5]["messages"][-1]["content"]
    assert result["type"] == "tool_result" and told == text(s06.COMPACTION_FAILED)


def test_a_compaction_that_cannot_save_its_transcript_keeps_the_history(in_tmp, capsys):
    (in_tmp / ".transcripts").write_text("a file in the way")
    history = conversation(("bash", {}, LONG))
    original = copy.deepcopy(history)
    with StandInAPI([]) as api:
        client = anthropic.Anthropic(api_key="k", base_url=api.url)
        assert s06.auto_compact(history, Run(client)) is False
    assert history == original and api.requests == []           # no summary call, nothing lost
    said = words(capsys.readouterr().err)
    assert "compaction skipped, history kept: cannot save the transcript" in said


def test_a_compaction_never_writes_its_transcript_through_a_link_planted_for_it(in_tmp):
    """QA planted .transcripts/.transcript.tmp-<pid> (the name was guessable) -> a file of
    theirs; the compaction wrote the whole conversation into it."""
    victim = in_tmp / "victim.txt"
    victim.write_text("the user's file")
    (in_tmp / ".transcripts").mkdir()
    (in_tmp / ".transcripts" / f".transcript.tmp-{os.getpid()}").symlink_to(victim)
    history = conversation(("bash", {}, LONG), ("bash", {}, "done"))
    with StandInAPI([reply(text("SUMMARY: ran bash twice"))]) as api:
        client = anthropic.Anthropic(api_key="k", base_url=api.url)
        assert s06.auto_compact(history, Run(client)) is True
    assert victim.read_text() == "the user's file"
    (saved,) = (in_tmp / ".transcripts").glob("transcript_*.jsonl")
    assert len(saved.read_text().splitlines()) == 5
    assert f".transcripts/{saved.name}" in history[0]["content"]


def test_usage_with_null_fields_counts_as_zero():
    size = s06.ContextSize()
    messages = [{"role": "user", "content": "hi"}]
    size.record(Usage(None, None), messages)
    # Nothing reported: the estimate.
    assert size.estimate(messages) == s06.tokens.estimate(messages)
    size.record(Usage(10, 5, cache_read=None, cache_creation=7), messages)
    assert size.estimate(messages) == 22


def test_layer2_does_not_compact_again_until_new_work_has_grown_the_context(in_tmp, capsys):
    s06.CONTEXT.threshold = 40
    history = conversation(("bash", {}, LONG))
    with StandInAPI([reply(text("SUMMARY " + "s" * 400))]) as api:
        client = anthropic.Anthropic(api_key="k", base_url=api.url)
        assert s06.needs_compaction(history) and s06.auto_compact(history, Run(client))
    assert ("[what the compaction left (summary, any board, system prompt, tools) is over "
            "layer 2's threshold (") in words(capsys.readouterr().err)
    assert not s06.needs_compaction(history)        # still over 40 tokens, but nothing new was done
    history.append({"role": "assistant", "content": [text("more work " * 10)]})
    assert s06.needs_compaction(history)        # grown by half a threshold: compact again


def test_at_a_new_prompt_the_three_newest_results_stay_whole_and_older_ones_are_cleared(
        run_main):
    """A turn whose calls came back in one message: while the model answers them, all stay (the
    newest turn). At the next prompt they are old, and KEEP_RECENT alone decides: the three
    newest stay whole; the two big ones before them become placeholders."""
    commands = ["printf '%20000s' | tr ' ' a", "printf '%20000s' | tr ' ' b",
                "seq 1 500", "seq 2 501", "seq 3 502"]
    script = [reply(*[tool("bash", {"command": c}) for c in commands]),
              reply(text("looked at all five")), reply(text("the second answer"))]
    code, out, err, api = run_main(s06, stdin="look at the logs\nand now?\nq\n", script=script)
    assert code == 0 and api.violations == [], err
    answered, next_prompt = api.requests[1], api.requests[2]
    whole = [r["content"] for r in tool_results(answered)]
    assert [len(w) for w in whole[:2]] == [20_000, 20_000]      # the turn's own: all whole
    shown = [r["content"] for r in tool_results(next_prompt, 2)]
    assert shown[2:] == whole[2:]
    assert all(s.startswith("[Previous: used bash; the whole result is in ") for s in shown[:2])
    assert next_prompt["messages"][-1] == {"role": "user", "content": "and now?"}
    assert "micro_compact: 2 old tool results (or inputs) are now placeholders" in err


def test_every_request_is_streamed_and_cacheable_and_the_next_call_reads_the_prefix(run_main):
    script = [reply(tool("bash", {"command": "seq 1 2000"})),
              reply(tool("bash", {"command": "echo hi"})), reply(text("done"))]
    code, out, err, api = run_main(s06, "go", script=script)
    assert code == 0
    assert all(r["stream"] and r["cache_control"] == {"type": "ephemeral"} for r in api.requests)
    first, second, third = api.usages
    # Under the 1,024-token minimum: nothing cached; then the whole prefix.
    assert first["cache_creation_input_tokens"] == 0
    assert third["cache_read_input_tokens"] == second["cache_creation_input_tokens"] > 1024
