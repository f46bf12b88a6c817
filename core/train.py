"""`python -m core.train`: train the bundled models (the presets, seeds and loop are in core/training/train.py)."""

import sys

from core.training.train import main

if __name__ == "__main__":
    sys.exit(main())
