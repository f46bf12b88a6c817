"""Every "predict, then reveal" prompt of the lesson pages under AppTest (the live-training ones are in
test_reveal_training.py): before Reveal nothing on the page answers it (the charts, tables and sentences that
would are absent); after Reveal they are there, and the answer opens with a grade that names the class's
prediction and the value measured on this run, recomputed here from core/ on the same tiny models."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pytest
import torch
from conftest import PAGES, drawn, figures, ok, shows
from streamlit.testing.v1 import AppTest
from test_cross_attention_page import tiny_dir  # noqa: F401  (a fixture: two tiny random encoder–decoders)

from core.data.translation import read_source, vocabularies
from core.figures.maths import token_axis_labels
from core.lessons import position_lab as lab
from core.lessons.generation import Sampling, cache_check, generate
from core.lessons.lens import token_norm_view
from core.lessons.linear_attention import compare_on_recording
from core.lessons.maths import layer_maths
from core.model import registry
from core.model.masks import MaskPreset, flip_cells
from core.model.run import encode_text, record_text
from core.model.seq2seq import load_seq2seq, run_translation
from pages.ui.examples import ATTRACTOR, PERMUTED
from pages.ui.safety import literal
from pages.ui.text_input import DEFAULT_TEXT

torch.set_num_threads(1)
SOURCE = "the dog that the children loved chased two old cats ."  # the encoder–decoder page's default


@pytest.fixture
def dirs(models_dir, tiny_dir, monkeypatch):  # noqa: F811
    """The tiny text models and encoder–decoders, where the pages read them."""
    monkeypatch.setenv("ATTENTION_LAB_SEQ2SEQ_DIR", str(tiny_dir))
    return {"text": models_dir, "seq2seq": tiny_dir}


def model(dirs, name: str = "lm-rope"):
    return registry.load_model(name, dirs["text"])


def recording(dirs, text: str = DEFAULT_TEXT, **options):
    transformer, card = model(dirs)
    return record_text(transformer, text, card=card, **options)


# ---------------------------------------------------------------------------------------------------------
# What is on the page
# ---------------------------------------------------------------------------------------------------------

def page_text(at: AppTest) -> str:
    """Every sentence shown: markdown, captions, boxes, and the metrics' labels and values."""
    texts = [e.value for kind in ("markdown", "caption", "info", "success", "warning", "header", "subheader")
             for e in at.get(kind)]
    return " ".join(texts + [f"{m.label} {m.value}" for m in at.metric])


def chart_keys(at: AppTest) -> set[str]:
    """The user keys of the charts drawn, plotly or canvas (an element id ends with its key)."""
    return {key for key in KNOWN_CHARTS if drawn(at, key)}


def table_columns(at: AppTest) -> set[str]:
    return {column for frame in at.dataframe for column in frame.value.columns}


KNOWN_CHARTS = ("chart_scores", "chart_pattern", "chart_column", "cost_chart", "softmax_chart", "linear_chart",
                "cosine_chart", "token_chart", "fig5_chart", "masked_pattern_chart", "empty_row_chart",
                "incremental_chart", "similarity_chart", "profile_chart", "rope_chart", "permutation_no_mask_chart",
                "permutation_chart", "cross_forced", "cross_free", "decoder_free")


@dataclass
class Prompt:
    """A prompt, what on its page answers it, and how to compute what its grade must say.

    charts: chart keys; texts: sentences; columns: table columns; all absent before Reveal, present after.
    measured(dirs) -> the value the grade must show, computed here from core/."""

    name: str
    page: str
    key: str
    prediction: str
    measured: Callable[[dict], str]
    charts: tuple[str, ...] = ()
    texts: tuple[str, ...] = ()
    columns: tuple[str, ...] = ()
    answer: str | None = None  # the option the run must make right, where the maths settles it
    params: dict = field(default_factory=dict)
    setup: Callable[[AppTest], None] | None = None

    def shown(self, at: AppTest) -> dict[str, bool]:
        text, keys, columns = page_text(at), chart_keys(at), table_columns(at)
        return {**{f"chart {c}": c in keys for c in self.charts}, **{f"text {t!r}": t in text for t in self.texts},
                **{f"column {c}": c in columns for c in self.columns}}


# ---------------------------------------------------------------------------------------------------------
# The measured values, recomputed
# ---------------------------------------------------------------------------------------------------------

def top_key(dirs) -> str:
    rec = recording(dirs)
    row = rec.pattern(0)[0][-1]  # layer 0, head 0, the last query (the page's default token)
    labels = token_axis_labels(rec.meta["tokens"], rec.meta["unknown"])
    return f"**{row.max():.3f}**, on key **{literal(labels[int(row.argmax())])}**"


def forms(dirs) -> str:
    maths = layer_maths(model(dirs)[0], recording(dirs), 0)
    return f"differ by at most **{maths.sum_vs_concat:.1e}**"


def linear_vs_softmax(dirs) -> str:
    return f"= **{compare_on_recording(recording(dirs), 0, 0).relative_error:.1%}**"


def standardised_spread(dirs) -> str:
    view = token_norm_view(recording(dirs), model(dirs)[0], 0, "ln1")
    stds = view.standardized.std(axis=1)
    return f"from **{stds.min():.4f}** to **{stds.max():.4f}**"


def empty_row_sum(dirs) -> str:
    transformer, card = model(dirs)
    n = len(encode_text(DEFAULT_TEXT, transformer.cfg.max_len)[1])
    allowed = flip_cells(MaskPreset("causal", 4, 4, 0.3, 0, True).build(n), {(1, 0), (1, 1)})
    rec = record_text(transformer, DEFAULT_TEXT, mask=allowed, card=card)
    rows = np.stack([rec.pattern(m)[:, 1] for m in range(rec.n_layers)])
    return f"row summing to **{np.nansum(rows, axis=-1).max():.3g}**"


def incremental(dirs) -> str:
    transformer, _ = model(dirs)
    ids = encode_text(DEFAULT_TEXT, transformer.cfg.max_len)[0]
    change = lab.incremental_change(transformer, ids, "causal")
    return f"**{int((change[-1] > lab.ROUNDING).sum())} of the {len(ids) - 1} earlier tokens**"


def cache(dirs) -> str:
    transformer, _ = model(dirs)
    ids = encode_text(ATTRACTOR, transformer.cfg.max_len)[0]  # the page's default prompt
    check = cache_check(transformer, generate(transformer, ids, 2, Sampling(temperature=0.0)))
    return f"**{check.logits_error:.1e}** in the logits"


def similar(dirs) -> str:
    similarity = lab.position_similarity(lab.encoding_table(model(dirs)[0], "sinusoidal", 64))
    return f"are **{', '.join(map(str, lab.most_similar(similarity, 10)))}**"


def rope_length(dirs) -> str:
    return f"**{lab.rope_pair(recording(dirs), 0, 0, 0, 'q').length_change:.1e}**"


def permutation(mask: str) -> Callable[[dict], str]:
    def measured(dirs) -> str:
        transformer, _ = model(dirs)
        ids_a, ids_b = (encode_text(t, 64)[0] for t in PERMUTED)
        return f"{lab.permutation_test(transformer, ids_a, ids_b, mask, 'none').max_change:.2g}"
    return measured


def translation(dirs):
    transformer, _ = load_seq2seq("tiny", dirs["seq2seq"])
    vocab = vocabularies()
    source = read_source(SOURCE, transformer.cfg.max_src_len)
    return run_translation(transformer, list(source.ids), vocab.target.bos_id, vocab.target.eos_id,
                           vocab.target_ids(source.pair.target))


def alignment_weight(dirs) -> str:
    row = translation(dirs).forced.pattern("cross", 1)[1][12]  # the card's best head L1 H1, the verb's step
    return f"puts **{row.max():.0%}** of step 12's attention"


def free_words(dirs) -> str:
    steps = [s for s in translation(dirs).steps() if s.reference is not None]
    return f"**{sum(not s.free_wrong for s in steps)} of {len(steps)}** reference words"


def measure(at: AppTest) -> None:
    at.button(key="measure").click().run()


def growth(at: AppTest) -> str:
    """The cost page's own measurement (timings cannot be recomputed, and the fit reads every run, the table only
    their medians): the growth fitted on the table's sizes, N = 64 and 128, five runs each."""
    table = next(f.value for f in at.dataframe if "softmax time (ms)" in f.value.columns)
    return f"Theil–Sen over all {5 * len(table)} timed runs at {len(table)} sizes)"


MATHS, COST, NORM = (str(PAGES / p) for p in ("maths.py", "attention_cost.py", "token_norm.py"))
MASKS, POSITIONS, CROSS = (str(PAGES / p) for p in ("masks_lab.py", "positions_lab.py", "cross_attention.py"))
PROMPTS = [
    Prompt("maths: top key", MATHS, "predict_top", "0: [BOS]", top_key,
           charts=("chart_scores", "chart_pattern", "chart_column"), texts=("puts its largest weight",),
           columns=("Σ_n′ A[n′, n]",), params=dict(maths_step="3 · Scores and softmax")),
    Prompt("maths: sum or concat", MATHS, "predict_forms", "different", forms,
           texts=("same sum", "max |Σ_h V_h X A_h − concat form|"), answer="identical, up to rounding",
           params=dict(maths_step="5 · All heads")),
    Prompt("cost: doubling N", COST, "predict_double", "about ×1", growth, charts=("cost_chart",),
           texts=("N²", "time slope"), columns=("softmax time (ms)",), params=dict(max_n="128"), setup=measure),
    Prompt("cost: linear vs softmax", COST, "predict_same", "exactly the same", linear_vs_softmax,
           charts=("softmax_chart", "linear_chart", "cosine_chart"), texts=("‖linear − softmax‖ / ‖softmax‖",)),
    Prompt("tokennorm: standardised", NORM, "predict_standardised", "they still differ from token to token",
           standardised_spread, charts=("token_chart", "fig5_chart"), texts=("ends with mean 0",),
           answer="mean 0 and std 1, for every token"),
    Prompt("masks: an empty row", MASKS, "predict_empty_row", "uniform weights", empty_row_sum,
           charts=("masked_pattern_chart",), texts=("row is all zeros",), answer="all zeros",
           params=dict(cells="1:0 1:1", n_new="2")),
    Prompt("masks: an empty row, measured on request", MASKS, "predict_empty_row", "an error", empty_row_sum,
           charts=("empty_row_chart",), texts=("with every key switched off",), answer="all zeros",
           params=dict(n_new="2")),
    Prompt("masks: incremental", MASKS, "predict_incremental", "all of them", incremental,
           charts=("incremental_chart",), texts=("none under a causal mask",), answer="none",
           params=dict(n_new="2")),
    Prompt("masks: key/value cache", MASKS, "predict_cache", "different", cache, texts=("max |Δ logits|",),
           params=dict(n_new="2")),
    Prompt("positions: similar", POSITIONS, "predict_similar", "position 0", similar,
           charts=("similarity_chart", "profile_chart"), answer="its neighbours"),
    Prompt("positions: RoPE length", POSITIONS, "predict_length", "longer", rope_length, charts=("rope_chart",),
           texts=("Only the direction carries the position",), answer="the same length"),
    Prompt("positions: no mask", POSITIONS, "predict_no_mask", "no, different", permutation("none"),
           charts=("permutation_no_mask_chart",), texts=("cannot tell the orders apart",), answer="yes, the same"),
    Prompt("positions: causal", POSITIONS, "predict_causal", "no, the mask is not about order",
           permutation("causal"), charts=("permutation_chart",), texts=("the mask itself leaks position",),
           answer="yes, the representations differ"),
    Prompt("encoder-decoder: alignment", CROSS, "predict_align", "6: chased", alignment_weight,
           charts=("cross_forced",), texts=("on the true source word",)),
    Prompt("encoder-decoder: free generation", CROSS, "predict_free", "yes, word for word", free_words,
           charts=("decoder_free",), texts=("The model, free (greedy) generation",),
           columns=("free generation: writes",)),
]


@pytest.mark.parametrize("prompt", PROMPTS, ids=[p.name for p in PROMPTS])
def test_nothing_answers_a_prompt_before_reveal_and_the_reveal_grades_it(app, dirs, prompt):
    at = app(prompt.page, timeout=120, **prompt.params)
    if prompt.setup is not None:
        prompt.setup(at)
    ok(at)
    shown = prompt.shown(at)
    assert not any(shown.values()), f"answered before Reveal: {[what for what, on in shown.items() if on]}"
    at.radio(key=prompt.key).set_value(prompt.prediction).run()
    at.button(key=f"{prompt.key}__reveal").click().run()
    ok(at)
    shown = prompt.shown(at)
    assert all(shown.values()), f"missing after Reveal: {[what for what, on in shown.items() if not on]}"
    grade = next((m.value for m in at.markdown if m.value.startswith("You said ")), "")
    assert grade.startswith(f"You said **{literal(prompt.prediction)}**; measured: "), grade
    expected = growth(at) if prompt.measured is growth else prompt.measured(dirs)
    assert expected in grade, (expected, grade)
    if prompt.answer is not None:
        assert f"so the answer here is **{literal(prompt.answer)}**" in grade, grade


def test_a_prompt_hides_again_when_its_question_changes(app, dirs):
    at = app(MATHS, maths_step="3 · Scores and softmax")
    at.button(key="predict_top__reveal").click().run()
    assert "chart_pattern" in chart_keys(at)
    at.radio(key="head").set_value(1).run()  # another head: another question
    ok(at)
    assert "chart_pattern" not in chart_keys(at) and "Which key n′ will query" in page_text(at)
    assert not any(m.value.startswith("No prediction was made") for m in at.markdown)


def test_revealing_without_a_prediction_or_a_measurement_says_what_is_missing(app, dirs):
    at = app(COST, max_n="128")
    at.button(key="predict_double__reveal").click().run()
    ok(at)
    grade = next(m.value for m in at.markdown if m.value.startswith("No prediction was made"))
    assert "nothing is measured yet" in grade and "cost_chart" not in chart_keys(at)
    measure(at)
    ok(at)
    assert "cost_chart" in chart_keys(at) and growth(at) in page_text(at)


def test_the_cross_attention_of_free_generation_waits_for_both_prompts(app, dirs):
    at = app(CROSS)
    at.button(key="predict_align__reveal").click().run()
    ok(at)
    assert "cross_forced" in chart_keys(at) and "cross_free" not in chart_keys(at)
    assert not any(shows(fig, "free generation: reads its own words") for fig in figures(at))
    at.button(key="predict_free__reveal").click().run()
    ok(at)
    assert {"cross_forced", "cross_free", "decoder_free"} <= chart_keys(at)
