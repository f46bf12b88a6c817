"""Agreement outside the grammar's templates (issue 34): probes in the grammar's own words, in constructions
core.data.grammar never generates, so a model that agrees only inside its training templates shows it.

The grammar puts at most one modifier (a PP or a relative clause) after a subject of two or more words, at most two
adjectives in a noun phrase, a name only as a whole subject or object, and every sentence starts with its subject.
Each construction here breaks one of those rules (tests/test_grammar_probes.py checks that the training corpus
never holds it):

* ``pp_chain``: two PPs after the subject, both of the other number ("the key near the boxes behind the cats is");
* ``names``: a name as the attractor ("the dogs near tom are") or as a subject with a modifier ("tom near the boxes
  is"), half each;
* ``preposed_pp``: the PP before the subject ("near the boxes the key is");
* ``adjective_string``: three adjectives before the subject's noun, then a PP of the other number;
* ``pp_then_object_rc``: a PP of the other number, then an object relative clause whose noun is of the other number
  too ("the key near the boxes that the children love is").

Each probe is a grammar.AgreementExample in the present tense (every verb marks number), subjects singular and plural
half each, so always choosing one form scores one half (the majority baselines are reported beside each accuracy).
"""

from __future__ import annotations

import random
from collections.abc import Callable

from core.data import grammar
from core.data.grammar import AgreementExample, Number

SEED = 34
CONSTRUCTIONS = ("pp_chain", "names", "preposed_pp", "adjective_string", "pp_then_object_rc")
OTHER: dict[Number, Number] = {"sg": "pl", "pl": "sg"}
Built = tuple[tuple[str, ...], str]  # the words before the verb, and the attractor (the nearest other-number noun)


def _noun_phrase(rng: random.Random, number: Number, adjectives: int = 0) -> tuple[str, ...]:
    return grammar.noun_phrase(rng, number, adjectives, max(adjectives, 1)).words


def _pp(rng: random.Random, number: Number) -> tuple[str, ...]:
    return rng.choice(grammar.PREPOSITIONS), *_noun_phrase(rng, number)


def _present(verb: grammar.Verb, number: Number) -> str:
    return verb.sg if number == "sg" else verb.pl


def _pp_chain(rng: random.Random, number: Number) -> Built:
    second = _pp(rng, OTHER[number])
    return (*_noun_phrase(rng, number), *_pp(rng, OTHER[number]), *second), second[-1]


def _names(rng: random.Random, number: Number) -> Built:
    name = rng.choice(tuple(grammar.NAMES))
    if number == "pl":  # a plural subject, a name as the attractor
        return (*_noun_phrase(rng, "pl"), rng.choice(grammar.PREPOSITIONS), name), name
    pp = _pp(rng, "pl")  # a name as the subject, with a modifier
    return (name, *pp), pp[-1]


def _preposed_pp(rng: random.Random, number: Number) -> Built:
    pp = _pp(rng, OTHER[number])
    return (*pp, *_noun_phrase(rng, number)), pp[-1]


def _adjective_string(rng: random.Random, number: Number) -> Built:
    pp = _pp(rng, OTHER[number])
    return (*_noun_phrase(rng, number, adjectives=3), *pp), pp[-1]


def _pp_then_object_rc(rng: random.Random, number: Number) -> Built:
    inner = _noun_phrase(rng, OTHER[number])
    clause = (grammar.RELATIVIZER, *inner, _present(rng.choice(grammar.TRANSITIVE_VERBS), OTHER[number]))
    return (*_noun_phrase(rng, number), *_pp(rng, OTHER[number]), *clause), inner[-1]


_BUILDERS: dict[str, Callable[[random.Random, Number], Built]] = {
    "pp_chain": _pp_chain, "names": _names, "preposed_pp": _preposed_pp, "adjective_string": _adjective_string,
    "pp_then_object_rc": _pp_then_object_rc}


def _predicate(rng: random.Random, number: Number) -> tuple[str, tuple[str, ...]]:
    """The main verb (present tense, so its number shows) and what follows it, as the grammar ends a sentence."""
    if rng.random() < 0.5:
        return ("is" if number == "sg" else "are"), (rng.choice(grammar.ADJECTIVES), ".")
    return _present(rng.choice(grammar.INTRANSITIVE_VERBS), number), (".",)


def agreement_probes(construction: str, n: int, seed: int = SEED) -> list[AgreementExample]:
    """n probes of one construction (CONSTRUCTIONS), singular and plural subjects alternating, the same every time."""
    if construction not in _BUILDERS:
        raise ValueError(f"unknown construction {construction!r}; the constructions are {', '.join(CONSTRUCTIONS)}")
    rng = random.Random(f"{seed}-{construction}")
    probes = []
    for k in range(n):
        number: Number = "sg" if k % 2 == 0 else "pl"
        before, attractor = _BUILDERS[construction](rng, number)
        verb, after = _predicate(rng, number)
        other = grammar.SINGULAR_VERBS[verb] if number == "sg" else grammar.PLURAL_VERBS[verb]
        probes.append(AgreementExample(prefix=" ".join(before), correct=verb, wrong=other, attractor=attractor,
                                       suffix=" ".join(after)))
    return probes


def is_singular(probe: AgreementExample) -> bool:
    """Whether the probe's subject is singular (its agreeing verb is a singular form)."""
    return probe.correct in grammar.SINGULAR_VERBS
