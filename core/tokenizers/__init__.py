"""Text to token ids: the bundled word-level tokenizer (words.py) and the `Encoded` it returns. A pretrained model's
own tokenizer is wrapped to the same interface in core/model/pretrained.py. Imports nothing else from core.
"""
