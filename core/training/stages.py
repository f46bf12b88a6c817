"""The vision models' training stages (issue 35): a preset's later stages, each a Preset of its own.

The first stage is the preset's own recipe. A second (polish_steps, polish_stage) goes on from the first's weights
on POLISH_MIX at a tenth of the peak rate; a third (pen_steps, pen_stage) from the second's on PEN_MIX.
core.training.train runs them in order (later_stages) and records each in the card (polish_*, pen_*).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from core.data.images import PEN_MIX, POLISH_MIX

if TYPE_CHECKING:
    from core.training.train import Preset

POLISH_STEPS = 600  # the bundled vision models' second stage
POLISH_WARMUP = 50  # the second stage's fresh optimiser warms up again
POLISH_POOL = 60000  # images the second stage draws its batches from
PEN_STEPS = 1200  # their third stage
LATER_MIXES = {"polish": POLISH_MIX, "pen": PEN_MIX}  # the later stages' pools


def first_stage(preset: Preset) -> Preset:
    """The preset without its later stages."""
    return replace(preset, polish_steps=0, pen_steps=0)


def polish_stage(preset: Preset) -> Preset:
    """The second stage of a preset with polish_steps: that many steps on POLISH_MIX (the first stage's kinds, shapes
    drawn with the image page's pen and sketches to the finest hairline) at a constant tenth of the peak rate, where
    the first stage's cosine ends, with a fresh optimiser warmed up over POLISH_WARMUP steps."""
    return replace(preset, steps=preset.polish_steps, learning_rate=preset.learning_rate / 10, schedule="constant",
                   warmup=POLISH_WARMUP, pool_size=POLISH_POOL, polish_steps=0, pen_steps=0, later_stage="polish")


def pen_stage(preset: Preset) -> Preset:
    """The third stage of a preset with pen_steps: that many steps on PEN_MIX (more of the pen's drawings, the
    second stage's other kinds in its proportions) as the second stage runs, from the second stage's weights."""
    return replace(polish_stage(preset), steps=preset.pen_steps, later_stage="pen")


LATER_STAGES = {"polish": polish_stage, "pen": pen_stage}


def stages(preset: Preset) -> list[tuple[str, Preset]]:
    """The preset's stages in order, each as (its name, the preset trained up to and with it): the first, then the
    second and the third where the preset has them."""
    through = [("first", first_stage(preset))]
    if preset.polish_steps:
        through.append(("polish", replace(preset, pen_steps=0)))
    if preset.pen_steps:
        through.append(("pen", preset))
    return through
