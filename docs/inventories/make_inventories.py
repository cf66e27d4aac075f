"""Writes the intersphinx inventories the docs build reads (no network at build time).

The published ``objects.inv`` files cannot be fetched where the docs are built, so each
inventory is made from the installed package: every public name of the modules below, under
its public path and its defining path (type hints name the latter), linked to the page that
the project's own documentation gives it. Run it again after a dependency upgrade:

    python docs/inventories/make_inventories.py
"""

from __future__ import annotations

import importlib
import inspect
import sys
import warnings
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent

# inventory -> (version's distribution, modules whose public names it holds)
PACKAGES = {
    "python": (None, [
        "builtins", "typing", "collections", "collections.abc", "pathlib", "os", "enum",
        "dataclasses", "contextlib", "functools", "logging", "signal", "subprocess",
        "multiprocessing", "multiprocessing.context", "threading", "types", "argparse",
        "numbers", "abc", "datetime", "io", "concurrent.futures",
    ]),
    "torch": ("torch", [
        "torch", "torch.nn", "torch.nn.utils", "torch.optim", "torch.optim.lr_scheduler",
        "torch.distributions", "torch.utils.data", "torch.multiprocessing", "torch.cuda",
        "torch.distributed", "torch.nn.parallel", "torch.autograd",
    ]),
    "torchrl": ("torchrl", [
        "torchrl.envs", "torchrl.envs.transforms", "torchrl.envs.libs.gym", "torchrl.envs.utils",
        "torchrl.collectors", "torchrl.data", "torchrl.modules", "torchrl.modules.distributions",
        "torchrl.objectives", "torchrl.objectives.value",
    ]),
    "tensordict": ("tensordict", ["tensordict", "tensordict.nn"]),
    "lightning": ("lightning", [
        "lightning.pytorch", "lightning.pytorch.callbacks", "lightning.pytorch.loggers",
        "lightning.pytorch.strategies", "lightning.pytorch.cli", "lightning.pytorch.core",
        "lightning.pytorch.plugins",
    ]),
}  # fmt: skip


def page(inventory: str, public: str, obj: object) -> str:
    """The page (relative to the docs' root) of ``obj`` documented as ``public``."""
    if inventory == "python":
        module = public.rsplit(".", 1)[0] if "." in public else "builtins"
        if module == "builtins":
            is_error = isinstance(obj, type) and issubclass(obj, BaseException)
            return f"library/{'exceptions' if is_error else 'functions'}.html#{public}"
        return f"library/{module}.html#{public}"
    if inventory == "lightning":
        defined = f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', '')}"
        return f"api/{defined}.html#{defined}"
    root = "generated" if inventory == "torch" else "reference/generated"
    return f"{root}/{public}.html#{public}"


def entries(inventory: str, modules: list[str]):
    """(name, role, uri) for every public name of ``modules`` and their classes' methods."""
    seen = set()
    for module_name in modules:
        module = importlib.import_module(module_name)
        names = getattr(module, "__all__", None) or [n for n in vars(module) if n[0] != "_"]
        for name in names:
            obj = getattr(module, name, None)
            if obj is None or inspect.ismodule(obj):
                continue
            public = name if module_name == "builtins" else f"{module_name}.{name}"
            uri = page(inventory, public, obj)
            aliases = {public}
            defined = getattr(obj, "__module__", None)
            if isinstance(defined, str) and hasattr(obj, "__qualname__"):
                aliases.add(f"{defined}.{obj.__qualname__}".removeprefix("builtins."))
            roles = ["class", "exception"] if isinstance(obj, type) else ["function", "data"]
            for alias in aliases:
                for role in [*roles, "class", "data", "obj"]:
                    if (alias, role) not in seen:
                        seen.add((alias, role))
                        yield alias, role, uri
                if not isinstance(obj, type):
                    continue
                for member, value in vars(obj).items():
                    if member[0] == "_" or not (callable(value) or isinstance(value, property)):
                        continue
                    anchor = uri.split("#")[0] + f"#{public}.{member}"
                    for role in ("method", "attribute", "property"):
                        if (f"{alias}.{member}", role) not in seen:
                            seen.add((f"{alias}.{member}", role))
                            yield f"{alias}.{member}", role, anchor


def write(inventory: str, distribution: str | None, modules: list[str]) -> int:
    from importlib.metadata import version

    release = version(distribution) if distribution else sys.version.split()[0]
    found = entries(inventory, modules)
    lines = sorted({f"{name} py:{role} 1 {uri} -" for name, role, uri in found})
    header = (
        "# Sphinx inventory version 2\n"
        f"# Project: {inventory}\n# Version: {release}\n"
        "# The remainder of this file is compressed using zlib.\n"
    )
    body = zlib.compress(("\n".join(lines) + "\n").encode())
    (HERE / f"{inventory}.inv").write_bytes(header.encode() + body)
    return len(lines)


if __name__ == "__main__":
    warnings.simplefilter("ignore")  # deprecation notices of the names walked
    for name, (distribution, modules) in PACKAGES.items():
        print(f"{name}: {write(name, distribution, modules)} entries")
