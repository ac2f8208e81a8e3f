#!/usr/bin/env python3
"""The mutation check: break one idea at a time in a copy of the repo; the tests must notice.

    python tests/mutate.py              # every mutation, each against the tests it names
    python tests/mutate.py claim order  # only the mutations whose name contains a word given
    python tests/mutate.py --jobs 1     # one mutation at a time (default: two at once)
    python tests/mutate.py --after-suite  # the suite just passed here: no run on an unchanged copy
    python tests/mutate.py --suite      # each against the whole suite (slow: minutes per mutation)
    python tests/mutate.py --help

A suite can pass and still not test an idea: a mutation that leaves every test green shows
where. Each entry below is (name, file, the exact text to replace, what replaces it, the tests
that must fail: files, or single tests as file::name). The working tree is copied (uncommitted
changes included) to a temporary folder, the one change is made there, and the tests run there
(stopping at the first failure); the repo is never touched. First every
snippet is looked for: one that is not in its file exactly once is a stale entry, and the
check fails at once, before any test runs (a stale entry would silently test nothing). Then
the named tests run on an unchanged copy: a test that already fails cannot catch anything, so
it is left out of the runs (--after-suite skips that run: .ci/run has just run the whole suite,
and it passed). The PostgreSQL mutations need a server (TEST_DATABASE_URL, or the
binaries for a throwaway one): without it their tests skip, and the mutation is reported
MISSED. Exit status: 0 when every mutation is caught, 1 when one is missed, 2 when an entry is
stale or the unchanged run did not end (nothing to compare with). .ci/run runs it once, after
the suite. See tests/MUTATIONS.md.
Not collected by pytest (no test_ names).
"""

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SKIP = shutil.ignore_patterns(".git", "__pycache__", ".pytest_cache", ".tasks", ".transcripts",
                              "demo", ".venv")   # what a run leaves behind is not the code
# Seconds for one pytest run, the last bound: a mutation that makes a test hang is caught by
# the suite's own bound first (conftest.HANG_LIMIT: the test fails, named, after 120 s; or,
# where the signal cannot break the hang, faulthandler ends the run 60 s later, its dump naming
# the test), and here only if neither came.
TIMEOUT = 300
# The same bound for a run of the whole suite (--suite, and its run on an unchanged copy): the
# suite takes some 4 minutes alone, more beside another run. At 300 s its unchanged run was cut
# off and read as "nothing fails", and a surviving mutation as one that made it hang: caught.
SUITE_TIMEOUT = 1800


@dataclass
class Mutation:
    name: str
    file: str
    old: str
    new: str
    tests: list


S03_E2E = "tests/test_s03_e2e.py"
PAGE = "tests/test_session_page.py"
S06 = "tests/test_s06_compact.py"
STREAMS = "tests/test_stream_shapes.py"
SENDABLE = "tests/test_sendable_text.py"
CONTRACT = "tests/test_board_contract.py"
FOLDER = "tests/test_board_folder.py"
PG = "tests/test_board_postgres.py"
SESSION_LOG = "tests/test_session_log.py"
API_CONTEXT = "tests/test_api_context.py"
SECRETS_TESTS = "tests/test_secrets.py"
ATOMIC = "tests/test_atomic_file_tools.py"
RESERVE_TAKEN = CONTRACT + "::test_reserve_refuses_a_taken_id_and_a_freed_task_keeps_its_hand_edit"
WAITS = CONTRACT + "::test_while_one_agent_changes_the_board_another_agents_change_waits_for_it"
HELD_BY_ANOTHER = (CONTRACT + "::test_a_task_in_progress_by_another_agent_cannot_be_started_or_"
                              "completed")
TODO_E2E = S03_E2E + "::test_todo_rendering_reminder_and_refused_second_in_progress"
LAYER1_BATCH = (S06 + "::test_layer1_clears_old_long_results_in_one_worthwhile_batch_and_keeps_"
                      "the_newest")
STOPPED_MID_BATCH = (SESSION_LOG + "::test_a_lesson_stopped_mid_batch_resumes_with_every_call_"
                                   "that_ran")
CTRL_C_MID_BATCH = ("tests/test_cli.py::test_ctrl_c_in_a_batch_keeps_the_calls_that_ran_and_marks_"
                    "the_one_running")

MUTATIONS = [
    # ---------------------------------------------------------------- s03: the loop and tools
    Mutation("the todo nag comes a round late", "s03_todo.py",
             "        if rounds_without_todo >= NAG_AFTER:",
             "        if rounds_without_todo > NAG_AFTER:",
             [TODO_E2E]),
    Mutation("the nag resets only when every call of a round is todo", "s03_todo.py",
             '        if any(call["name"] == "todo" for call in response.tool_uses):',
             '        if all(call["name"] == "todo" for call in response.tool_uses):',
             [S03_E2E + "::test_a_round_with_todo_among_other_calls_resets_the_nag"]),
    Mutation("two todo items may be in progress at once", "s03_todo.py",
             "        if len(doing) > 1:",
             "        if len(doing) > 2:",
             [TODO_E2E]),
    Mutation("a todo status sent as a list is a TypeError, not the rule it breaks",
             "s03_todo.py",
             "        if not isinstance(status, str) or status not in self.MARKS:",
             "        if status not in self.MARKS:",
             ["tests/test_s03_tools.py::test_a_call_that_breaks_a_rule_is_refused_and_keeps_the_"
              "old_list"]),
    Mutation("call_tool returns a tool's exception as a result that worked", "s03_todo.py",
             '        return f"{type(exc).__name__}: {exc}", True',
             '        return f"{type(exc).__name__}: {exc}", False',
             [TODO_E2E]),
    Mutation("tool_results come back in reverse order of the calls", "s03_todo.py",
             "            results.append(tool_calls.kept(run, call, result))",
             "            results.insert(0, tool_calls.kept(run, call, result))",
             [TODO_E2E]),
    Mutation("the note about a cut call goes before the tool_results", "s03_todo.py",
             "    return results + response.notes",
             "    return response.notes + results",
             [S03_E2E + "::test_complete_tool_calls_before_the_cut_one_run_and_the_cut_one_"
                        "does_not"]),
    Mutation("a tool call cut by max_tokens is run anyway", "harness/pairing.py",
             'CUT = {"max_tokens", "model_context_window_exceeded", ENDED_EARLY}',
             'CUT = {"model_context_window_exceeded", ENDED_EARLY}',
             [S03_E2E + "::test_a_tool_call_cut_by_max_tokens_is_not_run"]),
    Mutation("a paused turn keeps only its last part", "harness/model_call.py",
             "            content += more",
             "            content = more",
             [S03_E2E + "::test_the_user_and_the_history_get_the_whole_of_a_paused_turn"]),
    Mutation("an empty text block of a reply is sent back (the API refuses it)",
             "harness/model_call.py",
             "            continue                      # the API refuses an empty text block",
             "            kept.append(block)",
             ["tests/test_cli.py::test_empty_content_or_text_after_a_call_keeps_the_history_"
              "valid"]),
    Mutation("a one-shot run out of model calls exits 0, as if done", "harness/cli.py",
             "        return STEPS_RAN_OUT\n",
             "        return 0\n",
             [S03_E2E + "::test_the_step_limit_ends_the_turn_with_a_clear_message"]),
    Mutation("write_file replaces a file the user made read-only", "harness/files.py",
             "    if not os.access(path, os.W_OK):",
             "    if False:",
             ["tests/test_atomic_file_tools.py::test_a_file_this_user_may_not_write_is_refused_"
              "by_write_and_edit_and_left_whole"]),
    Mutation("output to a full disk ends in a traceback", "harness/cli.py",
             "        if exc.errno not in OUTPUT_LOST:",
             "        if True:",
             ["tests/test_cli.py::test_output_to_a_full_disk_is_one_line_not_a_traceback"]),
    Mutation("readline counts the prompt's colour codes as columns", "harness/cli.py",
             '    return ("\\001", "\\002")',
             '    return ("", "")',
             ["tests/test_repl.py::test_a_typed_line_that_fits_the_terminal_is_not_wrapped_early_"
              "by_the_prompts_colour"]),
    Mutation("a dumb terminal gets colour codes and redrawn lines", "harness/terminal.py",
             '    return stream.isatty() and os.environ.get("TERM") != "dumb"',
             '    return stream.isatty()',
             ["tests/test_cli.py::test_a_dumb_terminal_gets_no_codes_and_no_redrawn_lines",
              "tests/test_harness.py::test_no_colour_on_a_dumb_terminal"]),
    Mutation("a redrawn line is as wide as the narrowest layout, not the terminal",
             "harness/terminal.py",
             "    return excerpt.cut(printable(text), width(sys.stderr, narrowest=2) - 1)",
             "    return excerpt.cut(printable(text), width(sys.stderr) - 1)",
             ["tests/test_cli.py::test_on_a_narrow_terminal_each_line_redrawn_in_place_fits_one_"
              "line"]),
    Mutation("a key echoed into a broken stream is printed", "harness/model_call.py",
             "        raise EndpointError(config.without_secrets(self._line(exc))) from None",
             "        raise EndpointError(self._line(exc)) from None",
             ["tests/test_secrets.py::test_a_key_in_a_stream_the_sdk_cannot_read_is_hidden_too"]),
    Mutation("an endpoint's half-megabyte error is printed whole", "harness/errors.py",
             "    return excerpt.one_line(without_secrets(message), DETAIL_MAX)",
             "    return excerpt.one_line(without_secrets(message))",
             ["tests/test_secrets.py::test_an_endpoints_long_error_message_is_cut_to_a_line_that_"
              "keeps_its_advice"]),
    Mutation("a text block holding a number ends in a traceback", "harness/model_call.py",
             '        if block.get("type") == "text" and not isinstance(block.get("text"), str):',
             "        if False:",
             [STREAMS + "::test_a_text_block_whose_text_is_not_a_string_is_one_line_naming_the_"
                        "endpoint"]),
    Mutation("a resumed reply's blocks are not checked", "harness/model_call.py",
             "    return stop_reason, _checked_calls(_plain(response.content), resumed.where)",
             "    return stop_reason, _plain(response.content)",
             ["tests/test_paused_turns.py::test_a_resumed_reply_with_a_call_without_an_id_is_one_"
              "line_as_a_first_one_is"]),
    Mutation("a wrong task id on a big board lists every id again", "harness/board/text.py",
             "    if len(task_ids) <= IDS_NAMED:",
             "    if True:",
             ["tests/test_board_contract.py::test_a_missing_task_on_a_big_board_names_the_"
              "count_the_range_and_the_nearest_ids"]),
    Mutation("/task import's line numbers drift after a form feed; a \\x85 splits an item",
             "harness/board/checklist.py",
             "    for number, line in enumerate(LINE_END.split(text), 1):",
             '    for number, line in enumerate(text.splitlines(), 1):',
             ["tests/test_repl_commands.py::test_task_import_numbers_lines_as_an_editor_does"]),
    Mutation("--board '   ' makes a folder named with spaces", "harness/board/__init__.py",
             "    if not text.strip():      # else",
             "    if not text:      # else",
             ["tests/test_board_contract.py::test_a_blank_board_address_is_refused_in_one_line_"
              "and_makes_no_folder"]),
    Mutation("a refused summary call becomes the summary", "harness/compaction.py",
             '    if response.stop_reason == "refusal":',
             "    if False:",
             ["tests/test_s06_compact.py::test_a_failed_summary_loses_nothing"]),
    Mutation("a summary bigger than the conversation replaces it", "harness/compaction.py",
             "    if tokens.estimate(response.said) >= tokens.estimate(view):",
             "    if False:",
             ["tests/test_s06_compact.py::test_a_failed_summary_loses_nothing"]),
    Mutation("a blank compaction block is reported as done and as failed",
             "harness/api_context.py",
             "            if summary:\n                _compacted(run, steps, usage, summary)",
             "            if True:\n                _compacted(run, steps, usage, summary)",
             ["tests/test_api_context.py::test_a_compaction_block_with_a_blank_summary_is_said_"
              "to_have_failed_only"]),
    Mutation("blocks that share an index run a call without its input", "harness/model_call.py",
             "            if event.index != self.blocks:",
             "            if False:",
             [STREAMS + "::test_blocks_that_share_an_index_are_one_line_not_a_call_run_without_"
                        "its_input"]),
    Mutation("a connection that never opens is blamed on API_TIMEOUT", "harness/errors.py",
             "    if isinstance(exc, anthropic.APITimeoutError) and isinstance(exc.__cause__,",
             "    if False and isinstance(exc.__cause__,",
             ["tests/test_cli.py::test_a_connection_that_never_opens_is_not_blamed_on_api_"
              "timeout"]),
    Mutation("a refused beta sends a new session's user to --continue an older one",
             "harness/api_context.py",
             "        if saved:",
             "        if True:",
             ["tests/test_api_context.py::test_an_endpoint_that_refuses_the_beta_is_one_line_and_"
              "exit_1"]),
    Mutation("an invisible direction mark reaches the terminal", "harness/clean.py",
             '"\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f\\u061c\\u200e\\u200f\\u2028',
             '"\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f\\u2028',
             ["tests/test_terminal.py::test_printable_escapes_control_characters_and_keeps_"
              "newlines_and_tabs"]),
    Mutation("a 5,000-character path comes back whole in its error", "harness/files.py",
             "    if size > PATH_MAX:",
             "    if False:",
             ["tests/test_hostile_files.py::test_a_path_longer_than_any_the_system_takes_is_"
              "refused_without_repeating_it"]),
    Mutation("write_file to new/ makes a file named new", "harness/files.py",
             '    if "/" in shown and ending in ("/", "/.", "/.."):',
             "    if False:",
             ["tests/test_hostile_files.py::test_write_file_to_a_path_ending_in_a_slash_makes_no_"
              "file"]),
    Mutation("a file name over 255 bytes is a raw OSError from write_file", "harness/files.py",
             '"the file is unchanged" if os.path.exists(path) else',
             '"the file is unchanged" if path.exists() else',
             ["tests/test_hostile_files.py::test_a_file_name_over_255_bytes_is_refused_in_words_"
              "by_every_file_tool"]),
    Mutation("a [DONE] after a whole reply throws the reply away", "harness/model_call.py",
             '                if self.last != "message_stop":\n                    raise',
             '                if True:\n                    raise',
             [STREAMS + "::test_a_done_sentinel_after_a_whole_reply_is_ignored"]),
    Mutation("data that is not JSON mid-reply is taken for the end", "harness/model_call.py",
             '                if self.last != "message_stop":\n                    raise',
             '                if False:\n                    raise',
             [STREAMS + "::test_data_that_is_not_json_before_the_reply_ends_is_still_one_line"]),
    Mutation("a .env copied from the example with its key empty is not named",
             "harness/env_file.py",
             "    empty = _empty_key_in()\n",
             "    empty = None\n",
             ["tests/test_setup.py::test_a_dotenv_copied_from_the_example_and_not_filled_in_is_"
              "named_as_empty"]),
    Mutation("a closed terminal window loses the session page", "harness/cli.py",
             "    with contextlib.suppress(OSError):\n        terminal.show_session(",
             "    if True:\n        terminal.show_session(",
             ["tests/test_run_ends.py::test_a_terminal_window_closed_at_the_prompt_still_writes_"
              "the_page"]),
    Mutation("Ctrl-C while the page is written is a traceback", "harness/cli.py",
             "    except KeyboardInterrupt:       # Ctrl-C after q",
             "    except ZeroDivisionError:       # Ctrl-C after q",
             ["tests/test_run_ends.py::test_ctrl_c_while_the_page_is_written_after_q_is_one_"
              "line"]),
    Mutation("--continue copies the history line by line into its final name",
             "harness/session/log.py",
             '        data = b"".join(_line(record) for record in records)\n',
             "        cut = cls.start(folder)\n"
             "        for record in records:\n"
             "            cut._write_record(record)\n"
             '        data = b"".join(_line(record) for record in records)\n',
             ["tests/test_session_log.py::test_a_continue_stopped_while_it_copies_the_history_"
              "leaves_no_cut_copy"]),
    Mutation("a 6 GB session log is read whole by --continue", "harness/session/log.py",
             "        if size > LOG_MAX:",
             "        if False:",
             ["tests/test_session_log.py::test_a_session_log_too_big_to_read_is_refused_before_"
              "it_is_read"]),
    Mutation("an old Mac's checklist (\\r alone) imports as one task", "harness/board/checklist.py",
             'LINE_END = re.compile(r"\\r\\n|\\r|\\n")',
             'LINE_END = re.compile(r"\\r?\\n")',
             ["tests/test_repl_commands.py::test_task_import_numbers_lines_as_an_editor_does"]),
    Mutation("a dumb terminal never shows the words beside a tool call", "harness/terminal.py",
             "    if text.strip() and not ansi(sys.stderr):",
             "    if text.strip() and not sys.stderr.isatty():",
             ["tests/test_cli.py::test_a_dumb_terminal_gets_no_codes_and_no_redrawn_lines"]),
    Mutation("the key is hidden after the message is cut, so its start shows",
             "harness/errors.py",
             "    return excerpt.one_line(without_secrets(message), DETAIL_MAX)",
             "    return without_secrets(excerpt.one_line(message, DETAIL_MAX))",
             ["tests/test_secrets.py::test_a_key_quoted_where_the_message_is_cut_shows_none_of_"
              "itself"]),
    Mutation("a URL whose search_path names no schema is not told to create it",
             "harness/board/postgres.py",
             "            except errors.InvalidSchemaName as exc:",
             "            except errors.UndefinedTable as exc:",
             [PG + "::test_a_url_whose_schema_does_not_exist_is_told_in_one_line_to_create_it"]),
    Mutation("every task on a SQL_ASCII database is unreadable once written",
             "harness/board/postgres.py",
             '                                   client_encoding="UTF8")',
             "                                   client_encoding=None)",
             [PG + "::test_a_board_on_a_sql_ascii_database_reads_what_it_wrote"]),
    Mutation("a missing database is named as the URL spells it (my%20board)", "harness/errors.py",
             "        database = missing[1]",
             '        database = urlsplit(name).path.lstrip("/")',
             [PG + "::test_a_missing_database_is_named_as_libpq_reads_it_with_a_createdb_a_shell_"
                   "takes"]),
    Mutation("the demo's model says its first result is whole after layer 2 took it",
             "harness/demos.py",
             "        if summarised(body):\n            # A low COMPACT_THRESHOLD",
             "        if False:\n            # A low COMPACT_THRESHOLD",
             ["tests/test_demo_threshold.py"]),
    Mutation("the page cuts a result to 600 characters before its preview",
             "harness/session/recorder.py",
             "            _preview(output), bool(is_error)))",
             "            excerpt.cut(str(output), 600), bool(is_error)))",
             [PAGE + "::test_a_long_task_file_and_a_long_results_count_are_on_the_page_as_on_"
              "the_screen"]),
    Mutation("a vertical tab or a form feed in a result starts a new line on the screen and page",
             "harness/excerpt.py",
             '    lines = str(text).replace("\\r\\n", "\\n").split("\\n")',
             "    lines = str(text).splitlines() or ['']",
             [PAGE + "::test_control_characters_in_a_result_are_escapes_not_line_breaks"]),
    Mutation("a completion reads the board from memory and misses a blocker added by hand",
             "s07_task_system.py",
             'the ids it freed."""\n        tasks = self.store.scan(recheck=True)[0]',
             'the ids it freed."""\n        tasks = self.store.scan()[0]',
             [CONTRACT + "::test_a_blocker_added_by_hand_is_cleared_when_it_completes_in_the_"
              "same_process"]),
    Mutation("another thread's listing is kept as the board the lock holder remembers",
             "harness/board/folder.py",
             "        return self.lock_fd is not None and self._holder == threading.get_ident()",
             "        return self.lock_fd is not None",
             [FOLDER + "::test_a_listing_in_another_thread_never_becomes_what_the_lock_holder_"
              "remembers"]),
    Mutation("a hard link at the board's .lock is written through", "harness/writer.py",
             "    if found.st_nlink > 1:", "    if False:",
             [FOLDER + "::test_a_hard_link_at_the_boards_lock_is_refused_and_nothing_is_written_"
              "through_it"]),
    Mutation("TASK_BOARD=~/board in .env makes a folder named ~", "harness/board/__init__.py",
             "        location = os.path.expanduser(location.strip())",
             "        location = location.strip()",
             [FOLDER + "::test_a_board_in_the_home_folder_written_with_a_tilde_in_dotenv_is_"
              "there"]),
    Mutation("the call Ctrl-C stopped is missing from the session page", "harness/tool_calls.py",
             "        if len(results) < len(calls):", "        if False:",
             ["tests/test_cli.py::test_the_call_ctrl_c_stopped_is_on_the_session_page_as_"
              "interrupted"]),
    Mutation("a huge owner in a box's tooltip takes the board picture's whole budget",
             "harness/session/board_picture.py",
             "<title>{text(excerpt.cut(title, TITLE_CHARS))}</title>",
             "<title>{text(title)}</title>",
             ["tests/test_session_board.py::test_a_task_with_a_huge_owner_or_subject_is_drawn_its_"
              "title_cut"]),
    Mutation("the page lists every summary whole, however many", "harness/session/page.py",
             "        if used > SUMMARY_BYTES:", "        if False:",
             [PAGE + "::test_many_long_summaries_keep_the_page_to_its_size_and_the_latest_whole"]),
    Mutation("a proxy password with an unencoded / reaches the model's commands",
             "harness/config.py",
             "    at = url.rfind(\"@\")\n", "    at = -1\n",
             [SECRETS_TESTS + "::test_a_proxys_password_never_reaches_the_model"]),
    Mutation("a base URL the parser refuses quotes a piece of its password", "harness/client.py",
             "({why if config.password_in(url) else exc}); ", "({exc}); ",
             [SECRETS_TESTS + "::test_a_base_url_refused_before_any_request_hides_its_password"]),
    Mutation("words after /clear are ignored and the conversation wiped", "harness/cli.py",
             "    if arg:\n        raise ValueError(\"/clear takes", "    if False:\n        raise "
             "ValueError(\"/clear takes",
             ["tests/test_cli.py::test_words_after_clear_refuse_it_and_the_conversation_stays"]),
    Mutation("a huge COLUMNS is taken as it is", "harness/terminal.py",
             "    return min(max(columns or PLAIN_WIDTH, narrowest), WIDEST)",
             "    return max(columns or PLAIN_WIDTH, narrowest)",
             ["tests/test_cli.py::test_a_huge_columns_is_a_wide_terminal_not_a_hang"]),
    Mutation("an unknown flag's escape code reaches the terminal", "harness/cli.py",
             "    typed = terminal.printable(\" \".join(unknown))",
             "    typed = \" \".join(unknown)",
             ["tests/test_cli.py::test_an_unknown_flag_with_an_escape_code_is_shown_escaped"]),
    Mutation("a REPL with stdin closed ends in a traceback", "harness/cli.py",
             '("stderr", "w"), ("stdin", "r")):', '("stderr", "w")):',
             ["tests/test_cli.py::test_a_closed_stdin_reads_as_the_end_of_input"]),
    Mutation("a key with a line break is blamed on the network", "harness/client.py",
             "        _check_key(name, api_key or auth_token)", "        pass",
             [SECRETS_TESTS + "::test_a_key_with_a_space_or_line_break_is_named_not_blamed_on_the_"
              "network"]),
    Mutation("/task done 1 2 completes #1 and says nothing of #2", "harness/board/commands.py",
             'if verb in ("show", "start", "done", "delete") and len(rest) > 1:',
             'if False:',
             ["tests/test_repl_commands.py::test_a_task_command_given_several_ids_does_nothing_"
              "and_says_one_at_a_time"]),
    Mutation("a demo's page that cannot be written names the wrong folder",
             "harness/session/page.py",
             '        where = screen.where(f"{folder}/") if screen else f"{folder}/"',
             '        where = f"{folder}/"',
             [PAGE + "::test_a_demo_whose_page_cannot_be_written_names_the_folder_from_where_"
              "you_are"]),
    Mutation("the keyless demo opens the board TASK_BOARD names", "harness/board/__init__.py",
             '    if getattr(args, "demo", False):\n        location = default',
             '    if False:\n        location = default',
             ["tests/test_s07_e2e.py::test_the_demo_leaves_a_board_of_yours_alone_even_one_it_"
              "cannot_reach"]),
    Mutation("a long wait for the folder board's lock is silent", "harness/board/folder.py",
             "        waiting.daemon = True\n        waiting.start()",
             "        waiting.daemon = True",
             [FOLDER + "::test_a_long_wait_for_the_boards_lock_is_said_once"]),
    Mutation("a gateway password that begins with digits and a / reaches the model",
             "harness/config.py",
             '    if at < start or not colon or "/" in user:',
             '    if at < start or not colon or "/" in user or password.split("/")[0].isdigit():',
             [SECRETS_TESTS + "::test_child_env_leaves_out_a_base_url_that_holds_a_password_"
              "and_its_copies"]),
    Mutation("a COMPACT_THRESHOLD the system prompt fills summarises before every call",
             "harness/compaction.py", "    return max(threshold, needed)", "    return threshold",
             ["tests/test_s06_compact.py::test_a_threshold_the_system_prompt_fills_is_raised_"
              "with_a_note_not_summarised_every_call"]),
    Mutation("--demo --max-steps 2 plays the whole script and says nothing",
             "harness/cli.py", "    if args.max_steps:\n", "    if False:\n",
             ["tests/test_cli.py::test_an_empty_prompt_or_what_the_demo_would_ignore_is_refused_"
              "locally"]),
    Mutation("an unquoted prompt of several words gets argparse's bare refusal",
             "harness/cli.py", "    if args.prompt is None or args.demo or any(",
             "    if True or any(",
             ["tests/test_cli.py::test_a_prompt_of_several_words_without_quotes_is_refused_with_"
              "the_command_to_type"]),
    Mutation("a tool name of 3,000 characters fills the screen on its call line",
             "harness/terminal.py", '    start = f"> {excerpt.cut(printable(name), NAME_CHARS)}"',
             '    start = f"> {printable(name)}"',
             ["tests/test_terminal.py::test_a_tool_name_thousands_of_characters_long_takes_a_few_"
              "lines_not_a_screenful"]),
    Mutation("an error line of 3,000 characters fills the screen",
             "harness/terminal.py",
             "            shown = excerpt.head_and_tail(shown, ERROR_CHARS // 2, "
             "ERROR_CHARS // 2)\n", "",
             ["tests/test_terminal.py::test_a_tool_name_thousands_of_characters_long_takes_a_few_"
              "lines_not_a_screenful"]),
    Mutation("a string sent as a tool's input is reported as NoneType", "harness/tool_input.py",
             "                         f\"got {sent}\")",
             "                         f\"got {type(given).__name__}\")",
             ["tests/test_s03_tools.py::test_bad_tool_calls_become_error_results"]),
    Mutation("a task file that is a dangling link is reported as no task", "s07_task_system.py",
             "        if not os.path.lexists(self.path(task_id)):",
             "        if not self.path(task_id).exists():",
             ["tests/test_board_hand_edits.py::test_a_task_file_that_is_a_dangling_link_is_named_"
              "unreadable_not_missing"]),
    Mutation("a bar past the page's requests links to an anchor not on the page",
             "harness/session/page.py",
             " if call.number in linked else bar", " if call.request else bar",
             ["tests/test_session_requests.py::test_a_bar_links_only_to_a_request_the_page_shows"]),
    Mutation("after a summary call the page marks the unchanged tools new",
             "harness/session/sent.py",
             "            if getattr(call.request, part) is not None:\n",
             "            if True:\n",
             ["tests/test_session_requests.py::test_after_a_summary_call_without_tools_the_tools_"
              "are_as_before_not_new"]),
    Mutation("layer 1's mark before a call that got no reply is drawn outside the chart",
             "harness/session/page.py",
             "                                     + [cleared.before_call for cleared in "
             "record.clearings]))",
             "                                     ))",
             ["tests/test_session_page.py::test_a_clearing_before_a_call_that_got_no_reply_is_"
              "drawn_inside_the_chart"]),
    Mutation("an unquoted prompt's suggested command drops the flags typed", "harness/cli.py",
             "    quoted = shlex.join([*rest, ", "    quoted = shlex.join([",
             ["tests/test_cli.py::test_a_prompt_of_several_words_without_quotes_is_refused_with_"
              "the_command_to_type"]),
    Mutation("a REPL command typed after the lesson is suggested as a quoted prompt",
             "harness/cli.py", "    if _is_command_word(args.prompt):", "    if False:",
             ["tests/test_cli.py::test_a_prompt_of_several_words_without_quotes_is_refused_with_"
              "the_command_to_type"]),
    Mutation("a base URL read two ways is dialled at the wrong host", "harness/client.py",
             "    if config.password_in(url) and parts.password not in config.password_in(url):",
             "    if False:",
             [SECRETS_TESTS + "::test_a_base_url_an_http_client_reads_another_way_is_refused_"
              "saying_how_to_write_it"]),
    Mutation("a prompt quoting a short summary is badged the summary on the page",
             "harness/session/sent.py",
             "    summary = block.kind == \"text\" and block.text.startswith(compaction."
             "SUMMARY_OPENING)",
             "    summary = block.kind == \"text\"",
             ["tests/test_session_requests.py::test_only_the_summary_layer_2_sent_is_badged_the_"
              "summary_not_a_prompt_quoting_it"]),
    Mutation("TASK_BOARD=' .tasks ' makes a folder named with its spaces",
             "harness/board/__init__.py", "os.path.expanduser(location.strip())",
             "os.path.expanduser(location)",
             [FOLDER + "::test_a_board_named_with_spaces_around_it_is_the_folder_without_them"]),
    Mutation("a setting of 4,400 digits is a traceback", "harness/config.py",
             " or len(raw) > 18 or int(raw) < 1:", " or int(raw) < 1:",
             ["tests/test_s06_compact.py::test_a_threshold_that_is_not_a_positive_whole_number_"
              "is_one_clear_line"]),
    Mutation("a task id of 4,400 digits tells the model to call sys.set_int_max_str_digits",
             "harness/board/record.py", r'r"\s*#?\d{1,18}\s*"', r'r"\s*#?\d+\s*"',
             ["tests/test_board_contract.py::test_anything_else_is_refused_clearly"]),
    Mutation("a board that is a link to nothing lists as empty", "harness/board/folder.py",
             "        if os.path.islink(folder):\n", "        if False:\n",
             [FOLDER + "::test_a_fifo_or_a_dangling_link_at_the_boards_name_is_named_as_what_it_"
              "is"]),
    Mutation("a blocker named twice in removeBlockedBy is refused as not a blocker",
             "harness/board/record.py", "    return list(dict.fromkeys(parse_task_id(v) for v in ",
             "    return list((parse_task_id(v) for v in ",
             ["tests/test_board_contract.py::test_a_blocker_is_removed_by_its_id_and_one_not_"
              "there_is_refused"]),
    Mutation("PRICE_PER_MTOK=1e308 makes /cost say inf", "harness/config.py",
             r'    if not re.fullmatch(r"\d{1,9}(\.\d{1,9})?|\.\d{1,9}", raw, re.ASCII):',
             r'    if not re.fullmatch(r"[\d._e]+", raw):',
             ["tests/test_prices.py::test_a_bad_price_is_refused_before_anything_runs"]),
    Mutation("the advice to go on drops --board and --name", "harness/cli.py",
             "        words += [\"--board\", shown]",
             "        pass",
             ["tests/test_long_sessions.py::test_the_advice_to_go_on_keeps_the_board_and_the_name_"
              "given"]),
    Mutation("the advice to go on prints the board's password", "harness/cli.py",
             "        shown = board.shown(args.board)", "        shown = args.board",
             [SECRETS_TESTS + "::test_the_advice_to_go_on_shows_a_board_password_as_stars"]),
    Mutation("an edit of one line into two puts a bare LF in a CRLF file", "harness/files.py",
             '    eol = ending[0] if ending else "\\n"', '    eol = "\\n"',
             ["tests/test_hostile_files.py::test_every_line_an_edit_adds_to_a_crlf_file_ends_in_"
              "crlf"]),
    Mutation("an old_text found twice overlapping is edited at the first", "harness/files.py",
             '        at = plain.find(wanted, at + 1)',
             '        at = plain.find(wanted, at + len(wanted))',
             ["tests/test_hostile_files.py::test_an_old_text_found_twice_overlapping_is_refused_as_"
              "not_unique"]),
    Mutation("old_text of several lines misses a file of mixed line endings", "harness/files.py",
             "    wanted, plain = _as_lf(old), _as_lf(text)",
             "    wanted, plain = _as_lf(old), text.replace('\\r', '\\n')",
             ["tests/test_hostile_files.py::test_old_text_of_several_lines_matches_a_file_of_mixed_"
              "line_endings"]),
    Mutation("a command that times out gives the model none of its output", "harness/bash.py",
             '"it in the background: cmd > job.log 2>&1 &\\n" + _until_then(out))',
             '"it in the background: cmd > job.log 2>&1 &")',
             ["tests/test_s03_tools.py::test_a_command_that_times_out_gives_the_model_what_it_"
              "printed_until_then"]),
    Mutation("a command that sent its output to a file times out in subprocess's words",
             "harness/bash.py", "            except subprocess.TimeoutExpired:\n",
             "            except ZeroDivisionError:\n",
             ["tests/test_s03_tools.py::test_a_command_whose_output_went_to_a_file_times_out_in_"
              "the_harnesss_words"]),
    Mutation("bash output loses its first line's indent", "harness/bash.py",
             '.rstrip().lstrip("\\r\\n")', ".strip()",
             ["tests/test_s03_tools.py::test_bash_output_keeps_its_first_lines_indent_and_says_how_"
              "it_ended"]),
    Mutation("write_file to a.txt/. replaces a.txt", "harness/files.py",
             '    if "/" in shown and ending in ("/", "/.", "/.."):',
             '    if "/" in shown and ending in ("/",):',
             ["tests/test_hostile_files.py::test_write_file_to_a_path_ending_in_a_slash_makes_no_"
              "file"]),
    Mutation("/clear keeps layer 2 waiting after a failed summary", "harness/cli.py",
             "        size.reported, size.seen, size.after_compaction = None, 0, 0",
             "        size.reported, size.seen = None, 0",
             ["tests/test_context_window.py::test_after_a_failed_summary_clear_starts_layer_2_"
              "afresh"]),
    Mutation("a request past the window is refused with no way forward", "harness/errors.py",
             '    if status == 400 and "prompt is too long" in detail:',
             "    if False:",
             ["tests/test_context_window.py::test_a_request_past_the_window_says_how_to_go_on"]),
    Mutation("a resumed s07 session shows the board as at its compaction", "harness/run.py",
             "        if self.after_summary is None:\n            return messages",
             "        if True:\n            return messages",
             ["tests/test_s07_e2e.py::test_a_resumed_session_sees_the_board_as_it_is_now_not_as_at_"
              "its_compaction"]),
    Mutation("a forged save note in a command's output names the placeholder's file",
             "harness/spill.py",
             "    if match is None or not NAME.fullmatch(os.path.basename(match[\"path\"])):",
             "    if match is None:",
             ["tests/test_spill.py::test_a_line_shaped_like_the_save_note_in_a_commands_output_is_"
              "not_trusted"]),
    Mutation("a cut result whose whole was deleted is saved again and called whole",
             "harness/spill.py",
             "    if named is not None and not _is_regular_file(named):\n",
             "    if False:\n",
             ["tests/test_spill.py::test_a_cut_result_whose_saved_whole_was_deleted_is_not_saved_"
              "again_as_whole"]),
    Mutation("an empty path is called a folder", "harness/files.py",
             "    if not path.strip():\n", "    if False:\n",
             ["tests/test_hostile_files.py::test_a_path_no_file_can_have_is_named_for_what_is_"
              "wrong_with_it"]),
    Mutation("a flood's note names the stop's margin, not what the command wrote",
             "harness/bash.py", "        written = (len(kept) + dropped) // 1_000_000",
             "        written = FLOOD_BYTES // 1_000_000",
             ["tests/test_s03_tools.py::test_a_command_that_floods_is_stopped_and_memory_stays_"
              "bounded"]),
    Mutation("/task import ~/plan.md finds no file", "harness/board/commands.py",
             "    return checklist.import_checklist(tasks, os.path.expanduser(path))",
             "    return checklist.import_checklist(tasks, path)",
             ["tests/test_repl_commands.py::test_task_import_reads_a_path_as_a_shell_would_home_"
              "and_quotes"]),
    Mutation("/task import \"my plan.md\" takes the quotes for part of the name",
             "harness/board/commands.py",
             "        path = words[0] if len(words) == 1 else path",
             "        path = path",
             ["tests/test_repl_commands.py::test_task_import_reads_a_path_as_a_shell_would_home_"
              "and_quotes"]),
    Mutation("a cut line's note counts characters where tail and cut count bytes",
             "harness/files.py", '    return text[:keep] + note(len(text[:keep].encode("utf-8")))',
             "    return text[:keep] + note(keep)",
             ["tests/test_read_file_paging.py::test_the_command_to_read_a_cut_lines_rest_goes_on_"
              "where_the_read_stopped_in_any_script"]),
    Mutation("a summary request that leaves nothing out says the conversation was cut",
             "harness/compaction.py", "    if cut == 0 or len(shorter) == len(view):",
             "    if cut == 0:",
             ["tests/test_context_window.py::test_a_summary_request_that_leaves_nothing_out_says_"
              "nothing_left_out"]),
    Mutation("a CRLF split in two matches a blank line that is not there", "harness/files.py",
             '    return text.replace("\\r\\n", "\\n").replace("\\r", "\\n")',
             '    return text.replace("\\r", "\\n")',
             ["tests/test_hostile_files.py::test_a_crlf_is_one_line_break_never_a_cr_and_an_lf"]),
    Mutation("a real-time signal's end of a command is a ValueError", "harness/bash.py",
             '        name = signal.strsignal(-status) or "no name"',
             "        name = signal.Signals(-status).name",
             ["tests/test_s03_tools.py::test_bash_output_keeps_its_first_lines_indent_and_says_how_"
              "it_ended"]),
    Mutation("a command that times out is left running", "harness/bash.py",
             "            _kill_group(proc)       # now, not after the output is decoded",
             "            pass                    # now, not after the output is decoded",
             ["tests/test_s03_tools.py::test_bash_timeout_kills_the_whole_process_group"]),
    Mutation("a save note naming a results-shaped file elsewhere is trusted", "harness/spill.py",
             "        named = None\n    if named is not None and not _is_regular_file(named):",
             "        pass\n    if named is not None and not _is_regular_file(named):",
             ["tests/test_spill.py::test_a_line_shaped_like_the_save_note_in_a_commands_output_is_"
              "not_trusted"]),
    Mutation("layer 1's one batch is said to be several on the page", "harness/session/page.py",
             "    if len(run) > 1:\n        when = f\"in {len(run)} batches",
             "    if len(run) >= 1:\n        when = f\"in {len(run)} batches",
             ["tests/test_session_page.py::test_the_marks_sit_at_the_right_calls_and_the_summary_"
              "is_readable_from_its_mark"]),
    Mutation("a one-line file too big to look past promises lines after it", "harness/files.py",
             "    if size - f.tell() > COUNT_REST_UP_TO and in_line:",
             "    if size - f.tell() > COUNT_REST_UP_TO and in_line and False:",
             ["tests/test_read_file_paging.py::test_a_cut_line_too_long_to_look_past_does_not_"
              "promise_lines_after_it"]),
    Mutation("a running agent gives an id below a task a person added", "harness/board/folder.py",
             "        if stamp != self._stamp or _folder_times(self.dir) != self._folder:",
             "        if stamp != self._stamp:",
             [CONTRACT + "::test_a_running_agent_gives_the_next_id_past_a_task_added_by_hand"]),
    Mutation("a window too small for the API's trigger is not said", "harness/api_context.py",
             "        if guard < self.trigger:\n            terminal.show_note(",
             "        if False:\n            terminal.show_note(",
             [API_CONTEXT + "::test_a_window_too_small_for_the_apis_trigger_says_layer_2_acts_"
              "and_context_counts_to_it"]),
    Mutation("/context counts down to an API trigger the window never reaches",
             "harness/session/views.py",
             "    elif threshold is not None and threshold < api.trigger:",
             "    elif False:",
             [API_CONTEXT + "::test_a_window_too_small_for_the_apis_trigger_says_layer_2_acts_"
              "and_context_counts_to_it"]),
    Mutation("s07's demo takes --api-context in silence", "harness/demos.py",
             "    if run.api_context is not None and compacts:\n"
             "        terminal.show_note(f\"[demo]",
             "    if False:\n        terminal.show_note(f\"[demo]",
             ["tests/test_s07_e2e.py::test_the_demo_with_api_context_sends_it_and_says_the_api_"
              "never_acts_in_it"]),
    Mutation("a --continue that did nothing leaves a copy of the whole session",
             "harness/session/log.py", "        log.copied = len(data)\n", "",
             ["tests/test_repl.py::test_a_continue_that_never_asked_the_model_leaves_no_copy_of_"
              "the_session"]),
    Mutation("a session that ended with /clear can never be continued again",
             "harness/session/log.py",
             "    if not found.messages and found.torn_lines:",
             "    if not found.messages:",
             ["tests/test_repl.py::test_a_session_that_ended_cleared_is_continued_as_a_new_"
              "conversation"]),
    Mutation("a person's /task done takes another agent's finished work into their name",
             "harness/board/claims.py",
             "        if status == task[\"status\"] == \"completed\" and owner is None:",
             "        if False:",
             [CONTRACT + "::test_a_persons_done_on_a_task_another_agent_completed_changes_"
              "nothing"]),
    Mutation("a window smaller than CONTEXT_WINDOW gets advice that cannot work",
             "harness/errors.py",
             "    if window and int(window[1]) < setting:",
             "    if False:",
             ["tests/test_context_window.py::test_a_window_smaller_than_context_window_is_named_"
              "and_the_way_on_it_gives_works"]),
    Mutation("--continue resumes another agent's session without a word", "harness/session/log.py",
             "    other_agent = bool(agent and mine.get(\"agent\") != agent)",
             "    other_agent = False",
             ["tests/test_s07_e2e.py::test_continue_says_whose_session_it_resumes_when_it_was_"
              "another_agents"]),
    Mutation("a log opens with its first line before it records anything", "harness/session/log.py",
             "        log.about = log.whose = about\n        return log",
             "        log._write_record({\"session\": about})\n        return log",
             [SESSION_LOG + "::test_a_log_that_recorded_nothing_yet_is_empty_so_continue_passes_it_"
              "over"]),
    Mutation("/compact of a history that is one summary pays for a summary of it",
             "harness/compaction.py",
             "    elif len(messages) == 1 and is_summary_message(messages[0]):",
             "    elif False:",
             ["tests/test_s07_e2e.py::test_slash_compact_of_a_history_that_is_one_summary_asks_"
              "for_no_second"]),
    Mutation("a reply that stopped coming is left out of /cost", "harness/model_call.py",
             "        if exc is None or not (self.began and stopped):",
             "        if True:",
             ["tests/test_stream_shapes.py::test_a_reply_abandoned_part_way_is_counted_for_what_"
              "the_api_read"]),
    Mutation("a reply abandoned with Ctrl-C is left out of /cost", "harness/model_call.py",
             "        stopped = silent or dropped or isinstance(exc, (KeyboardInterrupt, "
             "SystemExit))",
             "        stopped = silent or dropped or isinstance(exc, SystemExit)",
             ["tests/test_s03_e2e.py::test_ctrl_c_after_the_reply_began_is_counted_for_what_the_"
              "api_read"]),
    Mutation("--continue with no name resumes a named agent's session without a word",
             "harness/session/log.py",
             "    other_agent = bool(agent and mine.get(\"agent\") != agent)",
             "    other_agent = bool(agent and mine.get(\"agent\") and mine[\"agent\"] != agent)",
             ["tests/test_s07_e2e.py::test_continue_with_no_name_says_it_resumes_a_named_agents_"
              "session"]),
    Mutation("a background job dies of SIGPIPE when it prints after bash returned",
             "harness/bash.py",
             "        _drop_later_output(proc.stdout)",
             "        proc.stdout.close()",
             ["tests/test_s03_tools.py::test_a_background_job_that_prints_after_bash_returns_"
              "keeps_running"]),
    Mutation("the bash tool runs /bin/sh (dash on Debian)", "harness/bash.py",
             'BASH = shutil.which("bash")', "BASH = None",
             ["tests/test_s03_tools.py::test_the_bash_tool_runs_bash_where_sh_is_another_shell"]),
    Mutation("a background job that floods after bash returned runs on for good", "harness/bash.py",
             "            while dropped <= FLOOD_BYTES:", "            while True:",
             ["tests/test_s03_tools.py::test_a_background_job_that_floods_after_bash_returns_is_"
              "stopped_as_a_command_is"]),
    Mutation("a reply a signal abandoned is left out of the total", "harness/model_call.py",
             "        stopped = silent or dropped or isinstance(exc, (KeyboardInterrupt, "
             "SystemExit))",
             "        stopped = silent or dropped or isinstance(exc, KeyboardInterrupt)",
             ["tests/test_run_ends.py::test_a_kill_while_a_reply_comes_counts_what_the_api_read_"
              "in_the_total"]),
    Mutation("an abandoned first call hides the dropped-tools warning", "harness/model_call.py",
             '    if request["tools"] and len(recorder.completed_calls()) == 1:',
             '    if request["tools"] and len(recorder.data.calls) == 1:',
             ["tests/test_cli.py::test_the_dropped_tools_warning_comes_with_the_first_reply_that_"
              "came_whole"]),
    Mutation("/context takes an abandoned call's count for the conversation's",
             "harness/session/recorder.py",
             "        return [call for call in self.data.calls if not call.abandoned]",
             "        return list(self.data.calls)",
             ["tests/test_stream_shapes.py::test_context_after_an_abandoned_reply_is_the_"
              "conversation_as_it_was"]),
    Mutation("a connection closed after the whole reply throws the reply away",
             "harness/model_call.py",
             "                # bytes): the reply is whole, and kept.\n"
             "                if not self.ended:",
             "                # bytes): the reply is whole, and kept.\n                if True:",
             ["tests/test_cli.py::test_a_connection_closed_after_the_whole_reply_keeps_the_"
              "reply"]),
    Mutation("a background job that logs every 50 ms holds bash until its timeout",
             "harness/bash.py",
             "        if reads_since and time.monotonic() - exited_at > EXIT_GRACE:",
             "        if False:",
             ["tests/test_s03_tools.py::test_a_background_job_that_prints_all_the_time_does_"
              "not_hold_bash_until_its_timeout"]),
    Mutation("a scan remembered under the lock loses the broken files' lines",
             "harness/board/folder.py",
             "            return dict(self._tasks), list(self._problems)",
             "            return dict(self._tasks), []",
             ["tests/test_board_folder.py::test_a_scan_remembered_under_the_lock_still_names_"
              "the_broken_files"]),
    Mutation("a filter's output after the shell exited is cut after half a second",
             "harness/bash.py", "EXIT_GRACE = 5\n", "EXIT_GRACE = 0.5\n",
             ["tests/test_s03_tools.py::test_what_a_filter_prints_after_the_shell_exits_is_"
              "all_kept"]),
    Mutation("a shell that exits just as a wait for output ends loses its last line",
             "harness/bash.py",
             "            if exited_at is not None:\n                held = True",
             "            if proc.poll() is not None:\n                held = True",
             ["tests/test_s03_tools.py::test_the_shells_last_words_are_kept_when_it_exits_"
              "just_as_a_wait_ends"]),
    Mutation("a kill during a session's first call loses its prompt",
             "harness/cli.py",
             "    run.log.record(history)\n    answer = lesson.loop(history, run, **budget)",
             "    answer = lesson.loop(history, run, **budget)",
             ["tests/test_run_ends.py::test_a_kill_during_a_sessions_first_call_leaves_its_"
              "prompt_for_continue"]),
    Mutation("a filter quiet for 0.6 s after the shell exited loses the output",
             "harness/bash.py", "EXIT_QUIET = 1.5\n", "EXIT_QUIET = 0.2\n",
             ["tests/test_s03_tools.py::test_a_filter_that_pauses_after_the_shell_exits_"
              "still_shows_the_output"]),
    Mutation("--continue reads the sessions through a link at .transcripts",
             "harness/session/log.py",
             "        with writer.folder(folder, make=False) as where, os.scandir(where) as",
             "        with contextlib.nullcontext(folder) as where, os.scandir(where) as",
             ["tests/test_session_log.py::test_a_transcripts_folder_that_is_a_link_or_"
              "unreadable_is_one_line_not_no_session"]),
    Mutation("a session removed while --continue looks is a traceback",
             "harness/session/log.py",
             "        written = entry.stat(follow_symlinks=False)\n    except OSError:",
             "        written = entry.stat(follow_symlinks=False)\n    except PermissionError:",
             ["tests/test_session_log.py::test_a_session_removed_while_continue_looks_is_"
              "passed_over_not_a_traceback"]),
    Mutation("fitting a long conversation for its summary measures it again at each start",
             "harness/compaction.py",
             "            head, size = [view[prompt]], each[prompt] + after",
             "            head, size = [view[prompt]], "
             "tokens.estimate([view[prompt]] + view[start:])",
             ["tests/test_context_window.py::test_fitting_a_long_conversation_measures_each_"
              "message_once"]),
    Mutation("a copy --continue was writing when it was killed stays for ever",
             "harness/session/log.py",
             "        writer.sweep(folder)\n        log = cls(path, fd)",
             "        log = cls(path, fd)",
             ["tests/test_session_log.py::test_a_copy_killed_midway_is_swept_when_a_later_"
              "session_starts"]),
    Mutation("a session file named session_①.jsonl ends every --continue in a traceback",
             "harness/session/log.py", "    if n.isascii() and n.isdigit():",
             "    if n.isdigit():",
             ["tests/test_session_log.py::test_a_session_name_with_a_digit_int_cannot_read_is_"
              "no_traceback"]),
    Mutation("a prompt naming <task-board> is counted as a board from the tag on",
             "harness/board/message.py",
             "    start = text.rfind(OPENING)", "    start = text.rfind(board.BOARD_START)",
             ["tests/test_session_board.py::test_a_prompt_that_names_the_board_tag_is_counted_"
              "as_its_words_not_as_a_board"]),
    Mutation("a hand-edited block the API refuses is resumed, and every call refused",
             "harness/session/repair.py",
             "                    block[\"type\"] in WRITTEN[role]",
             "                    True",
             ["tests/test_session_log.py::test_blocks_a_hand_edit_added_that_the_api_refuses_"
              "are_left_out_and_said"]),
    Mutation("a request too long for a window set right says to set CONTEXT_WINDOW",
             "harness/errors.py", "    if window and int(window[1]) == setting:",
             "    if False:",
             ["tests/test_context_window.py::test_a_request_past_the_window_says_how_to_go_on"]),
    Mutation("--continue refreshes a board a summary quotes, not the one at its end",
             "harness/board/message.py", "    start = text.rfind(OPENING)",
             "    start = text.find(OPENING)",
             ["tests/test_s07_e2e.py::test_a_summary_that_quotes_an_older_board_has_the_board_"
              "at_its_end_read_again"]),
    Mutation("an edit's start or end falls between a CRLF's \\r and \\n",
             "harness/files.py", '    if text[low - 1:low + 1] == "\\r\\n":\n        low += 1\n',
             "", ["tests/test_hostile_files.py::test_every_line_an_edit_adds_to_a_crlf_file_"
                  "ends_in_crlf"]),
    Mutation("edit_file's search of old_text is a regex tried at every start",
             "harness/files.py", "    at = plain.find(wanted)\n",
             "    lines = map(re.escape, wanted.split('\\n'))\n"
             "    tried = re.finditer('(?=(?:' + LINE_BREAK.join(lines) + '))', plain)\n"
             "    at = min([match.start() for match in tried] or [-1])\n",
             ["tests/test_hostile_files.py::test_a_long_old_text_in_a_big_repetitive_file_is_"
              "answered_at_once"]),
    Mutation("a base URL pasted with its line end is a traceback",
             "harness/client.py", "    if any(c.isspace() or not c.isprintable() for c in url):",
             "    if False:",
             ["tests/test_cli.py::test_a_malformed_base_url_is_one_line_naming_what_is_wrong"]),
    Mutation("a gateway's token in the base URL's query reaches the model's env",
             "harness/config.py", "    for value in _query_values(url):\n        found +=",
             "    for value in []:\n        found +=",
             ["tests/test_secrets.py::test_child_env_leaves_out_a_base_url_that_holds_a_"
              "password_and_its_copies"]),
    Mutation("a workspace deleted mid-session is a bare 'No such file or directory'",
             "harness/files.py",
             "    except FileNotFoundError:\n        raise FileNotFoundError(\n",
             "    except FileNotFoundError:\n        raise\n        raise FileNotFoundError(\n",
             ["tests/test_s03_tools.py::test_a_workspace_deleted_while_the_session_runs_is_named_"
              "in_each_tools_error"]),
    Mutation("a Ctrl-C as a command starts leaves the command running", "harness/bash.py",
             "    if ctrl_c and callable(signal.getsignal(signal.SIGINT)):",
             "    if False:",
             ["tests/test_s03_tools.py::test_a_signal_as_the_command_starts_still_kills_the_"
              "command",
              "tests/test_s03_e2e.py::test_a_signal_as_the_command_starts_kills_it_in_a_lesson_"
              "run"]),
    Mutation("a second signal while a command is killed, or the page made, raises again",
             "harness/bash.py", "        if ready and came == [signum]:", "        if ready:",
             ["tests/test_s03_tools.py::test_a_second_signal_while_the_command_is_killed_still_"
              "kills_it",
              "tests/test_run_ends.py::test_a_second_signal_as_the_run_ends_still_writes_the_"
              "page_and_the_total"]),
    Mutation("a run's own block is not told of the signal a command's block raised",
             "harness/bash.py",
             "        for block in _BLOCKS if signum != signal.SIGINT else [came]:",
             "        for block in [came]:",
             ["tests/test_run_ends.py::test_a_second_signal_as_the_run_ends_still_writes_the_"
              "page_and_the_total"]),
    Mutation("a flood is killed only after the signals' guard is left", "harness/bash.py",
             "    if dropped > FLOOD_BYTES:\n        _kill_group(proc)           # here too",
             "    if False:\n        _kill_group(proc)           # here too",
             ["tests/test_s03_tools.py::test_a_flood_is_killed_before_the_signal_guard_is_left"]),
    Mutation("a Ctrl-C as a new file opens leaves it, empty, behind", "harness/writer.py",
             "            os.close(fd)\n        _remove(where, name)\n        raise\n",
             "            os.close(fd)\n        raise\n",
             ["tests/test_writer.py::test_a_ctrl_c_as_a_new_file_opens_leaves_no_empty_file_"
              "behind",
              "tests/test_writer.py::test_a_ctrl_c_as_a_pin_file_opens_leaves_no_empty_file_"
              "behind"]),
    Mutation("read_file skips to an offset a line at a time", "harness/files.py",
             "        block = f.read(SKIP_PART)", "        block = f.readline(SKIP_PART)",
             ["tests/test_read_file_paging.py::test_an_offset_deep_in_a_big_file_is_reached_a_"
              "block_at_a_time_not_a_line_at_a_time"]),
    Mutation("a NUL before the offset is said to be at the skip's block, not its line",
             "harness/files.py",
             "            start = at + before + 1 if before >= 0 else line_start",
             "            start = line_start",
             ["tests/test_read_file_paging.py::test_a_nul_before_the_offset_names_its_line_and_"
              "where_it_starts"]),
    Mutation("a skip that ends mid-line loses where that line started", "harness/files.py",
             "        if b\"\\n\" in part:\n            line_start",
             "        if False:\n            line_start",
             ["tests/test_read_file_paging.py::test_every_offset_starts_at_its_line_however_the_"
              "skip_splits_the_file"]),
    Mutation("a SIGHUP as a Ctrl-C kills the command is never raised for the run",
             "harness/bash.py",
             "        if outer_before == 0 and outer and came[:1] != outer[:1]:",
             "        if False:",
             ["tests/test_s03_tools.py::test_a_closed_terminal_as_a_ctrl_c_kills_the_command_"
              "still_ends_the_run"]),
    Mutation("a SIGHUP as a command's block closes is never raised for the run",
             "harness/bash.py", "and outer and came[:1] != outer[:1]:",
             "and outer and came[:1] == [signal.SIGINT]:",
             ["tests/test_s03_tools.py::test_a_closed_terminal_as_a_commands_block_closes_still_"
              "ends_the_run"]),
    Mutation("a tool call a hand edit put in a user message is left out unsaid",
             "harness/session/repair.py",
             '        self.refused += sum(1 for b in blocks if b["type"] == "tool_use")', "",
             ["tests/test_session_log.py::test_blocks_a_hand_edit_added_that_the_api_refuses_"
              "are_left_out_and_said"]),
    Mutation("--continue reads again a board a user pasted into a prompt, over their words",
             "harness/board/message.py",
             "content.startswith(compaction.SUMMARY_OPENING):",
             "True:",
             ["tests/test_s07_e2e.py::test_a_prompt_that_holds_a_board_is_resumed_as_the_user_"
              "wrote_it"]),
    Mutation("--continue of the API's summary never reads its board again",
             "harness/board/message.py",
             '        if isinstance(block, dict) and str(block.get("text")).startswith(OPENING):',
             "        if False:",
             ["tests/test_api_context.py::test_in_s07_the_board_comes_back_after_the_apis_"
              "compaction_in_a_reply_that_ends_the_turn"]),
    Mutation("a session log a command removed goes on into the removed file",
             "harness/session/log.py",
             "            if os.fstat(self._fd).st_nlink == 0 and not self._made_anew(record):",
             "            if False:",
             ["tests/test_session_log.py::test_a_session_whose_log_a_command_removed_is_still_"
              "continued"]),
    Mutation("a log made anew mid-batch loses the results of the calls that ran",
             "harness/session/log.py",
             "            if block is not record.get(\"tool_result\"):", "            if False:",
             ["tests/test_session_log.py::test_a_log_made_anew_mid_batch_holds_the_results_of_"
              "the_calls_before"]),
    Mutation("write_file makes ~/notes.txt in a folder named ~", "harness/files.py",
             "    if expanded:\n", "    if False:\n",
             ["tests/test_s03_tools.py::test_a_path_a_shell_would_have_changed_is_refused_and_"
              "nothing_is_made"]),
    Mutation("write_file makes a file named hello.py and a line break", "harness/files.py",
             '    if path != path.strip(" ") or any(', '    if False and any(',
             ["tests/test_s03_tools.py::test_a_path_a_shell_would_have_changed_is_refused_and_"
              "nothing_is_made"]),
    Mutation("a name that starts with ~$ or $NAME. is refused too", "harness/files.py",
             '[^/]*\\)))(?=/|$)")', '[^/]*\\))))")',
             ["tests/test_s03_tools.py::test_names_that_only_look_like_it_are_written"]),
    Mutation("a weak model's {\"offset\": null} is refused, not taken as no offset",
             "harness/tool_input.py",
             '        if value is None and want in ("integer", "number", "boolean") \\\n',
             "        if False \\\n",
             ["tests/test_s03_tools.py::test_a_null_optional_argument_is_not_given_and_a_whole_"
              "float_is_an_integer"]),
    Mutation("a limit of 2.0 is refused as not an integer", "harness/tool_input.py",
             '        if want == "integer" and isinstance(value, float) and value.is_integer():',
             "        if False:",
             ["tests/test_s03_tools.py::test_a_null_optional_argument_is_not_given_and_a_whole_"
              "float_is_an_integer"]),
    Mutation("a mistyped argument is named in Python's words (NoneType, int)",
             "harness/tool_input.py",
             "    return JSON_NAMES.get(type(value), type(value).__name__)",
             "    return type(value).__name__",
             ["tests/test_s03_tools.py::test_bad_tool_calls_become_error_results"]),
    Mutation("a todo sent with text null is a todo named None", "s03_todo.py",
             "        if not isinstance(text, str) or not text.strip():",
             "        if not str(text).strip():",
             ["tests/test_s03_tools.py::test_a_call_that_breaks_a_rule_is_refused_and_keeps_the_"
              "old_list"]),
    Mutation("a todo sent with id null is #None", "s03_todo.py",
             "        if item_id is None:\n            item_id = number\n",
             '        item_id = item.get("id", number)\n',
             ["tests/test_s03_tools.py::test_an_item_with_a_null_id_takes_its_number_as_one_with_"
              "none_does"]),
    Mutation("a file mounted on its own is said to be busy, not a mount point",
             "harness/files.py", "    if exc.errno == errno.EBUSY:", "    if False:",
             ["tests/test_atomic_file_tools.py::test_a_file_that_can_be_written_but_not_replaced_"
              "says_why_and_how_to_write_it"]),
    Mutation("a file in a read-only folder is said to be denied, as if read-only itself",
             "harness/files.py",
             "    if exc.errno == errno.EACCES and os.access(path, os.W_OK):",
             "    if False:",
             ["tests/test_atomic_file_tools.py::test_a_file_that_can_be_written_but_not_replaced_"
              "says_why_and_how_to_write_it"]),
    Mutation("a lone / is sent to the model, a paid call for a typo", "harness/cli.py",
             ' or not query.strip().strip("/"):', ":",
             ["tests/test_cli.py::test_unknown_slash_commands_are_answered_locally"]),
    Mutation("read_file a.txt/ reads a.txt", "harness/files.py",
             '    if shown.endswith(("/", "/.")):       # pathlib dropped it',
             '    if False:       # pathlib dropped it',
             ["tests/test_s03_tools.py::test_a_file_named_with_a_slash_after_it_is_not_read_as_"
              "the_file"]),
    Mutation("a todo id of 0 becomes the item's number", "s03_todo.py",
             "        if item_id is None:\n", "        if not item_id:\n",
             ["tests/test_s03_tools.py::test_an_item_with_a_null_id_takes_its_number_as_one_with_"
              "none_does"]),
    Mutation("a task id of 3.0 is refused", "harness/board/record.py",
             "        value = int(value)\n", "",
             ["tests/test_board_contract.py::test_ids_from_a_model_are_accepted_in_three_"
              "spellings"]),
    Mutation("an unknown argument sent as null is dropped, not refused", "harness/tool_input.py",
             'want in ("integer", "number", "boolean")', "True",
             ["tests/test_s03_tools.py::test_a_null_optional_argument_is_not_given_and_a_whole_"
              "float_is_an_integer"]),
    Mutation("a log that cannot be made anew closes the old fd first", "harness/session/log.py",
             "            fd = writer.open_appending(path)\n",
             "            os.close(self._fd)\n            fd = writer.open_appending(path)\n",
             ["tests/test_session_log.py::test_a_log_removed_where_no_new_one_can_be_made_stops_"
              "and_says_so"]),
    Mutation("a result a hand edit put in an assistant message is left out unsaid",
             "harness/session/repair.py",
             "one: a hand edit's\n                self.refused += 1\n", "one: a hand edit's\n",
             ["tests/test_session_log.py::test_blocks_a_hand_edit_added_that_the_api_refuses_"
              "are_left_out_and_said"]),
    Mutation("the board takes the database's serializable default", "harness/board/postgres.py",
             "set_config('default_transaction_isolation', 'read committed', false)",
             "set_config('application_name', 'read committed', false)",
             ["tests/test_board_postgres.py::test_a_database_set_to_serializable_still_takes_every_"
              "agents_changes"]),
    Mutation("a connection the server dropped fails the next call", "harness/board/postgres.py",
             '                self._conn.execute("SELECT 1")', "                pass",
             ["tests/test_board_postgres.py::test_a_connection_the_server_dropped_between_two_"
              "calls_is_made_again"]),
    Mutation("the advice to go on shows *** for the board's password, unsaid", "harness/cli.py",
             "        if shown != args.board:", "        if False:",
             ["tests/test_secrets.py::test_the_advice_to_go_on_shows_a_board_password_as_stars"]),
    Mutation("a board whose tasks table was dropped never opens again",
             "harness/board/postgres.py", "\"to_regclass('tasks') IS NOT NULL\")",
             "\"true\")",
             ["tests/test_board_postgres.py::test_a_board_whose_tasks_table_was_dropped_is_made_"
              "again"]),
    Mutation("--continue on another board than the session's goes on unsaid",
             "harness/session/log.py", " or not now or board == now:", " or True:",
             ["tests/test_s07_e2e.py::test_continue_on_another_board_than_the_session_ran_on_says_"
              "so"]),
    Mutation("the live board listens again in silence after a lost connection",
             "harness/board/live.py", "                lines.append(AGAIN)\n", "",
             ["tests/test_board_postgres.py::test_the_live_board_listening_again_says_what_it_"
              "could_not_hear"]),
    Mutation("pydantic's serializer warnings reach the terminal", "harness/model_call.py",
             "stream.close) as self.watch, quiet_serializer():",
             "stream.close) as self.watch, contextlib.nullcontext():",
             [STREAMS + "::test_an_odd_usage_puts_no_pydantic_warning_on_the_terminal"]),
    Mutation("a tool call cut by an early end of the stream is run anyway",
             "harness/pairing.py",
             'CUT = {"max_tokens", "model_context_window_exceeded", ENDED_EARLY}',
             'CUT = {"max_tokens", "model_context_window_exceeded"}',
             [STREAMS + "::test_a_task_update_cut_off_inside_its_input_is_not_run"]),
    Mutation("a stream that ended before message_delta is taken as a whole reply",
             "harness/model_call.py",
             "        stop_reason = response.stop_reason if self.ended else pairing.ENDED_EARLY\n"
             "        _check_shape(",
             "        stop_reason = response.stop_reason\n"
             "        _check_shape(",
             [STREAMS]),
    Mutation("a tool input sent as JSON text is decoded without mending half an emoji",
             "harness/pairing.py",
             "    return clean_json(decoded) if isinstance(decoded, dict) else None",
             "    return decoded if isinstance(decoded, dict) else None",
             [SENDABLE]),
    Mutation("a tool result joins the history without being mended", "harness/tool_calls.py",
             '    output = clean_text(result["content"] or "(no output)")',
             '    output = result["content"] or "(no output)"',
             [SENDABLE + "::test_a_task_file_name_that_is_not_utf8_leaves_the_session_working"]),
    Mutation("a result over OUTPUT_CAP is cut, not saved whole", "s03_todo.py",
             '            output = spill.keep_whole(output, OUTPUT_CAP, call["name"], run.saved)',
             "            output = output[:OUTPUT_CAP]",
             ["tests/test_long_sessions.py::test_a_300000_character_output_is_read_back_whole_"
              "after_layer_1_clears_it"]),
    Mutation("a file is put in place by writing into it, not renamed over it", "harness/writer.py",
             "    temporary, made = _write_temporary(where, name, data, mode)\n"
             "    try:\n"
             "        os.replace(temporary, name, src_dir_fd=where, dst_dir_fd=where)\n",
             "    temporary, made = _write_temporary(where, name, data, mode)\n"
             "    try:\n"
             "        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666, "
             "dir_fd=where)\n"
             "        with os.fdopen(fd, 'wb') as f:\n"
             "            f.write(data)\n"
             "        os.unlink(temporary, dir_fd=where)\n",
             ["tests/test_atomic_file_tools.py::test_a_crash_while_the_file_is_put_in_place_"
              "leaves_the_old_file_or_the_new",
              FOLDER + "::test_a_crash_while_a_task_file_is_put_in_place_leaves_the_old_task_"
                       "or_the_new"]),
    Mutation("a file is written in place, with no temporary file", "harness/writer.py",
             "    temporary, made = _write_temporary(where, name, data, mode)\n"
             "    try:\n"
             "        os.replace(temporary, name, src_dir_fd=where, dst_dir_fd=where)\n"
             "    except BaseException:\n"
             "        _remove(where, temporary)\n"
             "        raise\n"
             "    return made\n",
             "    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666, dir_fd=where)\n"
             "    with os.fdopen(fd, 'wb') as f:\n"
             "        f.write(data)\n"
             "        f.flush()\n"
             "        return os.fstat(f.fileno())\n",
             ["tests/test_atomic_file_tools.py::test_a_crash_inside_write_file_leaves_the_old_"
              "file_or_the_new",
              FOLDER + "::test_a_crash_at_any_byte_of_an_update_leaves_the_old_task_or_the_"
                       "new"]),
    Mutation("the workspace check compares strings: work-evil counts as inside work",
             "harness/files.py",
             "    if not resolved.is_relative_to(folder):",
             "    if not str(resolved).startswith(str(folder)):",
             [S03_E2E + "::test_a_sibling_folder_whose_name_starts_with_the_workspaces_is_"
                        "outside_it"]),
    Mutation("an edit in a CRLF file writes its new lines with LF", "harness/files.py",
             '    put = _as_lf(new).replace("\\n", eol)',
             '    put = new',
             ["tests/test_hostile_files.py::test_old_text_written_with_newlines_matches_a_crlf_"
              "file"]),
    Mutation("a command the agent runs sees the API key", "harness/config.py",
             "        if name in HARNESS_ONLY or any(_holds(value, s) for s in hidden):",
             "        if False:",
             ["tests/test_cli.py::test_the_key_in_the_real_environment_never_reaches_a_"
              "command"]),
    Mutation("a command is left running when its tool call is stopped", "harness/bash.py",
             "            _kill_group(proc)\n            raise\n",
             "            raise\n",
             ["tests/test_s03_tools.py::test_a_signal_as_the_command_starts_still_kills_the_"
              "command"]),
    Mutation("control codes from a tool reach the terminal raw", "harness/terminal.py",
             "    return clean.escaped(text)",
             "    return text",
             ["tests/test_terminal.py::test_printable_escapes_control_characters_and_keeps_"
              "newlines_and_tabs"]),

    # ---------------------------------------------------------------- the session log
    Mutation("a call's result reaches the log only with the whole batch", "harness/tool_calls.py",
             "    run.log.tool_result(result)           # on disk now: a kill -9 does not lose it",
             "    pass",
             [STOPPED_MID_BATCH]),
    Mutation("Ctrl-C marks the call that was running as never run", "harness/pairing.py",
             "    rest = [stopped(calls[done], INTERRUPTED)] if done < len(calls) else []",
             "    rest = [stopped(calls[done], NOT_RUN)] if done < len(calls) else []",
             [CTRL_C_MID_BATCH]),
    Mutation("--continue drops the call that was running instead of marking it interrupted",
             "harness/session/repair.py",
             "            if call is not None and answer is None and running and not marked:",
             "            if call is not None and answer is None and running and marked:",
             [STOPPED_MID_BATCH]),
    Mutation("--continue resumes a compacted session from before its compaction",
             "harness/session/log.py",
             '        history[:] = [record["message"]]',
             '        history.append(record["message"])',
             [SESSION_LOG + "::test_a_compacted_session_resumes_from_its_summary"]),
    Mutation("--continue copies the history for every line it reads (quadratic)",
             "harness/session/log.py",
             "        history.append(record)",
             "        history[:] = history + [record]",
             [SESSION_LOG + "::test_continue_of_a_long_log_costs_time_linear_in_its_lines"]),
    Mutation("a reply reusing an earlier tool_use id is sent as it is", "harness/pairing.py",
             "            elif isinstance(given, str) and given in earlier:",
             "            elif isinstance(given, str) and given in earlier and 0:",
             ["tests/test_pairing.py::test_a_new_reply_reusing_an_earlier_id_gets_a_fresh_one_"
              "and_others_are_left_alone"]),
    Mutation("a prune waits for a running session's pin lock, which it holds (it hangs)",
             "harness/pins.py",
             "            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)",
             "            fcntl.flock(fd, fcntl.LOCK_SH)",
             ["tests/test_spill.py::test_a_running_sessions_placeholder_files_survive_another_"
              "sessions_pruning"]),

    # ---------------------------------------------------------------- s06: the three layers
    Mutation("layer 1 clears batches of a quarter of CLEAR_AT_LEAST",
             "s06_compact.py",
             "    big_enough = freed >= min(CLEAR_AT_LEAST, 0.4 * CONTEXT.threshold)",
             "    big_enough = freed >= min(CLEAR_AT_LEAST // 4, 0.4 * CONTEXT.threshold)",
             [S06 + "::test_layer1_never_clears_a_batch_smaller_than_clear_at_least"]),
    Mutation("an old read_file that failed is cleared as a read a later read follows",
             "s06_compact.py",
             '    if name == "read_file" and not block.get("is_error"):',
             '    if name == "read_file":',
             [S06 + "::test_an_old_failed_read_is_cleared_without_claiming_a_read"]),
    Mutation("layer 1 ignores the cache a batch rewrites", "s06_compact.py",
             " or not pays_for_itself or needs_compaction(view_now, freed):",
             " or needs_compaction(view_now, freed):",
             [S06 + "::test_a_batch_waits_while_clearing_it_would_rewrite_more_cache_than_it_"
                    "frees"]),
    Mutation("layer 1 clears a batch just before layer 2 summarises", "s06_compact.py",
             " or not pays_for_itself or needs_compaction(view_now, freed):",
             " or not pays_for_itself:",
             ["tests/test_layer1.py::test_no_batch_is_cleared_just_before_layer_2_summarises"]),
    Mutation("layer 2 still counts what layer 1 just cleared", "s06_compact.py",
             "        CONTEXT.reported -= freed",
             "        pass",
             [S06 + "::test_what_layer_1_just_cleared_does_not_push_layer_2_to_compact"]),
    Mutation("layer 1 keeps one result fewer than KEEP_RECENT", "s06_compact.py",
             '        old = n < len(pairs) - KEEP_RECENT and call["id"] not in newest',
             '        old = n < len(pairs) - KEEP_RECENT + 1 and call["id"] not in newest',
             [LAYER1_BATCH]),
    Mutation("layer 1 clears an input in a session shorter than KEEP_RECENT",
             "s06_compact.py",
             "        if old and may_go and input_size > KEEP_CHARS and not CLEARED.holds(call):",
             "        if may_go and input_size > KEEP_CHARS and not CLEARED.holds(call):",
             [S06 + "::test_a_session_shorter_than_keep_recent_loses_nothing"]),
    Mutation("layer 1 clears results of the newest turn, which the model has not seen",
             "s06_compact.py",
             '        old = n < len(pairs) - KEEP_RECENT and call["id"] not in newest',
             "        old = n < len(pairs) - KEEP_RECENT",
             [S06 + "::test_layer1_never_clears_what_the_model_has_not_answered_yet"]),
    Mutation("layer 1 clears a read of a file no later read or write shows", "s06_compact.py",
             '        may_go = (call["name"] not in ("read_file", "write_file")',
             "        may_go = (True",
             [S06 + "::test_a_file_stays_visible_until_a_later_read_or_write_supersedes_it"]),
    Mutation("layer 1 clears the text of a file's newest write, its only view in sight",
             "s06_compact.py",
             '        may_go = (call["name"] not in ("read_file", "write_file")',
             '        may_go = (call["name"] != "read_file"',
             ["tests/test_layer1.py::test_the_newest_whole_view_of_a_file_stays_in_sight"]),
    Mutation("a write that failed counts as showing the whole file", "harness/compaction.py",
             '    shown = call.get("name") in SHOW_WHOLE_FILE and not part and not '
             'result.get("is_error")',
             '    shown = call.get("name") in SHOW_WHOLE_FILE and not part',
             [S06 + "::test_only_a_whole_read_or_write_that_worked_makes_an_earlier_read_stale"]),
    Mutation("layer 1 writes its placeholders into the history instead of a copy",
             "s06_compact.py",
             '            message = {**message, "content": [CLEARED.as_sent(block) for block in '
             'content]}',
             '            message["content"] = [CLEARED.as_sent(block) for block in content]',
             [LAYER1_BATCH]),
    Mutation("a cleared result is not saved whole on disk", "harness/compaction.py",
             '    return spill.save_for_placeholder(result.get("content"), name, run.saved)',
             "    return None",
             [LAYER1_BATCH]),
    Mutation("layer 2 compacts again without the half-threshold growth", "s06_compact.py",
             "    return size > CONTEXT.threshold and grown > CONTEXT.threshold // 2",
             "    return size > CONTEXT.threshold",
             [S06 + "::test_layer2_does_not_compact_again_until_new_work_has_grown_the_context"]),
    Mutation("a compaction saves no transcript of what it summarises", "s06_compact.py",
             "        path = compaction.save_transcript(messages)",
             "        path = None",
             [S06 + "::test_the_model_calls_compact_mid_task_and_keeps_working"]),
    Mutation("the model is not told that the compaction it asked for failed", "s06_compact.py",
             '                messages[-1]["content"].append({"type": "text", "text": '
             'COMPACTION_FAILED})',
             "                pass",
             [S06 + "::test_slash_compact_in_the_repl_and_a_failing_summary_in_a_turn"]),
    Mutation("the token estimate counts a non-ASCII character as its escape (up to 6x over)",
             "harness/tokens.py",
             "    return len(json.dumps(value, ensure_ascii=False, default=str))",
             "    return len(json.dumps(value, default=str))",
             ["tests/test_non_ascii_tokens.py::test_context_and_layer_2_count_a_chinese_"
              "conversation_as_an_ascii_one_of_its_length"]),

    # ---------------------------------------------------------------- s07: the rules
    Mutation("_clear_dependency drops the last blocker, not the finished one",
             "s07_task_system.py",
             '                fresh["blockedBy"] = [b for b in fresh["blockedBy"] if b != '
             'finished["id"]]',
             '                fresh["blockedBy"] = fresh["blockedBy"][:-1]',
             [CONTRACT + "::test_completing_one_of_several_blockers_removes_exactly_that_blocker"]),
    Mutation("completing a task frees none of its dependents", "s07_task_system.py",
             "                lines += self._clear_dependency(task)",
             "                pass",
             [CONTRACT + "::test_completing_a_task_unblocks_its_dependents_and_says_so"]),
    Mutation("reopening a finished task does not say who stopped waiting for it",
             "s07_task_system.py",
             '                notes += text.reopened(task, freed)',
             '                notes += text.reopened(task, [])',
             [CONTRACT + "::test_reopening_a_completed_task_says_who_no_longer_waits"]),
    Mutation("a task in progress or done is listed as ready to start", "s07_task_system.py",
             '        return task["status"] == "pending" and not graph.waiting_on(task, tasks)',
             "        return not graph.waiting_on(task, tasks)",
             [CONTRACT + "::test_list_all_orders_numerically_and_names_what_can_start"]),
    Mutation("the claim refusal lets an agent finish another agent's task",
             "harness/board/claims.py",
             '    if task["status"] in CLAIMING and holder and holder != agent:',
             '    if task["status"] in CLAIMING and holder and holder != agent and not status:',
             [HELD_BY_ANOTHER]),
    Mutation("a task another agent completed may be taken, reopened or deleted",
             "harness/board/claims.py",
             '    if task["status"] in CLAIMING and holder and holder != agent:',
             '    if task["status"] == "in_progress" and holder and holder != agent:',
             ["tests/test_board_reopen.py::test_a_model_cannot_take_or_delete_a_task_another_"
              "agent_completed"]),
    Mutation("completing a task from pending leaves it nobody's", "harness/board/claims.py",
             '    elif status in CLAIMING or (status and task["status"] == "in_progress"):',
             '    elif status == "in_progress" or (status and task["status"] == "in_progress"):',
             ["tests/test_board_reopen.py::test_a_task_completed_without_being_started_is_its_"
              "completers"]),
    Mutation("an agent may start a task in another agent's name", "harness/board/claims.py",
             '    if owner and owner != agent and after != "pending" and not force:',
             '    if owner and owner != agent and after != "pending" and force:',
             [CONTRACT + "::test_an_agent_starts_a_task_only_in_its_own_name"]),
    Mutation("a task in progress is put in another agent's name without a handover",
             "harness/board/claims.py",
             '    if owner and owner != agent and after != "pending" and not force:',
             '    if owner and owner != agent and status == "in_progress" and not force:',
             [CONTRACT + "::test_a_task_in_progress_stays_in_the_name_of_the_agent_working_on_it"]),
    Mutation("completing a task counts a deleted dependent as freed", "s07_task_system.py",
             '            if finished["id"] not in other["blockedBy"] or other["status"] == '
             '"deleted":',
             '            if finished["id"] not in other["blockedBy"]:',
             [CONTRACT + "::test_a_deleted_task_is_neither_freed_nor_shown_waiting"]),
    Mutation("a task set back to pending keeps its owner", "harness/board/claims.py",
             '    elif status == "pending":\n        change["owner"] = None\n',
             '    elif status == "pending":\n        pass\n',
             [HELD_BY_ANOTHER]),
    Mutation("a blocked task may start", "s07_task_system.py",
             '        if status in ("in_progress", "completed") and waiting:',
             '        if status == "completed" and waiting:',
             [CONTRACT + "::test_a_blocked_task_cannot_start_or_complete_and_the_refusal_names_"
                         "its_blockers"]),
    Mutation("the cycle check is skipped", "s07_task_system.py",
             "                graph.refuse_cycle(tasks, tid, dep)",
             "                pass",
             [CONTRACT + "::test_unknown_self_and_cyclic_blockers_are_refused_and_change_"
                         "nothing"]),
    Mutation("addBlockedBy reads the whole board again for each id it adds", "s07_task_system.py",
             "                graph.refuse_cycle(tasks, tid, dep)",
             "                graph.refuse_cycle(self.store.scan(recheck=True)[0], tid, dep)",
             [CONTRACT + "::test_many_blockers_in_one_call_read_the_board_once_and_still_"
                         "refuse_a_cycle"]),
    Mutation("the cycle check looks only at direct blockers", "harness/board/graph.py",
             "                stack.append(b)",
             "                pass",
             [CONTRACT + "::test_unknown_self_and_cyclic_blockers_are_refused_and_change_"
                         "nothing"]),
    Mutation("a deleted task is accepted as a blocker (a note, not a refusal)",
             "s07_task_system.py",
             '            if other["status"] == "deleted":\n'
             '                raise ValueError(f"task #{dep} was deleted; it cannot block '
             'anything")\n',
             "",
             [CONTRACT + "::test_a_deleted_task_cannot_become_a_blocker"]),
    Mutation("starting a task does not make the agent its owner", "harness/board/claims.py",
             '"in_progress"):\n        change["owner"] = agent\n',
             '"in_progress"):\n        pass\n',
             [CONTRACT + "::test_of_eight_concurrent_starters_exactly_one_wins_each_round"]),
    Mutation("a blocker that cannot be read counts as finished", "harness/board/graph.py",
             "if tasks.get(blocker, {}).get(\"status\") not in FINISHED]",
             "if tasks.get(blocker, {\"status\": \"completed\"})[\"status\"] not in FINISHED]",
             [CONTRACT + "::test_a_blocker_removed_by_hand_still_holds_its_task_back"]),
    Mutation("a newline in a subject forges a line of the board", "harness/excerpt.py",
             '    joined = " ".join(str(value).split())',
             "    joined = str(value)",
             [CONTRACT + "::test_an_owner_with_newlines_or_escapes_is_one_printable_line_on_the_"
                         "live_board"]),
    Mutation("a NUL in a subject is stored on a folder board (PostgreSQL refuses it)",
             "harness/board/record.py",
             '    if "\\0" in value:      # PostgreSQL',
             '    if False:      # PostgreSQL',
             [FOLDER + "::test_a_hand_edited_file_postgresql_would_refuse_is_flagged_and_left_"
                       "as_it_is"]),
    Mutation("s07's automatic compaction (layer 2) leaves the board out", "s07_task_system.py",
             "            compact_with_board(messages, run)                  # layer 2 + board",
             "            s06.auto_compact(messages, run)                    # layer 2 + board",
             ["tests/test_s07_e2e.py::test_an_automatic_compaction_also_brings_the_board_back"]),
    Mutation("the board is not added after a compaction", "s07_task_system.py",
             "focus, SYSTEM, TOOLS, attach=board_message)",
             "focus, SYSTEM, TOOLS, attach=None)",
             [CONTRACT + "::test_the_board_survives_a_compaction_in_a_real_run"]),
    Mutation("a big board after a compaction leaves out the tasks in progress",
             "harness/board/text.py",
             '    unfinished = [t for t in live if t["status"] not in FINISHED]\n'
             '    lines = [f"(',
             '    unfinished = [t for t in live if t["status"] == "pending"]\n'
             '    lines = [f"(',
             [CONTRACT + "::test_tasks_in_progress_stay_on_a_big_board_after_a_compaction"]),
    Mutation("a live-board notification with a non-string owner is shown as a name",
             "harness/board/live.py",
             '    for field in ("agent", "owner", "was_owner"):\n'
             "        if change.get(field) is not None and not isinstance(change[field], str):\n"
             "            return None\n",
             "",
             ["tests/test_board_postgres.py::test_forged_notifications_are_counted_and_never_"
              "hide_the_real_news"]),
    Mutation("a person's /task done on another agent's task is refused, not taken over",
             "harness/board/commands.py",
             '        "done": lambda: tasks.update(rest[0], status="completed", force=True),',
             '        "done": lambda: tasks.update(rest[0], status="completed"),',
             ["tests/test_repl_commands.py::test_a_persons_task_done_takes_over_a_task_another_"
              "agent_has_in_progress"]),

    Mutation("importing s03 loads the command line, and the session's record and log with it",
             "s03_todo.py",
             "from pathlib import Path\n",
             "from pathlib import Path\n\nimport harness.cli\n",
             ["tests/test_s07_e2e.py::test_importing_a_lesson_loads_its_mechanism_not_the_"
              "command_line"]),

    Mutation("a refused reply stays in the conversation, and the API refuses every later turn",
             "harness/cli.py",
             "            history.pop()\n",
             "            pass\n",
             ["tests/test_refusals.py::test_a_refused_turn_keeps_the_tool_calls_that_ran_"
              "before_it"]),

    # ---------------------------------------------------------------- s07: the file board
    Mutation("the high-water mark is ignored: a new task takes an id deleted by hand",
             "s07_task_system.py",
             "        return record.new_id(max(largest, self.store.high_water()) + 1)",
             "        return record.new_id(largest + 1)",
             [CONTRACT + "::test_an_id_removed_by_hand_is_not_given_to_a_new_task"]),
    Mutation("the folder's high-water mark is never read: an id deleted by hand is given again",
             "s07_task_system.py",
             "            return int(digits)",
             "            return 0",
             [CONTRACT + "::test_an_id_removed_by_hand_is_not_given_to_a_new_task"]),
    Mutation("the folder's high-water mark is never raised: an id deleted by hand is given again",
             "s07_task_system.py",
             '            if task["id"] > self.high_water():',
             '            if False:',
             [CONTRACT + "::test_an_id_removed_by_hand_is_not_given_to_a_new_task"]),
    Mutation("the cross-process stamp check is removed: a warm cache misses another's task",
             "harness/board/folder.py",
             "        if stamp != self._stamp or _folder_times(self.dir) != self._folder:",
             "        if False:",
             [CONTRACT + "::test_a_blocker_completed_by_a_warm_manager_frees_what_another_"
                         "manager_created",
              CONTRACT + "::test_a_warm_managers_refusal_of_a_missing_id_names_what_another_"
                         "created_since"]),
    Mutation("a listing keeps a cached task its file no longer holds (a hand edit unseen)",
             "harness/board/folder.py",
             "        if hit is not None and hit[0] == key:",
             "        if hit is not None:",
             [CONTRACT + "::test_another_managers_writes_and_a_hand_edit_are_seen_by_the_next_"
                         "call"]),
    Mutation("completing a task writes back its dependents as cached, over a hand edit",
             "s07_task_system.py",
             '            fresh = self.store.try_load(other["id"])',
             "            fresh = other",
             [CONTRACT + "::test_completing_a_blocker_keeps_a_hand_edit_made_to_its_dependent_"
                         "since",
              FOLDER + "::test_a_hand_edit_that_keeps_size_time_and_inode_survives_its_blocker_"
                       "completing"]),
    Mutation("a new task's file replaces one made by hand with the same id",
             "s07_task_system.py",
             '            writer.link(temporary, self.path(task["id"]))',
             '            os.replace(temporary, self.path(task["id"]))',
             [RESERVE_TAKEN]),
    Mutation("the folder's lock is not taken", "s07_task_system.py",
             "            fcntl.flock(fd, fcntl.LOCK_EX)   # waits while another agent holds it\n",
             "",
             [WAITS]),
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
             [WAITS]),
    Mutation("PostgreSQL's reserve replaces a task that holds the id already",
             "harness/board/postgres.py",
             "        return self._put(task, RESERVE)",
             "        return self._put(task, REPLACE)",
             [RESERVE_TAKEN]),
    Mutation("PostgreSQL's warm cache ignores the generation: another's change is unseen",
             "harness/board/postgres.py",
             "                fresh = generation is not None and generation == self._generation",
             "                fresh = self._generation is not None",
             [CONTRACT + "::test_a_missing_task_names_the_tasks_another_agent_has_just_added"]),
    Mutation("PostgreSQL's high-water mark is ignored: a new task takes an id deleted by hand",
             "harness/board/postgres.py",
             '"WHERE high_water BETWEEN 0 AND %(max)s - 1), 0)")',
             '"WHERE false), 0)")',
             [CONTRACT + "::test_an_id_removed_by_hand_is_not_given_to_a_new_task"]),
    Mutation("the board's URL is shown with its password", "harness/board/__init__.py",
             '        rest = f"{user}:***@{host_part}"',
             "        pass",
             ["tests/test_board_postgres.py::test_a_board_url_is_shown_with_its_password_as_"
              "stars"]),

    # ---------------------------------------------------------------- --api-context
    Mutation("the API's compaction block is dropped from the history", "harness/api_context.py",
             '                kept.append({**block, "content": summary})',
             "                pass",
             [API_CONTEXT + "::test_a_compaction_block_is_kept_sent_back_and_carried_across_"
                            "continue"]),
    Mutation("s07's board does not come back after the API's summary", "s07_task_system.py",
             "    s06.start(run, args, SYSTEM, TOOLS, attach=board_message)",
             "    s06.start(run, args, SYSTEM, TOOLS)",
             [API_CONTEXT + "::test_in_s07_the_board_comes_back_after_the_apis_compaction"]),
    Mutation("an endpoint's message of several lines is printed as several", "harness/errors.py",
             "    return excerpt.one_line(without_secrets(message), DETAIL_MAX)",
             "    return without_secrets(message)[:DETAIL_MAX]",
             ["tests/test_cli.py::test_an_endpoint_error_message_of_several_lines_is_one_line"]),
    Mutation("a proxy's 422 naming the beta gets no hint", "harness/api_context.py",
             '"status_code", None) not in (400, 422):',
             '"status_code", None) != 400:',
             [API_CONTEXT + "::test_a_422_that_names_the_beta_gets_the_hint_too"]),
    Mutation("a 400 that does not name the beta gets the hint all the same",
             "harness/api_context.py",
             "        if not any(word in str(exc) for word in words):\n            return line\n",
             "",
             [API_CONTEXT + "::test_a_400_that_does_not_name_the_beta_gets_no_hint"]),
    Mutation("a COMPACT_THRESHOLD unused with --api-context is ignored in silence",
             "harness/api_context.py",
             "    if mine:\n        terminal.show_note(f\"[COMPACT_THRESHOLD={mine}",
             "    if False:\n        terminal.show_note(f\"[COMPACT_THRESHOLD={mine}",
             [API_CONTEXT + "::test_a_compact_threshold_the_user_set_is_said_to_be_unused_with_"
                            "the_flag"]),
    Mutation("/context's rows and headline disagree with clear, unexplained",
             "harness/session/views.py",
             '    if counted and api is not None and api.mode == "clear" and api.cleared:',
             "    if False:",
             [API_CONTEXT + "::test_context_says_its_rows_are_what_is_sent_before_the_apis_"
                            "clearing"]),
    Mutation("a one-shot turn the API refused stays in the log", "harness/cli.py",
             "        repair.keep_completed(history, saved, message, None, "
             "list(run.log.ran.values()))",
             "        pass",
             ["tests/test_long_sessions.py::test_a_one_shot_turn_the_api_refused_is_not_kept_"
              "for_continue"]),
    Mutation("a resumed session is counted with what the API's summary replaced",
             "harness/cli.py",
             "resume_from=run.resumed,", "resume_from=None,",
             ["tests/test_api_context.py::test_continue_of_a_compacted_session_counts_what_is_"
              "sent_not_what_the_api_dropped"]),
    Mutation("an answer a narrow terminal cannot encode undoes the turn", "harness/cli.py",
             "    _tolerate_narrow_terminals()\n    try:", "    try:",
             ["tests/test_cli.py::test_an_answer_a_narrow_terminal_cannot_encode_is_shown_and_"
              "the_turn_kept"]),
    Mutation("a board news watcher that failed to start is never made again",
             "harness/board/commands.py",
             "            self.watcher = live.BoardWatcher(self.tasks.store, self.tasks.agent)\n"
             "            self.store = self.tasks.store\n",
             "            self.store = self.tasks.store\n"
             "            self.watcher = live.BoardWatcher(self.tasks.store, self.tasks.agent)\n",
             ["tests/test_board_folder.py::test_a_board_that_cannot_be_read_at_the_first_prompt_"
              "is_tried_again_not_left_broken"]),
    Mutation("s07's board is left out when the API's summary ends the turn",
             "harness/model_call.py",
             '            self.run.carried.append({"type": "text", "text": late()})',
             "            pass",
             ["tests/test_api_context.py::test_in_s07_the_board_comes_back_after_the_apis_"
              "compaction_in_a_reply_that_ends_the_turn"]),
    Mutation("repair drops the API's summary that opens a resumed session",
             "harness/session/repair.py",
             'if not self.messages and not (blocks and blocks[0]["type"] == "compaction"):',
             "if not self.messages:",
             ["tests/test_pairing.py::test_a_history_that_opens_with_the_apis_summary_keeps_it"]),
    Mutation("/context after the API's summary says the API has not counted it",
             "harness/session/views.py",
             "context.seen - dropped", "context.seen",
             ["tests/test_api_context.py::test_cost_context_and_the_page_say_the_api_is_in_"
              "charge_and_count_its_summary"]),
    Mutation("a one-shot turn is undone when its answer cannot be printed", "harness/cli.py",
             "        terminal.print_answer(answer, run.screen)\n",
             "        try:\n"
             "            terminal.print_answer(answer, run.screen)\n"
             "        except ValueError:\n"
             "            repair.keep_completed(history, saved, message, None, [])\n"
             "            raise\n",
             ["tests/test_long_sessions.py::test_a_one_shot_turn_that_finished_is_kept_when_"
              "printing_its_answer_fails"]),

    # ---------------------------------------------------------------- issue #46's three
    Mutation("after a second compaction the requests start at the API's first summary",
             "harness/api_context.py",
             "    for n in range(len(messages) - 1, -1, -1):",
             "    for n in range(len(messages)):",
             [API_CONTEXT + "::test_after_the_apis_second_compaction_a_request_sends_only_what_"
                            "follows_it",
              API_CONTEXT + "::test_continue_after_the_apis_second_compaction_counts_and_sends_"
                            "from_the_last_summary"]),
    Mutation("the API's compaction is said without its cached part",
             "harness/api_context.py",
             "    after = sum(tokens.usage_counts(usage)[:3])\n"
             "    if steps:\n"
             "        before = sum(tokens.usage_counts(steps[-1])[:3])\n",
             "    after = tokens.usage_counts(usage)[0]\n"
             "    if steps:\n"
             "        before = tokens.usage_counts(steps[-1])[0]\n",
             [API_CONTEXT + "::test_the_apis_compaction_is_said_with_its_cached_part_on_the_"
                            "screen_and_the_page"]),
    Mutation("--continue --api-context clear sends the API's compaction block back",
             "harness/api_context.py",
             "    if setting is not None and setting.mode == COMPACT:\n        return kept\n",
             "    if setting is not None:\n        return kept\n",
             [API_CONTEXT + "::test_continue_with_clear_of_a_session_the_api_compacted_goes_on_"
                            "from_the_summary_as_text"]),

    # ---------------------------------------------------------------- issue #46: fifth audit
    # What the redesign (#45) and the hostile-conditions fixes (#47) changed; MUTATIONS.md.
    Mutation("the board's .lock is opened through a link planted there",
             "harness/board/folder.py",
             "        return writer.open_shared(None, lock, LOCK_MODE)\n"
             "    except (FileNotFoundError, NotADirectoryError):",
             "        return os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, LOCK_MODE)\n"
             "    except (FileNotFoundError, NotADirectoryError):",
             [FOLDER + "::test_a_link_at_the_boards_lock_is_refused_and_nothing_is_written_"
                       "through_it"]),
    Mutation("an endpoint's password is shown in the lines that name it", "harness/config.py",
             "        shown = f\"{scheme}{userinfo.partition(':')[0]}:***@{rest}\"",
             "        shown = url",
             [SECRETS_TESTS + "::test_an_unreachable_endpoint_with_a_password_is_named_with_the_"
                              "password_hidden"]),
    Mutation("a command sees the password in ANTHROPIC_BASE_URL or a proxy's URL",
             "harness/config.py",
             '        hidden += _url_secrets(os.environ.get(name, ""))\n',
             "        pass\n",
             [SECRETS_TESTS + "::test_a_password_in_the_base_url_never_reaches_the_model_and_"
                              "still_opens_the_gateway",
              SECRETS_TESTS + "::test_a_proxys_password_never_reaches_the_model"]),
    Mutation("a command sees the base URL's password decoded from its %-escapes",
             "harness/config.py",
             "    return [password, unquote(password)]",
             "    return [password]",
             [SECRETS_TESTS + "::test_child_env_leaves_out_a_base_url_that_holds_a_password_and_"
                              "its_copies"]),
    Mutation("a bad CONTEXT_WINDOW opens a keyless REPL", "harness/config.py",
             "    context_window()\n    price(model)",
             "    price(model)",
             ["tests/test_prices.py::test_every_bad_number_stops_the_keyless_repl_before_it_"
              "starts"]),
    Mutation("a .env served as a FIFO is skipped as not a file of settings",
             "harness/env_file.py",
             "    if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode)):",
             "    if not stat.S_ISREG(mode):",
             ["tests/test_setup.py::test_a_dotenv_served_as_a_fifo_is_read"]),
    Mutation("a temporary name made from the final name passes 255 bytes", "harness/writer.py",
             '    temporary = f".tmp_{kind}{secrets.token_hex(8)}.tmp"',
             '    temporary = f".tmp_{kind}{os.path.basename(name)[:100]}_{secrets.token_hex(8)}'
             '.tmp"',
             ["tests/test_hostile_files.py::test_a_long_non_ascii_file_name_the_system_takes_can_"
              "be_written_and_edited"]),
    Mutation("a replaced file becomes the owner's of the process that wrote it",
             "harness/writer.py",
             "        _keep_owner(new, was)\n",
             "",
             [ATOMIC + "::test_a_task_file_rewritten_as_root_stays_its_owners"]),
    Mutation("a replaced file loses its extended attributes (its ACLs)", "harness/writer.py",
             "                os.setxattr(new, attribute, value)",
             "                pass",
             [ATOMIC + "::test_write_and_edit_as_root_keep_the_files_owner_group_mode_and_"
                       "attributes"]),
    Mutation("the API's summary sent as a list of text blocks counts as a failed one",
             "harness/api_context.py",
             "    if isinstance(content, list):\n        texts =",
             "    if False:\n        texts =",
             [API_CONTEXT + "::test_a_summary_sent_as_a_list_of_text_blocks_is_kept_as_the_"
                            "string_the_api_takes"]),
    Mutation("the reply's own entry in usage.iterations is taken for the API's summary",
             "harness/api_context.py",
             '    return [step for step in steps if _field(step, "type") == "compaction"]',
             "    return steps",
             [API_CONTEXT + "::test_an_odd_or_missing_count_of_the_apis_summary_keeps_the_"
                            "summary"]),
    Mutation("a summary blanked in the log is sent back on --continue",
             "harness/api_context.py",
             "    kept = from_last_summary(without_empty_summaries(messages))",
             "    kept = from_last_summary(messages)",
             [API_CONTEXT + "::test_a_summary_blanked_by_hand_in_the_log_is_left_out_and_the_"
                            "session_goes_on"]),
    Mutation("layer 2 waits until a request fills the model's whole window",
             "harness/compaction.py",
             "    return max(window - 2 * reply_tokens, window // 2)",
             "    return window",
             [API_CONTEXT + "::test_with_clearing_a_conversation_that_grows_by_text_is_"
                            "summarised_inside_the_window"]),
    Mutation("s06's --demo ignores the learner's COMPACT_THRESHOLD", "s06_compact.py",
             '    CONTEXT.threshold = config.positive_int("COMPACT_THRESHOLD", default, "tokens")',
             "    CONTEXT.threshold = default",
             ["tests/test_demo_threshold.py::test_a_threshold_above_the_demos_context_keeps_"
              "layer_2_from_compacting"]),
    Mutation("a closed terminal (SIGHUP) ends a run without its page and total",
             "harness/bash.py",
             "(signal.SIGTERM, signal.SIGHUP)}",
             "(signal.SIGTERM,)}",
             ["tests/test_run_ends.py::test_a_closed_terminal_or_a_kill_at_the_prompt_writes_the_"
              "page_and_the_total"]),
    Mutation("a run with stdout closed ends in a traceback", "harness/cli.py",
             '    for name, mode in (("stdout", "w"), ("stderr", "w"), ("stdin", "r")):',
             '    for name, mode in (("stderr", "w"), ("stdin", "r")):',
             ["tests/test_run_ends.py::test_a_closed_stdout_is_no_traceback_after_the_work_is_"
              "done"]),
    Mutation("a keep-alive event counts as progress: a reply that never comes waits forever",
             "harness/model_call.py",
             "        if event.type in CONTENT:\n            self.watch.progress()",
             "        if True:\n            self.watch.progress()",
             [STREAMS + "::test_a_keep_alive_event_of_a_gateways_own_does_not_count_as_the_"
                        "reply_coming"]),
    Mutation("a stop_reason sent as an object goes into the history", "harness/model_call.py",
             "    if stop_reason is not None and not isinstance(stop_reason, str):",
             "    if False:",
             [STREAMS + "::test_a_stop_reason_sent_as_an_object_is_one_line_naming_the_endpoint"]),
    Mutation("a reply in words that says tool_use sends an empty user message next",
             "harness/model_call.py",
             '        elif stop_reason == "tool_use":\n            stop_reason = "end_turn"',
             '        elif False:\n            stop_reason = "end_turn"',
             [STREAMS + "::test_a_reply_in_words_that_says_tool_use_ends_the_turn"]),
    Mutation("a refused reply runs the calls it holds", "harness/model_call.py",
             '        if stop_reason == "refusal":',
             "        if False:",
             [STREAMS + "::test_a_refused_reply_runs_none_of_its_calls"]),
    Mutation("read_file shows a sparse file's hole as text", "harness/files.py",
             '            if b"\\0" in raw:                  # from here on the file is not text',
             '            if False:                  # from here on the file is not text',
             ["tests/test_hostile_files.py::test_read_file_on_a_sparse_file_shows_its_text_lines_"
              "and_reads_only_a_bounded_prefix"]),
    Mutation("read_file reads a huge line whole to cut it", "harness/files.py",
             "            raw = f.readline(window)",
             "            raw = f.readline()",
             ["tests/test_hostile_files.py::test_a_line_of_100_mb_is_shown_cut_after_reading_"
              "only_a_bounded_prefix"]),
    Mutation("a task file nested too deeply takes the board down", "s07_task_system.py",
             "        except (ValueError, RecursionError) as exc:",
             "        except ValueError as exc:",
             [FOLDER + "::test_a_deeply_nested_task_file_is_flagged_and_the_rest_of_the_board_"
                       "works"]),
    Mutation("a file named task_05.json is not flagged: the task vanishes in silence",
             "s07_task_system.py",
             '            elif name.startswith("task_") and name.endswith(".json"):',
             "            elif False:",
             [FOLDER + "::test_only_canonical_files_with_integer_ids_are_tasks"]),
    Mutation("removing a blocker a task does not have is accepted in silence",
             "s07_task_system.py",
             '            if dep not in blocked:\n                raise ValueError(f"#{tid} is not '
             'blocked by #{dep}")',
             '            if dep not in blocked:\n                continue',
             [CONTRACT + "::test_a_blocker_is_removed_by_its_id_and_one_not_there_is_refused"]),
    Mutation("the board sweeps any writer's temporary file, one being written too",
             "harness/writer.py",
             "    return named is not None and entry.stat(follow_symlinks=False).st_mtime "
             "< stale\n",
             "    return named is not None\n",
             ["tests/test_board_sweep.py::test_another_writers_temporary_file_being_written_is_"
              "kept"]),
    Mutation("what a killed task writer left (.tmp_task_<hex>.tmp) stays on the board",
             "harness/board/folder.py",
             "    return bool(LITTER.fullmatch(name) or writer.TASK_TEMPORARY.fullmatch(name))",
             "    return bool(LITTER.fullmatch(name))",
             ["tests/test_board_sweep.py::test_a_task_writers_temporary_file_is_swept_at_once_"
              "and_only_it"]),
    Mutation("the results folder's marker is written through a link planted at its name",
             "harness/spill.py",
             '    writer.replace_in(fd, MARKER, MARKER_TEXT.encode("utf-8"), 0o644)',
             "    (folder / MARKER).write_text(MARKER_TEXT)",
             ["tests/test_spill.py::test_a_link_planted_where_the_marker_goes_is_replaced_never_"
              "written_through"]),
    Mutation("a one-shot turn the API refused exits 0, as if the work were done",
             "harness/cli.py",
             "            status = 1\n",
             "            status = 0\n",
             ["tests/test_refusals.py::test_the_apis_explanation_of_a_refusal_is_shown_as_text_"
              "never_as_codes"]),
    Mutation("a task file made by hand without blockedBy is accepted, and the board breaks",
             "harness/board/record.py",
             '    if "blockedBy" not in task:\n',
             "    if False:\n",
             [FOLDER + "::test_a_task_file_made_by_hand_without_blockedby_is_flagged_not_a_key_"
              "error"]),
    # ---------------------------------------------------------------- hostile round 6
    Mutation("a change writes on though its .lock was removed meanwhile",
             "harness/board/folder.py",
             "        self._still_the_lock()\n",
             "",
             [FOLDER + "::test_a_lock_file_removed_during_a_change_refuses_the_write_so_no_task_"
              "is_claimed_twice"]),
    Mutation("a task whose file a read would refuse as too big is written",
             "harness/board/record.py",
             "    if len(encoded) > TASK_FILE_MAX:\n",
             "    if False:\n",
             ["tests/test_board_hand_edits.py::test_a_task_whose_file_would_be_too_big_to_read_"
              "back_is_not_written"]),
    Mutation("a server's Retry-After of a day is waited", "harness/client.py",
             'event_hooks={"response": [_capped_retry_wait]}',
             "event_hooks={}",
             ["tests/test_setup.py::test_a_rate_limit_asking_to_wait_a_day_is_waited_briefly_"
              "then_one_line"]),
    Mutation("the demo takes a new task and leaves its own in progress", "harness/demos.py",
             "    ready = re.search(LEFT_IN_PROGRESS, listing, re.M)\n",
             "    ready = None\n",
             ["tests/test_repl_commands.py::test_an_s07_demo_cut_off_mid_task_is_picked_up_by_the_"
              "next_run_not_left_stuck"]),
    Mutation("the page leaves a broken task file out in silence", "harness/session/recorder.py",
             '        said = [f"not drawn on the board: {line}" for line in '
             'unreadable[:UNREADABLE_SHOWN]]\n',
             "        said = []\n",
             ["tests/test_repl_commands.py::test_the_pages_board_says_which_task_files_it_could_"
              "not_draw"]),
    Mutation("the order line calls every task left a cycle's, or every one stuck",
             "harness/board/graph.py",
             "    behind = _behind(stuck, todo)\n",
             "    behind = set(todo) if stuck else set()\n",
             [CONTRACT + "::test_a_cycle_beside_a_task_waiting_for_a_lost_one_is_still_named_a_"
              "cycle"]),
]

# Names a mutation's new text uses that its file does not import.
IMPORTS = {"shutil.": "import shutil\n"}


def copy_of_repo(into: Path) -> Path:
    """The working tree in into/repo."""
    copy = into / "repo"
    shutil.copytree(ROOT, copy, ignore=SKIP, symlinks=True)
    return copy


def run_tests(repo: Path, tests: list, extra: list, timeout: float = TIMEOUT) -> tuple:
    """(the ids of the tests that failed, how many were skipped, pytest's exit code, its last
    lines) in this copy; exit code None when the run did not end within timeout seconds. A
    test that hung past the suite's last resort (faulthandler ended the run) counts as failed."""
    # -n 0: the named tests in pytest's own process; the mutations already run two at a time.
    command = [sys.executable, "-m", "pytest", "-q", "-rfEs", "-n", "0", "-p", "no:cacheprovider",
               *extra, *tests]
    env = {**_env(), "PYTHONDONTWRITEBYTECODE": "1"}
    # A session of its own: at the timeout the whole run goes, the lessons and servers it
    # started too (killing pytest alone left them running, and holding its pipes).
    proc = subprocess.Popen(command, cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return set(), 0, None, f"still running after {timeout:g} s"
    failed = set(re.findall(r"^(?:FAILED|ERROR) (.+?)(?: - .*)?$", out, re.M))
    failed |= hung_in(err)
    skipped = re.search(r"(\d+) skipped", out)
    tail = "\n".join(out.strip().splitlines()[-3:])
    return failed, int(skipped[1]) if skipped else 0, proc.returncode, tail


def hung_in(stderr: str) -> set:
    """The test faulthandler's dump (conftest's last resort) shows running, as file::name
    (the innermost test function of the dump), or nothing if the run was not ended so. A
    hang outside any test function (a fixture's teardown, after a test failed on a loaded
    machine) is a hang all the same: CI once called such a run missed."""
    if not re.search(r"^Timeout \(\d+:\d\d:\d\d\)!$", stderr, re.M):
        return set()
    frames = re.findall(r'File "[^"]*/(tests/test_\w+\.py)", line \d+ in (test_\w+)', stderr)
    if not frames:
        return {"a fixture or the run itself (hung: faulthandler ended the run)"}
    return {f"{path}::{name} (hung: faulthandler ended the run)" for path, name in frames[:1]}


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


def check(mutation: Mutation, tests: list, baseline: set, timeout: float = TIMEOUT) -> tuple:
    """(caught, the lines that say so): the mutation made in a fresh copy, its tests run."""
    started = time.monotonic()
    deselect = [f"--deselect={test}" for test in sorted(baseline)]
    with tempfile.TemporaryDirectory(prefix="mutate_") as tmp:
        repo = copy_of_repo(Path(tmp))
        apply(mutation, repo)
        failed, skipped, code, tail = run_tests(repo, tests, ["-x", *deselect], timeout)
    took = f"({time.monotonic() - started:.0f} s)"
    new = sorted(failed - baseline)
    if new or code not in (0, 1, 5):     # 2-4: pytest could not even run (an import error)
        lines = [f"caught  {mutation.name} {took}"] + [f"        by {test}" for test in new]
        if not new:
            lines.append(f"        pytest exit code {code}: {tail}")
        return True, lines
    lines = [f"MISSED  {mutation.name} {took}",
             f"        every test in {' '.join(tests)} still passes"]
    if skipped:
        lines.append(f"        ({skipped} skipped: {tail.splitlines()[-1]})")
    if code:            # 1 (a test failed) or 5 (none ran), yet no new failure was read
        lines.append(f"        pytest exit code {code}: {tail}")
    return False, lines


def parse(argv: list) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python tests/mutate.py",
        description="The mutation check: make each change of the list in a copy of the repo "
                    "and run the tests it names; each must fail. Exit 0: every mutation "
                    "caught; 1: one missed; 2: a stale entry, or an unchanged run that did "
                    "not end (nothing compared).",
        epilog="The list and what kills each: tests/MUTATIONS.md.")
    parser.add_argument("words", nargs="*",
                        help="run only the mutations whose name contains one of these words")
    parser.add_argument("--suite", action="store_true",
                        help="run each mutation against the whole suite (minutes each)")
    parser.add_argument("--after-suite", action="store_true",
                        help="the whole suite has just passed in this tree (as in .ci/run): "
                             "skip the run of the named tests on an unchanged copy")
    parser.add_argument("--jobs", type=int, default=2, metavar="N",
                        help="mutations checked at once (default 2: one for each core of "
                             "the CI machine)")
    return parser.parse_args(argv)


def main(argv: list) -> int:
    started = time.monotonic()
    args = parse(argv)
    words = args.words
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
    every = ["tests"] if args.suite else sorted({t for m in chosen for t in m.tests})
    timeout = SUITE_TIMEOUT if args.suite else TIMEOUT
    baseline, skipped = set(), 0
    if not args.after_suite:
        with tempfile.TemporaryDirectory(prefix="mutate_") as tmp:
            baseline, skipped, code, tail = run_tests(copy_of_repo(Path(tmp)), every, [],
                                                      timeout)
        # A run that did not end, or could not start, says nothing of which tests fail: every
        # mutation would then count as caught.
        if code not in (0, 1, 5):
            print(f"the named tests did not run to their end on an unchanged copy (pytest "
                  f"exit code {code}): nothing was compared\n        {tail}")
            return 2
    if baseline:
        print("already failing without any mutation (left out of the runs below):")
        for test in sorted(baseline):
            print(f"        {test}")
    if skipped:
        print(f"{skipped} of the named tests skip here (see -rs): a mutation only they would "
              "catch is MISSED")
    print(f"checking {len(chosen)} mutations, {max(args.jobs, 1)} at a time", flush=True)
    caught = 0
    with ThreadPoolExecutor(max_workers=max(args.jobs, 1)) as pool:
        runs = [pool.submit(check, m, ["tests"] if args.suite else m.tests, baseline, timeout)
                for m in chosen]
        for run in runs:                 # in the list's order, whatever finished first
            found, lines = run.result()
            caught += found
            print("\n".join(lines), flush=True)
    minutes = (time.monotonic() - started) / 60
    print(f"{caught} of {len(chosen)} mutations caught, {len(chosen) - caught} missed "
          f"({minutes:.1f} minutes)")
    return 0 if caught == len(chosen) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
