"""The models: the bundled ones (every NAME.json card under assets/models) and the user's saved runs (every
NAME/NAME.json under the user directory, written by core/training/live/), read by the app and the command line.

The user directory is $ATTENTION_LAB_USER_DIR, else ~/.attention_lab/runs. A run is saved into a folder of its
own, written under a temporary name and renamed into place, so a half-written run is never listed; folders whose
name starts with "." are such temporary ones (leftovers of a killed save are removed when a process first reads the
directory). A bundled model's name wins over a user run's of the same name.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import threading
import time
from functools import lru_cache
from pathlib import Path

from core.model import pretrained
from core.model.checkpoint import ModelCard, load_checkpoint, read_card
from core.model.transformer import Transformer

ASSETS = Path(__file__).resolve().parents[2] / "assets"
MODELS_DIR = ASSETS / "models"
DEFAULT_TEXT_MODEL = "english-long"
TEXT_TASKS = ("grammar-lm", "grammar-mlm", "english-lm", "english-mlm", "reversal", "copy", "sort")
USER_DIR_ENV = "ATTENTION_LAB_USER_DIR"
USER_RUN_ORIGIN = "live training"  # card.training["origin"] of a saved user run
RUN_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,47}")  # a user run's name: also its folder's and files' names


class UnknownModelError(KeyError):
    def __str__(self) -> str:
        return (f"no bundled model or saved run is called {self.args[0]!r}; "
                "`python -m core.record --list` lists the bundled ones")


def list_cards(directory: Path = MODELS_DIR) -> list[ModelCard]:
    """Every bundled model's card, sorted by name. Read once and kept while no card file changes (each holds its
    loss curve and held-out figures: reading all of them cost every page's run about 35 ms); callers must not
    change the cards."""
    paths = sorted(directory.glob("*.json"))
    stats = [path.stat() for path in paths]
    stamp = tuple((path.name, stat.st_mtime_ns, stat.st_size) for path, stat in zip(paths, stats))
    with _cards_lock:
        cached = _bundled.get(directory)
        if cached is not None and cached[0] == stamp:
            return list(cached[1])
    cards = [read_card(path) for path in paths]
    with _cards_lock:
        _bundled[directory] = (stamp, cards)
    return list(cards)


def user_dir() -> Path:
    """Where saved runs live: $ATTENTION_LAB_USER_DIR, else ~/.attention_lab/runs (never assets/)."""
    override = os.environ.get(USER_DIR_ENV)
    return Path(override).expanduser() if override else Path.home() / ".attention_lab" / "runs"


def user_card_path(name: str) -> Path:
    """NAME/NAME.json in the user directory (which need not exist); a name that is not a run name is refused."""
    if not RUN_NAME.fullmatch(name):
        raise UnknownModelError(name)
    return user_dir() / name / f"{name}.json"


def _complete(path: Path) -> bool:
    """A saved run's card has its weights beside it."""
    return path.is_file() and path.with_suffix(".safetensors").is_file()


TEMPORARY_SUFFIX = ".tmp"  # a run being written: .NAME.xxxxxxxx.tmp, renamed into place when whole
LEFTOVER_SECONDS = 600  # a temporary folder older than this was left by a save that died (a SIGKILL mid-save)


def remove_leftovers(root: Path, older_than: float = LEFTOVER_SECONDS) -> list[str]:
    """Remove the temporary folders (.NAME.xxxxxxxx.tmp) that saves killed mid-way left in `root`, if older than
    `older_than` seconds (a save under way in another replica sharing the folder keeps its own); their names."""
    removed = []
    now = time.time()
    for folder in root.glob(f".*{TEMPORARY_SUFFIX}") if root.is_dir() else ():
        try:
            if folder.is_dir() and now - folder.stat().st_mtime > older_than:
                shutil.rmtree(folder)
                removed.append(folder.name)
        except OSError:
            continue
    return removed


_cards_lock = threading.Lock()
_cards: dict[Path, tuple[int, list[ModelCard]]] = {}  # user dir -> (its mtime in ns, its cards)
_bundled: dict[Path, tuple[tuple, list[ModelCard]]] = {}  # models dir -> (its cards' names, mtimes, sizes; cards)


SHARED_FILE = ".shared"  # in the user directory: the saved runs a teacher shares with every browser, one a line


def shared_run_names(root: Path | None = None) -> set[str]:
    """The saved runs every browser's menu lists (set_shared writes them)."""
    try:
        return set((root or user_dir()).joinpath(SHARED_FILE).read_text().split())
    except OSError:
        return set()


def set_shared(name: str, shared: bool) -> None:
    """Share a saved run with every browser, or stop sharing it. The list is written beside and renamed into place,
    which changes the user directory's modification time: every replica reads the cards again (user_cards)."""
    root = user_dir()
    names = shared_run_names(root) - {name} | ({name} if shared else set())
    temporary = root / f"{SHARED_FILE}.{os.getpid()}{TEMPORARY_SUFFIX}"
    temporary.write_text("".join(f"{n}\n" for n in sorted(names)))
    temporary.replace(root / SHARED_FILE)
    forget_user_cards()


def _read_user_cards(root: Path) -> list[ModelCard]:
    shared = shared_run_names(root)
    cards = []
    for folder in sorted(root.iterdir()) if root.is_dir() else ():
        path = folder / f"{folder.name}.json"
        if RUN_NAME.fullmatch(folder.name) and _complete(path):
            try:
                card = read_card(path)
            except (OSError, ValueError, KeyError, TypeError):
                continue
            card.training["shared"] = folder.name in shared
            cards.append(card)
    return cards


def user_cards() -> list[ModelCard]:
    """Every saved user run's card, sorted by name; unreadable ones are left out (they cannot be opened). Read
    once and kept while the user directory is unchanged (a save, here or in a replica sharing it, renames a folder
    into it and so changes its modification time): a render costs one stat, not a read of every card. The first
    read of a directory in a process removes the leftovers of killed saves."""
    root = user_dir()
    try:
        stamp = root.stat().st_mtime_ns
    except OSError:
        stamp = -1
    with _cards_lock:
        cached = _cards.get(root)
        if cached is not None and cached[0] == stamp:
            return list(cached[1])
        if cached is None:
            remove_leftovers(root)
        cards = _read_user_cards(root)
        _cards[root] = (stamp, cards)
        return list(cards)


def forget_user_cards() -> None:
    """Read the saved runs' cards again on the next user_cards() (called when a run is saved)."""
    with _cards_lock:
        for root in _cards:
            _cards[root] = (-2, _cards[root][1])


def run_bytes(name: str) -> int:
    """The bytes a saved run's folder takes on disk (0 when it is gone)."""
    folder = user_dir() / name
    try:
        return sum(path.stat().st_size for path in folder.iterdir() if path.is_file())
    except OSError:
        return 0


def is_user_run(card: ModelCard) -> bool:
    return card.training.get("origin") == USER_RUN_ORIGIN


def text_model_names(directory: Path = MODELS_DIR) -> list[str]:
    return [card.name for card in list_cards(directory) if card.task in TEXT_TASKS]


def card_path(name: str, directory: Path = MODELS_DIR) -> Path:
    """The card of the bundled model `name` in `directory`, else of the saved user run `name`."""
    path = directory / f"{name}.json"
    if path.is_file() and path.parent == directory:
        return path
    path = user_card_path(name)
    if not _complete(path):
        raise UnknownModelError(name)
    return path


@lru_cache(maxsize=32)
def load_model(name: str, directory: Path = MODELS_DIR) -> tuple[Transformer, ModelCard]:
    """A bundled model (or saved user run, or pretrained "hf:…" model) in eval mode, loaded once per process.
    Saved runs are never overwritten (core/training/live/ refuses a taken name), so a cached one stays the one on disk."""
    if pretrained.is_pretrained(name):
        opened = pretrained.load(pretrained.source_of(name))
        return opened.model, opened.card
    return load_checkpoint(card_path(name, directory))


PRETRAINED_TASKS = ("pretrained-lm", "pretrained-mlm")  # text models a user has (core/model/pretrained.py)
_pretrained_lock = threading.Lock()
_pretrained: dict[str, tuple[float, list[ModelCard]]] = {}  # "" -> (when read, the cached models' cards)
PRETRAINED_SECONDS = 60.0  # how long the list of cached pretrained models is kept before the cache is scanned again


def pretrained_cards(opened: tuple[str, ...] = ()) -> list[ModelCard]:
    """The cards of the pretrained models in the local Hugging Face cache (rescanned every PRETRAINED_SECONDS),
    then of the sources in `opened` (folders or names a user opened); [] without `transformers`. A source that
    cannot be read is left out (opening it says why)."""
    if not pretrained.available():
        return []
    with _pretrained_lock:
        stamp, cards = _pretrained.get("", (-math.inf, []))
        if time.monotonic() - stamp > PRETRAINED_SECONDS:
            cards = _readable_cards(pretrained.cached_sources())
            _pretrained[""] = (time.monotonic(), cards)
    names = {card.name for card in cards}
    return cards + _readable_cards([source for source in opened if pretrained.PREFIX + source not in names])


def _readable_cards(sources: list[str]) -> list[ModelCard]:
    cards = []
    for source in sources:
        try:
            cards.append(pretrained.card_for(source))
        except pretrained.PretrainedError:
            continue
    return cards


QUALITY_WORDS = {  # a headline metric's key -> (its name for a class, whether it is a fraction); most telling first
    "agreement_out_of_template": ("agreement outside the templates", True),
    "minimal_pairs": ("minimal pairs", True), "agreement": ("agreement", True), "ppl": ("perplexity", False),
    "masked_acc": ("masked-token accuracy", True),
    "exact": ("exact match", True), "worst_set": ("worst set", True),
    "worst_condition": ("worst drawing or photo condition", True), "accuracy": ("accuracy", True),
    "templates": ("drawing templates right", True), "induction_score": ("induction score", True),
    "mirrored_attention": ("attention on the mirrored token", True), "rollout_on_object": ("rollout on the object", True),
    "it_referent_head": ("“it” head on its referent", True),
}


PICKER_WORDS = {"agreement_out_of_template": "agrees"}  # shorter, so the picker fits presenter mode
# Figures a lesson asks the class to predict (*What does “it” refer to?*): in the card and the README, not in the
# sidebar that every page shows before its Reveal
LESSON_ANSWERS = {"it_referent_head"}


def _rank(key: str) -> int:
    return list(QUALITY_WORDS).index(key) if key in QUALITY_WORDS else len(QUALITY_WORDS)


LOWER_IS_BETTER = {"ppl"}  # every other headline figure is better higher


def ranked_figures(headline: dict[str, float]) -> list[str]:
    """The headline's keys, the most telling first (QUALITY_WORDS' order): seeds are ranked by the first, and a tie
    is broken by the next."""
    return sorted(headline, key=_rank)


def quality(card: ModelCard, first_only: bool = False) -> str:
    """The card's held-out quality in words, most telling first ("agreement 94% · perplexity 17.9"), "" when it was
    not evaluated. With the spread over training seeds where the card has it (metrics["spread"]: the standard
    deviation of each headline figure over the seeds). first_only: the main figure alone, without its spread, under
    its PICKER_WORDS name where it has one."""
    headline, spread = card.metrics.get("headline", {}), card.metrics.get("spread", {})
    parts = []
    for key in sorted(headline, key=_rank):
        value = headline[key]
        if not isinstance(value, (int, float)) or key in LESSON_ANSWERS:
            continue
        name, fraction = QUALITY_WORDS.get(key, (key.replace("_", " "), False))
        name = PICKER_WORDS.get(key, name) if first_only else name
        shown = f"{value:.0%}" if fraction else f"{value:.1f}"
        if key in spread and not first_only:  # the main figure alone labels a picker, which must stay short
            shown += f" ± {_percent_spread(spread[key])}" if fraction else f" ± {spread[key]:.2g}"
        parts.append(f"{name} {shown}")
    return " · ".join(parts[:1] if first_only else parts)


def _percent_spread(sd: float) -> str:
    """A spread over seeds as a percentage: one decimal under a point, where whole points would show a real
    spread (say 0.3 points) as "0%"."""
    return f"{sd:.1%}" if 0 < sd < 0.01 else f"{sd:.0%}"


def describe(card: ModelCard) -> str:
    """One line for --list: name first, then task, encoding, mask, size and held-out quality."""
    cfg = card.config
    size = f"M={cfg.n_layers} H={cfg.n_heads} D={cfg.d_model}"
    quality = ", ".join(f"{key}={value:.3g}" if isinstance(value, float) else f"{key}={value}"
                        for key, value in card.metrics.get("headline", {}).items())
    return f"{card.name}\t{card.task}\tpe={cfg.pos_encoding}\tmask={cfg.mask}\t{size}\t{quality or 'not evaluated'}"
