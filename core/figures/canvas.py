"""Heatmaps for the app's canvas chart (assets/web/heatmap.js), the one chart every attention matrix is drawn with:
one head, two heads' difference, all heads tiled, the rollout; and the head view's bands (spec["kind"] "lines").
Pure data, no drawing, no Streamlit.

A plotly heatmap cost the browser most of a toggle at 512 tokens: Streamlit's chart turns the figure into JSON
and back twice to theme it and draws it twice. The canvas chart takes the numbers as
they are (float32 bytes, exactly the recorded weights), paints one pixel per cell and scales it up, and redraws in
place. The spec here says everything the chart shows; `pack` turns it into the bytes the browser reads:

    uint32 little-endian L | L bytes of JSON (the spec without its arrays) | zero padding to a multiple of 4 |
    each array in spec["arrays"] order, C order, little-endian (float32 or uint8), each padded the same way

An array named in spec["at_open_cells"] (name -> the value every masked cell holds, "0" or "-Infinity") travels
as its open cells only, in C order, and the reader puts the masked cells back: under a causal mask a head's weights
and scores are half the bytes (at 512 tokens 1.3 MB a chart, not 2.4), and its masked cells are exactly 0 and −∞ as
recorded (head_heatmap_spec checks that before it asks for this).

Orientation follows the notation as in core.figures.attention: rows are queries in common notation, keys in
the paper's (where each column sums to 1).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence

import numpy as np

from core.figures.attention import (DIFF_COLORSCALE, MASKED_FILL, MASKED_HATCH, MAX_HATCHED, MAX_TICK_LABELS,
                                    MIN_LINE_WEIGHT, ROLLOUT_COLORSCALE, WEIGHT_COLORSCALE, _check_notation,
                                    _figure_size, _masked_of, _tick_font_size, axis_titles, head_color, numbered_labels,
                                    oriented, overview_grid, plain_token_labels)
from core.figures.images import GRID_COLOUR, OVERLAY_COLORSCALE, SELECTED_COLOUR, muted

DTYPES = {"float32": np.float32, "uint8": np.uint8}
DIVIDER_COLOR = "#D55E00"  # vermilion: seen on the blues, colour-blind safe


def _roles(notation: str) -> tuple[str, str]:
    """(what a row is, what a column is) in this notation."""
    return ("key", "query") if notation == "paper" else ("query", "key")


def _base_spec(labels: list[str], notation: str, title: str, height: int | None, masked: np.ndarray) -> dict:
    n = len(labels)
    x_title, y_title = axis_titles(notation)
    row_role, col_role = _roles(notation)
    shown_masked = oriented(masked, notation)
    return {"labels": labels, "row_role": row_role, "col_role": col_role, "x_title": x_title, "y_title": y_title,
            "title": title, "height": height or _figure_size(n), "tick_step": -(-n // MAX_TICK_LABELS),
            "tick_font": _tick_font_size(n), "masked_fill": MASKED_FILL, "hatch_color": MASKED_HATCH,
            "hatch": bool(shown_masked.any()) and n <= MAX_HATCHED,
            "arrays": {"masked": shown_masked.astype(np.uint8)}}


def head_heatmap_spec(pattern: np.ndarray, tokens: Sequence[str], scores: np.ndarray | None = None, *,
                      unknown: Sequence[bool] | None = None, notation: str = "common", title: str = "",
                      masked: np.ndarray | None = None, height: int | None = None,
                      divider: int | None = None) -> dict:
    """One head's pattern [N(query), N(key)]: weights on 0..1,
    masked cells (from `masked`, else scores of -inf) grey, hatched up to MAX_HATCHED tokens. The hover gives the
    query, the key, the weight and, when `scores` are given, the pre-softmax score, at every N (the scores are
    sent as bytes, so there is no size past which they are left out). `divider`: dashed
    lines before token `divider` on both axes (say, where the texts a model was trained on ended)."""
    pattern = np.asarray(pattern)
    n = pattern.shape[-1]
    if pattern.shape != (n, n) or len(tokens) != n:
        raise ValueError(f"pattern must be [N, N] with N = len(tokens); got {pattern.shape} and {len(tokens)} tokens")
    spec = _base_spec(plain_token_labels(tokens, unknown), notation, title, height, _masked_of(scores, masked, n))
    spec["arrays"]["weight"] = oriented(pattern, notation)
    spec["fields"] = [{"name": "weight", "array": "weight", "digits": 4}]
    if scores is not None:
        spec["arrays"]["score"] = oriented(np.asarray(scores), notation)
        spec["fields"].append({"name": "score", "array": "score", "digits": 3})
    shut = spec["arrays"]["masked"].astype(bool)
    if shut.any() and (spec["arrays"]["weight"][shut] == 0).all() and (
            scores is None or np.isneginf(spec["arrays"]["score"][shut]).all()):
        spec["at_open_cells"] = {"weight": "0", **({"score": "-Infinity"} if scores is not None else {})}
    spec.update(color="weight", zmin=0.0, zmax=1.0, colorscale=WEIGHT_COLORSCALE, colorbar_title="weight (0 … 1)")
    if divider is not None:
        if not 0 < divider < n:
            raise ValueError(f"the divider must fall between two of the {n} tokens, got {divider}")
        spec["divider"] = {"at": int(divider), "color": DIVIDER_COLOR}
    return spec


def difference_heatmap_spec(pattern_a: np.ndarray, pattern_b: np.ndarray, tokens: Sequence[str], *,
                            unknown: Sequence[bool] | None = None, notation: str = "common", title: str = "",
                            masked_a: np.ndarray | None = None, masked_b: np.ndarray | None = None,
                            labels_ab: tuple[str, str] = ("A", "B"), height: int | None = None) -> dict:
    """B − A of two patterns [N(query), N(key)] over the same tokens on a diverging scale centred on 0: cells
    masked in both grey; the hover gives A, B and B − A."""
    a, b = np.asarray(pattern_a), np.asarray(pattern_b)
    if a.shape != b.shape:
        raise ValueError(f"the two patterns differ in shape: {a.shape} and {b.shape}")
    n = a.shape[-1]
    both_masked = _masked_of(None, masked_a, n) & _masked_of(None, masked_b, n)
    spec = _base_spec(plain_token_labels(tokens, unknown), notation, title, height, both_masked)
    name_a, name_b = labels_ab
    diff = b - a
    limit = float(max(np.abs(diff).max(initial=0.0), 1e-6))
    spec["arrays"].update({"a": oriented(a, notation), "b": oriented(b, notation), "diff": oriented(diff, notation)})
    spec["fields"] = [{"name": name_a, "array": "a", "digits": 4}, {"name": name_b, "array": "b", "digits": 4},
                      {"name": f"{name_b} − {name_a}", "array": "diff", "digits": 4}]
    spec.update(color="diff", zmin=-limit, zmax=limit, colorscale=DIFF_COLORSCALE,
                colorbar_title=f"{name_b} − {name_a}")
    return spec


def rollout_spec(matrix: np.ndarray, tokens: Sequence[str], *, unknown: Sequence[bool] | None = None,
                 notation: str = "common", title: str = "", height: int | None = None) -> dict:
    """Attention rollout [N(output token), N(input token)] (core.lessons.analysis.rollout, rows sum to 1), as
    core.figures.attention.rollout_heatmap shows it: transposed in paper notation, on 0 .. its largest share."""
    matrix = np.asarray(matrix)
    n = matrix.shape[-1]
    if matrix.shape != (n, n) or len(tokens) != n:
        raise ValueError(f"rollout must be [N, N] with N = len(tokens); got {matrix.shape} and {len(tokens)} tokens")
    spec = _base_spec(plain_token_labels(tokens, unknown), notation, title, height, np.zeros((n, n), dtype=bool))
    output, source = "output token", "input token"
    spec.update(row_role=source if notation == "paper" else output, col_role=output if notation == "paper" else source,
                x_title="output token n · columns sum to 1" if notation == "paper" else "input token n′",
                y_title="input token n′" if notation == "paper" else "output token n · rows sum to 1",
                color="rollout", zmin=0.0, zmax=float(max(matrix.max(initial=0.0), 1e-6)),
                colorscale=ROLLOUT_COLORSCALE, colorbar_title="share of the input token",
                fields=[{"name": "rollout", "array": "rollout", "digits": 4}])
    spec["arrays"]["rollout"] = oriented(matrix, notation)
    return spec


def overview_spec(patterns: np.ndarray, tokens: Sequence[str], *, notation: str = "common",
                  selected: tuple[int, int] | None = None, masked: np.ndarray | None = None, tile_px: int = 130,
                  max_cells: int = 128, title: str = "") -> dict:
    """Every head of every layer, patterns [M, H, N(query), N(key)], tiled as core.figures.attention.OverviewGrid
    says: one M x H grid of heatmaps on one scale, the weights sent as whole per cents in a byte each (the
    colour shows no finer steps; the hover says "≈" and the chosen head's own chart has the exact numbers), block
    means past `max_cells` tokens, the `selected` (layer, head) outlined. A click names the layer and the head."""
    grid = overview_grid(patterns, notation, masked, tokens, max_cells)
    n = grid.size
    masked = grid.masked if grid.masked is not None else np.zeros((n, n), dtype=bool)
    spec = _base_spec(grid.spans, notation, title, int(tile_px * grid.layers + 130), masked)
    heads = grid.heads
    spec.update(row_role=grid.row_word, col_role=grid.col_word, x_title="head", y_title="layer", hatch=False, tick_font=12,
                color="weight", zmin=0, zmax=100, colorscale=WEIGHT_COLORSCALE, colorbar_title="weight (%)",
                fields=[{"name": f"{grid.what} ≈", "array": "weight", "digits": 0, "unit": " %"}],
                tiles={"layers": grid.layers, "heads": heads, "size": n,
                       "selected": list(selected) if selected is not None else None})
    spec["arrays"] = {"weight": grid.percent, "masked": masked.astype(np.uint8)}  # the weights first: their shape
    return spec                                                                     # is the chart's


def head_view_spec(patterns: np.ndarray, tokens: Sequence[str], heads: Sequence[int], *,
                   unknown: Sequence[bool] | None = None, query: int | None = None, notation: str = "common",
                   min_weight: float = MIN_LINE_WEIGHT, layer: int | None = None,
                   shown: Sequence[int] | None = None) -> dict:
    """The head view (bertviz-like): tokens in two columns, a band from query n to key n′ for every weight A[n, n′]
    of the chosen heads, its thickness proportional to the weight; one colour per head (HEAD_COLORS).

    patterns: one layer's [H, N(query), N(key)]. Bands of weight < `min_weight` are dropped; with `query` set, only
    that query's bands are drawn; with `shown` (token indices, head_view_tokens), only those tokens' rows and the
    bands between them, labelled with their own indices. Common notation puts the queries on the left (the token
    that attends, as bertviz does) and the keys on the right; paper notation puts the keys n′ (the x_{n′} that are
    mixed) on the left and the queries n (y_n = Σ_{n′} x_{n′} A_{n′,n}) on the right.

    Each row is split into one lane per head; weight 1 fills a lane. At the query end a query's bands are stacked
    in key order across its lane (its weights sum to at most 1, so they never overlap); at the key end each is
    centred on the key's lane. Arrays: "ends" [B, 4] (query end top and bottom, key end top and bottom, in rows:
    row i's centre is i), "band" [B, 3] (query and key token index, the recorded weight), "head" [B] (which of
    spec["heads"]). The hover gives the exact weight; a click on a band or a query's label names the query."""
    _check_notation(notation)
    patterns = np.asarray(patterns)
    if patterns.ndim != 3 or patterns.shape[-1] != patterns.shape[-2] or patterns.shape[-1] != len(tokens):
        raise ValueError(f"patterns must be [H, N, N] with N = len(tokens); got {patterns.shape}, {len(tokens)} tokens")
    h_count, n, _ = patterns.shape
    if any(not 0 <= h < h_count for h in heads):
        raise ValueError(f"heads must be in 0..{h_count - 1}, got {list(heads)}")
    shown = list(range(n)) if shown is None else [int(i) for i in shown]
    if not shown or any(not 0 <= i < n for i in shown):
        raise ValueError(f"shown tokens must be in 0..{n - 1}, got {shown}")
    if query is not None and query not in shown:
        raise ValueError(f"query must be one of the shown tokens (0..{n - 1}), got {query}")
    index = np.array(shown)
    flags = list(unknown) if unknown is not None else [False] * n
    labels = numbered_labels(plain_token_labels([tokens[i] for i in shown], [flags[i] for i in shown]), shown)
    row = None if query is None else shown.index(query)  # the query's row among the shown ones
    patterns = patterns[:, index][:, :, index]  # [H, n, n] over the shown tokens
    lane = 0.84 / max(len(heads), 1)
    ends, band, head = [], [], []
    for j, h in enumerate(heads):
        rows, cols = np.nonzero((patterns[h] >= min_weight) & (patterns[h] > 0))  # by query, then key; never masked
        if row is not None:
            rows, cols = rows[rows == row], cols[rows == row]
        w = patterns[h][rows, cols].astype(np.float64)
        centre = -0.42 + lane * (j + 0.5)
        before = np.cumsum(w) - w  # the weight of the query's earlier keys: where its band starts in the lane
        _, first = np.unique(rows, return_index=True)
        start = before - np.repeat(before[first], np.diff(np.append(first, len(w))))
        q0 = rows + centre - lane / 2 + start * lane
        ends.append(np.stack([q0, q0 + w * lane, cols + centre - w * lane / 2, cols + centre + w * lane / 2], 1))
        band.append(np.stack([index[rows], index[cols], patterns[h][rows, cols]], 1))
        head.append(np.full(len(w), j))
    query_title, key_title = "query n (attends)", "key n′ (attended to)"
    left_title, right_title = (query_title, key_title) if notation == "common" else (key_title, query_title)
    n = len(shown)
    return {"kind": "lines", "title": (f"layer {layer} · " if layer is not None else "") + f"{left_title}  ⟶  {right_title}",
            "labels": labels, "tokens": shown, "marked": row, "query_side": "left" if notation == "common" else "right",
            "heads": [{"name": f"H{h}", "color": head_color(h)} for h in heads],
            "row_px": 26 if n <= 32 else 16 if n <= 64 else 12, "tick_font": _tick_font_size(n) + 1,
            "arrays": {"ends": np.concatenate(ends or [np.zeros((0, 4))]).astype(np.float32),
                       "band": np.concatenate(band or [np.zeros((0, 3))]).astype(np.float32),
                       "head": np.concatenate(head or [np.zeros(0)]).astype(np.uint8)}}


def pack(spec: dict, **extra) -> bytes:
    """The spec (and `extra` keys, such as the PNG's file name) as the bytes the canvas chart reads."""
    arrays = {name: np.ascontiguousarray(value, dtype=np.uint8 if value.dtype in (bool, np.uint8) else np.float32)
              for name, value in spec["arrays"].items()}
    shapes = {name: list(value.shape) for name, value in arrays.items()}
    open_cells = arrays["masked"] == 0 if spec.get("at_open_cells") else None
    for name in spec.get("at_open_cells", ()):
        arrays[name] = arrays[name][open_cells]  # [open cells], C order
    header = {**{k: v for k, v in spec.items() if k != "arrays"}, **extra,
              "arrays": [{"name": name, "dtype": str(value.dtype), "shape": shapes[name], "sent": int(value.size)}
                         for name, value in arrays.items()]}
    text = json.dumps(header, ensure_ascii=False, allow_nan=False).encode()
    parts = [struct.pack("<I", len(text)), text, _padding(4 + len(text))]
    for value in arrays.values():
        data = value.astype(value.dtype.newbyteorder("<"), copy=False).tobytes()
        parts += [data, _padding(len(data))]
    return b"".join(parts)


def _padding(size: int) -> bytes:
    """Zeros up to the next multiple of 4 bytes: a float32 array in the browser must start at one."""
    return b"\0" * (-size % 4)


def unpack(payload: bytes) -> dict:
    """The spec back from `pack`'s bytes, arrays as numpy arrays (what the browser reads, for tests and notebooks)."""
    (length,) = struct.unpack_from("<I", payload)
    spec = json.loads(payload[4:4 + length])
    offset = 4 + length + len(_padding(4 + length))
    arrays = {}
    for entry in spec["arrays"]:
        dtype = np.dtype(DTYPES[entry["dtype"]]).newbyteorder("<")
        count = entry["sent"]
        arrays[entry["name"]] = np.frombuffer(payload, dtype, count, offset)
        offset += count * dtype.itemsize + len(_padding(count * dtype.itemsize))
    if offset != len(payload):
        raise ValueError(f"payload has {len(payload) - offset} bytes past its arrays")
    for entry in spec["arrays"]:
        name, shape = entry["name"], entry["shape"]
        if name in spec.get("at_open_cells", {}):  # the masked cells put back, as heatmap.js does
            full = np.full(shape, float(spec["at_open_cells"][name]), arrays[name].dtype)
            full[arrays["masked"].reshape(shape) == 0] = arrays[name]
            arrays[name] = full
        arrays[name] = arrays[name].reshape(shape)
    return {**spec, "arrays": arrays}


def image_overlay_spec(image: np.ndarray, grids: np.ndarray, first_token: int = 1, *, what: str = "weight",
                       selected_patch: int | None = None, selected_head: tuple[int, int] | None = None,
                       extra: np.ndarray | None = None, extra_name: str = "", height: int = 420, tile_px: int = 125,
                       title: str = "") -> dict:
    """Attention over an image's patches: `grids` [rows, cols], one map on 0 … its largest value with a colour bar,
    or [M, H, rows, cols], every layer and head tiled, each on 0 … its own largest (so a spread-out head is not
    invisible). The image lies in grey under the cells (core.figures.images.muted) and small values fade to
    transparent. The hover names the patch (its token n = first_token + row · cols + column) and the value; `extra`
    [M, H] (say, what CLS keeps on itself, `extra_name`) joins each tile's hover. `selected_patch` (0-based) is
    outlined, `selected_head` (layer, head) framed; a click names the patch's row and column (tiled: its layer and
    head too)."""
    grids = np.asarray(grids, dtype=np.float32)
    tiled = grids.ndim == 4
    layers, heads, rows, cols = grids.shape if tiled else (1, 1, *grids.shape)
    if rows != cols or grids.ndim not in (2, 4):
        raise ValueError(f"grids must be [rows, cols] or [M, H, rows, cols] over a square grid; got {grids.shape}")
    peaks = np.maximum(grids.max(axis=(-2, -1), keepdims=True), 1e-12)
    side_by_side = lambda g: g.transpose(0, 2, 1, 3).reshape(layers * rows, heads * cols)  # [M·rows, H·cols]
    arrays = ({"shown": side_by_side(grids / peaks), "weight": side_by_side(grids)} if tiled else {"weight": grids})
    spec = {"labels": [str(i) for i in range(rows)], "row_role": "row", "col_role": "column",
            "x_title": "head" if tiled else "patch column", "y_title": "layer" if tiled else "patch row",
            "title": title, "height": int(tile_px * layers + 60) if tiled else height, "tick_step": 1, "tick_font": 12,
            "ticks": tiled, "masked_fill": "#ffffff", "hatch_color": "#ffffff", "hatch": False,
            "color": "shown" if tiled else "weight", "zmin": 0.0, "zmax": 1.0 if tiled else float(peaks.max()),
            "colorscale": OVERLAY_COLORSCALE, "colorbar_title": None if tiled else what,
            "fields": [{"name": what, "array": "weight", "digits": 3}], "grid_color": GRID_COLOUR,
            "patches": {"first": first_token, "cols": cols},
            "arrays": {**arrays, "masked": np.zeros((rows, cols), dtype=np.uint8), "backdrop": muted(image)[..., 0]}}
    if tiled:
        spec["tiles"] = {"layers": layers, "heads": heads, "size": rows,
                         "selected": list(selected_head) if selected_head is not None else None}
        if extra is not None:
            spec["arrays"]["extra"] = np.repeat(np.repeat(np.asarray(extra, dtype=np.float32), rows, 0), cols, 1)
            spec["fields"].append({"name": extra_name, "array": "extra", "digits": 3})
    if selected_patch is not None:
        spec["outline"] = {"axis": "cell", "at": list(divmod(int(selected_patch), cols)), "color": SELECTED_COLOUR}
    return spec
