"""Resolves a reference to any name of a documented object: ``hts_lightning.PPO`` and
``hts_lightning.modules.ppo.PPO`` find ``hts_lightning.modules.PPO``, where the API reference
documents it. Objects are matched by identity, so only true aliases resolve; a bare name (a
type hint's ``GradientMode``) resolves when one documented object of ours has it."""

from __future__ import annotations

import importlib

from sphinx.application import Sphinx


def _import(path: str):
    """The object at dotted ``path``, or None."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attribute in parts[cut:]:
                obj = getattr(obj, attribute)
        except AttributeError:
            return None
        return obj
    return None


def _documented(env) -> dict[int, str]:
    """id(object) -> the name it is documented under, for this project's objects."""
    cache = getattr(env, "_alias_targets", None)
    if cache is None:
        cache = {}
        for name in env.domains["py"].objects:
            if name.startswith("hts_lightning."):
                obj = _import(name)
                if obj is not None:
                    cache.setdefault(id(obj), name)
        env._alias_targets = cache
    return cache


def _resolve(app: Sphinx, env, node, contnode):
    if node.get("refdomain") != "py":
        return None
    python, target = env.domains["py"], node["reftarget"]
    if target.startswith("hts_lightning"):
        obj = _import(target)
        name = None if obj is None else _documented(env).get(id(obj))
    elif "." not in target:  # a type hint's bare name (a Literal alias): ours if unique
        found = {n for n in python.objects if n.startswith("hts_lightning.")}
        found = {n for n in found if n.rsplit(".", 1)[-1] == target}
        name = found.pop() if len(found) == 1 else None
    else:
        return None
    if name is None:
        return None
    # "obj" matches any kind: a type alias is documented as data, referenced as a class.
    return python.resolve_xref(env, node["refdoc"], app.builder, "obj", name, node, contnode)


def setup(app: Sphinx) -> dict:
    app.connect("missing-reference", _resolve)
    return {"parallel_read_safe": True}
