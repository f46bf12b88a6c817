"""What an upload may cost the server (issue 15, finding 6): pixels refused from the header alone, peak memory
bounded, at most a few decodes at once, and a clear "busy" message past that.

Peak memory is measured as the growth of the peak resident set size of a fresh Python process
(upload_files.decode_cost): Pillow allocates its pixels outside Python's allocator, so tracemalloc would not see them.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from PIL import Image, ImageFile
from upload_files import bmp_header_only, decode_cost, encode, flat_png, header_only_png, photo_jpeg

from core.serving import image_io
from core.serving.image_io import ImageBusyError, ImageInputError, load_image


def peak_growth_mb(path: Path) -> tuple[float, str]:
    """(MB the peak memory of a fresh process grew by while load_image read ``path``, what load_image did)."""
    cost = decode_cost(str(path))
    return cost["mb"], cost["outcome"]


@pytest.fixture
def decodes(monkeypatch) -> list[int]:
    """Every Pillow decode (ImageFile.load) during the test, as the size of the image decoded."""
    seen: list[int] = []
    original = ImageFile.ImageFile.load

    def counting_load(self):
        seen.append(self.size[0] * self.size[1])
        return original(self)
    monkeypatch.setattr(ImageFile.ImageFile, "load", counting_load)
    return seen


# --- refused from the header alone ----------------------------------------------------------------------------

@pytest.mark.filterwarnings("ignore::PIL.Image.DecompressionBombWarning")
@pytest.mark.parametrize(("data", "size"), [
    (header_only_png(7300, 5440), "7300×5440"),    # 39.7 megapixels: under the old 40-megapixel cap
    (header_only_png(4000, 3000), "4000×3000"),    # a 12-megapixel PNG is decoded in full: too costly
    (bmp_header_only(6000, 6000), "6000×6000"),
], ids=["png-39.7MP", "png-12MP", "bmp-36MP"])
def test_too_many_pixels_are_refused_from_the_header_alone(data, size, decodes):
    assert len(data) < 200
    with pytest.raises(ImageInputError, match=f"{size} pixels .*megapixels"):
        load_image(data)
    assert decodes == [], "nothing may be decoded"


@pytest.mark.filterwarnings("ignore::PIL.Image.DecompressionBombWarning")
@pytest.mark.parametrize(("progressive", "width", "height", "kind"), [
    (False, 7000, 6000, "a JPEG is 24 megapixels"),
    (True, 5000, 3000, "a progressive JPEG is 12 megapixels"),  # holds all its coefficients while decoding
])
def test_a_huge_jpeg_is_refused_from_the_header_alone(progressive, width, height, kind, decodes):
    small = photo_jpeg(64, 64, progressive=progressive)
    # The start of frame (SOF0 baseline, SOF2 progressive) carries height then width as 16-bit numbers.
    start = small.index(b"\xff\xc2" if progressive else b"\xff\xc0") + 5
    claim = height.to_bytes(2, "big") + width.to_bytes(2, "big")
    with pytest.raises(ImageInputError, match=f"{width}×{height} pixels .*; the limit for {kind}"):
        load_image(small[:start] + claim + small[start + 4:])
    assert decodes == []


# --- what a decode may cost -----------------------------------------------------------------------------------

def test_a_39_megapixel_png_costs_little_memory(tmp_path):
    path = tmp_path / "flat.png"
    path.write_bytes(flat_png(7300, 5440))  # 39.7 megapixels in about 150 KB
    assert path.stat().st_size < 300_000
    grown, outcome = peak_growth_mb(path)
    assert outcome.startswith("refused") and "megapixels" in outcome, outcome
    assert grown < 20, f"peak memory grew by {grown:.0f} MB"


def test_the_largest_png_accepted_costs_about_one_copy_of_its_pixels(tmp_path):
    width, height = 3840, 2160  # at the cap; RGBA with transparency: the costliest conversion
    path = tmp_path / "screen.png"
    path.write_bytes(flat_png(width, height, (10, 200, 10, 128)))
    grown, outcome = peak_growth_mb(path)
    assert outcome == "decoded to (32, 32, 3)", outcome
    one_copy = width * height * 4 / 2**20  # Pillow holds RGBA as 4 bytes a pixel: 31.6 MB
    assert grown < one_copy + 16, f"peak memory grew by {grown:.0f} MB for a {one_copy:.0f} MB image"


def test_a_12_megapixel_phone_photo_is_decoded_at_a_reduced_scale(tmp_path, decodes):
    data = photo_jpeg(4000, 3000)
    loaded = load_image(data)
    assert loaded.array.shape == (32, 32, 3) and loaded.original_size == (4000, 3000)
    assert decodes and max(decodes) <= (4000 // 8) * (3000 // 8), "decoded at 1/8 scale"
    path = tmp_path / "phone.jpg"
    path.write_bytes(data)
    grown, outcome = peak_growth_mb(path)
    assert outcome == "decoded to (32, 32, 3)" and grown < 16, (grown, outcome)


def test_transparency_is_flattened_strip_by_strip():
    """Converting and shrinking in strips gives the picture a full conversion gives."""
    image = Image.new("RGBA", (1200, 900), (255, 0, 0, 255))
    image.paste((0, 0, 255, 0), (600, 0, 1200, 900))  # right half fully transparent
    loaded = load_image(encode(image, "PNG"))
    array = loaded.array.astype(int)
    assert loaded.notes == ["flattened transparency onto white",
                            "resized from 1200×900 to 32×32 (centre crop to square first)"]
    assert (abs(array[:, :15] - (255, 0, 0)).max() <= 2) and (abs(array[:, 17:] - 255).max() <= 2)


# --- how many decode at once ----------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["PNG", "JPEG"])
def test_at_most_two_uploads_decode_at_once(monkeypatch, fmt):
    running, most = [0], [0]
    lock = threading.Lock()
    load = ImageFile.ImageFile.load

    def slow_load(self):  # every Pillow decode, wherever it is called from (a PNG's getexif decodes too)
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.2)
        try:
            return load(self)
        finally:
            with lock:
                running[0] -= 1
    monkeypatch.setattr(ImageFile.ImageFile, "load", slow_load)
    data = encode(Image.new("RGB", (300, 300), (9, 9, 9)), fmt)
    results: list[object] = []
    threads = [threading.Thread(target=lambda: results.append(load_image(data))) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 6 and all(r.array.shape == (32, 32, 3) for r in results)
    assert most[0] == 2, f"{most[0]} uploads decoded at once"


@pytest.mark.filterwarnings("ignore::PIL.Image.DecompressionBombWarning")
def test_busy_server_says_try_again_and_header_checks_still_answer(monkeypatch):
    monkeypatch.setattr(image_io, "DECODE_WAIT_SECONDS", 0.05)
    data = encode(Image.new("RGB", (64, 64), (9, 9, 9)), "PNG")
    held = 0
    try:
        while image_io._DECODE_SLOTS.acquire(blocking=False):
            held += 1
        assert held == 2
        started = time.perf_counter()
        with pytest.raises(ImageBusyError, match="busy .* try again"):
            load_image(data)
        assert time.perf_counter() - started < 1
        with pytest.raises(ImageInputError, match="megapixels"):  # no slot needed to refuse from the header
            load_image(header_only_png(7300, 5440))
    finally:
        for _ in range(held):
            image_io._DECODE_SLOTS.release()
    assert load_image(data).array.shape == (32, 32, 3)


def test_a_png_of_300000_text_chunks_is_refused_from_its_chunk_headers(decodes):
    """Issue 36: Pillow parsed every text chunk while opening the file (0.8 CPU-s) before any decode slot applied."""
    from upload_files import png_chunk, png_header

    text = png_chunk(b"tEXt", b"k\0v")
    pixels = flat_png(64, 64)[len(png_header(64, 64)):]  # a real PNG's IDAT and IEND, after its signature and IHDR
    data = png_header(64, 64) + text * 300_000 + pixels
    assert len(data) <= image_io.MAX_UPLOAD_BYTES
    started = time.process_time()
    with pytest.raises(ImageInputError, match="more than 4096 chunks"):
        load_image(data)
    assert time.process_time() - started < 0.2  # a scan of 4097 chunk headers, not 300,000 text chunks parsed
    assert decodes == []
    few = png_header(64, 64) + text * 100 + pixels
    assert load_image(few).array.shape == (32, 32, 3)  # a picture with some metadata still opens


def test_the_largest_webp_accepted_costs_about_what_the_largest_png_does(tmp_path):
    """A lossless WebP decodes through libwebp's own buffers, 16 bytes a pixel: 131 MB at 3840x2160 (issue 36)."""
    big = Image.new("RGBA", (3840, 2160), (10, 200, 10, 128))
    with pytest.raises(ImageInputError, match="limit for a WebP is 2.1 megapixels"):
        load_image(encode(big, "WEBP", lossless=True))
    path = tmp_path / "largest.webp"
    path.write_bytes(encode(big.resize((1920, 1080)), "WEBP", lossless=True))
    grown, outcome = peak_growth_mb(path)
    assert outcome == "decoded to (32, 32, 3)", outcome
    assert grown < 45, f"peak memory grew by {grown:.0f} MB"
