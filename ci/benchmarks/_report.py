"""Timing and reporting shared by the benchmark suite's scenarios.

Every scenario measures its cases side by side: :func:`interleaved` runs one
repetition of every case before the next repetition of any, so machine noise
(other work shares these 2 cores) hits all of them alike, and keeps the
median.  A scenario returns :class:`Row` objects; each row names its anchor
(the case it is compared with) and its target, so the table says per row
whether the target is met.
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from dataclasses import dataclass
from importlib import metadata

LIBRARIES = ("xarray-rumi", "numpy", "xarray", "dask", "geozl", "openzl", "rioxarray", "rasterio", "fsspec",
             "pandas")


def interleaved(cases: dict, repeats: int, *, warmup: bool = True) -> dict[str, float]:
    """Median seconds of each ``name -> zero-argument callable``, repetitions interleaved."""
    if warmup:
        for run in cases.values():
            run()
    times = {name: [] for name in cases}
    for _ in range(repeats):
        for name, run in cases.items():
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


@dataclass
class Row:
    """One line of a scenario's table.

    ``ratio`` is oriented so that bigger is better where ``higher_is_better``
    (a speed-up against the anchor), and is a plain quotient otherwise (a time
    or memory multiple of the anchor); ``target`` is a bound on it, or ``None``
    for a row shown for context.
    """

    case: str
    value: float
    unit: str
    anchor: str = ""
    ratio: float | None = None
    target: float | None = None
    higher_is_better: bool = True
    note: str = ""

    @property
    def met(self) -> str:
        if self.target is None or self.ratio is None:
            return ""
        ok = self.ratio >= self.target if self.higher_is_better else self.ratio <= self.target
        return "yes" if ok else "NO"

    @property
    def target_text(self) -> str:
        if self.target is None:
            return ""
        return f"{'>=' if self.higher_is_better else '<='} {self.target:g}"

    def cells(self) -> list[str]:
        ratio = "" if self.ratio is None else f"{self.ratio:.2f}"
        return [self.case, _number(self.value), self.unit, self.anchor, ratio, self.target_text, self.met, self.note]


HEADINGS = ["case", "value", "unit", "anchor", "ratio", "target", "met", "note"]


def _number(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def speed_row(case: str, seconds: float, anchor: str, anchor_seconds: float, target: float | None = None,
              note: str = "") -> Row:
    """A time row whose ratio is the anchor's time over this one (a speed-up: >1 is faster)."""
    return Row(case, seconds * 1e3, "ms", anchor, anchor_seconds / seconds, target, True, note)


def time_row(case: str, seconds: float, anchor: str, anchor_seconds: float, target: float | None = None,
             note: str = "") -> Row:
    """A time row whose ratio is this time over the anchor's (a multiple: <1 is faster)."""
    return Row(case, seconds * 1e3, "ms", anchor, seconds / anchor_seconds, target, False, note)


def text_table(rows: list[Row]) -> str:
    cells = [HEADINGS] + [row.cells() for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(HEADINGS))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def markdown_table(rows: list[Row]) -> str:
    lines = ["| " + " | ".join(HEADINGS) + " |", "|" + "---|" * len(HEADINGS)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row.cells()) + " |" for row in rows]
    return "\n".join(lines)


def environment() -> list[str]:
    """Machine and library versions, one ``name: value`` line each."""
    lines = [
        f"python: {platform.python_version()} ({platform.python_implementation()})",
        f"machine: {platform.machine()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}",
    ]
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
        if model:
            lines.append(f"cpu: {model}")
    except OSError:
        pass
    versions = []
    for name in LIBRARIES:
        try:
            versions.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{name} (absent)")
    lines.append("libraries: " + ", ".join(versions))
    return lines
