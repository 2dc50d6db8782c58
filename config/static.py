"""Static files compressed on the wire, with no build step (issue 30).

whitenoise serves a file's gzip variant to a browser that accepts it when the variant
exists beside the file (`app.css.gz`); `collectstatic` with its compressing storage makes
them, but `make run` serves straight from static/ (WHITENOISE_USE_FINDERS), where there
are none, so the rating page's script and style went out whole (65 KiB in all). This
middleware is whitenoise's own, except that when it first sees a text file (CSS,
JavaScript, SVG, JSON, maps, plain text) of at least MIN_SIZE bytes without a
variant, it writes the gzip variant (level 9) into a cache folder
(settings.STATIC_COMPRESSED_DIR, default var/static-gz/), named by the file's path,
size and modification time, so a changed file gets a new variant and two workers
writing the same one at once write the same bytes (each through its own temporary
file and an atomic rename). whitenoise then answers `Accept-Encoding: gzip` with it,
`Vary: Accept-Encoding` included. A file that does not shrink by at least a tenth keeps
no variant.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import tempfile
from pathlib import Path
from wsgiref.headers import Headers

from django.conf import settings
from django.middleware.gzip import GZipMiddleware
from whitenoise.middleware import WhiteNoiseMiddleware
from whitenoise.responders import MissingFileError, StaticFile

COMPRESSIBLE = (".css", ".js", ".mjs", ".svg", ".json", ".map", ".txt", ".html", ".xml")
MIN_SIZE = 512


def compressed_dir() -> Path:
    return Path(getattr(settings, "STATIC_COMPRESSED_DIR", None) or Path(settings.BASE_DIR) / "var" / "static-gz")


def gzip_variant(path: str, stat: os.stat_result) -> str | None:
    """The path of `path`'s gzip variant in the cache folder, written if missing; None
    when the file is not worth compressing."""
    if not path.endswith(COMPRESSIBLE) or stat.st_size < MIN_SIZE:
        return None
    folder = compressed_dir()
    name = hashlib.sha256(f"{os.path.abspath(path)}\0{stat.st_size}\0{stat.st_mtime_ns}".encode()).hexdigest()[:32]
    target = folder / f"{name}.gz"
    if target.exists():
        return str(target) if target.stat().st_size else None
    with open(path, "rb") as handle:
        data = handle.read()
    packed = gzip.compress(data, compresslevel=9, mtime=0)
    # Not worth it: an empty marker file says so, so the next look is a stat too.
    body = packed if len(packed) <= 0.9 * len(data) else b""
    folder.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=folder, prefix=".part-")
    with os.fdopen(fd, "wb") as out:
        out.write(body)
    os.replace(temporary, target)
    return str(target) if body else None


class CompressedStaticMiddleware(WhiteNoiseMiddleware):
    def get_static_file(self, path, url, stat_cache=None):
        # whitenoise's own (WhiteNoise.get_static_file), but for the gzip variant's path.
        if stat_cache is None and not os.path.exists(path):
            raise MissingFileError(path)
        headers = Headers([])
        self.add_mime_headers(headers, path, url)
        self.add_cache_headers(headers, path, url)
        if self.allow_all_origins:
            headers["Access-Control-Allow-Origin"] = "*"
        if self.add_headers_function is not None:
            self.add_headers_function(headers, path, url)
        encodings = {"gzip": path + ".gz", "br": path + ".br"}
        beside = path + ".gz" in stat_cache if stat_cache is not None else os.path.exists(path + ".gz")
        if not beside:  # a variant beside the file (collectstatic's) comes first
            variant = gzip_variant(path, stat_cache[path] if stat_cache is not None else os.stat(path))
            if variant is not None:
                encodings["gzip"] = variant
                if stat_cache is not None:
                    stat_cache[variant] = os.stat(variant)
        return StaticFile(path, headers.items(), stat_cache=stat_cache, encodings=encodings)


class GZipTextMiddleware(GZipMiddleware):
    """Django's GZipMiddleware (with its "Heal the BREACH" padding) for text only: pages,
    JSON and JSON Lines, CSV, SVG. A zip archive, a PNG or any other already compressed
    download keeps its bytes and its Content-Length."""

    TEXT_TYPES = ("text/", "application/json", "application/jsonl", "application/javascript", "image/svg+xml")

    def process_response(self, request, response):
        if not response.get("Content-Type", "").startswith(self.TEXT_TYPES):
            return response
        return super().process_response(request, response)
