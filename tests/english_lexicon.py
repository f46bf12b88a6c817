"""A small hand-written Lexicon for the tests of the broad-English generator and its evaluation: every word is
distinct, so a sentence can be read back word by word."""

from __future__ import annotations

from core.data.lexicon import Adjective, Lexicon, Noun, Verb

NOUNS = (Noun("dog", "dogs", "animal"), Noun("cat", "cats", "animal"), Noun("teacher", "teachers", "person"),
         Noun("child", "children", "person"), Noun("street", "streets", "place"), Noun("river", "rivers", "place"),
         Noun("key", "keys", "object"), Noun("box", "boxes", "object"),
         Noun("idea", "ideas", "abstract"))
VERBS = (Verb("chase", "chases", "chased", "chasing", True), Verb("see", "sees", "saw", "seeing", True),
         Verb("sleep", "sleeps", "slept", "sleeping", False), Verb("run", "runs", "ran", "running", False))
ADJECTIVES = (Adjective("old", "any"), Adjective("red", "any"), Adjective("tired", "animate"),
              Adjective("hungry", "animate"), Adjective("wide", "place"), Adjective("busy", "place"))
LEXICON = Lexicon(NOUNS, VERBS, ADJECTIVES, names=(("Sarah", "female"), ("Omar", "male")), cities=("London",),
                  prepositions=("near", "behind", "next to"))
