"""`streamlit run` whose runs wait 0.5 s before each write to the browser's URL: it widens, for a test, the window
in which a widget changed in the browser races a run that writes the URL (tests/test_browser.py). Usage:
`python tests/slow_url_streamlit.py app.py --server.port ...`."""

import sys
import time

from streamlit.runtime.state import query_params
from streamlit.web.cli import main

_send = query_params.QueryParams._send_query_param_msg


def _send_late(self) -> None:
    time.sleep(0.5)
    _send(self)


query_params.QueryParams._send_query_param_msg = _send_late
sys.argv = ["streamlit", "run", *sys.argv[1:]]
main()
