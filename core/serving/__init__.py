"""Small helpers for serving a class, beside the rest: the recording store's byte-bounded cache (lru.py), the
allocator settings that keep freed memory (allocator.py), bounded image decoding for uploads (image_io.py) and
making control characters visible (visible.py). They import nothing else from core.
"""
