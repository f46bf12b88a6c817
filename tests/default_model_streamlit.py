"""`streamlit run` whose text pickers open on the model named first: a server on a folder of tiny test models
(tests/test_app.py's build_models) opens on the folder's own lm-rope, as AppTest's pages do (conftest's
read_models_from), not on a fallback. Usage: `python tests/default_model_streamlit.py lm-rope app.py --server.port ...`
(tests/test_browser.py's serve_app, as its `runner`)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script: the repository's core/ importable

from streamlit.web.cli import main  # noqa: E402

from core.model import registry  # noqa: E402

registry.DEFAULT_TEXT_MODEL = sys.argv[1]
sys.argv = ["streamlit", "run", *sys.argv[2:]]
main()
