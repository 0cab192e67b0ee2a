"""Profiles in the Firefox Profiler's format (gzip'd JSON), written and read.

Written: the "processed" profile layout (columnar tables, the layout Ruby's
Vernier writes for Sidekiq), so https://profiler.firefox.com opens a profile
from wurk and from Sidekiq alike. Read: a table of the functions that took
the most samples, for the admin's profile page, from either writer (and from
the older row-based "gecko" layout).
"""

from __future__ import annotations

import gzip
import json
import os
from typing import Any

from .sampler import Sampler

PROCESSED_VERSION = 47
GECKO_VERSION = 28


def build(sampler: Sampler, name: str) -> dict[str, Any]:
    strings: dict[str, int] = {}

    def s(text: str) -> int:
        return strings.setdefault(text, len(strings))

    funcs: dict[tuple[str, str, int], int] = {}
    func_name: list[int] = []
    func_file: list[int] = []
    func_line: list[int] = []
    frames: dict[tuple[int, int], int] = {}
    frame_func: list[int] = []
    frame_line: list[int] = []
    stacks: dict[tuple[int | None, int], int] = {}
    stack_prefix: list[int | None] = []
    stack_frame: list[int] = []
    sample_stack: list[int | None] = []
    sample_time: list[float] = []
    for at, stack in sampler.samples:
        prefix: int | None = None
        for fn, filename, first, line in stack:
            f = funcs.get((fn, filename, first))
            if f is None:
                f = funcs[(fn, filename, first)] = len(func_name)
                func_name.append(s(fn))
                func_file.append(s(filename))
                func_line.append(first)
            fr = frames.get((f, line))
            if fr is None:
                fr = frames[(f, line)] = len(frame_func)
                frame_func.append(f)
                frame_line.append(line)
            st = stacks.get((prefix, fr))
            if st is None:
                st = stacks[(prefix, fr)] = len(stack_frame)
                stack_prefix.append(prefix)
                stack_frame.append(fr)
            prefix = st
        sample_stack.append(prefix)
        sample_time.append(round(at, 3))
    n_funcs, n_frames, n_stacks = len(func_name), len(frame_func), len(stack_frame)
    thread = {
        "name": name, "isMainThread": True, "processType": "default", "processStartupTime": 0,
        "processShutdownTime": None, "registerTime": 0, "unregisterTime": round(sampler.elapsed * 1000.0, 3),
        "pausedRanges": [], "pid": str(os.getpid()), "tid": sampler.target,
        "samples": {"stack": sample_stack, "time": sample_time, "weight": None, "weightType": "samples",
                    "length": len(sample_stack)},
        "markers": {"data": [], "name": [], "startTime": [], "endTime": [], "phase": [], "category": [], "length": 0},
        "stackTable": {"frame": stack_frame, "prefix": stack_prefix, "category": [0] * n_stacks,
                       "subcategory": [0] * n_stacks, "length": n_stacks},
        "frameTable": {"address": [-1] * n_frames, "inlineDepth": [0] * n_frames, "category": [0] * n_frames,
                       "subcategory": None, "func": frame_func, "nativeSymbol": [None] * n_frames,
                       "innerWindowID": [None] * n_frames, "implementation": [None] * n_frames,
                       "line": frame_line, "column": [None] * n_frames, "length": n_frames},
        "funcTable": {"name": func_name, "isJS": [True] * n_funcs, "relevantForJS": [True] * n_funcs,
                      "resource": [-1] * n_funcs, "fileName": func_file, "lineNumber": func_line,
                      "columnNumber": [None] * n_funcs, "length": n_funcs},
        "nativeSymbols": {}, "resourceTable": {"length": 0, "lib": [], "name": [], "host": [], "type": []},
        "stringArray": list(strings),
    }
    return {
        "meta": {"interval": sampler.interval * 1000.0, "startTime": sampler.started_at * 1000.0, "processType": 0,
                 "product": f"Python/wurk_django {name}", "stackwalk": 1, "version": GECKO_VERSION,
                 "preprocessedProfileVersion": PROCESSED_VERSION, "symbolicated": True, "markerSchema": [],
                 "sampleUnits": {"time": "ms", "eventDelay": "ms", "threadCPUDelta": "µs"},
                 "categories": [{"name": "Python", "color": "blue", "subcategories": ["Other"]}]},
        "libs": [],
        "threads": [thread],
    }


def to_gzip(profile: dict[str, Any]) -> bytes:
    return gzip.compress(json.dumps(profile, separators=(",", ":")).encode(), compresslevel=6)


def load(data: bytes) -> dict[str, Any]:
    """A stored profile (gzip'd or plain JSON) as a dict; ``ValueError`` if it is neither."""
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    try:
        profile = json.loads(data)
    except ValueError as exc:
        raise ValueError(f"not a Firefox Profiler JSON document: {exc}") from None
    if not isinstance(profile, dict) or not isinstance(profile.get("threads"), list):
        raise ValueError("not a Firefox Profiler document (no threads)")
    return profile


def _column(table: dict, name: str, fallback_index: int | None = None) -> list:
    """A column of a table in either layout: processed ``{name: [...]}`` or gecko ``{schema, data}``."""
    if name in table and isinstance(table[name], list):
        return table[name]
    schema, rows = table.get("schema"), table.get("data")
    if isinstance(schema, dict) and isinstance(rows, list) and name in schema:
        i = schema[name]
        return [row[i] if isinstance(row, list) and len(row) > i else None for row in rows]
    return []


def _text(strings: list, index: Any) -> str:
    return strings[index] if isinstance(index, int) and 0 <= index < len(strings) else str(index or "")


def _count_thread(thread: dict, counts: dict[tuple[str, str, Any], list[float]]) -> float:
    """Add one thread's self/total sample counts per function to ``counts``; returns its samples."""
    strings = thread.get("stringArray") or thread.get("stringTable") or []
    samples = thread.get("samples") or {}
    weights = samples.get("weight") if isinstance(samples.get("weight"), list) else None
    stacks = thread.get("stackTable") or {}
    prefixes, stack_frames = _column(stacks, "prefix"), _column(stacks, "frame")
    frame_func = _column(thread.get("frameTable") or {}, "func")
    funcs = thread.get("funcTable") or {}
    names, files, lines = _column(funcs, "name"), _column(funcs, "fileName"), _column(funcs, "lineNumber")
    labels: dict[int, tuple[str, str, Any]] = {}

    def label(frame: int) -> tuple[str, str, Any]:
        if frame not in labels:
            f = frame_func[frame] if 0 <= frame < len(frame_func) else None
            if not isinstance(f, int) or not 0 <= f < len(names):
                labels[frame] = ("?", "", None)
            else:
                labels[frame] = (_text(strings, names[f]), _text(strings, files[f]) if f < len(files) else "",
                                 lines[f] if f < len(lines) else None)
        return labels[frame]

    total = 0.0
    for n, stack in enumerate(_column(samples, "stack")):
        if not isinstance(stack, int):
            continue
        weight = float(weights[n]) if weights and n < len(weights) and weights[n] is not None else 1.0
        total += weight
        seen: set = set()
        first = True
        steps = 0
        while isinstance(stack, int) and 0 <= stack < len(stack_frames) and steps < 10_000:
            steps += 1  # a corrupt prefix cycle must not hang the page
            key = label(stack_frames[stack])
            entry = counts.setdefault(key, [0.0, 0.0])
            if first:
                entry[0] += weight
                first = False
            if key not in seen:  # recursion counts once in "total"
                entry[1] += weight
                seen.add(key)
            stack = prefixes[stack] if stack < len(prefixes) else None
    return total


def top_functions(profile: dict[str, Any], limit: int = 50) -> dict[str, Any]:
    """``{"samples": n, "rows": [{"function", "file", "line", "self", "total", "self_pct", "total_pct"}]}``
    over every thread, most self samples first."""
    counts: dict[tuple[str, str, Any], list[float]] = {}
    total_samples = sum(_count_thread(t, counts) for t in profile.get("threads") or [] if isinstance(t, dict))
    rows = sorted(counts.items(), key=lambda kv: (-kv[1][0], -kv[1][1], kv[0][0]))[:limit]
    pct = 100.0 / total_samples if total_samples else 0.0
    return {"samples": int(total_samples), "rows": [
        {"function": fn, "file": filename, "line": line, "self": int(own), "total": int(inclusive),
         "self_pct": round(own * pct, 1), "total_pct": round(inclusive * pct, 1)}
        for (fn, filename, line), (own, inclusive) in rows]}
