"""The baselines anchor reader recovers known curves from a page drawn as baselines' is: a
table of algorithms with colour swatches and one matplotlib SVG per game."""

from __future__ import annotations

import io
import math

import matplotlib
import numpy
import pytest

matplotlib.use("Agg")
from matplotlib import pyplot

from benchmarks.learning import baselines_anchors

STEPS = [i * 101_000 for i in range(100)]  # as on baselines' page: 100 points over 10M
COLOURS = {"ppo2": (102, 194, 165), "a2c": (255, 217, 47)}
CURVES = {  # game -> algorithm -> return at s agent steps, curved so that neighbours matter
    "Pong": {
        "ppo2": lambda s: -21 + 42 / (1 + math.exp(-(s - 2e6) / 4e5)),
        "a2c": lambda s: -20.5 + 3.5e-13 * s**2,
    },
    "Breakout": {"ppo2": lambda s: 3e-5 * s + 20 * math.sin(s / 1e6), "a2c": lambda s: 5.0},
}
#: The half-width of the band drawn around each curve, widening with the steps as the runs part.
HALF_WIDTH = {"ppo2": lambda s: 0.5 + s / 1e6, "a2c": lambda s: 0.2 + 0.1 * math.cos(s / 5e5)}


def _row(name: str) -> str:
    swatch = "rgba({}, {}, {}, 1.0)".format(*COLOURS[name])
    return (
        f'<tr><td style="display: flex"><div style="display: flex"> {name} </div></td>'
        f'<td><div style="background-color:{swatch}">&nbsp;</div></td><td>cron</td></tr>'
    )


def _page(rows: list[str]) -> str:
    parts = [f"<html><table><thead><tr><th> algo </th></tr></thead>{''.join(rows)}</table>"]
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        for game, curves in CURVES.items():
            figure, axes = pyplot.subplots(figsize=(8, 2))
            for name, curve in curves.items():
                colour = "#{:02x}{:02x}{:02x}".format(*COLOURS[name])
                axes.plot(STEPS, [curve(s) for s in STEPS], color=colour)
                middle = numpy.array([curve(s) for s in STEPS])
                half = numpy.array([HALF_WIDTH[name](s) for s in STEPS])
                axes.fill_between(STEPS, middle - half, middle + half, color=colour, alpha=0.3)
            axes.set_title(game)
            axes.grid(True)
            svg = io.StringIO()
            figure.savefig(svg, format="svg")
            pyplot.close(figure)
            parts.append(svg.getvalue()[svg.getvalue().index("<svg") :])
    return "\n".join(parts) + "</html>"


def test_each_curve_is_read_back_as_its_swatchs_algorithm_between_its_points(tmp_path):
    # The table lists the algorithms in the other order than the plots draw them.
    (tmp_path / baselines_anchors.PAGE).write_text(_page([_row("a2c"), _row("ppo2")]))
    plots = baselines_anchors.curves(baselines_anchors.read_page(tmp_path))
    assert list(plots) == ["Pong", "Breakout"]
    for game, curves in CURVES.items():
        assert sorted(plots[game]) == ["a2c", "ppo2"]
        values = [c(s) for c in curves.values() for s in STEPS]
        span = max(values) - min(values)
        for name, curve in curves.items():
            for steps in (1_000_000, 2_050_000, 3_333_333):
                # What the plot shows there: the line between the two points around it.
                drawn = numpy.interp(steps, STEPS, [curve(s) for s in STEPS])
                read = baselines_anchors.value_at(plots[game][name], steps)
                assert read == pytest.approx(drawn, abs=1e-3 * span), (game, name, steps)


def test_each_band_is_read_back_around_its_curve_as_low_and_high_at_the_steps():
    page = _page([_row("a2c"), _row("ppo2")])
    shaded = baselines_anchors.bands(page)
    for game, curves in CURVES.items():
        assert sorted(shaded[game]) == ["a2c", "ppo2"]
        values = [c(s) for c in curves.values() for s in STEPS]
        span = max(values) - min(values)
        for name, curve in curves.items():
            middle = [curve(s) for s in STEPS]
            half = [HALF_WIDTH[name](s) for s in STEPS]
            for steps in (1_000_000, 2_050_000, 3_333_333):
                low = numpy.interp(steps, STEPS, numpy.subtract(middle, half))
                high = numpy.interp(steps, STEPS, numpy.add(middle, half))
                read = baselines_anchors.band_at(shaded[game][name], steps)
                assert read == pytest.approx((low, high), abs=1e-3 * span), (game, name, steps)
    with pytest.raises(ValueError, match="outside the band"):
        baselines_anchors.band_at(shaded["Pong"]["a2c"], 10_500_000)


def test_steps_off_the_curve_and_a_page_whose_plots_lack_an_algorithm_are_refused():
    page = _page([_row("ppo2"), _row("a2c")])
    (curve, *_) = baselines_anchors.curves(page)["Pong"].values()
    with pytest.raises(ValueError, match="outside the curve"):
        baselines_anchors.value_at(curve, 10_500_000)
    COLOURS["trpo_mpi"] = (229, 196, 148)
    try:
        with pytest.raises(ValueError, match=r"Pong: no curve in the colour of \['trpo_mpi'\]"):
            baselines_anchors.curves(_page([_row("ppo2"), _row("a2c"), _row("trpo_mpi")]))
    finally:
        del COLOURS["trpo_mpi"]
