"""Attention Lab's library: models, recording, masks, position encodings, data, training, analysis, figures."""

from core.serving.allocator import keep_freed_memory

keep_freed_memory()  # a forward pass reuses the memory of the last one (core/serving/allocator.py)
