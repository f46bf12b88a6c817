"""Agreement outside the grammar's templates (issue 34, core.data.grammar_probes): every probe is in the grammar's
words, in a construction the training corpus never holds, balanced in number, and scored beside its baselines."""

from __future__ import annotations

import re

import pytest
import torch

from core.data import grammar, grammar_probes
from core.tokenizers.words import TextTokenizer
from core.training.evaluate import out_of_template_agreement

N = 40


@pytest.fixture(scope="module")
def corpus() -> str:
    """Training documents as the bundled LMs read them (stand-alone openings included), sentence by sentence."""
    return "\n".join(grammar.generate_documents(3000, grammar.TRAIN_SEED)).replace(" . ", " .\n")


def _pattern(*kinds: str) -> re.Pattern:
    """A regular expression for a run of words, one from each kind of grammar.lexicon_by_kind ("X?" optional)."""
    lexicon = grammar.lexicon_by_kind()
    parts = []
    for kind in kinds:
        optional = kind.endswith("?")
        words = "|".join(lexicon[kind.rstrip("?")])
        parts.append(f"(?:(?:{words}) )?" if optional else f"(?:{words}) ")
    return re.compile("(?:^| )" + "".join(parts), re.M)


NOUN = ("determiners", "adjectives?", "adjectives?")


def test_the_probes_speak_the_grammars_words_and_alternate_singular_and_plural():
    tokenizer = TextTokenizer()
    for construction in grammar_probes.CONSTRUCTIONS:
        probes = grammar_probes.agreement_probes(construction, N)
        assert probes == grammar_probes.agreement_probes(construction, N), "the same every time"
        assert [grammar_probes.is_singular(p) for p in probes] == [k % 2 == 0 for k in range(N)]
        for probe in probes:
            assert not any(tokenizer.encode(f"{probe.prefix} {probe.correct} {probe.suffix}").is_unknown)
            assert {probe.correct, probe.wrong} in ({s, p} for s, p in grammar.SINGULAR_VERBS.items())
            assert probe.attractor in probe.prefix.split()


def test_no_probe_construction_is_in_the_training_corpus(corpus):
    """Each construction breaks a rule the generator keeps, so its signature never occurs in training text."""
    noun = NOUN
    signatures = {
        "preposed_pp": re.compile(f"^(?:{'|'.join(grammar.PREPOSITIONS)}) ", re.M),  # a sentence opening with a PP
        "names": _pattern("prepositions", "names"),  # a name inside a PP
        "adjective_string": _pattern("determiners", "adjectives", "adjectives", "adjectives"),
        "pp_chain": _pattern(*noun, "nouns, singular", "prepositions", *noun, "nouns, plural", "prepositions"),
    }
    for name, signature in signatures.items():
        assert not signature.search(corpus), name
    # the same patterns one step short of each construction do occur: the searches can find what they look for
    assert _pattern(*noun, "nouns, singular", "prepositions", *noun, "nouns, plural").search(corpus)
    assert _pattern("determiners", "adjectives", "adjectives").search(corpus)
    assert _pattern("prepositions", "determiners").search(corpus)
    assert not re.search(f"^(?:{'|'.join(grammar.NAMES)}) (?:{'|'.join(grammar.PREPOSITIONS)}) ", corpus, re.M), \
        "a name as a subject never takes a modifier"
    for construction, signature in signatures.items():  # the probes themselves match their signature
        if construction != "names":
            assert any(signature.search(p.prefix) for p in grammar_probes.agreement_probes(construction, N)), \
                construction


class _Always:
    """A stand-in model that always prefers the singular verb forms (or the plural ones)."""

    def __init__(self, tokenizer: TextTokenizer, singular: bool):
        from types import SimpleNamespace
        self.cfg = SimpleNamespace(head="next_token")
        self.preferred = [tokenizer.token_to_id(s if singular else p) for s, p in grammar.SINGULAR_VERBS.items()]
        self.vocabulary = tokenizer.vocab_size

    def __call__(self, ids):
        from types import SimpleNamespace
        logits = torch.zeros(1, ids.shape[1], self.vocabulary)
        logits[..., self.preferred] = 1.0
        return SimpleNamespace(logits=logits)


def test_a_model_that_never_reads_the_subject_scores_the_baseline():
    tokenizer = TextTokenizer()
    for singular in (True, False):
        rows = out_of_template_agreement(_Always(tokenizer, singular), tokenizer, n=N)
        assert set(rows) == {*grammar_probes.CONSTRUCTIONS, "pooled"}
        for row in rows.values():
            assert row["accuracy"] == row["always_singular" if singular else "always_plural"] == 0.5
        assert rows["pooled"]["n"] == N * len(grammar_probes.CONSTRUCTIONS)
