"""Sentences of the animal/street kind written apart from the generator: other frames, verbs and adjectives.

english.it_sentence writes one frame ("The {animal} {didn't} {cross} the {place} {because it was too} {adjective}.")
from the lexicon's two lists of adjectives. These pairs are written by hand outside it: a main verb in the present
or with "refused to", a comma or "so" before the pronoun, an owner ("My dog"), nouns and adjectives the lists lack
(frozen, stormy, windy, overgrown, noisy, rough). In each pair the first ending makes "it" the first noun (an
animal), the second ending the second (a place or a thing); the last six name the place first, so that the order of
the nouns cannot stand in for their meaning. A head follows the meaning on a pair when its "it" attends more to the
first noun in the first sentence and to the second in the second (core.lessons.coreference.follows_meaning).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ItPair:
    frame: str  # with {} where the ending goes
    nouns: tuple[str, str]  # the animal, then the place or thing (in the sentence in either order)
    endings: tuple[str, str]  # the ending that makes "it" the animal, then the one that makes it the other noun

    def sentences(self) -> tuple[str, str]:
        return self.frame.format(self.endings[0]), self.frame.format(self.endings[1])


IT_PAIRS = (
    ItPair("The horse didn't jump into the lake because it was too {}.", ("horse", "lake"), ("tired", "frozen")),
    ItPair("The dog wouldn't swim across the river because it was too {}.", ("dog", "river"), ("scared", "deep")),
    ItPair("The cat did not walk into the garden, since it was too {}.", ("cat", "garden"), ("lazy", "overgrown")),
    ItPair("My dog refused to walk in the park because it was too {}.", ("dog", "park"), ("sleepy", "windy")),
    ItPair("The bird couldn't fly over the sea because it was too {}.", ("bird", "sea"), ("weak", "stormy")),
    ItPair("The cow wouldn't cross the bridge as it was too {}.", ("cow", "bridge"), ("frightened", "narrow")),
    ItPair("The puppy did not go into the room because it was so {}.", ("puppy", "room"), ("afraid", "dark")),
    ItPair("The fox didn't run across the field because it was too {}.", ("fox", "field"), ("exhausted", "muddy")),
    ItPair("Our kitten never goes into the house because it is too {}.", ("kitten", "house"), ("timid", "noisy")),
    ItPair("The elephant couldn't cross the stream because it was too {}.", ("elephant", "stream"), ("sick", "wide")),
    ItPair("The goat wouldn't enter the house because it was too {}.", ("goat", "house"), ("nervous", "crowded")),
    ItPair("The rabbit didn't cross the highway, because it was too {}.", ("rabbit", "highway"), ("slow", "busy")),
    ItPair("The wolf refused to walk up the road because it was too {}.", ("wolf", "road"), ("weak", "steep")),
    ItPair("The animal stopped at the road because it was too {}.", ("animal", "road"), ("tired", "busy")),
    ItPair("The duck did not cross the lake because it was too {}.", ("duck", "lake"), ("hungry", "rough")),
    ItPair("The pig wouldn't walk through the field because it was too {}.", ("pig", "field"), ("lazy", "flooded")),
    # the place first, the animal second: a head that takes the first noun for animate adjectives fails these
    ItPair("The road scared the horse because it was too {}.", ("horse", "road"), ("nervous", "busy")),
    ItPair("The river stopped the dog because it was too {}.", ("dog", "river"), ("tired", "deep")),
    ItPair("The street frightened the cat because it was so {}.", ("cat", "street"), ("timid", "crowded")),
    ItPair("The field slowed the pig down because it was too {}.", ("pig", "field"), ("lazy", "muddy")),
    ItPair("The highway worried the rabbit because it was so {}.", ("rabbit", "highway"), ("slow", "busy")),
    ItPair("The lake was too much for the duck because it was too {}.", ("duck", "lake"), ("weak", "rough")),
)
