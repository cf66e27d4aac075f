"""The baselines anchor reader recovers known curves from a page drawn as baselines' is: a
table of algorithms and one matplotlib SVG per game, the curves in the table's order."""

from __future__ import annotations

import io

import matplotlib
import pytest

matplotlib.use("Agg")
from matplotlib import pyplot

from benchmarks.learning import baselines_anchors

STEPS = [i * 101_000 for i in range(100)]
CURVES = {  # game -> algorithm -> return at s agent steps
    "Pong": {"ppo2": lambda s: -21 + 4e-6 * s, "a2c": lambda s: -20.5 + 2e-6 * s},
    "Breakout": {"ppo2": lambda s: 2e-5 * s, "a2c": lambda s: 5.0},
}


def _page() -> str:
    rows = "".join(f"<tr><td> {name} </td><td>cron</td></tr>" for name in CURVES["Pong"])
    parts = [f"<html><table><thead><tr><th> algo </th><td>user</td></tr></thead>{rows}</table>"]
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        for game, curves in CURVES.items():
            figure, axes = pyplot.subplots(figsize=(8, 2))
            for curve in curves.values():
                axes.plot(STEPS, [curve(s) for s in STEPS])
            axes.set_title(game)
            axes.grid(True)
            svg = io.StringIO()
            figure.savefig(svg, format="svg")
            pyplot.close(figure)
            parts.append(svg.getvalue()[svg.getvalue().index("<svg") :])
    return "\n".join(parts) + "</html>"


def test_the_curves_are_read_back_at_any_step_in_the_tables_order(tmp_path):
    page = tmp_path / baselines_anchors.PAGE
    page.write_text(_page())
    plots = baselines_anchors.curves(baselines_anchors.read_page(tmp_path))
    assert list(plots) == ["Pong", "Breakout"]
    for game, curves in CURVES.items():
        assert list(plots[game]) == ["ppo2", "a2c"]
        for name, curve in curves.items():
            for steps in (1_000_000, 2_050_000, 3_000_000):
                read = baselines_anchors.value_at(plots[game][name], steps)
                # a pixel of the 2-inch-high plot is ~1% of the y range
                span = max(c(s) for c in curves.values() for s in STEPS) - min(
                    c(s) for c in curves.values() for s in STEPS
                )
                assert read == pytest.approx(curve(steps), abs=0.01 * span), (game, name, steps)


def test_a_page_whose_plots_do_not_match_its_table_is_refused(tmp_path):
    page = _page().replace("<tr><td> a2c </td><td>cron</td></tr>", "")
    with pytest.raises(ValueError, match="Pong: 2 curves for 1 algorithms"):
        baselines_anchors.curves(page)
