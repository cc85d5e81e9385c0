"""A small SVG chart writer for the report's plots (planner._results.plots): panels with linear axes.

Plain text out, no plotting library in: an HTML report drew its three plots with matplotlib, whose import
and drawing cost more than a second of a report that reads 10,000 trials (docs/speed.md). What the
report's plots use is here and nothing more: lines (a NaN or an infinity breaks a line, as matplotlib
breaks it), bands between two curves, points, horizontal bars, vertical rules, text, a legend, and
axes with round ticks (1, 2 or 5 times a power of ten) and a light grid.

Every text (metric and arm names come from a run folder) is escaped as XML; the SVG goes into the page
as an `<img>`, where a browser runs no script and loads nothing it names.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape
from typing import Any

FONT = "DejaVu Sans, Helvetica, Arial, sans-serif"
TEXT = "#24292f"
AXIS = "#57606a"
GRID = "#d0d7de"
CHAR_EM = (
    0.62  # the width of an average character, in ems: to lay out labels without measuring them
)


def text_width(text: str, size: float) -> float:
    """About how wide `text` is drawn at font size `size` (px)."""
    return len(text) * size * CHAR_EM


def nice_ticks(lo: float, hi: float, most: int = 6, integer: bool = False) -> list[float]:
    """Round values from `lo` to `hi`, at most about `most` of them, at 1, 2 or 5 times a power of ten
    (whole numbers only with `integer`)."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo] if math.isfinite(lo) else []
    raw = (hi - lo) / max(most - 1, 1)
    if not math.isfinite(raw) or raw <= 0:
        return [lo, hi]
    power = 10.0 ** math.floor(math.log10(raw))
    if not power > 0:  # a span of subnormal floats: no round step fits it
        return [lo, hi]
    step = next((m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw), 10 * power)
    if integer:
        step = max(1.0, float(math.ceil(step)))
    first = math.ceil(lo / step)
    ticks = []
    k = first
    while k * step <= hi * (1 + 1e-12) + (1e-12 if hi == 0 else 0) and len(ticks) < 4 * most:
        ticks.append(k * step)
        k += 1
    return ticks


def tick_label(value: float, ticks: Sequence[float]) -> str:
    """A tick's text: as many decimals as the ticks' spacing needs; very large or small values as %g."""
    if value == 0:
        return "0"
    step = abs(ticks[1] - ticks[0]) if len(ticks) > 1 else abs(value)
    magnitude = max(abs(t) for t in ticks)
    if 1e-4 <= magnitude < 1e6 and step > 0:
        decimals = max(0, -math.floor(math.log10(step) + 1e-9))
        return f"{value:.{decimals}f}"
    return f"{value:.3g}"


_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _text(value: Any) -> str:
    """`value` as XML text or attribute: escaped, and a character XML cannot hold (a control character, a lone
    surrogate from a damaged file) as U+FFFD; else the whole image would not parse and show blank."""
    return escape(_NOT_XML.sub("\ufffd", str(value)), quote=True)


def _num(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".")


def _points(points: Any) -> str:
    return " ".join(f"{_num(x)},{_num(y)}" for x, y in points)


def _attrs(**attrs: Any) -> str:
    return "".join(
        f' {key.rstrip("_").replace("_", "-")}="{_text(value)}"'
        for key, value in attrs.items()
        if value is not None
    )


def _dash(style: str | None, width: float) -> str | None:
    return {"--": f"{4 * width:.1f} {2 * width:.1f}", ":": f"{width:.1f} {1.6 * width:.1f}"}.get(
        style or ""
    )


def _finite_runs(*columns: Sequence[float]) -> list[list[int]]:
    """Index runs where every column is finite (where a NaN or an infinity breaks a line or a band)."""
    runs: list[list[int]] = []
    current: list[int] = []
    for i, values in enumerate(zip(*columns, strict=True)):
        if all(isinstance(v, int | float) and math.isfinite(v) for v in values):
            current.append(i)
        elif current:
            runs.append(current)
            current = []
    if current:
        runs.append(current)
    return runs


@dataclass
class Panel:
    """One plot area of a chart: marks in data units, drawn when the chart is written."""

    left: float
    top: float
    width: float
    height: float
    title: str | None = None
    xlabel: str | None = None
    ylabel: str | None = None
    x_integer: bool = False
    x_margin: float = 0.05  # of the data's span, on each side (matplotlib's default margins)
    y_margin: float = 0.05
    x_from_zero: bool = False
    y_range: tuple[float, float] | None = None
    y_labels: list[tuple[float, str]] | None = (
        None  # categorical y ticks (value, text); else numeric ticks
    )
    grid: str = "both"  # "x", "y", "both" or "none"
    note: str | None = None  # a text in the middle instead of axes (nothing to plot)
    legend: list[tuple[str, str, str | None, str]] = field(
        default_factory=list
    )  # label, color, dash, kind
    legend_at: str = "upper left"
    _marks: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    _xs: list[float] = field(default_factory=list)
    _ys: list[float] = field(default_factory=list)

    def _extent(self, xs: Sequence[float] = (), ys: Sequence[float] = ()) -> None:
        self._xs += [float(v) for v in xs if math.isfinite(v)]
        self._ys += [float(v) for v in ys if math.isfinite(v)]

    def line(
        self,
        xs: Sequence[float],
        ys: Sequence[float],
        color: str,
        width: float = 1.5,
        dash: str | None = None,
        label: str | None = None,
    ) -> None:
        xs, ys = [float(v) for v in xs], [float(v) for v in ys]
        self._extent(xs, ys)
        self._marks.append(
            ("line", {"xs": xs, "ys": ys, "color": color, "width": width, "dash": dash})
        )
        if label is not None:
            self.legend.append((label, color, dash, "line"))

    def band(
        self,
        xs: Sequence[float],
        lo: Sequence[float],
        hi: Sequence[float],
        color: str,
        opacity: float = 0.18,
    ) -> None:
        xs, lo, hi = [float(v) for v in xs], [float(v) for v in lo], [float(v) for v in hi]
        self._extent(xs, lo)
        self._extent((), hi)
        self._marks.append(
            ("band", {"xs": xs, "lo": lo, "hi": hi, "color": color, "opacity": opacity})
        )

    def point(self, x: float, y: float, color: str, radius: float = 4.0) -> None:
        self._extent([x], [y])
        self._marks.append(("point", {"x": float(x), "y": float(y), "color": color, "r": radius}))

    def hbar(
        self,
        y: float,
        width: float,
        left: float,
        color: str,
        height: float = 0.8,
        opacity: float = 1.0,
        label: str | None = None,
    ) -> None:
        self._extent([left, left + width], [])
        self._marks.append(
            (
                "hbar",
                {
                    "y": y,
                    "w": float(width),
                    "left": float(left),
                    "color": color,
                    "h": height,
                    "opacity": opacity,
                },
            )
        )
        if label is not None and all(entry[0] != label for entry in self.legend):
            self.legend.append((label, color, None, "box"))

    def vline(
        self,
        x: float,
        color: str,
        width: float = 1.0,
        dash: str | None = None,
        label: str | None = None,
        extent: bool = True,
    ) -> None:
        if extent:
            self._extent([x], [])
        self._marks.append(("vline", {"x": float(x), "color": color, "width": width, "dash": dash}))
        if label is not None:
            self.legend.append((label, color, dash, "line"))

    def text(
        self, x: float, y: float, text: str, color: str = TEXT, size: float = 12, dx: float = 0.0
    ) -> None:
        """`text` at (x, y) in data units, shifted `dx` px right, left-aligned and centred on y."""
        self._marks.append(
            (
                "text",
                {
                    "x": float(x),
                    "y": float(y),
                    "text": text,
                    "color": color,
                    "size": size,
                    "dx": dx,
                },
            )
        )

    # -- drawing -------------------------------------------------------------------------------------------

    def _range(
        self, values: list[float], margin: float, from_zero: bool = False
    ) -> tuple[float, float]:
        if from_zero:
            values = [*values, 0.0]
        if not values:
            return 0.0, 1.0
        lo, hi = min(values), max(values)
        if hi == lo:
            pad = abs(lo) * 0.05 or 0.5
            return lo - pad, hi + pad
        span = hi - lo
        lo, hi = (lo if from_zero and lo >= 0 else lo - margin * span), hi + margin * span
        return (max(lo, -1.7e308), min(hi, 1.7e308))

    def draw(self) -> list[str]:
        out = []
        box = _attrs(
            x=_num(self.left), y=_num(self.top), width=_num(self.width), height=_num(self.height)
        )
        if self.note is not None:
            out.append(
                f"<text{_attrs(x=_num(self.left + self.width / 2), y=_num(self.top + self.height / 2))}"
                f' text-anchor="middle" dominant-baseline="middle" font-size="13">{_text(self.note)}</text>'
            )
            return out
        x0, x1 = self._range(self._xs, self.x_margin, self.x_from_zero)
        y0, y1 = self.y_range or self._range(self._ys, self.y_margin)

        def sx(v: float) -> float:
            return self.left + (v - x0) / (x1 - x0) * self.width

        def sy(v: float) -> float:
            return self.top + self.height - (v - y0) / (y1 - y0) * self.height

        clip = f"c{id(self)}"
        out.append(f'<clipPath id="{clip}"><rect{box}/></clipPath>')
        xticks = nice_ticks(x0, x1, max(4, int(self.width // 60)), self.x_integer)
        yticks = (
            [] if self.y_labels is not None else nice_ticks(y0, y1, max(4, int(self.height // 32)))
        )
        for t in xticks if self.grid in ("x", "both") else []:
            out.append(
                f"<line{_attrs(x1=_num(sx(t)), x2=_num(sx(t)), y1=_num(self.top), y2=_num(self.top + self.height))}"
                f' stroke="{GRID}" stroke-width="0.8"/>'
            )
        for t in yticks if self.grid in ("y", "both") else []:
            out.append(
                f"<line{_attrs(x1=_num(self.left), x2=_num(self.left + self.width), y1=_num(sy(t)), y2=_num(sy(t)))}"
                f' stroke="{GRID}" stroke-width="0.8"/>'
            )
        out.append(f'<g clip-path="url(#{clip})">')
        for kind, m in self._marks:
            out += self._mark(kind, m, sx, sy)
        out.append("</g>")
        out.append(f'<rect{box} fill="none" stroke="{AXIS}" stroke-width="0.8"/>')
        bottom = self.top + self.height
        for t in xticks:
            out.append(
                f"<line{_attrs(x1=_num(sx(t)), x2=_num(sx(t)), y1=_num(bottom), y2=_num(bottom + 4))}"
                f' stroke="{AXIS}"/><text{_attrs(x=_num(sx(t)), y=_num(bottom + 16))}'
                f' text-anchor="middle" font-size="11">{_text(tick_label(t, xticks))}</text>'
            )
        for value, label in self.y_labels or [(t, tick_label(t, yticks)) for t in yticks]:
            y = sy(value)
            out.append(
                f"<line{_attrs(x1=_num(self.left - 4), x2=_num(self.left), y1=_num(y), y2=_num(y))}"
                f' stroke="{AXIS}"/><text{_attrs(x=_num(self.left - 7), y=_num(y))} text-anchor="end"'
                f' dominant-baseline="middle" font-size="11">{_text(label)}</text>'
            )
        if self.title:
            out.append(
                f"<text{_attrs(x=_num(self.left + self.width / 2), y=_num(self.top - 8))}"
                f' text-anchor="middle" font-size="13">{_text(self.title)}</text>'
            )
        if self.xlabel:
            out.append(
                f"<text{_attrs(x=_num(self.left + self.width / 2), y=_num(bottom + 34))}"
                f' text-anchor="middle" font-size="12">{_text(self.xlabel)}</text>'
            )
        if self.ylabel:
            x, y = self.left - 46, self.top + self.height / 2
            out.append(
                f"<text{_attrs(x=_num(x), y=_num(y), transform=f'rotate(-90 {_num(x)} {_num(y)})')}"
                f' text-anchor="middle" font-size="12">{_text(self.ylabel)}</text>'
            )
        out += self._legend()
        return out

    def _mark(self, kind: str, m: dict[str, Any], sx, sy) -> list[str]:
        if kind == "line":
            style = _attrs(
                stroke=m["color"],
                stroke_width=m["width"],
                stroke_dasharray=_dash(m["dash"], m["width"]),
            )
            xs, ys = m["xs"], m["ys"]
            return [
                f'<polyline points="{_points((sx(xs[i]), sy(ys[i])) for i in run)}"{style} fill="none"'
                ' stroke-linejoin="round"/>'
                for run in _finite_runs(xs, ys)
            ]
        if kind == "band":
            out = []
            xs, lo, hi = m["xs"], m["lo"], m["hi"]
            for run in _finite_runs(xs, lo, hi):
                edge = [(sx(xs[i]), sy(hi[i])) for i in run] + [
                    (sx(xs[i]), sy(lo[i])) for i in reversed(run)
                ]
                out.append(
                    f'<polygon points="{_points(edge)}"'
                    f'{_attrs(fill=m["color"], fill_opacity=m["opacity"])} stroke="none"/>'
                )
            return out
        if kind == "point":
            if not (math.isfinite(m["x"]) and math.isfinite(m["y"])):
                return []
            return [
                f"<circle{_attrs(cx=_num(sx(m['x'])), cy=_num(sy(m['y'])), r=m['r'], fill=m['color'])}/>"
            ]
        if kind == "hbar":
            if not all(math.isfinite(v) for v in (m["w"], m["left"])) or m["w"] == 0:
                return []
            a, b = sx(m["left"]), sx(m["left"] + m["w"])
            top, bottom = sy(m["y"] + m["h"] / 2), sy(m["y"] - m["h"] / 2)
            return [
                f"<rect{_attrs(x=_num(min(a, b)), y=_num(top), width=_num(abs(b - a)), height=_num(bottom - top))}"
                f"{_attrs(fill=m['color'], fill_opacity=m['opacity'])}/>"
            ]
        if kind == "vline":
            if not math.isfinite(m["x"]):
                return []
            x = _num(sx(m["x"]))
            return [
                f"<line{_attrs(x1=x, x2=x, y1=_num(self.top), y2=_num(self.top + self.height))}"
                f"{_attrs(stroke=m['color'], stroke_width=m['width'], stroke_dasharray=_dash(m['dash'], m['width']))}/>"
            ]
        if not (math.isfinite(m["x"]) and math.isfinite(m["y"])):  # text
            return []
        return [
            f"<text{_attrs(x=_num(sx(m['x']) + m['dx']), y=_num(sy(m['y'])), fill=m['color'])}"
            f' dominant-baseline="middle" font-size="{_num(m["size"])}">{_text(m["text"])}</text>'
        ]

    def _legend(self) -> list[str]:
        if not self.legend:
            return []
        size, row = 11, 15
        wide = max(text_width(label, size) for label, *_ in self.legend) + 30
        out = []
        if self.legend_at == "below":  # one row under the x label, outside the data
            x, cy = self.left, self.top + self.height + 54
            for label, color, dash, kind in self.legend:
                out += self._key(x, cy, label, color, dash, kind, size)
                x += text_width(label, size) + 40
            return out
        x = self.left + 8 if self.legend_at.endswith("left") else self.left + self.width - wide - 8
        y = (
            self.top + 10
            if self.legend_at.startswith("upper")
            else self.top + self.height - row * len(self.legend) - 4
        )
        out.append(
            f"<rect{_attrs(x=_num(x - 4), y=_num(y - 2), width=_num(wide), height=_num(row * len(self.legend) + 4))}"
            ' fill="#ffffff" fill-opacity="0.85"/>'
        )  # over the data it lies on, as matplotlib's frame
        for i, (label, color, dash, kind) in enumerate(self.legend):
            out += self._key(x, y + i * row + row / 2, label, color, dash, kind, size)
        return out

    @staticmethod
    def _key(
        x: float, cy: float, label: str, color: str, dash: str | None, kind: str, size: float
    ) -> list[str]:
        """One legend entry: its sample (a line or a box) and its label."""
        if kind == "box":
            sample = f"<rect{_attrs(x=_num(x), y=_num(cy - 5), width=18, height=10, fill=color)}/>"
        else:
            sample = (
                f"<line{_attrs(x1=_num(x), x2=_num(x + 18), y1=_num(cy), y2=_num(cy), stroke=color)}"
                f"{_attrs(stroke_width=1.8, stroke_dasharray=_dash(dash, 1.2))}/>"
            )
        return [
            sample,
            f'<text{_attrs(x=_num(x + 24), y=_num(cy))} dominant-baseline="middle"'
            f' font-size="{size}">{_text(label)}</text>',
        ]


@dataclass
class Chart:
    """An SVG of `width` x `height` px holding panels."""

    width: float
    height: float
    panels: list[Panel] = field(default_factory=list)

    def panel(self, left: float, top: float, width: float, height: float, **options: Any) -> Panel:
        panel = Panel(left, top, max(width, 10.0), max(height, 10.0), **options)
        self.panels.append(panel)
        return panel

    def svg(self) -> bytes:
        parts = [
            f'<svg xmlns="http://www.w3.org/2000/svg"{_attrs(width=_num(self.width), height=_num(self.height))}'
            f' viewBox="0 0 {_num(self.width)} {_num(self.height)}"{_attrs(font_family=FONT, fill=TEXT)}>',
            f'<rect width="{_num(self.width)}" height="{_num(self.height)}" fill="#ffffff"/>',
        ]
        for panel in self.panels:
            parts += panel.draw()
        parts.append("</svg>")
        return "\n".join(parts).encode("utf-8")
