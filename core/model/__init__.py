"""The model itself, at the bottom of core/: the frozen config, the transformer (seed 001 section by section), its
position encodings and masks, the Recording it returns, checkpoints and the registry of models, the encoder-decoder,
the adapter that copies a user's Hugging Face checkpoint into our transformer, and `run.record_text` (text in,
Recording out). It imports only core.tokenizers: nothing from lessons, training, figures or serving.
"""
