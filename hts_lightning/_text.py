"""Docstrings as terminal text: the command line's help comes from docstrings written for
Sphinx."""

from __future__ import annotations

import re

__all__ = ["plain_text"]


def plain_text(text: str) -> str:
    """``text`` without reStructuredText's inline markup, for a terminal: the help comes from
    docstrings written for Sphinx (ours, Lightning's, jsonargparse's).

    Example:
        >>> plain_text("``max_epochs = -1`` or a :class:`~datetime.timedelta`")
        'max_epochs = -1 or a datetime.timedelta'
        >>> plain_text("the `Notes <https://docs.pytorch.org/notes.html>`_.")
        'the Notes (https://docs.pytorch.org/notes.html).'
    """
    text = re.sub(r":[a-z]+:`~?([^`]*)`", r"\1", text)  # :class:`x`, :func:`~x` ...
    text = re.sub(r"`([^`<]*?)\s*<([^>`]+)>`__?", r"\1 (\2)", text)  # `text <url>`_
    return text.replace("``", "")
