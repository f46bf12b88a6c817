"""Upload files for the upload tests and tests/benchmarks/bench_upload.py, written byte by byte or with Pillow.

Large images are written row by row through zlib, so making a 40-megapixel PNG costs the writer no more memory than
one row: the tests measure the loader's memory, not their own.
"""

from __future__ import annotations

import io
import json
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parent.parent
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_COLOUR_TYPES = {"L": 0, "RGB": 2, "RGBA": 6}


def png_chunk(kind: bytes, payload: bytes) -> bytes:
    crc = zlib.crc32(kind + payload)
    return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", crc)


def png_header(width: int, height: int, mode: str = "RGB", bit_depth: int = 8) -> bytes:
    """The signature and IHDR chunk of a PNG of ``width`` x ``height`` (mode L, RGB or RGBA)."""
    ihdr = struct.pack(">IIBBBBB", width, height, bit_depth, _COLOUR_TYPES[mode], 0, 0, 0)
    return PNG_SIGNATURE + png_chunk(b"IHDR", ihdr)


def header_only_png(width: int, height: int) -> bytes:
    """A PNG that claims ``width`` x ``height`` but holds no pixel data at all (decoding it would fail)."""
    return png_header(width, height) + png_chunk(b"IDAT", zlib.compress(b"")) + png_chunk(b"IEND", b"")


def flat_png(width: int, height: int, colour: tuple[int, ...] = (200, 30, 30)) -> bytes:
    """A valid PNG of one colour (3 values: RGB, 4: RGBA): a few hundred KB however many pixels it has."""
    mode = "RGBA" if len(colour) == 4 else "RGB"
    row = b"\x00" + bytes(colour) * width  # filter byte 0, then the pixels
    packer = zlib.compressobj(9)
    data = b"".join(packer.compress(row) for _ in range(height)) + packer.flush()
    return png_header(width, height, mode) + png_chunk(b"IDAT", data) + png_chunk(b"IEND", b"")


def bmp_header_only(width: int, height: int) -> bytes:
    """A 24-bit BMP whose header claims ``width`` x ``height`` and that holds no pixels."""
    info = struct.pack("<IiiHHIIiiII", 40, width, height, 1, 24, 0, 0, 2835, 2835, 0, 0)
    return b"BM" + struct.pack("<IHHI", 14 + len(info), 0, 0, 14 + len(info)) + info


def encode(image: Image.Image, fmt: str, **options: object) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, fmt, **options)
    return buffer.getvalue()


def photo_jpeg(width: int, height: int, progressive: bool = False) -> bytes:
    """A photo-like JPEG (smooth random colour fields) of ``width`` x ``height``."""
    rng = np.random.default_rng(0)
    coarse = rng.integers(0, 256, (height // 64 + 1, width // 64 + 1, 3), dtype=np.uint8)
    image = Image.fromarray(coarse).resize((width, height), Image.Resampling.BILINEAR)
    return encode(image, "JPEG", quality=85, progressive=progressive)


def many_frame_gif(frames: int, size: int = 64) -> bytes:
    """An animated GIF of ``frames`` frames; the first is red."""
    colours = [(255, 0, 0)] + [(0, (17 * k) % 256, 255) for k in range(1, frames)]
    images = [Image.new("RGB", (size, size), colour) for colour in colours]
    return encode(images[0], "GIF", save_all=True, append_images=images[1:], duration=40, loop=0)


# --- what one decode costs, measured in a fresh process -------------------------------------------------------

_MEASURE = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import numpy as np
from PIL import Image
from core.serving.image_io import ImageInputError, load_image

def full_decode(data):  # every pixel decoded, then converted and resized (as the review measured)
    with Image.open(io.BytesIO(data)) as image:
        return np.asarray(image.convert("RGB").resize((32, 32), Image.Resampling.LANCZOS))

def peak_mb():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) / 1024

import io
decode = {"load_image": lambda data: load_image(data).array, "full": full_decode}[sys.argv[3]]
data = open(sys.argv[2], "rb").read()
with open("/proc/self/clear_refs", "w") as clear:
    clear.write("5")  # the peak starts again from the memory in use now
before, started = peak_mb(), time.process_time()
try:
    outcome = "decoded to %s" % (decode(data).shape,)
except ImageInputError as error:
    outcome = "refused: %s" % error
print(json.dumps({"mb": peak_mb() - before, "cpu_s": time.process_time() - started, "outcome": outcome}))
"""


def decode_cost(path: str, decoder: str = "load_image") -> dict:
    """{"mb": peak memory growth, "cpu_s": CPU seconds, "outcome": what happened} of one decode of the file at
    ``path`` in a fresh Python process (Linux: it reads VmHWM after resetting it). ``decoder``: "load_image" or
    "full" (the loader before issue 15). Pillow allocates pixels outside Python's allocator, where tracemalloc
    does not look; and a child's ru_maxrss starts from its parent's, so neither would do."""
    done = subprocess.run([sys.executable, "-c", _MEASURE, str(ROOT), path, decoder],
                          capture_output=True, text=True, timeout=300, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])
