"""Uploads one session may leave on the server: bounded. Streamlit's own upload store (MemoryUploadedFileManager)
keeps every file PUT to /_stcore/upload_file/<session>/<file id> in memory until its session shuts down, for any
file id the client makes up and from a page with no uploader: one session sent 200 uploads of 5 MB in 7 s and the
server held 1000 MB more, still after reruns, the session's close and its expiry (issue 36, finding 2). nginx's 6 MB
body limit bounds one upload, not their number.

install_upload_limits() turns the server's one store into a BoundedUploadedFileManager, in place (its class is
swapped: the upload routes, the session manager and every session hold that one object, so a new object would reach
none of them). That is this app's one monkeypatch of Streamlit; tests/test_upload_limits.py checks it against the
installed Streamlit (1.67). The bounded store

- accepts a file only under a file id it issued to that session (get_upload_urls: the uploader asks over the
  websocket before it PUTs), at most MAX_ISSUED outstanding per session;
- holds at most MAX_FILES files and MAX_SESSION_BYTES per session and MAX_TOTAL_BYTES for everyone (a PUT past
  them is refused: 413, or 503 when the server's share is full);
- drops a file that no widget has read (get_files) UNCLAIMED_SECONDS after it came, and every file of a session that
  is no longer connected.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Sequence

from starlette.exceptions import HTTPException
from streamlit import runtime
from streamlit.runtime.memory_uploaded_file_manager import MemoryUploadedFileManager
from streamlit.runtime.uploaded_file_manager import UploadedFileRec, UploadFileUrlInfo

from core.serving.image_io import MAX_UPLOAD_BYTES

MAX_ISSUED = 8  # file ids a session holds unused: the app's uploaders take one file each
MAX_FILES = 3  # files a session keeps at once: one picture, its replacement, one more under way
MAX_SESSION_BYTES = 3 * MAX_UPLOAD_BYTES + (1 << 20)
MAX_TOTAL_BYTES = 256 << 20  # every session's uploads together (50 sessions each holding one 5 MB picture)
UNCLAIMED_SECONDS = 60.0  # a file no uploader has read this long after it came was not sent by an uploader


class BoundedUploadedFileManager(MemoryUploadedFileManager):
    """Streamlit's in-memory upload store with the bounds of the module's docstring. Made by install_upload_limits
    from the server's store (or directly, in tests)."""

    def __init__(self, upload_endpoint: str) -> None:
        super().__init__(upload_endpoint)
        self._start_limits()

    def _start_limits(self) -> None:
        self._issued: dict[str, OrderedDict[str, float]] = {}  # session -> file id -> when issued
        self._arrived: dict[tuple[str, str], float] = {}  # (session, file id) of a file no widget has read yet

    def get_upload_urls(self, session_id: str, file_names: Sequence[str]) -> list[UploadFileUrlInfo]:
        infos = super().get_upload_urls(session_id, list(file_names)[:MAX_ISSUED])
        now = time.monotonic()
        with self._lock:
            issued = self._issued.setdefault(session_id, OrderedDict())
            for info in infos:
                issued[info.file_id] = now
            while len(issued) > MAX_ISSUED:
                issued.popitem(last=False)
        return infos

    def add_file(self, session_id: str, file: UploadedFileRec) -> None:
        now = time.monotonic()
        with self._lock:
            self._drop_stale(now)
            if file.file_id not in self._issued.get(session_id, {}):
                raise HTTPException(status_code=400, detail="Unknown file id: ask for an upload URL first")
            held = {file_id: rec for file_id, rec in self.file_storage.get(session_id, {}).items()
                    if file_id != file.file_id}
            if len(held) >= MAX_FILES or sum(len(rec.data) for rec in held.values()) + len(file.data) > \
                    MAX_SESSION_BYTES:
                raise HTTPException(status_code=413, detail="Too many uploads in this session: remove one first")
            if self._total_bytes + len(file.data) > MAX_TOTAL_BYTES:
                raise HTTPException(status_code=503, detail="The server holds too many uploads: try again soon")
            self._issued[session_id].pop(file.file_id)
            self._arrived[(session_id, file.file_id)] = now
        super().add_file(session_id, file)

    def get_files(self, session_id: str, file_ids: Sequence[str]) -> list[UploadedFileRec]:
        """A widget reads its files: they are claimed (kept for as long as the session wants them)."""
        with self._lock:
            for file_id in file_ids:
                self._arrived.pop((session_id, file_id), None)
        return super().get_files(session_id, file_ids)

    def remove_file(self, session_id: str, file_id: str) -> None:
        with self._lock:
            self._arrived.pop((session_id, file_id), None)
        super().remove_file(session_id, file_id)

    def remove_session_files(self, session_id: str) -> None:
        with self._lock:
            self._issued.pop(session_id, None)
            for key in [key for key in self._arrived if key[0] == session_id]:
                del self._arrived[key]
        super().remove_session_files(session_id)

    def _drop_stale(self, now: float) -> None:
        """Under the lock: forget the files no widget read within UNCLAIMED_SECONDS, and the files and file ids of
        sessions no longer connected."""
        for session_id, file_id in [key for key, came in self._arrived.items() if now - came > UNCLAIMED_SECONDS]:
            self._remove_locked(session_id, file_id)
        for session_id in set(self.file_storage) | set(self._issued):
            if not _connected(session_id):
                for file_id in list(self.file_storage.get(session_id, {})):
                    self._remove_locked(session_id, file_id)
                self.file_storage.pop(session_id, None)
                self._issued.pop(session_id, None)

    def _remove_locked(self, session_id: str, file_id: str) -> None:
        self._arrived.pop((session_id, file_id), None)
        removed = self.file_storage.get(session_id, {}).pop(file_id, None)
        if removed is not None:
            self._total_bytes -= len(removed.data)
            self._file_count -= 1

    @property
    def held_bytes(self) -> int:
        """The bytes of every upload held now."""
        return self._total_bytes


def _connected(session_id: str) -> bool:
    """Whether a session is connected to this server (True outside a running server: nothing to judge by)."""
    if not runtime.exists():
        return True
    return runtime.get_instance().is_active_session(session_id)


def install_upload_limits() -> bool:
    """Bound the running server's upload store (the module's docstring), once; False outside a server (AppTest) or
    when its store is not Streamlit's in-memory one (left as it is)."""
    if not runtime.exists():
        return False
    manager = runtime.get_instance().uploaded_file_mgr
    if isinstance(manager, BoundedUploadedFileManager):
        return True
    if type(manager) is not MemoryUploadedFileManager:
        return False
    with manager._lock:
        BoundedUploadedFileManager._start_limits(manager)
        manager.__class__ = BoundedUploadedFileManager
    return True
