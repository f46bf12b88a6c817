"""The recording store: what to record (a Setting), one store of recordings that every session shares without
copies (core/serving/lru.py), and the one recorder thread that computes them, shared fairly between sessions
(core/serving/scheduler.py).
"""

from __future__ import annotations

import functools
import hashlib
import weakref
from dataclasses import dataclass, replace

import numpy as np
import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from core.model import registry
from core.model.checkpoint import ModelCard
from core.model.config import ConfigError
from core.model.masks import MaskSpec
from core.model.recording import Recording
from core.model.run import TextInputError, length_refusal, record_text
from core.serving.allocator import MemorySweeper, prefault
from core.serving.lru import ByteLRU
from core.serving.scheduler import CHEAP_COST, FairScheduler, Superseded
from pages.ui.models import get_model, models_dir
from pages.ui.safety import show_input_error


@dataclass(frozen=True)
class Setting:
    """What to run: a bundled model with its own mask and encoding (None) or an ablated one."""

    model: str
    mask: str | None = None  # None: the model's own; else a mask kind
    window: int = 8  # sliding-window width, with mask="window"
    stride: int = 4  # stride, with mask="strided"
    pe: str | None = None  # None: the model's own; else a position encoding

    def normalised(self) -> Setting:
        """Irrelevant parameters set to 0, so equal settings cache and compare equal."""
        return replace(self, window=self.window if self.mask == "window" else 0,
                       stride=self.stride if self.mask == "strided" else 0)

    def describe(self, card: ModelCard | None = None) -> str:
        """"model · mask … · encoding …", each once; "(own)" marks the model's own (known from its card)."""
        parts = [self.model]
        if self.mask is not None:
            parts.append({"window": f"mask window({self.window})", "strided": f"mask strided({self.stride})"}
                         .get(self.mask, f"mask {self.mask}"))
        elif card is not None:
            parts.append(f"mask {card.config.mask} (own)")
        if self.pe is not None:
            parts.append(f"encoding {self.pe}")
        elif card is not None:
            parts.append(f"encoding {card.config.pos_encoding} (own)")
        return " · ".join(parts)


RESULTS_MB = 256  # every session's recordings together: about 1 MB at 64 tokens, 53 MB at 512 (lm-rope-long)
# a recording or figure no one has asked for this long goes at the memory sweeper's next sweep (a short text's
# recording is recomputed in tens of ms; a 1000-token one in about a second)
RESULTS_IDLE_SECONDS = 30.0


@st.cache_resource
def _results() -> ByteLRU:
    """One store for the process: sessions share recordings, none is copied (see core/serving/lru.py)."""
    return ByteLRU(RESULTS_MB * 2**20)


def _feed(digest, value) -> None:
    """Hash `value` whole: an array by its dtype, shape and every byte (its repr elides the middle)."""
    if isinstance(value, np.ndarray):
        digest.update(f"array {value.dtype.str} {value.shape}".encode())
        digest.update(np.ascontiguousarray(value).tobytes())
    elif isinstance(value, (list, tuple)):
        digest.update(f"{type(value).__name__} {len(value)}".encode())
        for item in value:
            _feed(digest, item)
    elif value is None or isinstance(value, (str, int, float, bool, np.generic)):
        digest.update(repr(value).encode("utf-8", "surrogatepass"))
    else:  # an object's repr may leave out what it holds
        raise TypeError(f"cannot key a shared result by a {type(value).__name__}")


def store_key(*parts) -> bytes:
    """A fixed-size key for a call: the hash of its parts whole (scalars, tuples and lists of them, arrays by every
    byte), so a key never holds the text it was called with."""
    digest = hashlib.blake2b(digest_size=32)
    _feed(digest, parts)
    return digest.digest()


def shared_result(function):
    """Cache `function`'s results by its arguments in the process's ByteLRU: like st.cache_data, but a hit hands
    out the stored object itself instead of unpickling a copy (0.3 s for a 512-token recording). What it returns
    must not be changed by its callers: a Recording's arrays are read-only. Callers refuse over-long texts first
    (length_refusal): a refusal need not be stored."""
    @functools.wraps(function)
    def cached(*args):
        return _results().get_or_compute(store_key(function.__module__, function.__qualname__, args),
                                         lambda: function(*args))
    return cached


@dataclass(frozen=True)
class _Sized:
    """A stored figure with the bytes the store counts for it (a figure's own size is not known without
    serialising it: twice the arrays it was drawn from, plus a little)."""

    value: object
    nbytes: int


def shared_figure(function):
    """Cache a figure function's results by its arguments, arrays included, in the process's ByteLRU: the students
    of a class who look at one view at once draw it once (plotly builds a figure in tens of ms; 30 students revealing
    together queued them). The figure is shared, so callers must not change it (presenter mode draws a copy)."""
    @functools.wraps(function)
    def cached(*args, **kwargs):
        key = store_key(function.__module__, function.__qualname__, args, sorted(kwargs.items()))
        arrays = sum(value.nbytes for value in (*args, *kwargs.values()) if isinstance(value, np.ndarray))
        return _results().get_or_compute(key, lambda: _Sized(function(*args, **kwargs), 2 * arrays + 16_384)).value
    return cached


@st.cache_resource
def recorder() -> FairScheduler:
    """The threads that run the recorded forward passes the store keeps, for every session, one pass waiting per
    session and the cheapest first, a second thread for cheap passes only (core/serving/scheduler.py); memory is
    given back after a spike of long texts (core/serving/allocator.py's MemorySweeper), with the store's entries no
    one has asked for in RESULTS_IDLE_SECONDS.
    Its memory is faulted in up front, the store's budget of it (core/serving/allocator.py: at 512 tokens a pass took
    200 ms, 150 ms of them page faults, while the store was filling; glibc may give some of it back later, see
    there); sessions' scripts run in ever new threads, with other allocator arenas, where pages freed by one are not
    at hand for the next."""
    scheduler = FairScheduler("recorder")

    def sweep() -> None:  # what a spike of long texts left: its recordings once idle, then the memory they freed
        _results().drop_idle(RESULTS_IDLE_SECONDS)
        MemorySweeper.collect_and_trim()
    MemorySweeper(sweep=sweep)
    # costed past the cheap lane's limit: the main worker runs it, whose arena then holds the pages for long passes
    scheduler.submit("", CHEAP_COST + 1, lambda: prefault(RESULTS_MB * 2**20))
    return scheduler


def session_key() -> str:
    """This session's id ("" outside a running script)."""
    ctx = get_script_run_ctx()
    return ctx.session_id if ctx is not None else ""


def pass_cost(n_layers: int, text: str) -> float:
    """The recorder's cost of recording `text`: layers x tokens², tokens estimated by words (the bundled models read
    words)."""
    return n_layers * (len(text.split()) + 1) ** 2


def record_in_turn(work, cfg, text: str):
    """`work()` run in the recorder in this session's turn (a pass of a model of config `cfg` on `text`); while the
    session's previous pass is still running, a note says that this one comes after it (the note goes once it has
    run). A pass superseded by a newer one of this session (its page was rerun meanwhile) stops this obsolete run
    quietly: nothing stored, no error shown."""
    scheduler = recorder()
    cost = pass_cost(cfg.n_layers, text)
    session = session_key()
    note = st.empty() if session and scheduler.runs_for(session) else None
    if note is not None:
        note.info("Still working on your last request: this one runs when it ends.", icon=":material/hourglass_top:")
    try:
        return scheduler.submit(session, cost, work).result()
    except Superseded:
        st.stop()
    finally:
        if note is not None:
            note.empty()


@shared_result
def _recording(model: str, text: str, mask: str | None, window: int, stride: int, pe: str | None,
               directory: str) -> Recording | str:
    """The recording (computed in the recorder thread), or the one-line message saying why the text or setting
    cannot be run."""
    try:
        transformer, card = get_model(model, directory)
        spec = None
        if mask is not None:
            cfg = transformer.cfg
            spec = MaskSpec(mask, window or cfg.window, cfg.is_causal, stride or cfg.stride)
        return record_in_turn(lambda: record_text(transformer, text, mask=spec, pe=pe, card=card), transformer.cfg,
                              text)
    except (TextInputError, ConfigError, registry.UnknownModelError, ValueError) as error:
        return str(error)  # ValueError: e.g. a length the model refuses


SLOW_SECONDS = 1.0  # a forward pass slower than this is named as the slow part of a change


def slow_note(recording: Recording) -> None:
    """What is slow, when a change costs more than SLOW_SECONDS (a large pretrained model, a long text): the forward
    pass, and whether its recording is too large for the store that keeps recordings between clicks."""
    seconds = recording.meta.get("seconds", 0.0)
    too_big = recording.nbytes > RESULTS_MB * 2 ** 20
    if seconds < SLOW_SECONDS and not too_big:
        return
    cfg = recording.config
    note = (f"Computing this recording took {seconds:.1f} s: the forward pass of {cfg.n_layers} layers × "
            f"{cfg.n_heads} heads (D = {cfg.d_model}) on {recording.n_tokens} tokens is the slow part of every "
            "change; a shorter text is faster.")
    if too_big:
        note += (f" Its {recording.nbytes / 2 ** 20:.0f} MB of recorded arrays are more than the {RESULTS_MB} MB the "
                 "server keeps, so each click computes it again.")
    st.caption(note, help="Every number shown is from this forward pass, recomputed for each change.")


def get_recording(setting: Setting, text: str) -> Recording | str:
    """Cached by (model name, text, mask kind, window, stride, pe): the Recording or an error message (an
    over-long text's, before the store sees it)."""
    refusal = length_refusal(text)
    if refusal:
        return refusal
    s = setting.normalised()
    return _recording(s.model, text, s.mask, s.window, s.stride, s.pe, str(models_dir()))


class Recorded:
    """A recording as a fragment's argument: what it is of (a setting and a text) and a weak reference to it.
    Streamlit keeps a fragment's arguments for as long as its session lives, and two minutes after its browser has
    gone (server.disconnectedSessionTTL): given the Recording itself, every session held its last one, 156 MB for a
    990-word text on lm-rope-long, and four students sending such texts held a server at 1.9 GB after they had left
    (issue 36). Only the store keeps recordings now, within its budget; `get` hands the same object while anything
    holds it (the run that drew it, the store), else asks the store again (recomputed if the store let it go)."""

    def __init__(self, setting: Setting, text: str, recording: Recording):
        self.setting, self.text = setting, text
        self._recording = weakref.ref(recording)

    def get(self) -> Recording:
        """The recording; where it can no longer be made (its model was removed meanwhile), the page says why and
        this run stops (LookupError outside a run)."""
        recording = self._recording() or get_recording(self.setting, self.text)
        if isinstance(recording, str):
            show_input_error(recording)
            st.stop()  # ends a page's run; outside one (a download's file, made on click) it returns
            raise LookupError(recording)
        return recording
