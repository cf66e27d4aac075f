"""Sphinx configuration of the hts_lightning documentation (built offline, warnings as errors:
tests/test_docs_build.py)."""

from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path[:0] = [str(DOCS.parent), str(DOCS / "_ext")]

project = "hts_lightning"
author = "hts_lightning developers"
copyright = "2026, hts_lightning developers"

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.intersphinx",
    "sphinx.ext.viewcode",
    "aliases",
]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
myst_heading_anchors = 3
exclude_patterns = ["_build", "_ext", "inventories"]
html_theme = "furo"
html_title = "hts_lightning"
nitpicky = True
# numpy has no inventory here (docs/inventories is made from the packages this site links to)
nitpick_ignore = [("py:class", "numpy.ndarray")]

autodoc_member_order = "bysource"
autodoc_typehints = "signature"
# Overrides of Lightning or TorchRL methods without a docstring of their own stay out.
autodoc_inherit_docstrings = False
# The option types by their names (hts_lightning.choices), not their expanded literals.
autodoc_type_aliases = {
    name: f"hts_lightning.choices.{name}"
    for name in ("CollectorKind", "InferenceMode", "Backend", "EnvBackend", "OnEnvError",
                 "GradientMode", "LrSchedule", "OptimizerName")
}  # fmt: skip
autodoc_default_options = {"members": True, "show-inheritance": True}
napoleon_google_docstring = True
napoleon_numpy_docstring = False
# Keyword Args as a list like Args (several names on one line read as names, not types).
napoleon_use_keyword = False

# The inventories live in docs/inventories (made by docs/inventories/make_inventories.py from
# the installed packages), so the build reads no network.
intersphinx_mapping = {
    name: (url, str(DOCS / "inventories" / f"{name}.inv"))
    for name, url in {
        "python": "https://docs.python.org/3/",
        "torch": "https://docs.pytorch.org/docs/stable/",
        "torchrl": "https://docs.pytorch.org/rl/stable/",
        "tensordict": "https://docs.pytorch.org/tensordict/stable/",
        "lightning": "https://lightning.ai/docs/pytorch/stable/",
    }.items()
}
