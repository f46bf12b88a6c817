"""Training several runs at a time (python -m core.train --jobs N): each preset x seed a worker process of its own,
then each seeded preset's median shipped, the same models as training them one after another."""

from __future__ import annotations

from pathlib import Path

import torch

from core.model.registry import MODELS_DIR
from core.training.evaluate import SEEDS_DIR
from core.training.train import Preset, ship_median, train_preset, train_seed


def _job(preset: Preset, seed: int | None, out_dir: Path, seeds_dir: Path, device: str, threads: int) -> dict | Path:
    """One run of train_in_parallel, in a worker process: a seed's figures (train_seed), or a one-run preset's card."""
    if threads:
        torch.set_num_threads(threads)
    if seed is None:
        return train_preset(preset, out_dir, progress=False, device=device)
    return train_seed(preset, seed, seeds_dir, progress=False, device=device, source_dir=out_dir)


def train_in_parallel(runs: list[tuple[Preset, tuple[int, ...]]], jobs: int, out_dir: Path = MODELS_DIR,
                      seeds_dir: Path = SEEDS_DIR, device: str = "cpu", threads: int = 1) -> list[Path]:
    """Train every (preset, seeds) of `runs`, `jobs` runs at a time in worker processes (each seed of a preset is a
    run of its own), then ship each seeded preset's median seed: the same models as one after another, since a run
    depends only on its recipe and seed (on a GPU, several processes share the device). A preset that starts from
    another of the runs (init_from) trains after it has shipped. Returns the cards' paths."""
    names = {preset.name for preset, _ in runs}
    waves = [[run for run in runs if run[0].init_from not in names], [run for run in runs if run[0].init_from in names]]
    cards = {}
    for wave in waves:
        cards.update(_train_wave(wave, jobs, out_dir, seeds_dir, device, threads))
    return [cards[preset.name] for preset, _ in runs]


def _train_wave(runs: list[tuple[Preset, tuple[int, ...]]], jobs: int, out_dir: Path, seeds_dir: Path, device: str,
                threads: int) -> dict[str, Path]:
    """train_in_parallel's runs that do not depend on one another: each preset's shipped card, by name."""
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    if not runs:
        return {}
    with ProcessPoolExecutor(jobs, mp_context=get_context("spawn")) as pool:
        futures = {(preset.name, seed): pool.submit(_job, preset, seed, out_dir, seeds_dir, device, threads)
                   for preset, seeds in runs for seed in (seeds or (None,))}
        done = {key: future.result() for key, future in futures.items()}
    return {preset.name: ship_median(preset, {seed: done[preset.name, seed] for seed in seeds}, out_dir, seeds_dir)
            if seeds else done[preset.name, None] for preset, seeds in runs}
