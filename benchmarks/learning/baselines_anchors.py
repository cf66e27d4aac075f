"""OpenAI baselines' Atari 10M curves read off their published page, at chosen agent steps.

``benchmarks_atari10M.htm`` (openai/baselines, repository root) holds a table and one
matplotlib SVG per game, each the mean over 6 runs of every algorithm's episode return against
agent steps (10M, frame skip 4). The page has no data file: this reads the curves' points from
the SVG paths, maps pixels to values by the axes' tick marks, and interpolates at the steps
asked for. Each curve is the algorithm whose colour swatch in the table has the curve's colour
(on the page: the three algorithms at 0.0 in the table's Enduro column are its three flat lines
at 0). ``anchors.csv`` takes its baselines rows from this output. ``--bands`` adds the shaded
band drawn around each curve at those steps (the page does not say whether it is the 6 runs'
standard deviation or their standard error): how far apart the runs were.

    python -m benchmarks baselines_anchors <openai/baselines checkout or git dir or the .htm>
        [--games Pong Breakout] [--steps 1000000 2000000 3000000] [--bands]
"""

from __future__ import annotations

import argparse
import bisect
import re
import subprocess
import xml.etree.ElementTree as ElementTree
from pathlib import Path

PAGE = "benchmarks_atari10M.htm"
_SVG = "{http://www.w3.org/2000/svg}"
_NUMBER = re.compile(r"^-?\d+(\.\d+)?(e-?\d+)?$")
_POINT = re.compile(r"[ML] (-?[\d.]+) (-?[\d.]+)")
_XLINK = "{http://www.w3.org/1999/xlink}href"


def read_page(source: Path) -> str:
    """The page's text from a checkout of openai/baselines, its git directory, or the file."""
    if source.is_file():
        return source.read_text()
    if (source / PAGE).is_file():
        return (source / PAGE).read_text()
    return subprocess.run(
        ["git", "-C", str(source), "show", f"HEAD:{PAGE}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def algorithms(page: str) -> dict[str, str]:
    """The table's algorithms by the colour of their swatch (``#rrggbb``), in its row order."""
    table = page[page.index("<table") : page.index("</table>")]
    found = {}
    for row in re.findall(r"<tr>(.*?)</tr>", table, re.S)[1:]:
        name = re.sub(r"<.*?>", "", re.search(r"<t[dh][^>]*>(.*?)</t[dh]>", row, re.S)[1])
        rgb = re.search(r"background-color:\s*rgba?\((\d+),\s*(\d+),\s*(\d+)", row)
        if rgb is None:
            raise ValueError(f"the table's row of {name.strip()!r} has no colour swatch")
        found["#{:02x}{:02x}{:02x}".format(*map(int, rgb.groups()))] = name.strip()
    return found


def _number(text: str) -> float | None:
    text = text.strip().replace("\u2212", "-")  # matplotlib writes a true minus sign
    return float(text) if _NUMBER.match(text) else None


def _ticks(svg: ElementTree.Element, axis: str) -> list[tuple[float, float]]:
    """(pixel, value) of each labelled tick of ``axis`` ("x" or "y"), from its grid line."""
    ticks = []
    for group in svg.iter(f"{_SVG}g"):
        if not re.fullmatch(f"{axis}tick_\\d+", group.get("id", "")):
            continue
        x, y = map(float, _POINT.search(group.find(f".//{_SVG}path").get("d")).groups())
        value = _number("".join(group.find(f".//{_SVG}text").itertext()))
        if value is not None:
            ticks.append((x if axis == "x" else y, value))
    return ticks


def _scale(ticks: list[tuple[float, float]], factor: float = 1.0):
    (p0, v0), (p1, v1) = ticks[0], ticks[-1]
    return lambda pixel: (v0 + (pixel - p0) * (v1 - v0) / (p1 - p0)) * factor


def _plots(page: str):
    """(game, svg, pixel -> agent steps, pixel -> return) for every plot of the page."""
    for chunk in re.findall(r"<svg.*?</svg>", page, re.S):
        svg = ElementTree.fromstring(chunk)
        texts = ["".join(t.itertext()).strip() for t in svg.iter(f"{_SVG}text")]
        # The x axis's offset ("1e7") multiplies its tick labels; the title is the other text.
        offset = next((float(t) for t in texts if re.fullmatch(r"1e\d+", t)), 1.0)
        (game,) = [t for t in texts if _number(t) is None and not re.fullmatch(r"1e\d+", t)]
        yield game, svg, _scale(_ticks(svg, "x"), offset), _scale(_ticks(svg, "y"))


def curves(page: str) -> dict[str, dict[str, list[tuple[float, float]]]]:
    """{game: {algorithm: [(agent steps, mean return), ...]}} for every plot of the page."""
    names = algorithms(page)
    found: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for game, svg, to_x, to_y in _plots(page):
        found[game] = {}
        for path in svg.iter(f"{_SVG}path"):
            style = path.get("style", "").replace(" ", "")  # newer matplotlib spaces it
            points = _POINT.findall(path.get("d", ""))
            colour = re.search(r"stroke:(#[0-9a-f]{6})", style)
            # A curve: an unfilled line of many points in an algorithm's colour (grid lines
            # have two points; the bands around the curves are filled).
            if "fill:none" in style and colour and colour[1] in names and len(points) > 10:
                curve = [(to_x(float(x)), to_y(float(y))) for x, y in points]
                found[game][names[colour[1]]] = curve
        if len(found[game]) != len(names):
            missing = sorted(set(names.values()) - set(found[game]))
            raise ValueError(f"{game}: no curve in the colour of {missing}")
    return found


def bands(page: str) -> dict[str, dict[str, list[tuple[float, float]]]]:
    """{game: {algorithm: the outline of the band around its curve, [(agent steps, return),
    ...]}}. matplotlib draws a band as a filled path defined once and placed by a ``<use>``
    element at an offset."""
    names = algorithms(page)
    found: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for game, svg, to_x, to_y in _plots(page):
        placed = {
            use.get(_XLINK).lstrip("#"): (float(use.get("x", 0)), float(use.get("y", 0)))
            for use in svg.iter(f"{_SVG}use")
            if re.search(r"fill:#[0-9a-f]{6}", use.get("style", "").replace(" ", ""))
        }
        found[game] = {}
        for path in svg.iter(f"{_SVG}path"):
            colour = re.search(r"stroke:(#[0-9a-f]{6})", path.get("style", "").replace(" ", ""))
            if path.get("id") in placed and colour and colour[1] in names:
                dx, dy = placed[path.get("id")]
                outline = _POINT.findall(path.get("d", ""))
                band = [(to_x(float(x) + dx), to_y(float(y) + dy)) for x, y in outline]
                found[game][names[colour[1]]] = band
    return found


def band_at(band: list[tuple[float, float]], steps: float) -> tuple[float, float]:
    """The band's (lowest, highest) return at ``steps``: where its outline crosses them."""
    crossings = [
        y0 + (steps - x0) * (y1 - y0) / (x1 - x0)
        for (x0, y0), (x1, y1) in zip(band, band[1:] + band[:1], strict=True)
        if x0 != x1 and min(x0, x1) <= steps <= max(x0, x1)
    ]
    if not crossings:
        raise ValueError(f"{steps} agent steps is outside the band")
    return min(crossings), max(crossings)


def value_at(curve: list[tuple[float, float]], steps: float) -> float:
    """The curve's return at ``steps``, linearly between its two nearest points."""
    xs = [x for x, _ in curve]
    if not xs[0] <= steps <= xs[-1]:
        raise ValueError(f"{steps} agent steps is outside the curve ({xs[0]:.0f}-{xs[-1]:.0f})")
    i = min(max(bisect.bisect_left(xs, steps), 1), len(xs) - 1)
    (x0, y0), (x1, y1) = curve[i - 1], curve[i]
    return y0 + (steps - x0) * (y1 - y0) / (x1 - x0)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("source", type=Path, help=f"a checkout of openai/baselines or {PAGE}")
    parser.add_argument("--games", nargs="+", default=["Pong", "Breakout"])
    parser.add_argument("--steps", nargs="+", type=int, default=[1_000_000, 2_000_000, 3_000_000])
    parser.add_argument("--bands", action="store_true", help="add each curve's band (low..high)")
    args = parser.parse_args(argv)
    page = read_page(args.source)
    plots, shaded = curves(page), bands(page) if args.bands else {}
    print("game,algorithm," + ",".join(str(s) for s in args.steps))
    for game in args.games:
        for name, curve in plots[game].items():
            cells = []
            for steps in args.steps:
                cell = f"{value_at(curve, steps):.1f}"
                if name in shaded.get(game, {}):
                    cell += " ({:.1f}..{:.1f})".format(*band_at(shaded[game][name], steps))
                cells.append(cell)
            print(f"{game},{name}," + ",".join(cells))


if __name__ == "__main__":
    main()
