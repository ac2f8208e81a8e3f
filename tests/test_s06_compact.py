"""s06: the three compaction layers, as units and run as a user runs them."""

import copy
import json

import anthropic
import pytest

import s06_compact as s06
from harness import SetupError
from stand_in_api import StandInAPI, check_request, error, reply, text, tool


def history_with_results(*calls):
    """A valid history: one assistant tool_use and its result per (tool name, result content)."""
    messages = [{"role": "user", "content": "go"}]
    for n, (name, content) in enumerate(calls):
        messages.append({"role": "assistant", "content": [tool(name, {}, id=f"t{n}")]})
        messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{n}", "content": content}]})
    return messages


LONG = "x" * 101


# ---------------------------------------------------------------- layer 1

def test_micro_compact_replaces_only_old_long_results_of_other_tools():
    history = history_with_results(("bash", LONG), ("read_file", LONG), ("bash", "x" * 100),
                                   ("edit_file", LONG), ("bash", LONG), ("bash", LONG), ("bash", LONG))
    original = copy.deepcopy(history)
    view = s06.micro_compact(history)
    contents = [m["content"][0]["content"] for m in view[2::2]]
    assert contents == ["[Previous: used bash]", LONG, "x" * 100, "[Previous: used edit_file]", LONG, LONG, LONG]
    assert history == original                      # the history keeps every result
    assert check_request({"model": "m", "max_tokens": 1, "messages": view}) is None  # pairing intact
    ids = lambda msgs: [(b.get("id"), b.get("tool_use_id")) for m in msgs[1:] for b in m["content"]]
    assert ids(view) == ids(history)
    assert s06.micro_compact(view) == view          # idempotent


def test_micro_compact_keeps_everything_when_there_are_few_results():
    history = history_with_results(("bash", LONG), ("bash", LONG), ("bash", LONG))
    assert s06.micro_compact(history) == history


# ---------------------------------------------------------------- measuring

class Usage:
    def __init__(self, i, o, cache_read=None, cache_creation=None):
        self.input_tokens, self.output_tokens = i, o
        self.cache_read_input_tokens, self.cache_creation_input_tokens = cache_read, cache_creation


def test_context_size_prefers_the_reported_count_and_estimates_only_the_rest():
    size = s06.ContextSize()
    messages = [{"role": "user", "content": "a" * 400}]
    assert size.estimate(messages) == s06.estimate_tokens(messages)  # nothing reported yet
    messages.append({"role": "assistant", "content": [text("ok")]})
    size.record(Usage(1000, 20, cache_read=300), messages)
    assert size.estimate(messages) == 1320
    extra = {"role": "user", "content": "b" * 4000}
    messages.append(extra)
    assert size.estimate(messages) == 1320 + s06.estimate_tokens([extra])


def test_the_threshold_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv("COMPACT_THRESHOLD", raising=False)
    assert s06.compact_threshold() == 50_000
    monkeypatch.setenv("COMPACT_THRESHOLD", "1234")
    assert s06.compact_threshold() == 1234
    monkeypatch.setenv("COMPACT_THRESHOLD", "lots")
    with pytest.raises(SetupError, match="COMPACT_THRESHOLD must be a positive whole number"):
        s06.compact_threshold()


# ---------------------------------------------------------------- layer 2

@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_transcripts_are_jsonl_of_plain_data_and_never_overwritten(in_tmp):
    history = history_with_results(("bash", "héllo ✓"), ("read_file", LONG))
    first, second = s06.save_transcript(history), s06.save_transcript(history[:1])
    assert first != second and first.parent.name == ".transcripts"
    lines = first.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == history and "héllo ✓" in lines[2]
    assert [json.loads(line) for line in second.read_text(encoding="utf-8").splitlines()] == history[:1]


def test_auto_compact_replaces_the_history_with_the_summary(in_tmp):
    history = history_with_results(("bash", LONG), ("bash", "done"))
    with StandInAPI([reply(text("SUMMARY: ran bash twice"))]) as api:
        client = anthropic.Anthropic(api_key="k", base_url=api.url)
        assert s06.auto_compact(history, client, focus="the bash runs") is True
    (request,) = api.requests
    assert "tools" not in request and "Above all, preserve: the bash runs" in request["messages"][0]["content"]
    assert LONG in request["messages"][0]["content"]   # the summary sees the full results
    assert len(history) == 1 and history[0]["role"] == "user"
    assert "SUMMARY: ran bash twice" in history[0]["content"] and ".transcripts/transcript_" in history[0]["content"]
    (transcript,) = (in_tmp / ".transcripts").iterdir()
    assert len(transcript.read_text().splitlines()) == 5


@pytest.mark.parametrize("answer", [error(400, "prompt is too long"), reply()], ids=["api-error", "empty"])
def test_a_failed_summary_loses_nothing(in_tmp, capsys, answer):
    history = history_with_results(("bash", LONG))
    before = copy.deepcopy(history)
    with StandInAPI([answer]) as api:
        client = anthropic.Anthropic(api_key="k", base_url=api.url, max_retries=0)
        assert s06.auto_compact(history, client) is False
    assert history == before
    assert len(list((in_tmp / ".transcripts").iterdir())) == 1
    err = capsys.readouterr().err
    assert err.count("compaction failed, history kept") == 1


# ---------------------------------------------------------------- end to end

def test_the_model_calls_compact_mid_task_and_keeps_working(run_lesson, workdir):
    script = [reply(tool("bash", {"command": "seq 1 100"})),
              reply(tool("write_file", {"path": "a.txt", "content": "A"}), tool("compact", {"focus": "a.txt"})),
              reply(text("SUMMARY: wrote a.txt"), stop_reason="end_turn"),   # the summary call
              reply(tool("read_file", {"path": "a.txt"})),
              reply(text("finished after compaction"))]
    proc, api = run_lesson("s06_compact", "work", script=script)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "finished after compaction" and api.violations == []
    summary_req, after = api.requests[2], api.requests[3]
    assert "tools" not in summary_req and "compact" in [t["name"] for t in api.requests[0]["tools"]]
    assert after["messages"][0]["role"] == "user" and "SUMMARY: wrote a.txt" in after["messages"][0]["content"]
    assert len(after["messages"]) == 1
    assert "[compacted: " in proc.stderr and "transcript .transcripts/transcript_" in proc.stderr
    assert len(list((workdir / ".transcripts").iterdir())) == 1


def test_a_low_threshold_triggers_auto_compact_and_the_turn_completes(run_lesson, workdir):
    # Bash results become placeholders (layer 1), read_file results are kept and grow the context (layer 2).
    (workdir / "big.txt").write_text("word " * 800)
    script = ([reply(tool("bash", {"command": "seq 1 400"})) for _ in range(4)]
              + [reply(tool("read_file", {"path": "big.txt"})) for _ in range(4)] + [reply(text("done"))])
    proc, api = run_lesson("s06_compact", "work", script=script, summary="SUMMARY: printed numbers",
                           env={"COMPACT_THRESHOLD": "3000"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "done" and api.violations == []
    summaries = [r for r in api.requests if "tools" not in r]
    assert len(summaries) >= 1 and "[compacted: " in proc.stderr
    after = api.requests[api.requests.index(summaries[0]) + 1]
    assert "SUMMARY: printed numbers" in after["messages"][0]["content"]
    # Layer 1 was at work too: old bash results went to the model as placeholders.
    first_compaction = api.requests.index(summaries[0])
    assert any("[Previous: used bash]" in json.dumps(r["messages"]) for r in api.requests[:first_compaction])
    assert "micro_compact: an old bash result is now a placeholder" in proc.stderr


def test_slash_compact_in_the_repl_and_a_failing_summary_in_a_turn(run_main, workdir):
    script = [reply(tool("bash", {"command": "seq 1 50"})), reply(text("first")),
              reply(text("SUMMARY of the first turn")),                                 # /compact
              reply(tool("compact", {})), error(400, "summary refused"), reply(text("second"))]
    code, out, err, api = run_main(s06, stdin="one\n/compact\ntwo\nq\n", script=script)
    assert code == 0 and api.violations == [], err
    assert "first" in out and "second" in out
    assert "SUMMARY of the first turn" in api.requests[3]["messages"][0]["content"]
    assert "compaction failed, history kept: the API refused the request (400 summary refused)" in err
    # The failed compaction kept the whole history, and the turn went on.
    assert [m["role"] for m in api.requests[5]["messages"]] == ["user", "user", "assistant", "user"]


def test_a_threshold_of_non_ascii_digits_is_one_clear_error(monkeypatch):
    monkeypatch.setenv("COMPACT_THRESHOLD", "²")
    with pytest.raises(SetupError, match="positive whole number"):
        s06.compact_threshold()


def test_a_compaction_that_cannot_save_its_transcript_keeps_the_history(in_tmp, capsys):
    (in_tmp / ".transcripts").write_text("a file in the way")
    history = history_with_results(("bash", LONG))
    original = copy.deepcopy(history)
    with StandInAPI([]) as api:
        client = anthropic.Anthropic(api_key="k", base_url=api.url)
        assert s06.auto_compact(history, client) is False
    assert history == original and api.requests == []           # no summary call, nothing lost
    assert "compaction skipped, history kept: cannot save the transcript" in capsys.readouterr().err


def test_usage_with_null_fields_counts_as_zero():
    size = s06.ContextSize()
    messages = [{"role": "user", "content": "hi"}]
    size.record(Usage(None, None), messages)
    assert size.estimate(messages) == s06.estimate_tokens(messages)   # nothing reported: the estimate
    size.record(Usage(10, 5, cache_read=None, cache_creation=7), messages)
    assert size.estimate(messages) == 22
