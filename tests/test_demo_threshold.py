"""s06's --demo honours the learner's COMPACT_THRESHOLD, as the README and s06's docstring
say (`COMPACT_THRESHOLD=4000 python s06_compact.py --demo`): a learner tries a threshold in the
demo to see layer 2 move, and a demo that kept its own would show them nothing, while saying
theirs."""

import s06_compact
from helpers import words


def demo(run_main, **env) -> tuple:
    """s06's demo, keyless, with these settings: (what it printed, its compactions)."""
    code, out, err, api = run_main(s06_compact, "--demo", key=None, env=env)
    assert code == 0, err
    said = words(err + "\n" + out)
    return said, said.count("[compacted:")


def test_a_threshold_above_the_demos_context_keeps_layer_2_from_compacting(run_main):
    said, compactions = demo(run_main, COMPACT_THRESHOLD="60000")
    assert "[demo] COMPACT_THRESHOLD is 60,000 tokens for this demo (your" in said
    assert "Layer 2 has not compacted yet: the context is under COMPACT_THRESHOLD." in said
    assert compactions == 1                 # only the one the model asks for (layer 3)


def test_a_lower_threshold_compacts_the_demo_sooner_and_more_often(run_main):
    said, compactions = demo(run_main, COMPACT_THRESHOLD="4000")
    assert "[demo] COMPACT_THRESHOLD is 4,000 tokens for this demo (your" in said
    _, as_shipped = demo(run_main)
    assert compactions > as_shipped


def test_the_demo_model_says_layer_2_took_its_first_result_when_it_did(run_main):
    """At 4,000 tokens layer 2 summarises before layer 1 clears anything: the scripted model
    must say its first result went into the summary, not that it is still whole."""
    said, _ = demo(run_main, COMPACT_THRESHOLD="4000")
    assert "My first result is still whole" not in said
    assert "Layer 2 has summarised my first result: the summary is in its place." in said
