"""Secrets: recognising them, redacting them from text, and masking them in documents.

Lowest layer, so every package can use it. Three jobs:

- `redact(text)` removes credentials from text before it reaches output, logs, state or
  plans. First by value: every credential the process holds (credential-named environment
  variables, values providers `register_secret` when they read one, user name and password
  pairs they `register_credential`) in each form a server may echo it, plain, escaped,
  base64 (also of `user:password`), hex and percent-encoded (`specs.secret_encodings`).
  Then by shapes that only credentials have: Authorization header values, Bearer and Basic
  tokens, `user:password@` in URLs, AWS access key ids and secret keys next to their names,
  private key blocks, JWTs, well-known token formats, and `password=`-style assignments
  whose value is not a plain word. A word in prose is never redacted for following a
  name like "signature", "token" or "key": `signature: only` stays as it is.
- `looks_secret(value)` says why a single value looks like a credential (or None); the
  `secret-in-spec` policy and the maskers use it. Digests (`sha256:<hex>`), commit ids,
  UUIDs, paths, plain URLs and model names do not look secret.
- `mask(value)` is the displayed and stored form of a sensitive value: `(sensitive:<8 hex>)`,
  a slow keyed digest (PBKDF2) so a changed secret shows up as a change without the value
  being recoverable from the digest by a fast guess; `same_secret(a, b)` compares a masked
  value with a raw one, so what state stores (masked) diffs equal to the unchanged spec.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import functools
import hashlib
import itertools
import math
import os
import re
import threading
from collections import Counter
from collections.abc import Iterable
from typing import Any

from trainform.specs.secret_encodings import known_values

REDACTED = "[REDACTED]"
MASK_PREFIX = "(sensitive:"
MINIMUM_REGISTERED = 6
"""Shorter values are not registered: redacting a 3-letter word everywhere helps no one."""
MINIMUM_ENVIRONMENT = 8
ENTROPY_MINIMUM_LENGTH = 20
SWITCH_MINIMUM = 0.4

CREDENTIAL_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
_CREDENTIAL_NAME_PARTS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "KEY", "CREDENTIAL")

_registered: set[str] = set()
_credentials: set[tuple[str, str]] = set()
_registered_lock = threading.Lock()

# -- recognising ------------------------------------------------------------------------------

_PRIVATE_KEY = re.compile(
    # the body stops at an END line, or before a quote that ends the string it sits in
    # (escapes count as one character, so JSON text stays JSON)
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?:\\.|[^\"'\\])*?"
    r"(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|(?=[\"'])|(?=\\?\Z))",
    re.DOTALL,
)
_AWS_KEY_ID = re.compile(
    r"(?<![A-Z0-9])(?:AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA)[A-Z0-9]{16}(?![A-Z0-9])"
)
_KNOWN_TOKEN = re.compile(
    r"(?<![A-Za-z0-9_-])(?:"
    r"gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_-]{16,}"
    r"|xox[abposr]-[A-Za-z0-9-]{10,}|xapp-[A-Za-z0-9-]{10,}"
    r"|sk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}|(?:sk|rk)_live_[A-Za-z0-9]{16,}"
    r"|hf_[A-Za-z0-9]{20,}|AIza[A-Za-z0-9_-]{35}|npm_[A-Za-z0-9]{30,}|pypi-[A-Za-z0-9_-]{40,}"
    r"|dop_v1_[a-f0-9]{40,}|SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}"
    r")"
)
_JWT = re.compile(r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*")
_PAIR_NAMES = (
    r"password|passwd|passphrase|pwd|secret|client[_-]?secret|token|access[_-]?token"
    r"|refresh[_-]?token|id[_-]?token|auth[_-]?token|api[_-]?key|apikey|access[_-]?key"
    r"|secret[_-]?key|private[_-]?key|session[_-]?token|signature|x-amz-signature"
    r"|x-amz-security-token|x-amz-credential|credential|private-token"
)
_SEPARATOR = r"(?:[\"']\s*[=:]\s*[\"']|\s*[=:]\s*[\"']?)"
"""`=` or `:` after a name; a quoted name (JSON, a repr) needs a quoted value, so a number
or an object after a JSON key is left alone and JSON text stays JSON."""
_ASSIGNMENT = r"(?:[\"']\s*[=:]\s*[\"']|\s*=\s*[\"']?)"
"""A pair's separator: `=` (a query string, a flag, an environment listing) or a quoted
name and value (JSON, a repr); `name: value` is how prose runs on, and is left alone."""
_PAIR = re.compile(
    r"(?<![A-Za-z0-9])((?:" + _PAIR_NAMES + r")" + _ASSIGNMENT + r")([^\s\"'\\&,;<>)}\]]+)",
    re.IGNORECASE,
)
_AWS_SECRET = re.compile(
    r"((?:aws_?secret_?access_?key|secret_?access_?key|aws_?session_?token|session_?token)"
    + _SEPARATOR
    + r")([A-Za-z0-9/+=]{16,})",
    re.IGNORECASE,
)
_AUTHORIZATION = re.compile(
    r"((?:proxy-)?authorization" + _SEPARATOR + r")(?:"
    r"((?:digest|aws4-hmac-sha256)\s+)[^\r\n\"'\\]+"  # parameters: to the end of the line
    r"|((?:bearer|basic|negotiate|token)\s+)([A-Za-z0-9._~+/=-]+)"  # one token after a scheme
    r"|([A-Za-z0-9._~+/=-]+))",  # a token alone
    re.IGNORECASE,
)
_SCHEME_TOKEN = re.compile(r"(?<![A-Za-z0-9])(bearer|basic)(\s+)([A-Za-z0-9._~+/=-]{8,})", re.I)
_URL_USERINFO = re.compile(r"(://)([^\s/@:\"'\\]*)(:[^\s/@\"'\\]*)?@")

_CUES = (
    "authoriz", "bearer", "basic", "://", "eyj", "akia", "asia", "agpa", "aida", "aroa",
    "aipa", "anpa", "anva", "passw", "passphrase", "pwd", "secret", "token", "key",
    "signature", "credential", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_",
    "glpat-", "xox", "xapp-", "sk-", "sk_", "rk_", "hf_", "aiza", "npm_", "pypi-",
    "dop_v1_", "sg.",
)  # fmt: skip
"""Lowercase cues, one of which is in any text a line pattern matches: text without one
skips the patterns, and a long text runs them only on the lines holding one."""
SHORT_TEXT = 4096
_HEX = re.compile(r"[0-9a-fA-F]+")
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_DIGEST = re.compile(r"(?:sha256|sha384|sha512|sha1|md5|blake2b|blake3):[0-9a-fA-F]{16,}")
_TOKEN_CHARS = re.compile(r"[A-Za-z0-9+/=_.~-]+")
_WORD_SPLIT = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")
_REFERENCE = re.compile(r"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|[A-Z_][A-Z0-9_]*|(?:env|secret)[:/].+")
_HARMLESS = {"", "true", "false", "yes", "no", "none", "null", "auto", "required", "optional"}
_WORD = r"(?:[A-Z]?[a-z]+(?:[A-Z][a-z]{2,})*|[A-Z]+)"
_WORDS = rf"{_WORD}(?:[-_.']{_WORD})*"
_PLAIN_WORDS = re.compile(rf"{_WORDS}(?:=(?:{_WORDS}|[0-9]+(?:[.:][0-9]+)*))*[.,:;!?=]*")
"""Words of prose or an identifier made of them (`sign-key`, `not_yet`, `usernameEnv`,
`Realm`), a parameter name (`realm=`), an assignment of words or a number to one
(`signature=missing`, `max_tokens=2048`): not a credential."""
_NUMBER = re.compile(r"[vV]?[0-9]+(?:[-._:/][0-9]+)*[A-Za-z]?")


def shannon_entropy(text: str) -> float:
    """Bits per character of `text` as a sample of its own symbols."""
    if not text:
        return 0.0
    counts = Counter(text)
    length = len(text)
    return -sum(n / length * math.log2(n / length) for n in counts.values())


def _high_entropy(text: str) -> bool:
    """A random-looking token: long, one word of token characters, all three character
    classes, near the entropy a random string of its length has, and switching between
    classes far more often than words and identifiers do (`Llama-2-7B`, `CamelCase2`)."""
    if len(text) < ENTROPY_MINIMUM_LENGTH or not _TOKEN_CHARS.fullmatch(text):
        return False
    if _HEX.fullmatch(text) or _UUID.fullmatch(text):
        return False
    lower = any(c.islower() for c in text)
    if not (lower and any(c.isupper() for c in text) and any(c.isdigit() for c in text)):
        return False
    ceiling = math.log2(min(len(text), 64))
    return shannon_entropy(text) >= 0.8 * ceiling and class_switches(text) >= SWITCH_MINIMUM


def _class(character: str) -> int:
    if character.islower():
        return 1
    if character.isupper():
        return 2
    return 3 if character.isdigit() else 0


def class_switches(text: str) -> float:
    """Share of adjacent alphanumeric pairs whose class (lower, upper, digit) differs: about
    0.6 for random base62, under 0.4 for names people write."""
    pairs = switches = 0
    for left, right in zip(text, text[1:], strict=False):
        a, b = _class(left), _class(right)
        if a and b:
            pairs += 1
            switches += a != b
    return switches / pairs if pairs else 0.0


def looks_secret(value: Any) -> str | None:
    """Why `value` looks like a credential (e.g. "an AWS access key id"), or None."""
    if not isinstance(value, str) or len(value) < 8:
        return None
    text = value.strip()
    if _DIGEST.fullmatch(text):
        return None
    if _PRIVATE_KEY.search(text):
        return "a private key"
    if _AWS_KEY_ID.search(text):
        return "an AWS access key id"
    if _KNOWN_TOKEN.search(text):
        return "an access token of a known service"
    if _JWT.search(text):
        return "a JSON web token"
    if _AUTHORIZATION.search(text) or _basic_or_bearer(text):
        return "an authorization header value"
    match = _URL_USERINFO.search(text)
    if match and match.group(3) and len(match.group(3)) > 1:
        return "credentials in a URL"
    pair = next((p for p in _PAIR.finditer(text) if credential_like(p.group(2))), None)
    if pair is not None:
        return f"a `{pair.group(1).rstrip(' =:' + chr(34) + chr(39))}=` pair"
    if any(_high_entropy(part) for part in re.split(r"[\s=:,;@]+", text)):
        return "a high-entropy token"
    return None


def _basic_or_bearer(text: str) -> bool:
    return any(_scheme_credential(*match.group(1, 3)) for match in _SCHEME_TOKEN.finditer(text))


def _scheme_credential(scheme: str, token: str) -> bool:
    """A Basic token that decodes to `user:password`, a Bearer token that is not a word
    ("bearer authentication")."""
    if scheme.lower() == "basic":
        return _is_basic_pair(token)
    return credential_like(token)


def _is_basic_pair(token: str) -> bool:
    """`token` is base64 of printable text holding a `:` (a word seldom is)."""
    try:
        decoded = base64.b64decode(token + "=" * (-len(token) % 4), validate=True).decode()
    except (binascii.Error, ValueError):  # UnicodeDecodeError is a ValueError
        return False
    return ":" in decoded and decoded.isprintable()


def _harmless(value: str) -> bool:
    return value.lower() in _HARMLESS or bool(_REFERENCE.fullmatch(value))


def credential_like(value: str) -> bool:
    """Whether the value after a credential's name can be the credential: 6+ characters and
    not a word or words, a number, a version, a flag, a path, a URL, a digest, a UUID, a
    reference to a variable or a mark of redaction."""
    if len(value) < MINIMUM_REGISTERED or _harmless(value):
        return False
    if value.startswith(("-", "/", "./", "~", "$", REDACTED[:-1], MASK_PREFIX)) or "://" in value:
        return False
    return not any(pattern.fullmatch(value) for pattern in (_PLAIN_WORDS, _NUMBER, _DIGEST, _UUID))


def name_words(name: str) -> list[str]:
    """`WANDB_API_KEY`, `apiKey`, `hf-token` -> lowercase words."""
    return [word.lower() for word in _WORD_SPLIT.findall(name)]


_SENSITIVE_WORDS = {
    "password", "passwd", "passphrase", "secret", "token", "apikey", "credential",
    "credentials", "pat", "pwd",
}  # fmt: skip
_SENSITIVE_PAIRS = {
    ("api", "key"), ("access", "key"), ("secret", "key"), ("private", "key"),
    ("client", "secret"), ("signing", "key"), ("encryption", "key"), ("auth", "key"),
}  # fmt: skip


def sensitive_name(name: str) -> bool:
    """A parameter or variable name that says it holds a credential (`hf_token`, `apiKey`,
    `DB_PASSWORD`); `max_tokens`, `tokenizer` and `sort_key` do not."""
    words = name_words(name)
    if any(word in _SENSITIVE_WORDS for word in words):
        return True
    return any(pair in _SENSITIVE_PAIRS for pair in zip(words, words[1:], strict=False))


_REASONS: dict[tuple[str, str], str | None] = {}
_REASONS_KEPT = 1 << 16


def secret_reason(name: str, value: Any) -> str | None:
    """Why the value of `name` should be treated as a secret, or None: the value looks
    secret, or the name says it is a credential and the value is not a reference to one
    (an environment variable name, `${VAR}`, `secret:...`) or a placeholder. Remembered per
    (name, text): plan judges each job value for its hash, its display and the policies."""
    if type(value) is not str:
        return _secret_reason(name, value)
    key = (name, value)
    try:
        return _REASONS[key]
    except KeyError:
        pass
    if len(_REASONS) >= _REASONS_KEPT:
        _REASONS.clear()
    reason = _REASONS[key] = _secret_reason(name, value)
    return reason


def _secret_reason(name: str, value: Any) -> str | None:
    if isinstance(value, str) and is_masked(value):
        return None
    reason = looks_secret(value)
    if reason is not None:
        return reason
    if isinstance(value, str) and name and sensitive_name(name) and not _harmless(value.strip()):
        return f"the name {name} says it holds a credential"
    return None


# -- masking ----------------------------------------------------------------------------------

_MASK_SALT = b"trainform/sensitive-value/v1"
_MASK_ITERATIONS = 20_000


@functools.lru_cache(maxsize=4096)
def mask(value: str) -> str:
    """The shown and stored form of a sensitive value: `(sensitive:1a2b3c4d)`."""
    key = hashlib.pbkdf2_hmac("sha256", value.encode("utf-8"), _MASK_SALT, _MASK_ITERATIONS)
    return f"{MASK_PREFIX}{key.hex()[:8]})"


def is_masked(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(MASK_PREFIX) and value.endswith(")")


def same_secret(left: Any, right: Any) -> bool:
    """True when one side is the masked form of the other (state holds masked values)."""
    if is_masked(left) and isinstance(right, str) and not is_masked(right):
        return mask(right) == left
    if is_masked(right) and isinstance(left, str) and not is_masked(left):
        return mask(left) == right
    return False


# -- redacting --------------------------------------------------------------------------------


def register_secret(value: str | None) -> None:
    """Redact `value`, in every encoding, from everything from now on (a credential a
    provider read)."""
    if value and len(value) >= MINIMUM_REGISTERED:
        with _registered_lock:
            _registered.add(value)


def register_credential(username: str | None, password: str | None) -> None:
    """Redact `password` and the `username:password` pair a Basic credential encodes (so
    its base64 and hex without the `Basic` keyword too) from everything from now on. The
    user name alone is no secret and stays readable."""
    register_secret(password)
    if password and len(password) >= MINIMUM_REGISTERED:
        with _registered_lock:
            _credentials.add((username or "", password))


def forget_secrets() -> None:
    """Forget registered values and credentials (tests)."""
    with _registered_lock:
        _registered.clear()
        _credentials.clear()


def known_credentials() -> frozenset[tuple[str, str]]:
    """The (user name, password) pairs providers registered."""
    with _registered_lock:
        return frozenset(_credentials)


def credential_variable(name: str) -> bool:
    upper = name.upper()
    return name in CREDENTIAL_VARIABLES or any(part in upper for part in _CREDENTIAL_NAME_PARTS)


def known_secrets(environment: Iterable[tuple[str, str]] | None = None) -> list[str]:
    """Values to redact literally, longest first: registered values and the values of
    credential-named environment variables of 8+ characters."""
    items = os.environ.items() if environment is None else environment
    found = {
        value
        for name, value in items
        if len(value) >= MINIMUM_ENVIRONMENT and credential_variable(name)
    }
    with _registered_lock:
        found |= _registered
    return sorted(found, key=lambda v: (-len(v), v))


def _userinfo(match: re.Match[str]) -> str:
    scheme, user, password = match.group(1), match.group(2), match.group(3)
    if password and len(password) > 1:
        return f"{scheme}{REDACTED}@"
    if user and looks_secret(user):
        return f"{scheme}{REDACTED}@"
    return match.group(0)


def _scheme_token(match: re.Match[str]) -> str:
    scheme, space, token = match.groups()
    if not _scheme_credential(scheme, token):
        return match.group(0)
    return f"{scheme}{space}{REDACTED}"


def _pair(match: re.Match[str]) -> str:
    return match.group(1) + REDACTED if credential_like(match.group(2)) else match.group(0)


def _authorization(match: re.Match[str]) -> str:
    """An Authorization value: the parameters after Digest or AWS4-HMAC-SHA256; the token
    after a scheme or alone when it can be a credential (`basic authentication` cannot),
    and words joined by dots after Bearer, Basic or Negotiate."""
    name, parameters, scheme, token, alone = match.groups()
    if parameters:
        return name + parameters + REDACTED
    if scheme:
        keyword = scheme.strip().lower()
        if credential_like(token) or (keyword != "token" and _dotted(token)):
            return name + scheme + REDACTED
        return match.group(0)
    return name + REDACTED if credential_like(alone) else match.group(0)


def _dotted(token: str) -> bool:
    """Words joined by dots (`abc.def.ghi`): a token's shape after a Bearer scheme."""
    return len(token) >= MINIMUM_REGISTERED and "." in token.strip(".,:;!?")


class Redactor:
    """`redact` with the known secrets fixed once: for redacting many strings in a row.
    Without arguments the secrets and credentials are those the process knows now."""

    def __init__(
        self,
        secrets: list[str] | None = None,
        credentials: Iterable[tuple[str, str]] | None = None,
    ) -> None:
        self.secrets = known_secrets() if secrets is None else secrets
        pairs = known_credentials() if credentials is None else frozenset(credentials)
        self.known = known_values(tuple(self.secrets), pairs)

    def __call__(self, text: str) -> str:
        if not text:
            return text
        text = self.known.replace(text, REDACTED)
        if "-----BEGIN" in text:
            text = _PRIVATE_KEY.sub(REDACTED, text)
        lowered = text.lower()
        cues = [cue for cue in _CUES if cue in lowered]
        if not cues:
            return text
        if len(text) <= SHORT_TEXT or len(lowered) != len(text):
            return _line_patterns(text)
        lines = text.splitlines(keepends=True)
        starts = list(itertools.accumulate((len(line) for line in lines), initial=0))
        marked: set[int] = set()
        for cue in cues:
            position = lowered.find(cue)
            while position != -1:
                marked.add(bisect.bisect_right(starts, position) - 1)
                position = lowered.find(cue, position + 1)
        for index in marked:
            lines[index] = _line_patterns(lines[index])
        return "".join(lines)


def _line_patterns(text: str) -> str:
    """The patterns that match within a line (all but private key blocks)."""
    text = _AUTHORIZATION.sub(_authorization, text)
    text = _SCHEME_TOKEN.sub(_scheme_token, text)
    text = _URL_USERINFO.sub(_userinfo, text)
    text = _AWS_SECRET.sub(_pair, text)
    text = _PAIR.sub(_pair, text)
    text = _AWS_KEY_ID.sub(REDACTED, text)
    text = _KNOWN_TOKEN.sub(REDACTED, text)
    return _JWT.sub(REDACTED, text)


def redact(text: str) -> str:
    """`text` with every credential replaced by [REDACTED]."""
    return Redactor()(text)


# -- masking documents ------------------------------------------------------------------------

JOB_KINDS = ("TrainingJob", "EvalSuite")
SENSITIVE_FIELDS = ("parameters", "env", "command")
"""Fields of a job whose values may hold a credential, in specs and in job records (the run
inputs and launches the plan and state keep)."""


def mask_value(name: str, value: Any) -> Any:
    """`value` (a scalar, list or mapping found under `name`) with every value that
    `secret_reason` flags replaced by its mask; the same object when nothing is flagged.
    In a list, an item after a flag (`--token`, `--api-key`) is judged by that flag's name."""
    if isinstance(value, str):
        return mask(value) if secret_reason(name, value) else value
    if isinstance(value, dict):
        masked: dict[Any, Any] | None = None
        for key, item in value.items():
            shown = mask_value(str(key), item)
            if shown is not item:
                masked = masked or dict(value)
                masked[key] = shown
        return value if masked is None else masked
    if isinstance(value, list):
        items: list[Any] | None = None
        for index, item in enumerate(value):
            shown = mask_value(item_name(value, index, name), item)
            if shown is not item:
                items = items or list(value)
                items[index] = shown
        return value if items is None else items
    return value


def item_name(items: list[Any], index: int, name: str) -> str:
    """The name item `index` of a list is judged by: the flag before it (`--token` ->
    `token`), else the list's own name."""
    previous = items[index - 1] if index else None
    if isinstance(previous, str) and previous[:1] == "-" and "=" not in previous:
        return previous.lstrip("-")
    return name


def mask_tree(tree: Any) -> Any:
    """A job document or job record with everything under `parameters`, `env` and
    `command` masked (at any depth: spec, run inputs, launches, evaluations); the same
    object when nothing is masked."""
    if isinstance(tree, dict):
        masked: dict[str, Any] | None = None
        for key, item in tree.items():
            if key in SENSITIVE_FIELDS:
                shown = mask_value(key, item)
            elif isinstance(item, (dict, list)):
                shown = mask_tree(item)
            else:
                continue
            if shown is not item:
                masked = masked or dict(tree)
                masked[key] = shown
        return tree if masked is None else masked
    if isinstance(tree, list):
        items: list[Any] | None = None
        for index, item in enumerate(tree):
            shown = mask_tree(item)
            if shown is not item:
                items = items or list(tree)
                items[index] = shown
        return tree if items is None else items
    return tree


def mask_document(document: Any) -> Any:
    """A normalized document with its spec's parameters, env and command masked (only job
    kinds have those fields); the same object when nothing is masked."""
    spec = document.get("spec") if isinstance(document, dict) else None
    if not isinstance(spec, dict) or not any(field in spec for field in SENSITIVE_FIELDS):
        return document
    masked = mask_tree(spec)
    return document if masked is spec else {**document, "spec": masked}


def sensitive_values(tree: Any) -> list[str]:
    """The raw values `mask_tree` would mask, longest first."""
    found: set[str] = set()

    def collect(raw: Any, masked: Any) -> None:
        if raw is masked:
            return
        if isinstance(raw, str):
            found.add(raw)
        elif isinstance(raw, dict) and isinstance(masked, dict):
            for key in raw:
                collect(raw[key], masked.get(key))
        elif isinstance(raw, list) and isinstance(masked, list):
            for left, right in zip(raw, masked, strict=False):
                collect(left, right)

    collect(tree, mask_tree(tree))
    return sorted(found, key=lambda v: (-len(v), v))
