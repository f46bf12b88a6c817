"""Plotly figures for the image page: pure functions from arrays to figures, no model maths, no Streamlit.

Images are uint8 [H, W, 3]; they are drawn upscaled by nearest neighbour (crisp pixels) in image-pixel
coordinates: x from 0 to W left to right, y from 0 to H top to bottom, so patch (r, c) of size p covers
[c p, (c + 1) p] x [r p, (r + 1) p]. Attention maps are [rows, cols] grids over the patches, drawn as a
heatmap over the image whose colours fade to transparent where the weight is small.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from PIL import Image
from plotly.subplots import make_subplots

UPSCALE = 8  # the image is drawn 8x larger than it is, pixel by pixel
GRID_COLOUR = "rgba(255, 255, 255, 0.55)"
SELECTED_COLOUR = "#00e5ff"
# Transparent where the weight is small, opaque warm colours where it is large: the image shows through.
OVERLAY_COLORSCALE = [[0.0, "rgba(40, 0, 120, 0)"], [0.25, "rgba(90, 0, 170, 0.18)"],
                      [0.55, "rgba(220, 40, 90, 0.42)"], [0.8, "rgba(255, 140, 0, 0.6)"],
                      [1.0, "rgba(255, 235, 0, 0.72)"]]
VECTOR_COLORSCALE = "RdBu_r"
PROBABILITY_COLOUR, PREDICTED_COLOUR = "#9ab3cf", "#1f5fa8"


# ---------------------------------------------------------------------------------------------------------
# Pieces
# ---------------------------------------------------------------------------------------------------------

def as_uint8(image: np.ndarray) -> np.ndarray:
    """The image as uint8 0-255 (a float image is read as 0-1)."""
    array = np.asarray(image)
    if array.dtype != np.uint8:
        array = np.clip(np.rint(np.asarray(array, dtype=float) * 255), 0, 255).astype(np.uint8)
    return array


def image_source(image: np.ndarray, scale: int = UPSCALE) -> str:
    """The image upscaled by nearest neighbour as a PNG data URI (compact, and crisp in the browser)."""
    array = as_uint8(image)
    big = np.repeat(np.repeat(array, scale, axis=0), scale, axis=1)
    buffer = io.BytesIO()
    Image.fromarray(big).save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def muted(image: np.ndarray) -> np.ndarray:
    """The image in grey, its contrast kept but squeezed into mid-greys (uint8 [H, W, 3]), so that a coloured
    heatmap over it reads the same on any image, dark or light, red or yellow."""
    rgb = np.asarray(image, dtype=float)
    grey = rgb @ np.array([0.299, 0.587, 0.114])
    grey = 60 + grey * (140 / 255)
    return np.repeat(np.clip(np.rint(grey), 0, 255).astype(np.uint8)[..., None], 3, axis=-1)


def _image_trace(image: np.ndarray, scale: int = UPSCALE, source: str = "") -> dict:
    """The image in pixel coordinates: pixel (i, j) covers [j, j + 1] x [i, i + 1] (`source`: its image_source, when
    it is drawn more than once)."""
    return dict(type="image", source=source or image_source(image, scale), x0=0.5 / scale, y0=0.5 / scale,
                dx=1 / scale, dy=1 / scale, hoverinfo="skip")


PLAIN_AXIS = dict(showgrid=False, zeroline=False, showticklabels=False, ticks="", showline=False, constrain="domain")


def _patch_axes(fig: go.Figure, height: int, width: int, row: int | None = None, col: int | None = None) -> None:
    """Square pixels, y down, no ticks."""
    kwargs = {} if row is None else dict(row=row, col=col)
    fig.update_xaxes(range=[0, width], **PLAIN_AXIS, **kwargs)
    fig.update_yaxes(range=[height, 0], **PLAIN_AXIS, **kwargs)


def _square(fig: go.Figure, axis_index: int) -> None:
    suffix = "" if axis_index == 1 else str(axis_index)
    fig.layout[f"yaxis{suffix}"].scaleanchor = f"x{suffix}"


def _grid_shapes(height: int, width: int, patch: int, xref: str = "x", yref: str = "y") -> list[dict]:
    lines = [dict(type="line", x0=x, x1=x, y0=0, y1=height) for x in range(patch, width, patch)]
    lines += [dict(type="line", x0=0, x1=width, y0=y, y1=y) for y in range(patch, height, patch)]
    return [dict(line=dict(color=GRID_COLOUR, width=1), xref=xref, yref=yref, layer="above", **line)
            for line in lines]


def _outline(row: int, col: int, patch: int, xref: str = "x", yref: str = "y", colour: str = SELECTED_COLOUR,
             width: float = 3) -> dict:
    return dict(type="rect", x0=col * patch, x1=(col + 1) * patch, y0=row * patch, y1=(row + 1) * patch,
                xref=xref, yref=yref, line=dict(color=colour, width=width), layer="above")


def _patch_centres(rows: int, cols: int, patch: int) -> tuple[np.ndarray, np.ndarray]:
    return np.arange(cols) * patch + patch / 2, np.arange(rows) * patch + patch / 2


def _token_numbers(rows: int, cols: int, first: int) -> np.ndarray:
    return first + np.arange(rows * cols).reshape(rows, cols)


# ---------------------------------------------------------------------------------------------------------
# The image and its patches
# ---------------------------------------------------------------------------------------------------------

NUMBER_INKS = {False: ("white", "black"), True: ("#111111", "white")}  # on a light corner?: (text, its halo)
LIGHT_LUMA = 128  # a corner whose mean luma (0-255, Rec. 601) is above this is light


def numbers_on_light(image: np.ndarray, patch: int) -> np.ndarray:
    """Per patch, row by row: whether the corner its number is drawn in (the top-left quarter) is light, so that
    the number is drawn dark there (white on a white shape could not be read)."""
    luma = as_uint8(image)[..., :3].astype(float) @ np.array([0.299, 0.587, 0.114])  # [H, W]
    rows, cols = luma.shape[0] // patch, luma.shape[1] // patch
    half = max(patch // 2, 1)
    corners = luma[: rows * patch, : cols * patch].reshape(rows, patch, cols, patch)[:, :half, :, :half]
    return corners.mean(axis=(1, 3)).ravel() > LIGHT_LUMA


def image_with_grid(image: np.ndarray, patch: int, first_token: int = 1, selected: int | None = None,
                    numbers: bool = True, height: int = 420) -> go.Figure:
    """The image with its patch grid; each patch labelled with its token position n (first_token = 1 when a
    CLS token sits at n = 0). `selected` (0-based patch number) is outlined. Hover a patch for its n and place;
    the "patches" trace (invisible squares, customdata[0] = n) can be clicked to select one."""
    h, w = image.shape[:2]
    rows, cols = h // patch, w // patch
    xs, ys = _patch_centres(rows, cols, patch)
    tokens = _token_numbers(rows, cols, first_token)
    fig = go.Figure([_image_trace(image)])
    # Invisible square markers on the patch centres, for hover and for clicking a patch (customdata[0] = n).
    places = [f"row {r}, column {c}" for r in range(rows) for c in range(cols)]
    marker_px = max(6, int(height / rows * 0.9))
    fig.add_trace(go.Scatter(x=np.tile(xs, rows), y=np.repeat(ys, cols), mode="markers", name="patches",
                             customdata=np.stack([tokens.ravel(), places], axis=1),
                             marker=dict(symbol="square", size=marker_px, color="rgba(0,0,0,0)"),
                             selected=dict(marker=dict(opacity=0)), unselected=dict(marker=dict(opacity=0)),
                             hovertemplate="token n = %{customdata[0]}<br>patch %{customdata[1]}<extra></extra>"))
    shapes = _grid_shapes(h, w, patch)
    if selected is not None:
        shapes.append(_outline(*divmod(selected, cols), patch))
    fig.update_layout(shapes=shapes, height=height, margin=dict(l=4, r=4, t=8, b=4), showlegend=False,
                      clickmode="event+select", dragmode=False)
    if numbers:
        font_size = max(7, min(12, int(height / rows / 3.2)))
        x, y = np.tile(xs, rows) - patch * 0.42, np.repeat(ys, cols) - patch * 0.3
        on_light = numbers_on_light(image, patch)
        for light, (ink, halo) in NUMBER_INKS.items():  # dark numbers on light corners, light ones on dark
            pick = on_light == light
            fig.add_trace(go.Scatter(x=x[pick], y=y[pick], mode="text", text=[str(t) for t in tokens.ravel()[pick]],
                                     textposition="middle right", hoverinfo="skip", showlegend=False,
                                     textfont=dict(size=font_size, color=ink,
                                                   shadow=f"0 0 2px {halo}, 0 0 2px {halo}")))
    _patch_axes(fig, h, w)
    _square(fig, 1)
    return fig


# ---------------------------------------------------------------------------------------------------------
# Figure 2: patch -> vec -> W p -> + e -> token
# ---------------------------------------------------------------------------------------------------------

STRIPS_HEIGHT = 720  # figure 2 in common notation, five strips one under the other
STRIPS_MARGIN = dict(l=8, r=8, t=40, b=8)
COLUMNS_MARGIN = dict(l=8, r=8, t=84, b=8)  # figure 2 in paper notation: room for titles of three lines
STRIP_GAP_PX = 72  # presenter mode draws it 1.27 times as tall, its type 1.67 times as large: it needs 78 px there


def figure2_strip(pixels: np.ndarray, vec: np.ndarray, embedded: np.ndarray, position: np.ndarray,
                  token_vector: np.ndarray, token: int, notation: str = "paper", height: int | None = None,
                  standardised: bool = False) -> go.Figure:
    """Seed 001 figure 2 for one patch, left to right: the patch p_n, vec(p_n) (C·p·p numbers in (C, p, p)
    order), W p_n + b, e_n and x_n = W p_n + e_n (D numbers each, one colour scale for the three).
    standardised: vec holds the image's standardised channels (ModelConfig.image_norm), numbers of either sign
    drawn on the vectors' diverging scale with their own span, not pixel values in [0, 1] on a grey one.

    notation "paper": vectors are columns, as in X (D x N) of seed 001; "common": rows, as in X (N x D)."""
    vec, embedded, position, token_vector = (np.asarray(v, dtype=float) for v in (vec, embedded, position,
                                                                               token_vector))
    d, k = embedded.size, vec.size
    p = pixels.shape[0]
    channels = pixels.shape[2] if pixels.ndim == 3 else 1
    span = max(float(np.abs(np.concatenate([embedded, position, token_vector])).max()), 1e-9)
    columns = notation == "paper"
    br = "<br>" if columns else " "  # titles over narrow columns take a few short lines
    vec_title = f"vec(p<sub>{token}</sub>){',' + br + 'standardised' if standardised else ''}{br}∈ ℝ<sup>{k}</sup>"
    titles = [f"patch p<sub>{token}</sub>", vec_title,
              f"W p<sub>{token}</sub> + b{br}∈ ℝ<sup>{d}</sup>", f"e<sub>{token}</sub>{br}∈ ℝ<sup>{d}</sup>",
              f"x<sub>{token}</sub> ={br}W p<sub>{token}</sub> + e<sub>{token}</sub>"]
    channel_names = ["R", "G", "B"][:channels] if channels == 3 else [f"c{c}" for c in range(channels)]
    vec_labels = [f"{channel_names[i // (p * p)]} y{(i % (p * p)) // p} x{i % p}" for i in range(k)]
    if columns:  # the gaps hold each strip's tick labels
        fig = make_subplots(rows=1, cols=5, subplot_titles=titles, column_widths=[0.24, 0.16, 0.2, 0.2, 0.2],
                            horizontal_spacing=0.09)
    else:  # the gaps in pixels: each holds the tick labels of the strip above and the title of the one below
        height = height or STRIPS_HEIGHT
        fig = make_subplots(rows=5, cols=1, subplot_titles=titles, row_heights=[0.32, 0.17, 0.17, 0.17, 0.17],
                            vertical_spacing=STRIP_GAP_PX / (height - STRIPS_MARGIN["t"] - STRIPS_MARGIN["b"]))
    place = (lambda i: dict(row=1, col=i)) if columns else (lambda i: dict(row=i, col=1))

    # The patch itself (upscaled, crisp).
    fig.add_trace(go.Image(source=image_source(pixels, 32), x0=0.5 / 32, y0=0.5 / 32, dx=1 / 32, dy=1 / 32,
                           hoverinfo="skip"), **place(1))
    plain = dict(showticklabels=False, showgrid=False, zeroline=False, ticks="", showline=False, constrain="domain")
    fig.update_xaxes(range=[0, p], **plain, **place(1))
    fig.update_yaxes(range=[p, 0], **plain, **place(1))
    fig.layout["yaxis"].scaleanchor = "x"

    def vector(values, names, i, zmin, zmax, colorscale, what, showscale=False):
        z = values[:, None] if columns else values[None, :]
        index = np.arange(values.size)
        axis = dict(y=index) if columns else dict(x=index)
        text = np.asarray(names, dtype=object)
        custom = text[:, None] if columns else text[None, :]
        fig.add_trace(go.Heatmap(z=z, zmin=zmin, zmax=zmax, colorscale=colorscale, customdata=custom,
                                 showscale=showscale, xgap=0, ygap=0,
                                 colorbar=dict(title=dict(text="value"), thickness=10, len=0.7),
                                 hovertemplate=f"{what} %{{customdata}}: %{{z:.4f}}<extra></extra>", **axis),
                      **place(i))
        long_axis = dict(showticklabels=True, showgrid=False, zeroline=False, tickfont=dict(size=9), nticks=9)
        short_axis = dict(showticklabels=False, showgrid=False, zeroline=False, ticks="")
        if columns:
            fig.update_yaxes(autorange="reversed", **long_axis, **place(i))  # no room for a title "d" between
            fig.update_xaxes(**short_axis, **place(i))
        else:
            fig.update_xaxes(title=dict(text="d" if i == 5 else "", standoff=2), **long_axis, **place(i))
            fig.update_yaxes(**short_axis, **place(i))

    if standardised:
        vec_span = max(float(np.abs(vec).max()), 1e-9)
        vector(vec, vec_labels, 2, -vec_span, vec_span, VECTOR_COLORSCALE, "standardised pixel")
    else:
        vector(vec, vec_labels, 2, 0.0, 1.0, "gray", "pixel")
    dims = [f"d={i}" for i in range(d)]
    vector(embedded, dims, 3, -span, span, VECTOR_COLORSCALE, "W p + b,")
    vector(position, dims, 4, -span, span, VECTOR_COLORSCALE, "e,")
    vector(token_vector, dims, 5, -span, span, VECTOR_COLORSCALE, "x,", showscale=True)
    fig.update_annotations(font_size=13, yshift=12 if columns else 0)  # clear of the top tick label beside
    fig.update_layout(height=height or 480, margin=COLUMNS_MARGIN if columns else STRIPS_MARGIN)
    return fig


# ---------------------------------------------------------------------------------------------------------
# The prediction
# ---------------------------------------------------------------------------------------------------------

SHOWN_CLASSES = 10  # a model with more classes (a pretrained ViT's 1000) shows its likeliest ten


def class_probability_bars(probabilities: Sequence[float], classes: Sequence[str], true_label: int | None = None,
                           height: int = 260) -> go.Figure:
    """One horizontal bar per class (in class order, first on top), or for more than SHOWN_CLASSES classes the
    likeliest ones, likeliest first; the predicted class dark, the true class (when known) marked ✓ in its label."""
    probabilities = np.asarray(probabilities, dtype=float)
    predicted = int(np.argmax(probabilities))
    shown = (range(len(classes)) if len(classes) <= SHOWN_CLASSES
             else np.argsort(-probabilities, kind="stable")[:SHOWN_CLASSES].tolist())
    labels = [f"{classes[i]} ✓" if i == true_label else str(classes[i]) for i in shown]
    colours = [PREDICTED_COLOUR if i == predicted else PROBABILITY_COLOUR for i in shown]
    probabilities = probabilities[list(shown)]
    fig = go.Figure(go.Bar(x=probabilities, y=labels, orientation="h", marker_color=colours,
                           text=[f"{p:.1%}" for p in probabilities], textposition="outside", cliponaxis=False,
                           hovertemplate="%{y}: p = %{x:.4f}<extra></extra>"))
    fig.update_xaxes(range=[0, 1.15], tickformat=".0%", title_text="probability", showgrid=True)
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(height=height, margin=dict(l=8, r=24, t=8, b=8), showlegend=False)
    return fig
