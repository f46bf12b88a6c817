"""Training and evaluating models: batches from the generated data (tasks.py), the training loop and presets
(train.py, train_seq2seq.py), held-out evaluation (evaluate.py) and live training in the browser (live/). Uses
core.model, core.tokenizers, core.data and core.lessons (the scores a run reports).
"""
