"""A class's summary to keep: a CSV (one row per prompt and answer) and a one-page HTML file with a bar chart of
each prompt's answers, drawn as inline SVG so that it opens offline. It holds the questions, the answers counted,
the measurements and how many were right: nothing about a student but the count (nicknames are not in it).
"""

from __future__ import annotations

import csv
import html
import io
import re
from collections.abc import Sequence

from core.serving.classroom import PromptSummary

BAR_PX = 22  # one answer's bar
CHART_PX = 560  # the chart's width
LABEL_PX = 220  # the answers' labels on the left
RIGHT_COLOUR = "#009E73"  # Okabe-Ito green: the right option
OTHER_COLOUR = "#0072B2"  # Okabe-Ito blue


def plain(markdown: str) -> str:
    """The page's markdown of a measurement as plain text: emphasis and code marks and backslash escapes dropped."""
    return re.sub(r"\\(.)", r"\1", re.sub(r"\*\*|`", "", markdown))


def summary_csv(summaries: Sequence[PromptSummary]) -> str:
    """prompt, question, answer, count, is_right, measured, answered, right: one row per prompt and answer given
    (one row with an empty answer for a prompt no one answered)."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["prompt", "question", "answer", "count", "is_right", "measured", "answered", "right"])
    for s in summaries:
        rows = list(s.counts.items()) or [("", 0)]
        for answer, count in rows:
            is_right = "" if s.answer is None or not answer else str(answer == s.answer).lower()
            writer.writerow([s.prompt, plain(s.question), answer, count, is_right, plain(s.measured), s.answered,
                             "" if s.right is None else s.right])
    return out.getvalue()


def answers_svg(summary: PromptSummary) -> str:
    """A horizontal bar per answer, its count at the end; the right option's bar green."""
    if not summary.counts:
        return "<p><em>No answers.</em></p>"
    most = max(summary.counts.values()) or 1
    height = BAR_PX * len(summary.counts) + 8
    bars = []
    for row, (answer, count) in enumerate(summary.counts.items()):
        y = 4 + row * BAR_PX
        width = (CHART_PX - LABEL_PX - 40) * count / most
        colour = RIGHT_COLOUR if summary.answer is not None and answer == summary.answer else OTHER_COLOUR
        label = html.escape(answer if len(answer) <= 34 else answer[:33] + "…")
        bars.append(f'<text x="{LABEL_PX - 6}" y="{y + 15}" text-anchor="end">{label}</text>'
                    f'<rect x="{LABEL_PX}" y="{y + 3}" width="{width:.1f}" height="{BAR_PX - 6}" fill="{colour}"/>'
                    f'<text x="{LABEL_PX + width + 4:.1f}" y="{y + 15}">{count}</text>')
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{CHART_PX}" height="{height}" role="img" '
            f'font-family="sans-serif" font-size="13">{"".join(bars)}</svg>')


def summary_html(summaries: Sequence[PromptSummary], title: str) -> str:
    """One page: per prompt the question, the chart of answers, what was measured and how many were right."""
    sections = []
    for s in summaries:
        right = ("no verdict" if s.right is None else
                 f"{s.right} of {s.answered} right ({html.escape(s.answer or '')})")
        sections.append(f"<section><h2>{html.escape(plain(s.question))}</h2>{answers_svg(s)}"
                        f"<p><b>Measured:</b> {html.escape(plain(s.measured))}</p>"
                        f"<p><b>Answered:</b> {s.answered} · <b>Right:</b> {right}</p></section>")
    body = "".join(sections) or "<p>No prompt was asked in this class.</p>"
    return (f"<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            "<style>body{font-family:sans-serif;max-width:48rem;margin:2rem auto;padding:0 1rem}"
            "section{border-top:1px solid #ccc;padding:.5rem 0}h2{font-size:1.1rem}</style></head>"
            f"<body><h1>{html.escape(title)}</h1>{body}</body></html>")
