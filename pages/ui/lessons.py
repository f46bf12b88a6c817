""""Predict, then reveal": a prompt whose answer stays hidden until Reveal, graded against what this run measured
(core/lessons/predictions.py).
"""

from __future__ import annotations

import streamlit as st

from core.lessons.predictions import Grade
from pages.ui import classroom
from pages.ui.safety import literal
from pages.ui.widgets import BIND


def predict_then_reveal(key: str, question: str, options: list[str] | None, reveal, about: str = "") -> bool:
    """A "predict, then reveal" prompt: the class answers `question` (one of `options`, or free text when None),
    then the Reveal button calls `reveal(prediction)` to draw, in the prompt's box, the graded answer measured on
    this run (see `show_grade`). In a class session (pages/ui/classroom.py) a student's prediction goes to the class
    and the teacher's Reveal reveals it on every student's page, the class's answers beside it. Returns whether it
    is revealed: whatever else on the page answers the question is drawn only then (`until_revealed`). The
    prediction is bound to the URL under `key`; the reveal is per session (a shared link starts unrevealed) and holds
    for this question only: when the question changes (another token or head named in it, or another text `about`
    which it is asked), the prompt is hidden again."""
    shown = f"{key}__revealed"  # holds the question that was revealed
    asked = f"{question}\n{about}"
    if st.session_state.get(shown) not in (None, asked):
        del st.session_state[shown]
    prompt = classroom.prompt_in_class(key, question, options, asked)  # None outside a class session
    student = prompt is not None and classroom.is_student()
    answering = {"on_change": classroom.send_answer, "args": (key, prompt),
                 "disabled": classroom.closed(prompt)} if student else {}
    with st.container(border=True):
        st.markdown(f":material/psychology_alt: **Predict:** {question}")
        if options is None:
            prediction = st.text_input("Your prediction", key=key, bind=BIND, label_visibility="collapsed",
                                       placeholder="Type your prediction, then reveal", **answering)
        else:
            prediction = st.radio("Your prediction", options, index=None, key=key, bind=BIND, horizontal=True,
                                  label_visibility="collapsed", **answering)
        if student:  # in a class the teacher reveals, for everyone at once
            if not revealed(key):
                st.caption(":material/hourglass_top: Your answer goes to the class; your teacher reveals the "
                           "answer for everyone, and you can change yours until then.")
        else:
            # on_click runs before the rerun it starts, so content above the prompt that answers it appears at once
            st.button("Reveal", key=f"{key}__reveal", icon=":material/visibility:", on_click=_reveal,
                      args=(shown, asked))
        if prompt is not None and not revealed(key) and classroom.is_teacher():
            classroom.live_answers(prompt, options)
        if revealed(key):
            st.session_state["class_grading"] = None
            reveal(prediction)
            if prompt is not None:
                if classroom.is_teacher():
                    answer, measured = st.session_state.get("class_grading") or (None, "shown on the page")
                    classroom.publish_reveal(prompt, question, options, answer, measured)
                classroom.class_answers(prompt, options)
    return revealed(key)


def _reveal(shown: str, question: str) -> None:
    st.session_state[shown] = question


def revealed(key: str) -> bool:
    """Whether prompt `key` is revealed (for its current question) in this session."""
    return st.session_state.get(f"{key}__revealed") is not None


def until_revealed(key: str, what: str) -> bool:
    """True once prompt `key` is revealed; before, one line in its place saying that `what` waits for it. Guard
    every chart or text that answers the prompt with it: `if until_revealed(key, "The chart"): chart(...)`."""
    if revealed(key):
        return True
    st.caption(f":material/visibility_off: {what}: shown when you reveal your prediction.")
    return False


def show_grade(prediction: str | None, answer: str | None, measured: str) -> None:
    """The sentence a reveal opens with: the class's prediction, what this run measured (markdown the page wrote)
    and the verdict (core/lessons/predictions.py). In a class the teacher's reveal shares the answer and the
    measurement."""
    st.session_state["class_grading"] = (answer, measured)
    st.markdown(Grade(prediction, answer, measured).sentence(literal))
