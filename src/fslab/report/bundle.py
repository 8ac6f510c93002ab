"""vl-convert's JavaScript bundle — vega, vega-lite and vega-embed as one script — which every
page inlines once (html.py).

Making it takes vl-convert a second of CPU, holding the interpreter throughout, and it is the
same for one vl-convert and Vega-Lite version: so it is kept in fslab's cache directory
(core/cache.py) under both versions, with its SHA-256, and the next page reads it from there. It goes
into a page's <script> element: a kept bundle is used only if its file is fslab's own
(cache.read_kept: root's or this user's, writable by no one else), of these very versions, has
its recorded SHA-256 and holds nothing that would close the element; else it is made again and
kept anew, never served. Without one, it is made in a process of its own while the page is built
(vega_bundle_meanwhile), which keeps it."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import re
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import vl_convert

from fslab.core import cache
from fslab.core.errors import FslabError
from fslab.report.figures import VL_CONVERT, vega_lite

FORMAT = 1  # of the file kept; another is made anew
_LARGEST = 32 * 2**20  # the bundle is ~1.5 MB; a larger file is not fslab's
_VERSION = re.compile(r"[0-9A-Za-z][0-9A-Za-z.+_-]*")  # as it may stand in a file's name


class BundleError(FslabError):
    pass


@contextmanager
def vega_bundle_meanwhile() -> Iterator[Callable[[], str]]:
    """The bundle (vega_bundle), yielded as a function that gives it: kept, or made in a process
    of its own while the caller builds the page (which keeps it). The process is forked before
    the bundle is asked for: it inherits nothing running. A process that has the bundle (a second
    page) keeps it."""
    if not _HELD and (kept := _read_kept()) is not None:
        _HELD.append(kept)
    if _HELD:
        yield vega_bundle
        return
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("fork")) as pool:
        made = pool.submit(_made_and_kept)
        yield lambda: _held(made.result)


def vega_bundle() -> str:
    """The bundle, once per process: kept, else made (and kept)."""
    return _held(lambda: _read_kept() or _made_and_kept())


_HELD: list[str] = []  # the bundle, once this process has it (read, made here or by the forked process)


def _held(get: Callable[[], str]) -> str:
    if not _HELD:
        _HELD.append(get())
    return _HELD[0]


def _read_kept() -> str | None:
    """The kept bundle of this vl-convert and Vega-Lite, if its file is fslab's own and it is
    whole (its recorded SHA-256) and inlinable; else None."""
    path = _kept_path()
    data = cache.read_kept(path, _LARGEST) if path is not None else None
    if data is None:
        return None
    try:
        record = json.loads(data)
    except ValueError:
        return None
    if not isinstance(record, dict) or [record.get(k) for k in ("format", "vl_convert", "vega_lite")] != [
        FORMAT,
        VL_CONVERT,
        vega_lite(),
    ]:
        return None
    bundle, digest = record.get("bundle"), record.get("sha256")
    if not isinstance(bundle, str) or digest != _sha256(bundle) or not _inlinable(bundle):
        return None
    return bundle


def _made_and_kept() -> str:
    """The bundle made by vl-convert, and kept (where fslab may write: root)."""
    bundle = vl_convert.javascript_bundle(vl_version=vega_lite())  # type: ignore[call-arg]  # its stubs: snippet not optional
    if not _inlinable(bundle):
        raise BundleError(
            f"vl-convert-python {VL_CONVERT}'s JavaScript bundle holds "
            "'</script' or '<!--' and cannot be inlined; report this to fslab"
        )
    path = _kept_path()
    if path is not None:
        record = {
            "format": FORMAT,
            "vl_convert": VL_CONVERT,
            "vega_lite": vega_lite(),
            "sha256": _sha256(bundle),
            "bundle": bundle,
        }
        cache.keep(path, json.dumps(record).encode())
    return bundle


def _kept_path() -> Path | None:
    """Where the bundle of this vl-convert and Vega-Lite is kept; None (not kept) for a version
    that cannot be a file's name."""
    versions = (VL_CONVERT, vega_lite())
    if not all(_VERSION.fullmatch(v) for v in versions):
        return None
    return cache.CACHE_DIR / "vega-bundle-vl-convert-{}-vega-lite-{}.json".format(*versions)


def _inlinable(bundle: str) -> bool:
    """Whether the bundle can go inside a <script> element: nothing in it closes the element early."""
    return not re.search(r"</script|<!--", bundle, re.IGNORECASE)


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
