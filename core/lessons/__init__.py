"""The lessons' pure functions: what a page shows, computed from recordings and models (rollout and head summaries,
the logit lens and the residual stream taken apart, one layer's maths, position and length labs, generation with a
KV cache, linear attention and its cost, the vision transformer's patches, and grading a class's predictions). Uses
core.model, core.tokenizers and core.data; never training, figures or Streamlit.
"""
