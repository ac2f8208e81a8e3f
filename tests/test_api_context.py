"""--api-context: s06 with the API's own context management, run as a user runs it.

Each run goes through the real SDK to the loopback stand-in, which plays the API's two betas
(harness/stand_in/edits.py) and refuses what the real API refuses (stand_in/rules.py): a request
without its beta header, an edit with a field the API does not take, a compaction block sent
back without the compaction edit. Each test runs s06's main() in process (in_process=True): what
a run sends, keeps or says is the same code there, without the SDK's import paid again for each
run; nothing here depends on how a process starts or ends.
"""

import html
import json
import re
import types

import anthropic
import pytest

import s06_compact
import s03_todo
from harness import api_context, tokens
from harness.run import Run
from harness.stand_in import StandInAPI, edits
from harness.stand_in.script import error, reply, text, tool
from helpers import messages, words

SUMMARY = "Summary: five bulky outputs so far; nothing else was asked."


def bulky(first, said=None):
    """A bash call whose output is some 48,000 characters (about 12,000 tokens): five of them
    pass the API's 50,000-token minimum for a compaction."""
    blocks = [text(said)] if said else []
    return reply(*blocks, tool("bash", {"command": f"seq -s ' ' {first} {first + 8000}"}))


def five_bulky_then(*more):
    return [bulky(n) for n in (10_000, 20_000, 30_000, 40_000, 50_000)] + list(more)


def edit_of(request):
    (edit,) = request["context_management"]["edits"]
    return edit


def betas(headers):
    return {b.strip() for b in headers.get("anthropic-beta", "").split(",") if b.strip()}


# ---------------------------------------------------------------- what each mode sends

def test_clear_sends_the_context_editing_edit_with_its_beta_and_s06s_settings(run_lesson):
    proc, api = run_lesson("s06_compact", "--api-context", "clear", "hi",
                           script=[reply(text("Done."))], in_process=True)
    assert proc.returncode == 0, proc.stderr
    assert api.violations == []
    assert edit_of(api.requests[0]) == {
        "type": "clear_tool_uses_20250919",
        "trigger": {"type": "input_tokens", "value": api_context.API_CLEAR_AT},
        "keep": {"type": "tool_uses", "value": s06_compact.KEEP_RECENT},
        "clear_tool_inputs": True}
    assert betas(api.headers[0]) == {"context-management-2025-06-27"}
    # The lesson's docstring tells a learner what is sent: its numbers are these.
    said = words(s06_compact.__doc__)
    assert f"past {api_context.API_CLEAR_AT:,} input tokens the server clears" in said
    assert f"past {api_context.API_COMPACT_AT:,} it summarises" in said


def test_compact_sends_the_compaction_edit_with_its_beta_at_the_apis_minimum(run_lesson):
    proc, api = run_lesson("s06_compact", "--api-context", "compact", "hi",
                           script=[reply(text("Done."))], in_process=True)
    assert proc.returncode == 0, proc.stderr
    edit = edit_of(api.requests[0])
    assert edit["type"] == "compact_20260112"
    assert edit["trigger"] == {"type": "input_tokens", "value": api_context.API_COMPACT_AT}
    assert api_context.API_COMPACT_AT == 50_000
    # With tools in the request, the docs' own words that keep the summary step from calling one.
    assert "Do not call any tools" in edit["instructions"]
    assert betas(api.headers[0]) == {"compact-2026-01-12"}


def test_without_the_flag_no_beta_and_no_context_management_is_sent(run_lesson):
    proc, api = run_lesson("s06_compact", "hi", script=[reply(text("Done."))], in_process=True)
    assert proc.returncode == 0 and proc.stdout.strip() == "Done."
    assert "context_management" not in api.requests[0] and betas(api.headers[0]) == set()
    assert api.requests[0]["messages"] == [{"role": "user", "content": "hi"}]


def test_s07_takes_the_flag_too_as_it_runs_s06s_loop(run_lesson):
    proc, api = run_lesson("s07_task_system", "--api-context", "clear", "hi",
                           script=[reply(text("Done."))], in_process=True)
    assert proc.returncode == 0, proc.stderr
    assert edit_of(api.requests[0])["type"] == "clear_tool_uses_20250919"


def test_a_compact_threshold_the_user_set_is_said_to_be_unused_with_the_flag(run_lesson):
    """With --api-context the API's trigger decides, and layer 2 guards only the window: a
    COMPACT_THRESHOLD set in the environment or ./.env would otherwise be ignored in silence."""
    proc, api = run_lesson("s06_compact", "--api-context", "clear", "hi",
                           script=[reply(text("Done."))], env={"COMPACT_THRESHOLD": "5000"},
                           in_process=True)
    assert proc.returncode == 0, proc.stderr
    assert ("COMPACT_THRESHOLD=5000 is not used with --api-context: the API clears past "
            f"{api_context.API_CLEAR_AT:,} tokens") in words(proc.stderr)


def test_a_compact_threshold_that_is_not_a_number_is_one_line_with_the_flag_too(run_lesson):
    proc, api = run_lesson("s06_compact", "--api-context", "compact", "hi",
                           script=[reply(text("Done."))], env={"COMPACT_THRESHOLD": "lots"},
                           in_process=True)
    assert proc.returncode == 1 and api.requests == []
    assert messages(proc.stderr) == [
        "error: COMPACT_THRESHOLD must be a positive whole number of tokens, got 'lots'"]


def test_an_unknown_mode_is_a_usage_error_before_any_call(run_lesson):
    proc, api = run_lesson("s06_compact", "--api-context", "summarize", "hi", in_process=True)
    assert proc.returncode == 2 and "invalid choice: 'summarize'" in proc.stderr
    assert api.requests == []


# ---------------------------------------------------------------- the server does the work

def test_with_clear_the_server_clears_and_the_harness_neither_clears_nor_summarises(run_lesson):
    proc, api = run_lesson("s06_compact", "--api-context", "clear", "go",
                           script=five_bulky_then(reply(text("Done."))), summary=SUMMARY,
                           in_process=True)
    assert proc.returncode == 0, proc.stderr
    assert api.violations == []
    sent = json.dumps(api.requests)
    assert "[Previous:" not in sent and "<summary-request>" not in sent   # layers 1, 2 aside
    read = json.dumps(api.prompts[-1])
    assert edits.CLEARED in read                      # the server cleared old results...
    assert edits.CLEARED not in sent                  # ...and the history sent keeps them all
    assert "the API cleared" in words(proc.stderr)


def test_a_compaction_block_is_kept_sent_back_and_carried_across_continue(run_lesson, workdir):
    proc, api = run_lesson("s06_compact", "--api-context", "compact", "go",
                           script=five_bulky_then(reply(text("on"), tool("bash", {"command":
                                                                             "echo on"})),
                                                  reply(text("Done."))), summary=SUMMARY,
                           in_process=True)
    assert proc.returncode == 0, proc.stderr
    assert api.violations == []
    block = {"type": "compaction", "content": SUMMARY}
    after = api.requests[-1]["messages"]
    # Sent back, first: the request starts from the summary (the server drops what came before).
    assert after[0] == {"role": "assistant", "content": [block, *after[0]["content"][1:]]}
    assert "the API compacted the conversation" in words(proc.stderr)
    # The session log keeps it; --continue sends it back with the flag, and without it sends
    # the summary as text (the API would refuse the block).
    (log,) = (workdir / ".transcripts").glob("session_*.jsonl")
    logged = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert any(block in entry.get("content", []) for entry in logged if isinstance(entry, dict)
               and isinstance(entry.get("content"), list))
    proc, api = run_lesson("s06_compact", "--continue", "--api-context", "compact", "more",
                           script=[reply(text("Still here."))], in_process=True)
    assert proc.returncode == 0, proc.stderr
    assert api.violations == [] and api.requests[0]["messages"][0]["content"][0] == block
    proc, api = run_lesson("s06_compact", "--continue", "more", script=[reply(text("on"))],
                           in_process=True)
    assert proc.returncode == 0 and api.violations == [], proc.stderr
    first = api.requests[0]["messages"][0]
    assert first["role"] == "user" and SUMMARY in first["content"][0]["text"]


def test_continue_of_a_compacted_session_counts_what_is_sent_not_what_the_api_dropped(
        run_lesson):
    """Resumed, layer 2 (a guard at the window with --api-context) has no API count yet: it
    must count the history from the API's summary on, or it summarises for nothing."""
    window = {"CONTEXT_WINDOW": "90000"}
    script = five_bulky_then(bulky(60_000), bulky(70_000), reply(text("Done.")))
    proc, api = run_lesson("s06_compact", "--api-context", "compact", "go", script=script,
                           summary=SUMMARY, env=window, in_process=True)
    assert proc.returncode == 0, proc.stderr
    # The history kept all seven outputs (some 84,000 tokens, past layer 2's guard of 74,000
    # in this window); the API's summary came before the sixth, so a request sends about
    # 24,000.
    assert api.requests[-1]["messages"][0]["content"][0]["type"] == "compaction"
    proc, api = run_lesson("s06_compact", "--continue", "--api-context", "compact", "more",
                           script=[reply(text("Still here."))], env=window, in_process=True)
    assert proc.returncode == 0, proc.stderr
    assert "summary call" not in proc.stderr and len(api.requests) == 1
    # It goes on from the summary, and says so in what it counts; the next --continue too.
    sent = api.requests[0]["messages"]
    assert "[continuing .transcripts/session_" in proc.stderr
    assert f": {len(sent) - 1} messages;" in words(proc.stderr)
    proc, api = run_lesson("s06_compact", "--continue", "--api-context", "compact", "again",
                           script=[reply(text("Here."))], env=window, in_process=True)
    assert proc.returncode == 0, proc.stderr
    again = api.requests[0]["messages"]
    assert again[:len(sent)] == sent and again[len(sent)]["content"] == [text("Still here.")]


def test_s03_continues_a_session_the_api_compacted_from_its_summary_as_text(run_lesson):
    """s03 has no --api-context: the API would refuse the compaction block, so the session
    goes on from its summary, sent as plain text, and the user is told."""
    proc, api = run_lesson("s06_compact", "--api-context", "compact", "go",
                           script=five_bulky_then(reply(text("Done."))), summary=SUMMARY,
                           in_process=True)
    assert proc.returncode == 0, proc.stderr
    proc, api = run_lesson("s03_todo", "--continue", "more", script=[reply(text("Going on."))],
                           in_process=True)
    assert proc.returncode == 0 and api.violations == [], proc.stderr
    first = api.requests[0]["messages"][0]
    assert first["role"] == "user" and SUMMARY in first["content"][0]["text"]
    assert "sent as plain text" in words(proc.stderr)


def test_in_s07_the_board_comes_back_after_the_apis_compaction(run_lesson):
    """The promise s07 is named for: after every compaction, the API's too, the model is given
    the board read fresh; the summary alone would leave it to remember the tasks."""
    script = [reply(tool("task_create", {"subject": "Design the data model"}))]
    # The reply that brings the summary starts the task: the board must show it started.
    started = tool("task_update", {"task_id": 1, "status": "in_progress"})
    script += five_bulky_then(reply(text("on"), started), reply(text("Done.")))
    proc, api = run_lesson("s07_task_system", "--api-context", "compact", "go",
                           script=script, summary=SUMMARY, in_process=True)
    assert proc.returncode == 0, proc.stderr
    assert api.violations == []
    after = api.requests[-1]["messages"]
    assert after[0]["content"][0]["type"] == "compaction"       # the API did compact...
    (board,) = [b["text"] for b in after[1]["content"] if b["type"] == "text"]
    assert "Design the data model" in board                       # ...and the board came back,
    line = next(x for x in board.splitlines() if "Design the data model" in x)
    assert "in_progress" in line or "[>]" in line, board          # read after the update ran
    assert "the board, read from" in words(proc.stderr)


def test_in_s07_the_board_comes_back_after_the_apis_compaction_in_a_reply_that_ends_the_turn(
        run_lesson):
    """A reply that brings the summary and calls no tool ends the turn: the board then goes in
    a message of its own, which the next turn (here, --continue) sends after the summary."""
    script = [reply(tool("task_create", {"subject": "Design the data model"}))]
    script += five_bulky_then(reply(text("Done.")))
    proc, api = run_lesson("s07_task_system", "--api-context", "compact", "go",
                           script=script, summary=SUMMARY, in_process=True)
    assert proc.returncode == 0, proc.stderr
    assert "the board, read from" in words(proc.stderr)
    proc, _ = run_lesson("s07_task_system", stdin="/task done 1\nq\n", in_process=True)
    assert proc.returncode == 0, proc.stderr
    proc, api = run_lesson("s07_task_system", "--continue", "--api-context", "compact", "more",
                           script=[reply(text("On it."))], in_process=True)
    assert proc.returncode == 0, proc.stderr
    assert api.violations == []
    sent = api.requests[0]["messages"]
    assert sent[0]["content"][0]["type"] == "compaction"
    assert "[x] #1: Design the data model" in json.dumps(sent[1])      # the board as it is now
    assert sent[-1]["content"] == "more"
    assert "[the board in the resumed conversation was read again" in words(proc.stderr)


def test_a_summary_the_server_wrote_is_counted_in_the_record(fresh_layers):
    with StandInAPI(five_bulky_then(reply(text("Done."))), summary=SUMMARY) as api:
        run = Run(anthropic.Anthropic(api_key="k", base_url=api.url, max_retries=0))
        args = types.SimpleNamespace(api_context="compact", demo=False)       # as a run's
        s06_compact.start(run, args)
        messages = [{"role": "user", "content": "go"}]
        s06_compact.agent_loop(messages, run)
    calls = run.recorder.data.calls
    by_api = [c for c in calls if c.label == api_context.SUMMARY_LABEL]
    assert len(by_api) == 1 and by_api[0].is_summary
    step = next(u["iterations"][0] for u in api.usages if u.get("iterations"))
    assert (by_api[0].uncached, by_api[0].cache_read, by_api[0].cache_written,
            by_api[0].output) == (step["input_tokens"], step["cache_read_input_tokens"],
                                  step["cache_creation_input_tokens"], step["output_tokens"])
    # The record bills what the stand-in bills: the summary step included.
    billed = api.billing()
    assert sum(c.input for c in calls) == billed["input_sent"]
    (compaction,) = run.recorder.data.compactions
    assert compaction.summary == SUMMARY and compaction.after_call == by_api[0].number


def test_cost_context_and_the_page_say_the_api_is_in_charge_and_count_its_summary(run_main,
                                                                                  workdir):
    script = five_bulky_then(reply(text("Done.")))
    code, out, err, api = run_main(s06_compact, "--api-context", "compact",
                                   stdin="go\n/cost\n/context\nq\n", script=script,
                                   summary=SUMMARY)
    assert code == 0 and api.violations == []
    assert "[summary by the API: " in err                       # its usage line
    shown = words(out)
    assert re.search(r"\d+ model calls \(\d+ in the loop, 1 summary: 1 written by the API\)",
                     shown)
    assert shown.count("the API (--api-context compact)") == 2    # /cost and /context
    assert "--api-context compact at 50,000" in shown
    # /context's headline after the API's summary is the API's count of the last call.
    assert "the API's count for the last call" in shown
    assert "no API count for this context yet" not in shown
    (page,) = (workdir / ".transcripts").glob("session_*.html")
    shown = page.read_text(encoding="utf-8")
    assert SUMMARY in shown and "compaction block, kept in the session log" in shown
    assert shown.count('class="call summary-call"') == 1          # its bar, as a summary call
    # The sizes after the API's summary are the API's own count, not a guess of the harness's.
    shown = html.unescape(shown)
    assert "after: the API's count" in shown and "after: estimated" not in shown


def test_context_says_its_rows_are_what_is_sent_before_the_apis_clearing(run_main):
    """With clear, the API's count (the headline) is of what the server read, after its
    clearing; the rows are what the harness sends, whole. /context says which is which."""
    code, out, err, api = run_main(s06_compact, "--api-context", "clear",
                                   stdin="go\n/context\n/compact\n/context\nq\n",
                                   script=five_bulky_then(reply(text("Done."))),
                                   summary=SUMMARY)
    assert code == 0 and api.violations == []
    cleared = json.dumps(api.prompts[-2]).count(edits.CLEARED)     # the last call of the turn
    assert cleared >= 1
    note = (f"the rows are what the harness sends, whole: the API cleared {cleared} old tool "
            "results of it on the server, so its count is less")
    # Said once: after /compact there is no API count for the new history, nothing to explain.
    assert words(out).count(note) == 1


def test_without_the_flag_context_and_cost_say_the_harness_is_in_charge(run_main):
    code, out, err, api = run_main(s06_compact, stdin="/cost\n/context\nq\n")
    assert code == 0
    assert words(out).count("the harness's layers 1 and 2 (without --api-context)") == 2


# ---------------------------------------------------------------- an endpoint without the beta

REFUSED = "context_management: Extra inputs are not permitted"


def test_an_endpoint_that_refuses_the_beta_is_one_line_and_exit_1(run_lesson):
    proc, api = run_lesson("s06_compact", "--api-context", "clear", "hi",
                           script=[error(400, REFUSED)], in_process=True)
    assert proc.returncode == 1
    lines = [words(line) for line in messages(proc.stderr) if line.startswith("error")]
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert REFUSED in lines[0] and "run without --api-context" in lines[0]
    # Its first turn failed and is undone: --continue would not go on with it.
    assert "--continue" not in lines[0]


def test_in_the_repl_a_refused_beta_fails_the_turn_and_the_repl_goes_on(run_main):
    code, out, err, api = run_main(s06_compact, "--api-context", "compact",
                                   stdin="hi\n/cost\nq\n", script=[error(400, REFUSED)])
    assert code == 0 and "run without --api-context" in words(err)
    assert "session so far: 0 model calls" in out                # /cost still answers


def test_a_422_that_names_the_beta_gets_the_hint_too(run_lesson):
    """Some proxies validate the body themselves and answer 422 for a field they do not know."""
    proc, api = run_lesson("s06_compact", "--api-context", "clear", "hi",
                           script=[error(422, REFUSED)], in_process=True)
    assert proc.returncode == 1
    (line,) = [words(line) for line in messages(proc.stderr) if line.startswith("error")]
    assert REFUSED in line and "run without --api-context" in line


def test_a_400_that_does_not_name_the_beta_gets_no_hint(run_lesson):
    """Any other 400 is the API's own line, whole and alone: a hint there would send the user
    after the wrong cause."""
    proc, api = run_lesson("s06_compact", "--api-context", "clear", "hi",
                           script=[error(400, "messages.0: something else")], in_process=True)
    assert proc.returncode == 1 and proc.stdout == ""
    assert messages(proc.stderr) == [
        "error: the API refused the request (400 messages.0: something else)"]


# ---------------------------------------------------------------- the reply as history

def test_a_compaction_block_without_a_summary_is_left_out_and_said(capsys):
    block = {"type": "compaction", "content": None}
    setting = api_context.Setting(api_context.COMPACT, 50_000)
    kept = setting.kept([block, text("go on")])
    assert kept == [text("go on")] and "compaction failed" in words(capsys.readouterr().err)


def test_what_the_api_reads_starts_at_its_summary_even_inside_a_message():
    """As the server drops all before the block, a text before it in the same message too: a
    history resumed from here opens with the summary, which the API and repair accept."""
    summary = {"type": "compaction", "content": "a summary"}
    history = [{"role": "user", "content": "go"},
               {"role": "assistant", "content": [text("first"), summary, text("then")]},
               {"role": "user", "content": "more"}]
    assert api_context.from_last_summary(history) == [
        {"role": "assistant", "content": [summary, text("then")]}, history[2]]
    assert api_context.from_last_summary(history[:1]) == history[:1]     # no summary: all


def test_a_compaction_block_in_a_run_that_did_not_ask_for_one_is_left_out(capsys):
    block = {"type": "compaction", "content": "a summary"}
    setting = api_context.Setting(api_context.CLEAR, 30_000)
    assert setting.kept([block, text("hi")]) == [text("hi")]
    assert "did not ask the API to compact" in words(capsys.readouterr().err)


def test_a_compaction_that_pauses_is_resumed_within_one_round(workdir, monkeypatch):
    """pause_after_compaction: the reply is the block alone, stop_reason "compaction"; ask()
    sends it back and the model goes on, in the same round (as for pause_turn)."""
    monkeypatch.chdir(workdir)
    big = [{"role": "user", "content": "x " * 120_000}]
    pausing = {"type": "compact_20260112", "pause_after_compaction": True,
               "trigger": {"type": "input_tokens", "value": 50_000}}

    class Pausing(api_context.Setting):
        def request(self):
            return {"betas": ["compact-2026-01-12"], "context_management": {"edits": [pausing]}}

    with StandInAPI([reply(text("Done."))], summary=SUMMARY) as api:
        run = Run()
        run.api_context = Pausing(api_context.COMPACT, 50_000)
        run.client = anthropic.Anthropic(api_key="k", base_url=api.url, max_retries=0)
        answer = s03_todo.ask_model(run, "sys", s06_compact.TOOLS, big, 100)
    assert api.violations == [] and len(api.requests) == 2
    assert api.requests[1]["messages"][-1] == {"role": "assistant", "content": [
        {"type": "compaction", "content": SUMMARY}]}
    assert [b["type"] for b in answer.content] == ["compaction", "text"]
    assert answer.answer == "Done."


def test_a_reply_that_says_nothing_of_context_management_is_noted_once(run, capsys):
    """An endpoint that takes the beta's fields and ignores them: the API always answers with
    context_management (applied_edits, [] when it did nothing); a reply without it is said."""
    run.api_context = api_context.Setting(api_context.CLEAR, 30_000)
    silent = types.SimpleNamespace(content=[], usage={}, context_management=None)
    run.api_context.count(run, silent)
    run.api_context.count(run, silent)
    assert words(capsys.readouterr().err).count("says nothing of context management") == 1
    heard = types.SimpleNamespace(content=[], usage={}, context_management={"applied_edits": []})
    run.api_context = api_context.Setting(api_context.CLEAR, 30_000)
    run.api_context.count(run, heard)
    assert capsys.readouterr().err == ""           # a reply that did nothing: nothing to say


def test_a_clearing_is_said_when_it_grows_and_again_after_layer_3_made_a_new_history(run,
                                                                                      capsys):
    run.api_context = api_context.Setting(api_context.CLEAR, 30_000)

    def replied(uses):
        edit = {"type": "clear_tool_uses_20250919", "cleared_tool_uses": uses,
                "cleared_input_tokens": 1_000 * uses}
        said = {"applied_edits": [edit] if uses else []}
        run.api_context.count(run, types.SimpleNamespace(content=[], usage={},
                                                         context_management=said))
        return words(capsys.readouterr().err)

    assert "cleared 4 more old tool results" in replied(4)
    assert replied(4) == ""                       # the same clearing, repeated: nothing new
    assert "cleared 1 more old tool result on" in replied(5)
    assert replied(0) == ""                       # /compact: a new history, nothing cleared
    assert "cleared 2 more old tool results" in replied(2)


def test_the_demo_plays_each_mode_with_no_key(run_main):
    """--demo --api-context: s06's own settings (no trigger lowered: the API takes none under
    50,000 for a compaction), and the stand-in plays the server's side."""
    code, out, err, api = run_main(s06_compact, "--demo", "--api-context", "compact", key=None)
    assert code == 0 and "the API compacted the conversation" in words(err)
    assert "[summary by the API: " in err and "I went on from the summary" in words(out + err)
    code, out, err, api = run_main(s06_compact, "--demo", "--api-context", "clear", key=None)
    assert code == 0 and "the API cleared" in words(err)


# ---------------------------------------------------------------- odd shapes and dead ends (#47)

def compacting(content, usage):
    """A reply that opens with the API's compaction block (its content as given), then says
    Done: what a gateway may send back."""
    return reply({"type": "compaction", "content": content}, text("Done."), usage=usage)


def continued_from(run_lesson):
    """--continue with compaction: the first block the next request sends."""
    proc, api = run_lesson("s06_compact", "--continue", "--api-context", "compact", "more",
                           script=[reply(text("on"))], in_process=True)
    assert proc.returncode == 0 and api.violations == [], proc.stderr
    return api.requests[0]["messages"][0]["content"][0]


NOT_REPORTED = "the API compacted the conversation to 900 tokens (its size before: not reported)"


@pytest.mark.parametrize("usage, note", [
    ({"input_tokens": 900, "output_tokens": 5, "iterations": "not a list"}, NOT_REPORTED),
    ({"input_tokens": 900, "output_tokens": 5,
      "iterations": [{"type": "compaction", "input_tokens": "52000", "output_tokens": "300"},
                     {"type": "message", "input_tokens": 900, "output_tokens": 5}]},
     "the API compacted the conversation 52,000 → 900 tokens"),
    ({"input_tokens": 900, "output_tokens": 5}, NOT_REPORTED)])
def test_an_odd_or_missing_count_of_the_apis_summary_keeps_the_summary(run_lesson, usage,
                                                                        note):
    """A count sent as text, iterations that is no list, or none at all: one note, never a
    traceback, and the summary the API already billed is kept for --continue."""
    proc, api = run_lesson("s06_compact", "--api-context", "compact", "go",
                           script=[compacting(SUMMARY, usage)], in_process=True)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stdout.strip() == "Done."
    assert words(proc.stderr).count(note) == 1
    assert continued_from(run_lesson) == {"type": "compaction", "content": SUMMARY}


def test_a_summary_sent_as_a_list_of_text_blocks_is_kept_as_the_string_the_api_takes(
        run_lesson):
    """A gateway that normalises content sends the summary as text blocks; sent back so, the
    API (and the stand-in) would refuse every later call."""
    usage = {"input_tokens": 900, "output_tokens": 5}
    proc, api = run_lesson("s06_compact", "--api-context", "compact", "go",
                           script=[compacting([text(SUMMARY)], usage)], in_process=True)
    assert proc.returncode == 0, proc.stderr
    assert continued_from(run_lesson) == {"type": "compaction", "content": SUMMARY}


def test_a_summary_blanked_by_hand_in_the_log_is_left_out_and_the_session_goes_on(run_lesson,
                                                                                   workdir):
    proc, api = run_lesson("s06_compact", "--api-context", "compact", "go",
                           script=five_bulky_then(reply(text("Done."))), summary=SUMMARY,
                           in_process=True)
    assert proc.returncode == 0, proc.stderr
    (log,) = (workdir / ".transcripts").glob("session_*.jsonl")
    log.write_text(log.read_text(encoding="utf-8").replace(json.dumps(SUMMARY), '""'),
                   encoding="utf-8")
    proc, api = run_lesson("s06_compact", "--continue", "--api-context", "compact", "more",
                           script=[reply(text("on"))], in_process=True)
    assert proc.returncode == 0 and api.violations == [], proc.stderr
    assert "1 compaction block without a summary left out" in words(proc.stderr)
    assert proc.stdout.strip() == "on"


def test_a_beta_refused_after_the_api_compacted_names_a_way_on_that_works(run_lesson):
    """The endpoint took the beta once, and now refuses it: the error's advice (run without
    --api-context, with --continue) must itself work, not point back at the flag."""
    proc, api = run_lesson("s06_compact", "--api-context", "compact", "go",
                           script=five_bulky_then(reply(text("Done."))), summary=SUMMARY,
                           in_process=True)
    assert proc.returncode == 0, proc.stderr
    proc, api = run_lesson("s06_compact", "--continue", "--api-context", "compact", "more",
                           script=[error(400, REFUSED)], in_process=True)
    (line,) = [words(m) for m in messages(proc.stderr) if m.startswith("error")]
    assert proc.returncode == 1 and "run without --api-context (add --continue" in line
    proc, api = run_lesson("s06_compact", "--continue", "more", script=[reply(text("on"))],
                           in_process=True)
    assert proc.returncode == 0 and api.violations == [] and proc.stdout.strip() == "on"
    assert SUMMARY in api.requests[0]["messages"][0]["content"][0]["text"]


WINDOW = 40_000


def run_in_a_window(run_lesson, args, script, stdin=None):
    """s06's main() against a stand-in whose model reads WINDOW tokens at most, with
    CONTEXT_WINDOW set to it, as a user of a small local model sets it."""
    return run_lesson("s06_compact", *args, script=script, summary=SUMMARY, stdin=stdin,
                      env={"CONTEXT_WINDOW": str(WINDOW)}, key="k",
                      stand_in={"context_window": WINDOW}, in_process=True)


def talk(turns):
    """Replies that each say about 6,000 tokens: a conversation that grows by text."""
    return [reply(text(f"Part {n}: " + "words of an answer " * 1_300)) for n in range(turns)]


def test_with_clearing_a_conversation_that_grows_by_text_is_summarised_inside_the_window(
        run_lesson):
    """The API clears tool results, and text is not one: layer 2 must act while the summary
    request still fits, not once a request is over the window."""
    prompts = "".join(f"go on {n}\n" for n in range(8)) + "q\n"
    proc, api = run_in_a_window(run_lesson, ["--api-context", "clear"], talk(8),
                                stdin=prompts)
    assert proc.returncode == 0 and api.violations == [], proc.stderr
    assert "[compacted:" in proc.stderr and "answer cut" not in proc.stdout
    assert "prompt is too long" not in proc.stderr


def test_a_window_too_small_for_the_apis_trigger_says_layer_2_acts_and_context_counts_to_it(
        run_lesson):
    """In a 40,000-token window the API's compaction (past 50,000) can never come: the run
    says so as it starts, and /context counts down to layer 2's guard, not to 50,000."""
    proc, api = run_in_a_window(run_lesson, ["--api-context", "compact"], [],
                                stdin="/context\nq\n")
    assert proc.returncode == 0, proc.stderr
    said = words(proc.stderr)
    guard = re.search(r"layer 2 compacts first, at ([\d,]+)\]", said)
    assert ("[--api-context compact acts past 50,000 tokens, but CONTEXT_WINDOW is 40,000: "
            "with room kept for a reply and a summary, layer 2 compacts first, at " in said)
    assert guard and int(guard[1].replace(",", "")) < WINDOW
    shown = words(proc.stdout)
    assert f"layer 2 at {guard[1]}: " in shown and "to go before layer 2 compacts" in shown
    assert "--api-context compact at 50,000" not in shown
    # Who is in charge says it too, not only the API's trigger.
    assert f"past 50,000 tokens; in this window layer 2 compacts first, at {guard[1]}" in shown


def test_a_session_resumed_past_the_window_is_summarised_from_what_fits(run_lesson):
    """A session that grew in a larger window, resumed with a smaller one: the summary request
    covers the newest turns that fit, and the session goes on."""
    prompts = "".join(f"go on {n}\n" for n in range(9)) + "q\n"
    proc, api = run_lesson("s06_compact", script=talk(9), stdin=prompts, in_process=True)
    assert proc.returncode == 0, proc.stderr
    proc, api = run_in_a_window(run_lesson, ["--continue", "more"], [reply(text("on"))])
    assert proc.returncode == 0 and api.violations == [], proc.stderr
    assert "the summary covers its newest" in words(proc.stderr)
    assert proc.stdout.strip() == "on"


# ---------------------------------------------------------------- a second compaction (#46)

def compacted_twice(run_lesson):
    """s06 with --api-context compact over eleven bulky outputs: the API summarises twice
    (after the fifth output, and after the tenth, the first five gone with the first
    summary), and one more output follows the second summary. Returns the run."""
    script = [bulky(n * 10_000) for n in range(1, 12)] + [reply(text("Done."))]
    proc, api = run_lesson("s06_compact", "--api-context", "compact", "go", script=script,
                           summary=SUMMARY, in_process=True)
    assert proc.returncode == 0 and api.violations == [], proc.stderr
    return proc, api


def compactions_in(request) -> list:
    """Where each compaction block of a request is: (message, block)."""
    return [(m, b) for m, message in enumerate(request["messages"])
            if isinstance(message["content"], list)
            for b, block in enumerate(message["content"]) if block["type"] == "compaction"]


def size(counts) -> int:
    """What a usage says the API read: its input, uncached, read from the cache and written."""
    return (counts["input_tokens"] + counts["cache_read_input_tokens"]
            + counts["cache_creation_input_tokens"])


def test_after_the_apis_second_compaction_a_request_sends_only_what_follows_it(run_lesson):
    """The API drops everything before its LAST compaction block: a request that still sent
    the span between the first summary and the second would pay for it on every call."""
    proc, api = compacted_twice(run_lesson)
    compacting = [n for n, counted in enumerate(api.usages) if counted.get("iterations")]
    assert len(compacting) == 2                         # the API did summarise twice
    last = api.requests[-1]
    assert compactions_in(last) == [(0, 0)]             # one summary, first: the second one
    assert last["messages"][0]["role"] == "assistant"
    sent = json.dumps(last)
    # The sixth to tenth outputs came between the summaries; the eleventh follows the second.
    assert "60000 60001" not in sent and "100000 100001" not in sent
    assert "110000 110001" in sent
    # Each compaction is said with its sizes, as the API counted them.
    said = words(proc.stderr)
    for n in compacting:
        step, reply_step = api.usages[n]["iterations"]
        assert (f"the API compacted the conversation {size(step):,} → {size(reply_step):,} "
                "tokens") in said


def test_continue_after_the_apis_second_compaction_counts_and_sends_from_the_last_summary(
        run_lesson):
    """--continue goes on from the last summary: /context counts that, layer 2's guard (here a
    60,000-token window, so 44,000 tokens) does not summarise the span the API dropped, and
    the request sends it alone."""
    compacted_twice(run_lesson)
    window = {"CONTEXT_WINDOW": "60000"}
    proc, api = run_lesson("s06_compact", "--continue", "--api-context", "compact",
                           script=[reply(text("Still here."))], stdin="/context\nmore\nq\n",
                           env=window, in_process=True)
    assert proc.returncode == 0 and api.violations == [], proc.stderr
    assert "summary call" not in proc.stderr and len(api.requests) == 1
    (request,) = api.requests
    assert compactions_in(request) == [(0, 0)]
    assert "60000 60001" not in json.dumps(request) and "110000 110001" in json.dumps(request)
    resumed = request["messages"][:-1]                  # what /context was shown, then "more"
    assert request["messages"][-1]["content"] == "more"
    assert f": {len(resumed)} messages;" in words(proc.stderr)
    total = tokens.request(s06_compact.SYSTEM, s06_compact.TOOLS, resumed)
    assert (f"context now: ~{total:,} tokens (estimated: no API count for this context yet)"
            in proc.stdout)


# ---------------------------------------------------------------- the size of a compaction (#46)

def test_the_apis_compaction_is_said_with_its_cached_part_on_the_screen_and_the_page(
        run_lesson, workdir):
    """The API counts a request in three parts: uncached, read from the cache, written to it.
    A summary step reads almost all of its input from the cache: said as its uncached part
    alone, a compaction of 60,500 tokens would read "500 → 2,003"."""
    summary_step = {"type": "compaction", "input_tokens": 500, "cache_read_input_tokens": 48_000,
                    "cache_creation_input_tokens": 12_000, "output_tokens": 300}
    after = {"input_tokens": 2_003, "cache_read_input_tokens": 40_000,
             "cache_creation_input_tokens": 0, "output_tokens": 5}
    usage = {**after, "iterations": [summary_step, {"type": "message", **after}]}
    proc, api = run_lesson("s06_compact", "--api-context", "compact", "go",
                           script=[compacting(SUMMARY, usage)], in_process=True)
    assert proc.returncode == 0 and api.violations == [], proc.stderr
    assert ("the API compacted the conversation 60,500 → 42,003 tokens; its summary, a "
            "compaction block, is kept in the history and sent back") in words(proc.stderr)
    (page,) = (workdir / ".transcripts").glob("session_*.html")
    shown = words(html.unescape(page.read_text(encoding="utf-8")))
    assert ("60,500 → 42,003 tokens (before: the API's count; after: the API's count)"
            in shown)


def test_the_stand_ins_own_compaction_is_said_with_the_cache_it_read(run_lesson):
    """The same, as the stand-in plays the API: its summary step reads the conversation from
    the cache the loop's calls wrote."""
    proc, api = run_lesson("s06_compact", "--api-context", "compact", "go",
                           script=five_bulky_then(reply(text("Done."))), summary=SUMMARY,
                           in_process=True)
    assert proc.returncode == 0, proc.stderr
    (counted,) = [u for u in api.usages if u.get("iterations")]
    step, reply_step = counted["iterations"]
    assert step["cache_read_input_tokens"] > 40_000                  # read from the cache
    assert (f"the API compacted the conversation {size(step):,} → {size(reply_step):,} tokens"
            in words(proc.stderr))


# ---------------------------------------------------------------- --continue with clear (#46)

def test_continue_with_clear_of_a_session_the_api_compacted_goes_on_from_the_summary_as_text(
        run_lesson):
    """The API refuses a compaction block in a request without the compaction edit (a bare
    400): a session the API compacted, continued with clearing instead, goes on from its
    summary sent as text, and says so."""
    proc, api = run_lesson("s06_compact", "--api-context", "compact", "go",
                           script=five_bulky_then(reply(text("Done."))), summary=SUMMARY,
                           in_process=True)
    assert proc.returncode == 0, proc.stderr
    proc, api = run_lesson("s06_compact", "--continue", "--api-context", "clear", "more",
                           script=[reply(text("Going on."))], in_process=True)
    assert proc.returncode == 0 and api.violations == [], proc.stderr
    assert proc.stdout.strip() == "Going on."
    (request,) = api.requests
    assert edit_of(request)["type"] == "clear_tool_uses_20250919"
    assert compactions_in(request) == []
    first = request["messages"][0]
    assert first == {"role": "user", "content": [text(api_context.AS_TEXT + SUMMARY)]}
    assert ("it goes on from that summary, sent as plain text; add --api-context compact to "
            "let the API compact it again") in words(proc.stderr)


@pytest.mark.parametrize("content", ["   ", [text("  ")]], ids=["blank", "blank-blocks"])
def test_a_compaction_block_with_a_blank_summary_is_said_to_have_failed_only(run_lesson,
                                                                           content):
    """A block holding only white space was reported as a compaction and as a failed one, and
    the page counted a compaction with no summary."""
    usage = {"input_tokens": 900, "output_tokens": 5}
    proc, api = run_lesson("s06_compact", "--api-context", "compact", "go",
                           script=[compacting(content, usage)], in_process=True)
    assert proc.returncode == 0 and proc.stdout.strip() == "Done.", proc.stderr
    said = words(proc.stderr)
    assert "the API's compaction failed (its block holds no summary)" in said
    assert "the API compacted the conversation" not in said
