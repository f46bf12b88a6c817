"""Attention Lab beside its peers, in one run, on the same inputs, as ratios:

  1. recording overhead: our recorded forward vs our plain forward, N = 64, 256, 1024;
  2. our recorded forward vs TransformerLens's `run_with_cache` on an equivalent model (TransformerBridge.boot_native
     from a config, no download: same M layers, H heads, D, K, d_mlp, vocabulary, learned positions, pre-LN, GELU,
     causal), same token ids. Goal: ours takes at most half of TransformerLens's time;
  3. bytes sent to the browser for the all-heads overview (the text explorer's `overview_chart` message, as a live
     server sends it over the websocket) vs bertviz's `model_view` HTML for the same attention arrays and tokens
     (the bundled default model on the same text; N up to its context). Goal: at least 10 times smaller.

    pip install -r requirements-bench.txt
    python tests/benchmarks/bench_peers.py [--repeats 11] [--sizes 64 256 1024] [--texts 16 64 128] [--out FILE]

Timings are medians of interleaved runs (the four variants take turns, so machine noise hits all alike), one torch
thread, no gradients; timing reuses tests/benchmarks/bench_recording.py's `median_seconds`. Writes a JSON file
(default tests/benchmarks/results/peers.json) and prints a table. Run on purpose, not by the default test run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import urllib.parse
import zlib
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[1])]
from bench_browser import free_port, grammar_text, start, wait_healthy  # noqa: E402
from bench_recording import median_seconds  # noqa: E402
from load_test import Session, stop_server  # noqa: E402

from core.model.config import ModelConfig  # noqa: E402
from core.model.registry import DEFAULT_TEXT_MODEL, load_model  # noqa: E402
from core.model.run import record_text  # noqa: E402
from core.model.transformer import Transformer  # noqa: E402

# The bundled text models' shape (assets/models/*.json), with a context long enough for N = 1024.
CONFIG = ModelConfig(d_model=128, n_heads=4, n_layers=4, d_mlp=256, max_len=1024, vocab_size=335,
                     pos_encoding="learned", mask="causal", norm="pre")
SPEED_GOAL = 0.5  # ours / TransformerLens
BYTES_GOAL = 20.0  # bertviz / ours (issue 18)
OVERVIEW_KEY = "overview_chart"
OVERVIEW_VIEW = "All heads"  # the text explorer's tab that draws it


# ---------------------------------------------------------------------------------------------------------
# 1 and 2: forward passes
# ---------------------------------------------------------------------------------------------------------

def lens_bridge(cfg: ModelConfig):
    """TransformerLens's model of the same shape, built from a config (random weights, no download)."""
    from transformer_lens import TransformerBridge

    return TransformerBridge.boot_native(dict(
        n_layers=cfg.n_layers, d_model=cfg.d_model, n_heads=cfg.n_heads, d_head=cfg.head_dim, d_mlp=cfg.d_mlp,
        n_ctx=cfg.max_len, d_vocab=cfg.vocab_size, act_fn="gelu", normalization_type="LN"))


class LensRunner:
    """TransformerLens behind our forward's signature, so `median_seconds` times both alike:
    record=True runs `run_with_cache` (every hook point cached), record=False the plain forward."""

    def __init__(self, bridge):
        self.bridge = bridge

    def __call__(self, ids: torch.Tensor, record: bool):
        return self.bridge.run_with_cache(ids) if record else self.bridge(ids)


def check_equivalent(ours: Transformer, lens: LensRunner) -> dict:
    """Both models take the same ids to logits of the same shape and record the same attention shapes."""
    ids = torch.randint(0, CONFIG.vocab_size, (1, 16))
    with torch.no_grad():
        output = ours(ids, record=True)
        logits, cache = lens(ids, record=True)
    ours_pattern = output.recording.pattern(0)  # [H, N, N]
    lens_pattern = cache["blocks.0.attn.hook_pattern"][0]  # [1, H, N, N] -> [H, N, N]
    if output.logits.shape != logits.shape or tuple(ours_pattern.shape) != tuple(lens_pattern.shape):
        raise RuntimeError(f"not equivalent: logits {tuple(output.logits.shape)} vs {tuple(logits.shape)}, "
                           f"pattern {ours_pattern.shape} vs {tuple(lens_pattern.shape)}")
    return {"ours_parameters": ours.n_parameters, "lens_parameters": sum(p.numel() for p in lens.bridge.parameters()),
            "ours_arrays_recorded": len(output.recording.names), "lens_arrays_cached": len(cache)}


def time_forwards(sizes: list[int], repeats: int) -> dict:
    torch.manual_seed(0)
    ours = Transformer(CONFIG).eval()
    lens = LensRunner(lens_bridge(CONFIG))
    variants = {"ours_plain": (ours, False), "ours_recorded": (ours, True),
                "lens_plain": (lens, False), "lens_run_with_cache": (lens, True)}
    result = {"config": CONFIG.to_dict(), "repeats": repeats, **check_equivalent(ours, lens), "rows": []}
    names = list(variants)
    for n in sizes:
        ids = torch.randint(0, CONFIG.vocab_size, (1, n))
        for model, record in variants.values():
            median_seconds(model, ids, record, 2)  # warm up
        times = {name: [] for name in names}
        for repeat in range(repeats):
            for name in names[repeat % 4:] + names[:repeat % 4]:  # each variant takes each place in turn
                model, record = variants[name]
                times[name] += median_seconds(model, ids, record, 1)
        row = {"n": n, **{f"{name}_ms": 1000 * statistics.median(values) for name, values in times.items()}}
        row["recording_overhead"] = row["ours_recorded_ms"] / row["ours_plain_ms"]
        row["ours_vs_lens"] = row["ours_recorded_ms"] / row["lens_run_with_cache_ms"]
        row["lens_cache_overhead"] = row["lens_run_with_cache_ms"] / row["lens_plain_ms"]
        row["speed_goal_met"] = row["ours_vs_lens"] <= SPEED_GOAL
        result["rows"].append(row)
        print(table_line(FORWARD_COLUMNS, row), flush=True)
    return result


def met(flag: bool) -> str:
    return "met" if flag else "NOT met"


# (title, width, text of a row): the printed tables
FORWARD_COLUMNS = (("N", 5, lambda r: r["n"]), ("ours plain ms", 13, lambda r: f"{r['ours_plain_ms']:.2f}"),
                   ("ours recorded", 13, lambda r: f"{r['ours_recorded_ms']:.2f}"),
                   ("overhead", 8, lambda r: f"{r['recording_overhead']:.3f}"),
                   ("TL plain", 9, lambda r: f"{r['lens_plain_ms']:.2f}"),
                   ("TL cache", 9, lambda r: f"{r['lens_run_with_cache_ms']:.2f}"),
                   ("ours/TL", 8, lambda r: f"{r['ours_vs_lens']:.3f}"),
                   (f"goal <= {SPEED_GOAL}", 12, lambda r: met(r["speed_goal_met"])))
BYTES_COLUMNS = (("N", 5, lambda r: r["n"]), ("ours KB", 9, lambda r: f"{r['ours_bytes'] / 1024:.1f}"),
                 ("bertviz KB", 11, lambda r: f"{r['bertviz_bytes'] / 1024:.1f}"),
                 ("ratio", 7, lambda r: f"{r['ratio']:.2f}"),
                 ("deflated: ours", 14, lambda r: f"{r['ours_deflated'] / 1024:.1f}"),
                 ("bertviz", 8, lambda r: f"{r['bertviz_deflated'] / 1024:.1f}"),
                 ("ratio", 7, lambda r: f"{r['ratio_deflated']:.2f}"),
                 (f"goal >= {BYTES_GOAL:g}x", 12, lambda r: met(r["bytes_goal_met"])))


def table_line(columns, row: dict | None = None) -> str:
    """One line of a table: the titles when row is None."""
    return " ".join(f"{title if row is None else text(row)!s:>{width}}" for title, width, text in columns)


# ---------------------------------------------------------------------------------------------------------
# 3: bytes to the browser
# ---------------------------------------------------------------------------------------------------------

def bertviz_html(text: str, model, card) -> tuple[str, int]:
    """bertviz's model_view HTML for our model's attention on `text` (a tuple of [1, H, N, N], one per layer)."""
    from bertviz import model_view

    recording = record_text(model, text, card=card)
    attention = tuple(torch.from_numpy(recording.pattern(layer))[None] for layer in range(recording.n_layers))
    tokens = recording.meta["tokens"]
    return model_view(attention, tokens, html_action="return").data, len(tokens)


async def overview_messages(url: str, texts: list[str]) -> list[bytes]:
    """The overview chart's message for each text, as the server sends it to a browser that types the text."""
    session = Session(url, timeout=120, query=urllib.parse.urlencode({"view": OVERVIEW_VIEW}))
    try:
        opened = await session.open()
        messages = []
        for text in texts:
            outcome = await session.change("text", text)
            if opened.problems or outcome.problems or OVERVIEW_KEY not in session.messages:
                raise RuntimeError(f"the page did not draw the overview: {opened.problems + outcome.problems}")
            messages.append(session.messages[OVERVIEW_KEY])
        return messages
    finally:
        await session.close()


def deflated(data: bytes) -> int:
    """Size after deflate (zlib level 6): what gzip or websocket permessage-deflate would send."""
    return len(zlib.compress(data, 6))


def measure_bytes(sizes: list[int]) -> dict:
    model, card = load_model(DEFAULT_TEXT_MODEL)
    texts = [grammar_text(n, seed=4200 + n) for n in sizes]
    port = free_port()
    server = start("app.py", port, Path(os.environ.get("TMPDIR", "/tmp")) / "bench_peers_server.log")
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, server)
        messages = asyncio.run(overview_messages(url, texts))
    finally:
        stop_server(server)
    result = {"model": DEFAULT_TEXT_MODEL, "rows": []}
    for text, message in zip(texts, messages):
        html, n = bertviz_html(text, model, card)
        html_bytes = html.encode()
        row = {"n": n, "ours_bytes": len(message), "bertviz_bytes": len(html_bytes),
               "ours_deflated": deflated(message), "bertviz_deflated": deflated(html_bytes)}
        row["ratio"] = row["bertviz_bytes"] / row["ours_bytes"]
        row["ratio_deflated"] = row["bertviz_deflated"] / row["ours_deflated"]
        row["bytes_goal_met"] = row["ratio"] >= BYTES_GOAL
        result["rows"].append(row)
        print(table_line(BYTES_COLUMNS, row), flush=True)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=11)
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 256, 1024], help="N for items 1 and 2")
    parser.add_argument("--texts", type=int, nargs="+", default=[16, 64, 128],
                        help="N (tokens with [BOS]) for item 3; at most the bundled model's context")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "peers.json")
    args = parser.parse_args(argv)
    if max(args.sizes) > CONFIG.max_len or args.repeats < 1:
        parser.error(f"--sizes at most {CONFIG.max_len}, --repeats at least 1")
    torch.set_num_threads(1)
    load_before = os.getloadavg()
    print("1-2. forward passes: ours (plain, recorded) and TransformerLens (plain, run_with_cache)")
    print(table_line(FORWARD_COLUMNS) + "  (ms, medians)")
    forwards = time_forwards(args.sizes, args.repeats)
    print(f"     parameters: ours {forwards['ours_parameters']:,}, TransformerLens {forwards['lens_parameters']:,}; "
          f"arrays kept: ours {forwards['ours_arrays_recorded']}, TransformerLens {forwards['lens_arrays_cached']}")
    print("\n3. bytes to the browser: the all-heads overview vs bertviz model_view")
    print(table_line(BYTES_COLUMNS))
    sizes = measure_bytes(args.texts)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    machine = {"cpus": os.cpu_count(), "load_average_before": load_before, "load_average_after": os.getloadavg(),
               "torch": torch.__version__, "torch_threads": torch.get_num_threads()}
    print(f"machine: {machine['cpus']} CPUs, 1-min load average {load_before[0]:.1f} before, "
          f"{machine['load_average_after'][0]:.1f} after (shared: other work ran beside this)")
    args.out.write_text(json.dumps({"forwards": forwards, "bytes": sizes, "machine": machine}, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
