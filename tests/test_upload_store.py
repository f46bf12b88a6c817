"""What uploads one session may leave on the server (issue 36, finding 2): pages/ui/uploads.py's bounded store,
alone and installed in a real server, where a client floods it as the issue's attacker did (file ids it made up, a
page with no uploader, many files in a row)."""

from __future__ import annotations

import asyncio
import sys
import urllib.error
from pathlib import Path

import pytest
from starlette.exceptions import HTTPException
from streamlit.runtime.memory_uploaded_file_manager import MemoryUploadedFileManager
from streamlit.runtime.uploaded_file_manager import UploadedFileRec

from pages.ui import uploads
from pages.ui.uploads import BoundedUploadedFileManager

sys.path.insert(0, str(Path(__file__).resolve().parent / "benchmarks"))
MB = 1 << 20


def rec(file_id: str, size: int) -> UploadedFileRec:
    return UploadedFileRec(file_id, "a.png", "image/png", b"\0" * size)


def refused(manager, session: str, file: UploadedFileRec) -> int:
    with pytest.raises(HTTPException) as caught:
        manager.add_file(session, file)
    return caught.value.status_code


def test_only_file_ids_the_server_issued_to_that_session_are_accepted():
    store = BoundedUploadedFileManager("/upload")
    assert refused(store, "s1", rec("made-up", 10)) == 400
    [info] = store.get_upload_urls("s1", ["a.png"])
    assert refused(store, "s2", rec(info.file_id, 10)) == 400  # another session's id
    store.add_file("s1", rec(info.file_id, 10))
    assert [f.file_id for f in store.get_files("s1", [info.file_id])] == [info.file_id]
    assert refused(store, "s1", rec(info.file_id, 10)) == 400  # an id serves one upload
    assert len(store.get_upload_urls("s1", ["x"] * 1000)) == uploads.MAX_ISSUED


def test_a_session_holds_at_most_max_files_and_its_bytes():
    store = BoundedUploadedFileManager("/upload")
    infos = store.get_upload_urls("s1", ["a"] * uploads.MAX_ISSUED)
    for info in infos[:uploads.MAX_FILES]:
        store.add_file("s1", rec(info.file_id, 5 * MB))
    assert refused(store, "s1", rec(infos[uploads.MAX_FILES].file_id, 1)) == 413
    assert store.held_bytes == uploads.MAX_FILES * 5 * MB <= uploads.MAX_SESSION_BYTES
    store.remove_file("s1", infos[0].file_id)  # the uploader's ✕ (or a replaced picture)
    store.add_file("s1", rec(infos[uploads.MAX_FILES].file_id, 5 * MB))
    store.remove_session_files("s1")
    assert store.held_bytes == 0 and store.get_upload_urls("s1", ["a"])


def test_the_server_share_is_bounded_for_every_session_together(monkeypatch):
    monkeypatch.setattr(uploads, "MAX_TOTAL_BYTES", 12 * MB)
    store = BoundedUploadedFileManager("/upload")
    for session in ("s1", "s2"):
        [info] = store.get_upload_urls(session, ["a"])
        store.add_file(session, rec(info.file_id, 5 * MB))
    [info] = store.get_upload_urls("s3", ["a"])
    assert refused(store, "s3", rec(info.file_id, 5 * MB)) == 503


def test_files_no_widget_reads_are_dropped_and_claimed_ones_kept(monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(uploads.time, "monotonic", lambda: clock[0])
    store = BoundedUploadedFileManager("/upload")
    unread, read, later = store.get_upload_urls("s1", ["a", "b", "c"])
    store.add_file("s1", rec(unread.file_id, 4 * MB))
    store.add_file("s1", rec(read.file_id, 4 * MB))
    store.get_files("s1", [read.file_id])  # the uploader's widget reads it on the rerun
    clock[0] += uploads.UNCLAIMED_SECONDS + 1
    store.add_file("s1", rec(later.file_id, 1))
    assert store.get_files("s1", [unread.file_id]) == [] and store.get_files("s1", [read.file_id])
    assert store.held_bytes == 4 * MB + 1


def test_a_disconnected_sessions_files_are_dropped(monkeypatch):
    connected = {"s1", "s2"}
    monkeypatch.setattr(uploads, "_connected", lambda session: session in connected)
    store = BoundedUploadedFileManager("/upload")
    [mine] = store.get_upload_urls("s1", ["a"])
    store.add_file("s1", rec(mine.file_id, 5 * MB))
    store.get_files("s1", [mine.file_id])
    connected.discard("s1")  # its tab closed (or its session expired)
    [other] = store.get_upload_urls("s2", ["a"])
    store.add_file("s2", rec(other.file_id, 1))
    assert store.held_bytes == 1 and "s1" not in store.file_storage


def test_installing_outside_a_server_changes_nothing():
    assert uploads.install_upload_limits() is False  # no runtime here (AppTest builds its own store)
    assert issubclass(BoundedUploadedFileManager, MemoryUploadedFileManager)


@pytest.mark.browser  # starts a real server (no browser): with the slow tests
def test_a_real_server_refuses_a_flood_of_uploads_from_one_session(server):
    """The issue's attacker: a page with no uploader, file ids made up, then many issued ones in a row."""
    from load_test import Session, put_file

    async def flood() -> list[int]:
        session = Session(server, timeout=60)
        assert not (await session.open()).problems  # the text explorer: no uploader on it
        statuses = []
        upload_url = f"{server}/_stcore/upload_file/{session.session_id}/"
        for file_id in ["made-up-1", "made-up-2"] + [await issued(session) for _ in range(6)]:
            try:
                await asyncio.to_thread(put_file, upload_url + file_id, session.cookies, "a.png", b"\0" * MB, 60)
                statuses.append(204)
            except urllib.error.HTTPError as error:
                statuses.append(error.code)
        await session.close()
        return statuses

    async def issued(session) -> str:
        from streamlit.proto.BackMsg_pb2 import BackMsg
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        back = BackMsg()
        back.file_urls_request.request_id = "flood"
        back.file_urls_request.file_names.append("a.png")
        back.file_urls_request.session_id = session.session_id
        await session.ws.send(back.SerializeToString())
        while True:
            msg = ForwardMsg()
            msg.ParseFromString(await session.ws.recv())
            if msg.WhichOneof("type") == "file_urls_response":
                return msg.file_urls_response.file_urls[0].file_id

    statuses = asyncio.run(flood())
    assert statuses[:2] == [400, 400]  # ids the server never issued
    assert statuses[2:2 + uploads.MAX_FILES] == [204] * uploads.MAX_FILES
    assert set(statuses[2 + uploads.MAX_FILES:]) == {413}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from test_browser import _build_models, serve_app

    models = _build_models(tmp_path_factory.mktemp("models"))
    with serve_app(models, tmp_path_factory.mktemp("server") / "streamlit.log") as url:
        yield url
