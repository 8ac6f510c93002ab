"""How an implementation joins its extension point (filesystem, workload kind, monitor, report
format): its module registers it as it is imported, and the extension point loads its modules
only when it is first asked — fslab's own, every module of its package, then the modules that
installed Python packages name under the entry-point group `fslab.plugins`.

Code is only ever loaded from fslab's packages and from what is installed in fslab's Python
environment (as root, by root): never from anything a study file, a job file or a command line
names.
"""

from __future__ import annotations

import importlib
import pkgutil
from importlib.metadata import entry_points

from fslab.errors import FslabError

PLUGINS = "fslab.plugins"  # the entry-point group: each entry names a module to import

_loaded: set[str] = set()
_plugins_loaded = False


def load(package: str) -> None:
    """Import every module of the package `package` once (each joins its registry as it is
    imported), then the installed plugins' modules once."""
    if package not in _loaded:
        _loaded.add(package)
        found = importlib.import_module(package)
        for module in pkgutil.iter_modules(found.__path__):
            importlib.import_module(f"{package}.{module.name}")
    load_plugins()


def load_plugins() -> None:
    global _plugins_loaded
    if not _plugins_loaded:
        _plugins_loaded = True
        for entry in entry_points(group=PLUGINS):
            try:
                importlib.import_module(entry.module)
            except Exception as exc:  # a plugin's own failure, named: never a traceback from fslab
                raise FslabError(f"the plugin {entry.name!r} ({entry.module}, entry point group {PLUGINS}) failed to load: {exc}: fix or uninstall it") from None
