"""Exact OpenAI tokenizers with no network: tiktoken's engine, rank files shipped with chatmemory.

`tiktoken.get_encoding` downloads its rank files on first use, which fails offline and writes a
cache somewhere in the temp directory. chatmemory ships the official files instead
(`data/<name>.tiktoken.gz`, MIT, see `data/LICENSE-tiktoken-ranks`) and builds the
`tiktoken.Encoding` itself, with the pattern string and special tokens tiktoken defines in
`tiktoken_ext/openai_public.py`. The sha256 of every file is checked on load against tiktoken's own
pin, so the encodings are exactly tiktoken's (a test compares them field by field).

Nothing here reads environment variables, registers a tiktoken plugin, or touches
`tiktoken.get_encoding`/`tiktoken.encoding_for_model`; other tiktoken users in the process are not
affected. Each encoding is built once per process, on first use (0.2-0.5 s and about 75 MB of
peak memory for o200k_base, 0.1-0.2 s and 40 MB for cl100k_base).
"""

from __future__ import annotations

import base64
import binascii
import gzip
import hashlib
import re
import threading
import zlib
from dataclasses import dataclass
from importlib import resources

import tiktoken
from tiktoken.model import encoding_name_for_model as _tiktoken_model_table

from .._errors import ChatMemoryError, ConfigurationError

__all__ = ["SUPPORTED_ENCODINGS", "encoding_name_for_model", "get_encoding"]

_ENDOFTEXT = "<|endoftext|>"
_FIM_PREFIX = "<|fim_prefix|>"
_FIM_MIDDLE = "<|fim_middle|>"
_FIM_SUFFIX = "<|fim_suffix|>"
_ENDOFPROMPT = "<|endofprompt|>"


@dataclass(frozen=True)
class _Spec:
    sha256: str  # of the uncompressed rank file, as pinned by tiktoken
    pat_str: str
    special_tokens: dict[str, int]
    n_ranks: int


_O200K_PAT_STR = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)

_CL100K_PAT_STR = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)

_SPECS: dict[str, _Spec] = {
    "o200k_base": _Spec(
        sha256="446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        pat_str=_O200K_PAT_STR,
        special_tokens={_ENDOFTEXT: 199999, _ENDOFPROMPT: 200018},
        n_ranks=199998,
    ),
    "cl100k_base": _Spec(
        sha256="223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        pat_str=_CL100K_PAT_STR,
        special_tokens={
            _ENDOFTEXT: 100257,
            _FIM_PREFIX: 100258,
            _FIM_MIDDLE: 100259,
            _FIM_SUFFIX: 100260,
            _ENDOFPROMPT: 100276,
        },
        n_ranks=100256,
    ),
}

SUPPORTED_ENCODINGS: tuple[str, ...] = tuple(_SPECS)
"""The encodings chatmemory ships: `("o200k_base", "cl100k_base")`."""


def _supported() -> str:
    return " or ".join(repr(name) for name in SUPPORTED_ENCODINGS)


def _read_shipped(name: str) -> bytes:
    """The gzipped rank file of `name` as shipped in the package (tests replace this)."""
    return (resources.files(__package__) / "data" / f"{name}.tiktoken.gz").read_bytes()


def _corrupt(name: str, why: str) -> ChatMemoryError:
    return ChatMemoryError(
        f"the {name} rank file shipped with chatmemory (chatmemory/_tokens/data/"
        f"{name}.tiktoken.gz) {why}; the installation is damaged, reinstall chatmemory"
    )


def _load_ranks(name: str, spec: _Spec) -> dict[bytes, int]:
    try:
        packed = _read_shipped(name)
    except OSError as error:
        raise _corrupt(name, f"cannot be read ({error})") from error
    try:
        raw = gzip.decompress(packed)
    except (OSError, EOFError, zlib.error) as error:
        raise _corrupt(name, f"is not valid gzip ({error})") from error
    digest = hashlib.sha256(raw).hexdigest()
    if digest != spec.sha256:
        raise _corrupt(name, f"has sha256 {digest}, expected {spec.sha256}")
    # The digest pins the content, so the format is known: "<base64 token> <rank>" per line.
    fields = raw.split()
    try:
        ranks = dict(zip(map(base64.b64decode, fields[::2]), map(int, fields[1::2]), strict=True))
    except (ValueError, binascii.Error) as error:  # pragma: no cover - excluded by the digest
        raise _corrupt(name, f"cannot be parsed ({error})") from error
    if len(ranks) != spec.n_ranks:  # pragma: no cover - excluded by the digest
        raise _corrupt(name, f"has {len(ranks)} ranks, expected {spec.n_ranks}")
    return ranks


def _build(name: str) -> tiktoken.Encoding:
    spec = _SPECS[name]
    return tiktoken.Encoding(
        name=name,
        pat_str=spec.pat_str,
        mergeable_ranks=_load_ranks(name, spec),
        special_tokens=dict(spec.special_tokens),
    )


class _EncodingCache:
    """`get_encoding`: one `tiktoken.Encoding` per name and process, built on first use.

    Unlike a bare `functools.lru_cache`, two threads asking for the same encoding at once never
    build it twice: the build runs under a lock, and cached look-ups take no lock at all.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._encodings: dict[str, tiktoken.Encoding] = {}

    def __call__(self, name: str) -> tiktoken.Encoding:
        """The exact tiktoken encoding `name` (`"o200k_base"` or `"cl100k_base"`), offline.

        Raises `ConfigurationError` for any other name, and `ChatMemoryError` if the shipped rank
        file is missing or damaged (its sha256 is checked).
        """
        try:
            return self._encodings[name]
        except (KeyError, TypeError):
            pass
        if not isinstance(name, str) or name not in _SPECS:
            raise ConfigurationError(f"unknown encoding {name!r}; chatmemory ships {_supported()}")
        with self._lock:
            encoding = self._encodings.get(name)
            if encoding is None:
                encoding = self._encodings[name] = _build(name)
            return encoding

    def cache_clear(self) -> None:
        """Forget the built encodings; the next call builds (and verifies) them again."""
        with self._lock:
            self._encodings.clear()

    def __repr__(self) -> str:
        return f"<chatmemory get_encoding, built: {sorted(self._encodings)}>"


get_encoding = _EncodingCache()


# Model name -> encoding, following LangChain4j's OpenAiTokenCountEstimator (o200k_base for the
# o-series, gpt-4.x and gpt-5, else the jtokkit/tiktoken table). First match wins.
_MODEL_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"o\d"), "o200k_base"),  # o1, o1-mini, o3, o3-mini, o4-mini, ...
    (re.compile(r"(chat)?gpt-4o"), "o200k_base"),  # gpt-4o, gpt-4o-mini, chatgpt-4o-latest
    (re.compile(r"gpt-4\."), "o200k_base"),  # gpt-4.1, gpt-4.1-mini, gpt-4.5-preview
    (re.compile(r"gpt-5"), "o200k_base"),  # gpt-5, gpt-5-mini, gpt-5.1, gpt-5-codex
    (re.compile(r"gpt-4(-|$)"), "cl100k_base"),  # gpt-4, gpt-4-turbo, gpt-4-0613, gpt-4-32k
    (re.compile(r"gpt-3\.5|gpt-35"), "cl100k_base"),  # gpt-3.5-turbo, Azure's gpt-35-turbo
    (re.compile(r"text-embedding-(3|ada-002)"), "cl100k_base"),
)


def encoding_name_for_model(model: str) -> str:
    """The encoding (`"o200k_base"` or `"cl100k_base"`) an OpenAI model tokenizes with.

    o200k_base: gpt-4o*, chatgpt-4o*, gpt-4.1*, gpt-4.5*, gpt-5*, the o-series (o1, o3, o4-mini...).
    cl100k_base: gpt-4 and gpt-4-* (turbo, 32k, dated), gpt-3.5*, text-embedding-3-*, ada-002.
    Fine-tuned names (`ft:gpt-4o-mini-2024-07-18:org::id`) use their base model. Other names are
    looked up in tiktoken's model table (a plain dictionary, no download); gpt-oss models, which
    tiktoken maps to o200k_harmony, count as o200k_base (same ranks and pattern; only special
    tokens differ, and chatmemory never encodes those). Matching ignores case and surrounding
    spaces. An unknown model, or one using an encoding chatmemory does not ship, raises
    `ConfigurationError`.
    """
    if not isinstance(model, str) or not model.strip():
        raise ConfigurationError(f"model must be a non-empty string, got {model!r}")
    name = model.strip().lower()
    if name.startswith("ft:"):
        name = name[3:].split(":", 1)[0]
    for pattern, rule_encoding in _MODEL_RULES:
        if pattern.match(name):
            return rule_encoding
    encoding: str | None
    try:
        # A pure table lookup in tiktoken (safe offline, unlike `encoding_for_model`).
        encoding = _tiktoken_model_table(name)
    except KeyError:
        encoding = None
    if encoding == "o200k_harmony":
        encoding = "o200k_base"
    if encoding in _SPECS:
        return encoding
    found = "" if encoding is None else f" (it uses {encoding}, which chatmemory does not ship)"
    raise ConfigurationError(
        f"cannot tell which tokenizer model {model!r} uses{found}; "
        f"pass encoding='o200k_base' or 'cl100k_base' instead"
    )
