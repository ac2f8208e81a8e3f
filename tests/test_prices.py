"""What a session costs in money (issue #48), as a user meets it: /cost typed at the REPL and
the session page, at the default model's list price unless you set yours, each saying which
price it used and where it came from; no price made up for another model; and a bad price
refused before anything runs, in one line naming the variable."""

import re

import pytest

import s03_todo
import s06_compact
import s07_task_system
from harness import config
from harness.stand_in.script import reply, text, tool
from helpers import ROOT, Elements, messages, words

# An empty variable counts as unset: the tests see the default price whatever the shell that
# runs pytest exported.
UNSET = {"PRICE_PER_MTOK": "", "PRICE_PER_MTOK_OUT": ""}
# A turn whose second request (seq's output in it) is long enough to be written to the cache.
SCRIPT = (reply(tool("bash", {"command": "seq 1 1500"})), reply(text("done")))


def amounts(bill: dict, price_in: float, price_out: float) -> tuple:
    """What the stand-in's bill costs at these prices: input, the same without caching,
    output, and all of it; cache writes at 1.25x and reads at 0.1x the input price."""
    cost_in = bill["billed_input"] * price_in / 1e6
    cost_out = bill["output"] * price_out / 1e6
    return cost_in, bill["input_sent"] * price_in / 1e6, cost_out, cost_in + cost_out


def cost_typed(run_main, env: dict) -> tuple:
    """A turn, then /cost at s06's REPL: (what it printed, words; the stand-in's bill)."""
    code, out, err, api = run_main(s06_compact, stdin="go\n/cost\nq\n", script=SCRIPT,
                                   env={**UNSET, **env})
    assert code == 0 and api.violations == [] and len(api.requests) == 2, err
    return words(out), api.billing()


def page_text(workdir) -> str:
    """The session page the run wrote, as a browser shows its text."""
    (page,) = (workdir / ".transcripts").glob("session_*.html")
    return " ".join(" ".join(Elements(page.read_text(encoding="utf-8")).text).split())


# ---------------------------------------------------------------- the default model's price

def test_cost_gives_the_session_in_dollars_at_the_default_models_list_price(run_main):
    said, bill = cost_typed(run_main, {})
    cost_in, uncached, cost_out, total = amounts(bill, *config.DEFAULT_PRICE)
    assert bill["cache_write"] and total > 0          # the 1.25x of cache writes is in it
    assert (f"price: ${total:,.4f} = input ${cost_in:,.4f} (without caching "
            f"${uncached:,.4f}) + output ${cost_out:,.4f}") in said
    # Which price, from where, read when; and how to set another.
    assert f"at Anthropic's list price for {config.DEFAULT_MODEL}" in said
    assert f"{config.PRICE_SOURCE}, read {config.PRICE_READ}" in said
    assert "PRICE_PER_MTOK and PRICE_PER_MTOK_OUT set your own" in said


def test_the_list_price_and_its_source_are_what_the_docs_quote():
    """One place: config.py's constant; the pages that name the price quote it."""
    price_in, price_out = config.DEFAULT_PRICE
    quoted = f"${price_in:g} a million input tokens and ${price_out:g} a million output tokens"
    for doc in ("docs/session.md", "docs/real-use.md", "README.md"):
        page = words((ROOT / doc).read_text(encoding="utf-8"))
        assert quoted in page and config.PRICE_READ in page, doc


# ---------------------------------------------------------------- your price, another model

def test_your_price_replaces_the_list_price_and_is_named_with_its_values(run_main):
    said, bill = cost_typed(run_main, {"PRICE_PER_MTOK": "3", "PRICE_PER_MTOK_OUT": " 15 "})
    cost_in, uncached, cost_out, total = amounts(bill, 3, 15)
    assert (f"price: {total:,.4f} = input {cost_in:,.4f} (without caching "
            f"{uncached:,.4f}) + output {cost_out:,.4f}") in said
    assert "at your PRICE_PER_MTOK=3 and PRICE_PER_MTOK_OUT=15 per million tokens" in said
    assert "$" not in said and config.PRICE_SOURCE not in said   # your currency, not dollars


def test_your_input_price_alone_prices_the_input_alone_and_says_how_to_price_the_rest(run_main):
    said, bill = cost_typed(run_main, {"PRICE_PER_MTOK": "3"})
    cost_in, uncached, _, _ = amounts(bill, 3, 0)
    assert f"price: input {cost_in:,.4f} (without caching {uncached:,.4f}) at your" in said
    assert "output" not in said.split("price:")[1].split("at your")[0]
    assert "set PRICE_PER_MTOK_OUT to price the output" in said


def test_another_model_gets_no_made_up_price_and_is_told_to_set_one(run_main):
    said, _ = cost_typed(run_main, {"MODEL_ID": "llama-local"})
    assert not re.search(r"\d\.\d{4}", said) and "$" not in said
    assert ("price: none: MODEL_ID is llama-local, which has no price here; set PRICE_PER_MTOK "
            "(and PRICE_PER_MTOK_OUT) to its price per million tokens") in said
    said, bill = cost_typed(run_main, {"MODEL_ID": "llama-local", "PRICE_PER_MTOK": "0.5",
                                       "PRICE_PER_MTOK_OUT": "1"})
    assert f"price: {amounts(bill, 0.5, 1)[3]:,.4f} = input" in said   # yours: it is priced


# ---------------------------------------------------------------- the session page

def test_the_page_gives_the_cost_cost_gives_and_the_price_it_used(run_main, workdir):
    said, bill = cost_typed(run_main, {})
    shown = page_text(workdir)
    total = amounts(bill, *config.DEFAULT_PRICE)[3]
    assert f"price: ${total:,.4f} = input" in shown and f"price: ${total:,.4f} = input" in said
    assert f"at Anthropic's list price for {config.DEFAULT_MODEL}" in shown
    assert f"{config.PRICE_SOURCE}, read {config.PRICE_READ}" in shown


def test_the_page_of_another_model_says_to_set_a_price(run_main, workdir):
    code, out, err, api = run_main(s06_compact, "go", script=SCRIPT,
                                   env={**UNSET, "MODEL_ID": "llama-local"})
    assert code == 0, err
    shown = page_text(workdir)
    assert "MODEL_ID is llama-local, which has no price here; set PRICE_PER_MTOK" in shown
    assert "$" not in shown.split("price:")[1] and not re.search(r"\d\.\d{4}", shown)


def test_the_readme_says_what_the_demo_would_cost_as_its_page_does(run_main, workdir):
    code, out, err, api = run_main(s07_task_system, "--demo", key=None, env=UNSET)
    assert code == 0, err
    (page,) = (workdir / "demo" / ".transcripts").glob("session_s07_*.html")
    shown = " ".join(" ".join(Elements(page.read_text(encoding="utf-8")).text).split())
    total = float(re.search(r"price: \$([\d.]+) = input", shown)[1])
    readme = words((ROOT / "README.md").read_text(encoding="utf-8"))
    quoted = re.search(r"the demo's session would cost about \$([\d.]+)", readme)
    assert quoted, "README.md no longer says what the demo's session would cost"
    assert f"{total:.2f}" == quoted[1]                     # to the cent: paths change tokens


# ---------------------------------------------------------------- a bad price

# 1e308 made /cost say "inf", -0 "-0.0000"; 1_000 and ٣ were read as numbers, as float()
# reads them, where COMPACT_THRESHOLD refuses them.
BAD = ["abc", "-1", "inf", "nan", "1e308", "-0", "1_000", "٣"]


@pytest.mark.parametrize("name", ["PRICE_PER_MTOK", "PRICE_PER_MTOK_OUT"])
@pytest.mark.parametrize("value", BAD)
@pytest.mark.parametrize("where", ["environment", ".env"])
def test_a_bad_price_is_refused_before_anything_runs(run_main, workdir, name, value, where):
    if where == ".env":
        (workdir / ".env").write_text(f"{name}={value}\n", encoding="utf-8")
        env = {}
    else:
        env = {name: value}
    code, out, err, api = run_main(s06_compact, "go", script=SCRIPT, env=env)
    assert code == 1 and api.requests == [] and len(messages(err)) == 1, err
    what = "input" if name == "PRICE_PER_MTOK" else "output"
    assert f"error: {name} must be a price per million {what} tokens" in words(err)
    assert repr(value) in err
    assert [p.name for p in workdir.iterdir()] == ([".env"] if where == ".env" else [])


def test_a_bad_price_stops_the_repl_and_the_demo_before_they_start(run_main, workdir):
    code, out, err, api = run_main(s07_task_system, stdin="/cost\nq\n",
                                   env={"PRICE_PER_MTOK": "abc"})
    assert code == 1 and out == "" and len(messages(err)) == 1   # no banner, no /cost
    assert "PRICE_PER_MTOK must be a price" in err
    code, out, err, api = run_main(s07_task_system, "--demo", key=None,
                                   env={"PRICE_PER_MTOK_OUT": "-1"})
    assert code == 1 and len(messages(err)) == 1 and "PRICE_PER_MTOK_OUT must be" in err
    assert list(workdir.iterdir()) == []                 # no demo/, no board, no log


def test_a_bad_price_in_env_file_is_one_line_from_the_lesson_run_as_a_user_runs_it(run_lesson,
                                                                                  workdir):
    (workdir / ".env").write_text("PRICE_PER_MTOK=inf\n", encoding="utf-8")
    proc, api = run_lesson("s07_task_system", "plan the work")
    assert proc.returncode == 1 and api.requests == [] and proc.stdout == ""
    assert len(messages(proc.stderr)) == 1
    assert words(proc.stderr) == ("error: PRICE_PER_MTOK must be a price per million input "
                                  "tokens, such as 3 or 0.25; got 'inf'")


@pytest.mark.parametrize("name, value, lesson", [("API_TIMEOUT", "abc", s07_task_system),
                                                 ("CONTEXT_WINDOW", "x", s03_todo)])
def test_every_bad_number_stops_the_keyless_repl_before_it_starts(run_main, workdir,
                                                                   name, value, lesson):
    """docs/real-use.md: a value that must be a number and is not is refused before anything
    runs. API_TIMEOUT is used only by the client and CONTEXT_WINDOW in s03 only by /context,
    yet a REPL without a key (no client) must not open over either."""
    code, out, err, api = run_main(lesson, stdin="q\n", key=None, env={name: value})
    assert code == 1 and out == "" and len(messages(err)) == 1, err
    assert name in err and repr(value) in err
