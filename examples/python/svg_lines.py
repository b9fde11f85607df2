"""A small line plot as SVG text, in pure Python (no matplotlib needed).

    svg = line_plot(xs, {"name": [y0, y1, ...], ...}, title=..., xlabel=..., ylabel=..., log_y=True)

xs are the x values shared by every series. One polyline per series, a legend in the
series' order, ticks at round values (powers of ten and 2x, 5x in between on
a log axis)."""

import math
from xml.sax.saxutils import escape

PALETTE = ["#000000", "#1f77b4", "#2ca02c", "#17becf", "#9467bd", "#d62728", "#ff7f0e", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22"]


def _nice_step(span, ticks=6):
    raw = span / ticks
    mag = 10 ** math.floor(math.log10(raw))
    return next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)


def _linear_ticks(lo, hi):
    step = _nice_step(hi - lo)
    first = math.ceil(lo / step) * step
    return [first + i * step for i in range(int((hi - first) / step + 1e-9) + 1)]


def _log_ticks(lo, hi):
    """The powers of ten inside [lo, hi] if there are 4 or more, else 1, 2 and 5 times them,
    else (a span of less than a decade or so) every whole multiple."""
    for multiples in ((1,), (1, 2, 5), (1, 2, 3, 4, 5, 6, 7, 8, 9)):
        ticks = [m * 10.0**e for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
                 for m in multiples]
        ticks = [t for t in ticks if lo <= t <= hi]
        if len(ticks) >= 4:
            break
    return ticks


def _label(v):
    return f"{v:.6g}"


def line_plot(xs, series, *, title="", xlabel="", ylabel="", legend_title="", log_y=False, styles=None, width=760,
              height=480):
    """series: name -> list of y values. styles: name -> {"color": ..., "dash": "6,3"} (optional)."""
    styles = styles or {}
    left, right, top, bottom = 70, 250, 40, 50  # the legend sits in the right margin
    pw, ph = width - left - right, height - top - bottom
    xlo, xhi = min(xs), max(xs)
    values = [y for ys in series.values() for y in ys]
    ylo, yhi = min(values), max(values)
    if log_y:
        f = math.log10
        ylo, yhi = 10 ** (math.floor(f(ylo) * 10) / 10), 10 ** (math.ceil(f(yhi) * 10) / 10)
        yticks = _log_ticks(ylo, yhi)
    else:
        f = float
        pad = (yhi - ylo) * 0.05 or 1.0
        ylo, yhi = ylo - pad, yhi + pad
        yticks = _linear_ticks(ylo, yhi)

    def px(x):
        return left + pw * (x - xlo) / ((xhi - xlo) or 1)

    def py(y):
        return top + ph * (1 - (f(y) - f(ylo)) / (f(yhi) - f(ylo)))

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{left + pw / 2}" y="22" text-anchor="middle" font-size="15">{escape(title)}</text>']
    for t in yticks:
        y = py(t)
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + pw}" y2="{y:.1f}" stroke="#e4e4e4"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{_label(t)}</text>')
    for t in _linear_ticks(xlo, xhi):
        x = px(t)
        out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + ph}" stroke="#f0f0f0"/>')
        out.append(f'<text x="{x:.1f}" y="{top + ph + 18}" text-anchor="middle">{_label(t)}</text>')
    out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#444"/>')
    out.append(f'<text x="{left + pw / 2}" y="{height - 10}" text-anchor="middle">{escape(xlabel)}</text>')
    out.append(f'<text transform="translate(18,{top + ph / 2}) rotate(-90)" text-anchor="middle">'
               f'{escape(ylabel)}</text>')
    legend_top = top
    if legend_title:
        out.append(f'<text x="{left + pw + 12}" y="{top + 4}" font-weight="bold">{escape(legend_title)}</text>')
        legend_top += 18
    for k, (name, ys) in enumerate(series.items()):
        style = styles.get(name, {})
        color = style.get("color", PALETTE[k % len(PALETTE)])
        dash = f' stroke-dasharray="{style["dash"]}"' if style.get("dash") else ""
        points = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in zip(xs, ys))
        out.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.5"{dash} points="{points}"/>')
        ly = legend_top + 14 + 18 * k
        out.append(f'<line x1="{left + pw + 12}" y1="{ly - 4}" x2="{left + pw + 40}" y2="{ly - 4}" '
                   f'stroke="{color}" stroke-width="2"{dash}/>')
        out.append(f'<text x="{left + pw + 46}" y="{ly}">{escape(name)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
