"""The registries of what fslab is extended with — filesystems, layers, device sources, workload
kinds, scenarios, monitors, report files and export forms (and the journal's release functions)
— one shape for all, read lazily.

An implementation is one module that joins its registry itself as it is imported, with one call
shape whatever it is:

    FILESYSTEMS.add(Ext2())          # any entry that has a `name`
    MONITORS.add(MonitorKind("toy", order=99, figures=..., make=edge_counter))

fslab's own modules add `own=True` (`FILESYSTEMS.add(Ext4(), own=True)`): every other entry is
one fslab is extended with, which `fslab doctor` names.

A registry finds fslab's own implementations one of two ways: by its `shipped` table (name →
module), importing a module only when its name is asked for (filesystems, workload kinds: a run
loads only those its study names), or, given a `package`, by importing every module of that
package the first time it is read at all (monitors, report formats: each is used whole).
Installed packages' implementations come from their entry points of group `fslab.plugins` (each
naming a module to import), imported only when a name is not found or every name is listed.
Nothing a study file says ever names code to load: a study names a filesystem, never a module.

A test adds an entry for itself alone within `scoped()` (every registry restored after it).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from typing import Any, Protocol, TypeVar

from fslab.core.errors import FslabError

PLUGINS = "fslab.plugins"  # the entry-point group of installed packages that extend fslab

_plugins_loaded = False


class PluginFailed(FslabError):
    """An installed package's fslab plugin that could not be imported."""


class Named(Protocol):
    """What a registry holds: anything with the name it is registered and asked for under."""

    @property
    def name(self) -> str: ...


T = TypeVar("T", bound=Named)


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


_ALL: list[Registry[Any]] = []  # every registry (each made once, by the module it belongs to), for scoped()


class Registry(Mapping[str, T]):
    """Name → implementation. Looking a name up imports the module that registers it (fslab's own,
    by `shipped`, or its whole `package`), else every plugin; listing names imports no shipped
    module (their names are known), only the plugins. Names keep their order: fslab's own first,
    as `shipped` lists them (or as the package's modules registered them), then the others."""

    def __init__(self, what: str, shipped: Mapping[str, str] | None = None, *, package: str | None = None) -> None:
        self.what = what  # what an entry is, as a message names it: "filesystem", "monitor"
        self.shipped = dict(shipped or {})  # name → the module of fslab's that registers it
        self.package = package  # fslab's package whose every module registers an entry
        self.registered: dict[str, T] = {}
        self.from_outside: set[str] = set()  # the names a module not of fslab's registered (a plugin's, a toy's)
        self.version = 0  # changes whenever an entry is added or removed: what a cache of a listing keys on
        self._package_loaded = False
        _ALL.append(self)

    def add(self, entry: T, *, own: bool = False) -> T:
        """Called by an implementation's module as it is imported: the entry joins under its name.
        `own`: fslab's own modules say so; any other entry (a plugin's, a test's toy) is one fslab
        is extended with."""
        self.registered[entry.name] = entry
        if own:
            self.from_outside.discard(entry.name)
        else:
            self.from_outside.add(entry.name)
        self.version += 1
        return entry

    def added(self) -> list[str]:
        """The names registered from outside fslab (an installed package's plugin, a test's toy),
        in order: what `fslab doctor` says this fslab is extended with."""
        return [name for name in self if name in self.from_outside]

    def own(self) -> list[str]:
        """fslab's own names, in order, and no plugin's (none is imported): what a schema fixed as
        fslab is imported may accept (a built-in scenario's name)."""
        self._load_package()
        return [name for name in dict.fromkeys([*self.shipped, *self.registered]) if name not in self.from_outside]

    def _load_package(self) -> None:
        if self.package is not None and not self._package_loaded:
            self._package_loaded = True
            for module in pkgutil.iter_modules(importlib.import_module(self.package).__path__):
                importlib.import_module(f"{self.package}.{module.name}")

    def __getitem__(self, name: str) -> T:
        self._load_package()
        if name not in self.registered:
            if name in self.shipped:
                importlib.import_module(self.shipped[name])
            else:
                load_plugins()
        return self.registered[name]

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):  # untrusted text (a journal's) may hold anything
            return False
        self._load_package()
        if name in self.shipped or name in self.registered:
            return True
        load_plugins()
        return name in self.registered

    def __iter__(self) -> Iterator[str]:
        self._load_package()
        load_plugins()
        return iter(dict.fromkeys([*self.shipped, *self.registered]))

    def __len__(self) -> int:
        return sum(1 for _ in self)

    @contextmanager
    def scoped(self) -> Iterator[Registry[T]]:
        """This registry as it is, restored after the block: what is added within it (a test's toy)
        is gone after. Every entry of fslab's own is loaded first, so that one whose module the
        block imports is not lost with the block's."""
        list(self.values())
        before, outside = dict(self.registered), set(self.from_outside)
        try:
            yield self
        finally:
            self.registered, self.from_outside = before, outside
            self.version += 1


@contextmanager
def scoped() -> Iterator[None]:
    """Every registry as it is, restored after the block (Registry.scoped): a test registers a toy
    within it, for that test alone."""
    with ExitStack() as stack:
        for registry in list(_ALL):
            stack.enter_context(registry.scoped())
        yield
