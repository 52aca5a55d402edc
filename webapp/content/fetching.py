"""Download a pinned tarball, check it, take files out of it: the standard library only.

Nothing here knows of Flask or the database (`webapp/content/fetch_models.py` imports what
comes out). A download goes to `NAME.part` beside its destination and becomes the
destination only once its size and SHA-256 are the pinned ones, by a rename: a reader of the
cache never sees half a file. An interrupted download resumes from the part's end (an HTTP
Range request); one that grows past its pinned size, or ends with other bytes, is refused.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import tarfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import BinaryIO

from webapp.content.model_sources import Package

CHUNK = 1 << 16
TIMEOUT = 30.0  # seconds without a byte before a download is given up


class FetchError(Exception):
    """A tarball could not be had, or is not the pinned one; the message says which and why."""


def fetch_package(
    package: Package,
    cache: Path,
    *,
    base_url: str | None = None,
    from_dir: Path | None = None,
    timeout: float = TIMEOUT,
) -> Path:
    """The path of `package`'s tarball in `cache`, downloaded (or copied from `from_dir`) and
    checked unless a checked copy is there already."""
    dest = cache / package.filename
    if dest.is_file() and dest.stat().st_size == package.size and sha256_of(dest) == package.sha256:
        return dest
    cache.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    if from_dir is not None:
        _copy_bounded(from_dir / package.filename, part, package.size)
        where = str(from_dir / package.filename)
    else:
        where = package.url(base_url or "")
        _download(where, part, package.size, timeout)
    got = sha256_of(part)
    if got != package.sha256:
        part.unlink()  # a corrupt file must not be resumed either
        raise FetchError(
            f"{where}: SHA-256 mismatch (got {got}, pinned {package.sha256}); nothing was "
            "imported from it"
        )
    os.replace(part, dest)
    return dest


def probe(url: str, timeout: float) -> str | None:
    """None if `url`'s host answers an HTTP request within `timeout` seconds, else why not."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout):
            return None
    except urllib.error.HTTPError:
        return None  # it answered, if only with an error
    except (urllib.error.URLError, OSError) as exc:
        return str(getattr(exc, "reason", exc))


def _download(url: str, part: Path, size: int, timeout: float) -> None:
    have = part.stat().st_size if part.exists() else 0
    if have > size:
        part.unlink()
        have = 0
    if have == size:
        return  # complete already; the checksum decides
    request = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            resumed = response.status == 206
            if not resumed:
                have = 0  # the server sent the whole file
            with part.open("ab" if resumed else "wb") as out:
                got = _copy_limited(response, out, size - have)
    except urllib.error.HTTPError as exc:
        raise FetchError(f"{url}: the server answered {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise FetchError(
            f"{url}: cannot download ({reason}); run the command again to resume"
        ) from None
    if got > size - have:
        part.unlink()
        raise FetchError(f"{url}: larger than its pinned {size} bytes; nothing was imported")
    if have + got < size:
        raise FetchError(
            f"{url}: the download ended after {have + got} of {size} bytes; run the command "
            "again to resume it"
        )


def _copy_bounded(source: Path, part: Path, size: int) -> None:
    try:
        with source.open("rb") as src, part.open("wb") as out:
            got = _copy_limited(src, out, size)
    except OSError as exc:
        raise FetchError(f"cannot read {source}: {exc.strerror}") from None
    if got != size:
        part.unlink()
        raise FetchError(
            f"{source}: {'more' if got > size else 'fewer'} bytes than the pinned {size}"
        )


def _copy_limited(src: BinaryIO, out: BinaryIO, limit: int) -> int:
    """Copy at most `limit` + 1 bytes (one more tells "too large"); how many were copied."""
    done = 0
    while done <= limit:
        chunk = src.read(min(CHUNK, limit + 1 - done))
        if not chunk:
            break
        out.write(chunk)
        done += len(chunk)
    return done


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def read_member(tarball: Path, member: str, *, limit: int) -> bytes:
    """One regular file of a .tgz, refused when missing or larger than `limit` bytes."""
    try:
        with tarfile.open(tarball, "r:gz") as tar:
            try:
                info = tar.getmember(member)
            except KeyError:
                raise FetchError(f"{tarball.name} holds no {member}") from None
            if not info.isfile() or info.size > limit:
                raise FetchError(f"{tarball.name}: {member} is not a file of at most {limit} bytes")
            stream = tar.extractfile(info)
            if stream is None:
                raise FetchError(f"{tarball.name}: {member} cannot be read")
            return stream.read()
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise FetchError(f"{tarball.name} is not a readable .tgz ({exc})") from None


def read_members(tarball: Path, prefix: str, *, limit: int, total: int) -> dict[str, bytes]:
    """Every regular file of a .tgz whose path starts with `prefix`, in one pass over it (a
    package of 500 small files is not decompressed 500 times); refused when one is larger than
    `limit` bytes or all of them together are larger than `total`."""
    found: dict[str, bytes] = {}
    size = 0
    try:
        with tarfile.open(tarball, "r:gz") as tar:
            for info in tar:
                if not info.name.startswith(prefix) or not info.isfile():
                    continue
                size += info.size
                if info.size > limit or size > total:
                    raise FetchError(
                        f"{tarball.name}: {info.name} makes more than {limit} bytes in one file "
                        f"or {total} in all"
                    )
                stream = tar.extractfile(info)
                if stream is None:
                    raise FetchError(f"{tarball.name}: {info.name} cannot be read")
                found[info.name] = stream.read()
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise FetchError(f"{tarball.name} is not a readable .tgz ({exc})") from None
    return found


def write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(path.name + ".part")
    part.write_bytes(data)
    os.replace(part, path)


def tiktoken_npm_encoder(raw: bytes, *, name: str) -> tuple[bytes, bytes]:
    """The npm tiktoken package's encoders/NAME.json as (rank file, sidecar) bytes, the two
    files `bpe.importers` reads.

    Its `bpe_ranks` is lines of `! OFFSET b64 b64 ...`: consecutive ranks from OFFSET. The rank
    file is written as tiktoken's own (`base64 rank` by rank), byte for byte the file the
    pinned `file_sha256` names.
    """
    try:
        data = json.loads(raw)
        ranks: list[tuple[int, str]] = []
        for line in data["bpe_ranks"].split("\n"):
            if not line:
                continue
            fields = line.split(" ")
            offset = int(fields[1])
            ranks.extend((offset + i, token) for i, token in enumerate(fields[2:]))
        sidecar = {
            "name": name,
            "pat_str": data["pat_str"],
            "special_tokens": data["special_tokens"],
        }
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
        raise FetchError(
            f"{name}.json is not the npm tiktoken encoder it should be ({exc})"
        ) from None
    ranks.sort()
    # Re-encoded so that a token's base64 is the canonical one, as tiktoken writes it.
    lines = [
        f"{base64.b64encode(base64.b64decode(token)).decode()} {rank}\n" for rank, token in ranks
    ]
    return "".join(lines).encode("ascii"), json.dumps(sidecar, ensure_ascii=False).encode()
