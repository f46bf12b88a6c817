"""Text to token ids: the bundled word-level tokenizer (words.py) and the `Encoded` it returns, and the byte-level BPE
tokenizer for models of broad English (subword.py: same interface, never [UNK]). A pretrained model's own tokenizer
is wrapped to the same interface in core/model/pretrained.py. Imports nothing else from core.
"""
