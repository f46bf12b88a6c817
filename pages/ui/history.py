"""One browser-history entry per page visit.

Streamlit's frontend pushes a history entry each time a run changes the address bar's query string (its
handlePageInfoChanged), not only when the page changes: opening a page whose widgets write their values to the URL
(bind="query-params") added three or four entries, so Back showed the same page again and again, each time with
part of its state. A small script, mounted once per page, makes a push that keeps the path (only the query
string changes) replace the current entry: Back then goes to the previous page. On leaving a page Streamlit also
clears its query string from the entry it leaves; the script puts it back, so Back finds that page as it was left
(the typed text, the model, the layer), not its defaults.

On Back, Streamlit also drops from the address every parameter that a widget of another page bound last (its
filter for parameters left over from another page); our pages share keys (`text`, `model`, `layer`), so the
restored address lost exactly the state it came back for. restore_shared_params takes the address as it is;
until the page has written its own address, the script keeps the restored one in the address bar, so that a
second run that Streamlit merges into the first (a component's first value, say) reads it too. That merged run has
lost Streamlit's history flag (a widget's message that lands while Back's run is pending drops it; Streamlit's
"accepted limitation"): on a busy machine Back came to the page with its model but not its typed text. So the
address each page leaves is remembered (remember_address), and an arrival at a page with exactly that address is
restored too. A link in the sidebar sends the address of the page it leaves, which the filter is right to drop.
"""

from __future__ import annotations

from urllib.parse import parse_qsl

import streamlit as st
from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx
from streamlit.runtime.state.session_state_proxy import get_session_state

# Runs in the page's own window (components v2 have no iframe). Installed once per window.
_JS = """
export default function () {
  if (window.__attentionLabHistory) return;
  window.__attentionLabHistory = true;
  const history = window.history;
  const push = history.pushState.bind(history);
  const replace = history.replaceState.bind(history);
  const target = (url) => new URL(url ?? window.location.href, window.location.href);
  let cleared = null; // this entry's address before Streamlit cleared its query string on leaving the page
  let restoring = null; // the path Back or Forward just restored, until its page writes its own address
  // capture: before Streamlit's own popstate handler, which may already rewrite the address
  window.addEventListener("popstate", () => { restoring = window.location.pathname; }, { capture: true });
  history.replaceState = function (state, title, url) {
    const next = target(url);
    const stripping = next.pathname === window.location.pathname && !next.search && window.location.search;
    // Back/Forward: keep the restored query string, which the page's next run reads (restore_shared_params)
    if (stripping && restoring === next.pathname) return;
    if (next.search) restoring = null;
    cleared = stripping ? window.location.href : null;
    return replace(state, title, url);
  };
  history.pushState = function (state, title, url) {
    if (target(url).pathname === window.location.pathname) return history.replaceState(state, title, url);
    if (cleared) replace(history.state, "", cleared); // Back returns to the page as it was left
    cleared = null;
    restoring = null;
    return push(state, title, url);
  };
}
"""

_component = st.components.v2.component("attention_lab.history", js=_JS)


def one_entry_per_page() -> None:
    """Mount the script (it draws nothing)."""
    with st.sidebar:
        _component(key="history_entries")


_ADDRESSES = "history_addresses"  # session state: page script hash -> the parameters its last run left
_LAST_PAGE = "history_last_page"  # session state: the page script hash of the last run


def _parameters(query_string: str) -> list[tuple[str, str]]:
    return sorted(parse_qsl(query_string, keep_blank_values=True))


def remember_address() -> None:
    """Call after the page ran (also when it stopped early): the address this page leaves, to know it on Back."""
    ctx = get_script_run_ctx()
    if ctx is not None:
        st.session_state[_LAST_PAGE] = ctx.page_script_hash
        params = st.query_params
        st.session_state.setdefault(_ADDRESSES, {})[ctx.page_script_hash] = sorted(
            (key, value) for key in params for value in params.get_all(key))


def restore_shared_params() -> None:
    """Call before the page runs: on Back or Forward (flagged by Streamlit, or an arrival at a page with the address
    it was left with), every parameter of the restored address seeds its widget. The address is the page's own (one
    entry per page visit, its query string kept), so no other page's state comes with it. Uses Streamlit's session
    internals (pinned Streamlit; tests/test_browser_history.py fails if they change)."""
    ctx = get_script_run_ctx()
    if ctx is None:
        return
    left = st.session_state.get(_ADDRESSES, {}).get(ctx.page_script_hash)
    arrived = st.session_state.get(_LAST_PAGE, ctx.page_script_hash) != ctx.page_script_hash
    returned = arrived and bool(left) and left == _parameters(ctx.query_string)
    if not (ctx.is_history_navigation or returned):
        return
    with get_session_state().query_params() as params:
        params.populate_from_query_string(ctx.query_string)
        params.set_initial_query_params_from_current()
        params._send_query_param_msg()  # the filter sent the address without them: put them back
