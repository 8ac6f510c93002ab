"""Registries of what fslab is extended with (filesystems, workload kinds, monitors, report
formats, the journal's makers), read lazily.

An implementation joins its registry from its own module, as that module is imported
(`REGISTRY.add(name, it)`, or a decorator that calls it). fslab's own implementations are named
in the registry's `shipped` table (name → module) and imported only when one is asked for; those
of installed packages come from their entry points of group `fslab.plugins` (each naming a module
to import), imported only when a name is not found or every name is listed. Nothing a study
file says ever names code to load: a study names a filesystem, never a module.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator, Mapping
from typing import TypeVar

from fslab.core.errors import FslabError

PLUGINS = "fslab.plugins"  # the entry-point group of installed packages that extend fslab

T = TypeVar("T")

_plugins_loaded = False
_packages_loaded: set[str] = set()


class PluginFailed(FslabError):
    """An installed package's fslab plugin that could not be imported."""


def load_plugins() -> None:
    """Import, once, each module installed packages name in the `fslab.plugins` entry-point group:
    each joins its registries as it is imported."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    from importlib.metadata import entry_points  # tens of milliseconds: only for a name listed or not found

    for point in entry_points(group=PLUGINS):
        try:
            point.load()
        except Exception as exc:  # a broken plugin is named, not a traceback
            raise PluginFailed(
                f"the fslab plugin {point.name!r} ({point.value}, entry point "
                f"group {PLUGINS}) cannot be imported: {exc}: fix or uninstall it"
            ) from exc


def load(package: str) -> None:
    """For a registry whose every implementation is read at once (monitors, report formats):
    import every module of fslab's package `package` once (each joins its registry as it is
    imported), then the plugins."""
    if package not in _packages_loaded:
        _packages_loaded.add(package)
        for module in pkgutil.iter_modules(importlib.import_module(package).__path__):
            importlib.import_module(f"{package}.{module.name}")
    load_plugins()


class Registry(Mapping[str, T]):
    """Name → implementation. Looking a name up imports the module that registers it (fslab's own,
    by `shipped`), else every plugin; listing names imports no shipped module (their names are
    known), only the plugins. Names keep their order: fslab's own first, as `shipped` lists them."""

    def __init__(self, shipped: Mapping[str, str]) -> None:
        self.shipped = dict(shipped)  # name → the module of fslab's that registers it
        self.registered: dict[str, T] = {}

    def add(self, name: str, implementation: T) -> T:
        self.registered[name] = implementation
        return implementation

    def __getitem__(self, name: str) -> T:
        if name not in self.registered:
            if name in self.shipped:
                importlib.import_module(self.shipped[name])
            else:
                load_plugins()
        return self.registered[name]

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):  # untrusted text (a journal's) may hold anything
            return False
        if name in self.shipped or name in self.registered:
            return True
        load_plugins()
        return name in self.registered

    def __iter__(self) -> Iterator[str]:
        load_plugins()
        return iter(dict.fromkeys([*self.shipped, *self.registered]))

    def __len__(self) -> int:
        return sum(1 for _ in self)
