"""The load test's pure parts (tests/benchmarks/load_test.py): what counts as an error in a server message, how
a tab remembers widgets, the latency percentiles and the memory verdict. No server is started here."""

import sys
from pathlib import Path

import pytest
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

sys.path.insert(0, str(Path(__file__).resolve().parent / "benchmarks"))
from load_test import (JUDGE_MEMORY_MINUTES, Record, Session, latency_summary, memory_summary,  # noqa: E402
                       next_value, problems, report, shown_value, trainer_browsers)


def element_msg(fragment_id: str = "") -> tuple[ForwardMsg, object]:
    msg = ForwardMsg()
    msg.delta.fragment_id = fragment_id
    return msg, msg.delta.new_element


def test_exceptions_and_error_boxes_are_problems_warnings_are_not():
    msg, element = element_msg()
    element.exception.type, element.exception.message = "TypeError", "bad argument"
    assert problems(msg) == ["exception TypeError: bad argument"]
    element.exception.is_warning = True
    assert problems(msg) == []
    msg, element = element_msg()
    element.alert.body, element.alert.format = "Can't run this", element.alert.ERROR
    assert problems(msg) == ["error box: Can't run this"]
    element.alert.format = element.alert.WARNING  # e.g. "2 token(s) are not in the vocabulary"
    assert problems(msg) == []
    msg, element = element_msg()
    element.markdown.body = "**12 tokens**"
    assert problems(msg) == []


def test_script_end_states():
    finished = ForwardMsg()
    finished.script_finished = ForwardMsg.ScriptFinishedStatus.FINISHED_SUCCESSFULLY
    assert problems(finished) == []
    finished.script_finished = ForwardMsg.ScriptFinishedStatus.FINISHED_WITH_COMPILE_ERROR
    assert problems(finished) == ["the script did not compile"]


def test_a_tab_remembers_widgets_their_fragment_and_the_page():
    session = Session("http://127.0.0.1:1", timeout=1)
    navigation = ForwardMsg()
    navigation.navigation.page_script_hash = "page-hash"
    session._note(navigation, navigation.SerializeToString())
    assert session.page_hash == "page-hash"
    msg, element = element_msg("fragment-1")
    element.radio.id, element.radio.default = "$$ID-0123abcd-layer", 1
    element.radio.options.extend(["L0", "L1", "L2"])
    data = msg.SerializeToString()
    session._note(msg, data)
    layer = session.widgets["layer"]
    assert (layer.id, layer.fragment_id, layer.options, layer.value) == ("$$ID-0123abcd-layer", "fragment-1",
                                                                        ["L0", "L1", "L2"], "L1")
    assert session.messages["layer"] == data
    msg, element = element_msg()
    element.markdown.body = "no id, not remembered"
    session._note(msg, msg.SerializeToString())
    assert set(session.widgets) == {"layer"}


def test_shown_values():
    msg, element = element_msg()
    element.selectbox.options.extend(["model's own (causal)", "none", "window"])
    element.selectbox.default = 0
    assert shown_value(element) == "model's own (causal)"
    element.selectbox.set_value, element.selectbox.raw_value = True, "window"
    assert shown_value(element) == "window"
    msg, element = element_msg()
    element.text_area.default = "the keys"
    assert shown_value(element) == "the keys"
    element.text_area.set_value, element.text_area.value = True, "the cat"
    assert shown_value(element) == "the cat"
    msg, element = element_msg()
    element.multiselect.default.extend([0, 1])  # other widgets: no single shown value
    assert shown_value(element) == ""


def test_next_value_always_changes_something():
    import random

    session = Session("http://127.0.0.1:1", timeout=1)
    msg, element = element_msg()
    element.selectbox.id = "$$ID-ff-mask"
    element.selectbox.options.extend(["own", "none"])
    session._note(msg, msg.SerializeToString())
    msg, element = element_msg()
    element.text_area.id, element.text_area.default = "$$ID-ee-text", "a b"
    session._note(msg, msg.SerializeToString())
    rng = random.Random(0)
    assert {next_value(session, "mask", [], rng) for _ in range(10)} == {"none"}
    assert {next_value(session, "text", ["a b", "c d"], rng) for _ in range(10)} == {"c d"}


def test_latency_percentiles():
    summary = latency_summary([float(x) for x in range(1, 101)])
    assert summary == {"count": 100, "p50_s": pytest.approx(50.5), "p95_s": pytest.approx(95.05), "max_s": 100.0}
    assert latency_summary([2.0]) == {"count": 1, "p50_s": 2.0, "p95_s": 2.0, "max_s": 2.0}
    assert latency_summary([])["p95_s"] is None


def test_memory_that_plateaus_is_bounded_and_a_leak_is_not():
    plateau = [(t, 300 + min(t, 40) * 5) for t in range(0, 181, 2)]  # caches fill in 40 s, then stay
    summary = memory_summary(plateau)
    assert summary["bounded"] and summary["second_half_growth"] == pytest.approx(0.0)
    assert (summary["start_mb"], summary["peak_mb"], summary["end_mb"]) == (300, 500, 500)
    leak = [(t, 300 + t) for t in range(0, 181, 2)]  # 1 MB a second, for ever
    summary = memory_summary(leak)
    assert not summary["bounded"]
    assert summary["first_half_peak_mb"] == 390 and summary["second_half_peak_mb"] == 480
    with pytest.raises(ValueError, match="two memory samples"):
        memory_summary([(0, 300)])



def test_report_counts_errors_and_judges_memory_only_on_long_runs():
    records = [Record(0, "open", 2.0, 1000), Record(0, "text", 1.0, 500), Record(1, "open", 3.0, 1000),
               Record(1, "pe", 0.25, 300),
               Record(1, "mask", None, problems=["no answer in 120 s"]),
               Record(0, "head", 0.5, 300, problems=["error box: Can't run this"])]
    series = [(t, 400.0) for t in range(0, 200, 10)]
    settings = dict(url="http://127.0.0.1:1", sessions=2, minutes=JUDGE_MEMORY_MINUTES, think_s=[1, 2], ramp_s=0)
    result = report(records, {7: series}, {7: 12.0}, 180.0, settings)
    assert result["errors"] == 2 and len(result["error_examples"]) == 2
    assert result["latency"]["open"]["count"] == 2 and result["latency"]["mask"]["count"] == 0
    assert result["latency"]["all interactions"] == latency_summary([1.0, 0.25, 0.5])
    assert result["latency"]["toggles (mask, pe)"] == latency_summary([0.25])  # the failed mask toggle: no time
    assert result["interactions_per_s"] == pytest.approx(3 / 180)
    assert result["kb_per_interaction"] == pytest.approx(1100 / 3 / 1024)
    assert result["memory_bounded"] is True and result["server"]["7"]["cpu_s"] == 12.0
    short = report(records, {7: series}, {7: 12.0}, 60.0, {**settings, "minutes": JUDGE_MEMORY_MINUTES - 1})
    assert short["memory_bounded"] is None


def test_trainers_two_of_them_with_a_second_tab_of_the_same_browser():
    browsers = trainer_browsers(5, 2)
    assert len(browsers) == 7 and len(set(browsers)) == 5  # the issue's classroom: 5 browsers, 2 with two tabs
    assert browsers[5:] == browsers[:2]
    assert trainer_browsers(0, 2) == []


def test_a_tab_keeps_the_signed_browser_cookie_its_page_sets():
    """The trainers' second tabs send it: the app accepts only ids it signed (pages/ui/browser.py)."""
    session = Session("http://x", 1)
    msg, element = element_msg("")
    element.html.body = "<script>document.cookie = 'attention_lab_browser=abc.def; path=/; max-age=1';</script>"
    session._note(msg, msg.SerializeToString())
    assert session.app_cookie == "attention_lab_browser=abc.def"


def test_the_class_errors_leave_out_the_attackers_and_memory_after_the_class_is_reported():
    records = [Record(0, "pe", 0.2, 300), Record(9, "attack", 7.0, 9000, problems=["error box: too long"]),
               Record(10, "flood", 0.1, 5 << 20)]
    series = [(t, 700.0 + (600 if 60 <= t <= 120 else 0)) for t in range(0, 200, 10)]
    settings = dict(url="http://127.0.0.1:1", sessions=1, minutes=3, think_s=[1, 2], ramp_s=0, after_s=60)
    result = report(records, {7: series}, {7: 1.0}, 140.0, settings)
    assert result["errors"] == 0 and result["attacker_errors"] == 1
    assert result["latency"]["attack"]["count"] == 1 and result["latency"]["flood"]["count"] == 1
    server = result["server"]["7"]
    assert server["baseline_mb"] == 700 and server["after_mb"] == 700 and server["memory"]["peak_mb"] == 1300


def test_a_tab_remembers_the_fragments_it_drew_for_its_polls():
    session = Session("http://x", 1)
    msg, element = element_msg("frag-1")
    element.markdown.body = "polled"
    session._note(msg, msg.SerializeToString())
    assert session.fragments == {"frag-1"}


def test_the_browser_benchmark_judges_issue_18s_goals_where_it_sets_them():
    from bench_browser import judge

    row = {"tokens": 512, "type_ratio": 2.1, "toggle_ratio": 1.9, "app_type_s": 0.5, "app_toggle_s": 0.4}
    judge(row)
    assert row["type_goal"] == "goal <= 2x: NOT met" and row["toggle_goal"] == "goal <= 2x: met"
    row = {"tokens": 1024, "type_ratio": 9.0, "toggle_ratio": 8.0, "app_type_s": 2.5, "app_toggle_s": 1.5}
    judge(row)
    assert row["toggle_goal"] == "goal <= 2 s: met" and "type_goal" not in row  # the issue sets no goal for it
    row = {"tokens": 16, "type_ratio": 1.0, "toggle_ratio": 1.0, "app_type_s": 0.1, "app_toggle_s": 0.1}
    judge(row)
    assert "toggle_goal" not in row and "type_goal" not in row
