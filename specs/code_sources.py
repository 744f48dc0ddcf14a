"""Where job and evaluation code may come from (`spec.code`): the rules, and their diagnostics.

`check_code_sources` runs at validate, after references resolve, on every TrainingJob and
EvalSuite with `spec.code`; `check_code` applies the same rules to plain values and is
called again by planner.lockfile right before `git` runs (a lock or plan must refuse an
unsafe repository even when validation was bypassed). No subprocess runs here.

`code.repo` is one of:

- `https://[user@]host[:port]/path` (no password in the URL),
- `ssh://[user@]host[:port]/path`,
- `user@host:path` (scp form, e.g. `git@github.com:org/repo.git`),
- a relative folder inside the spec folder (letters, digits, `. _ + @ / -`; real path,
  symlinks followed, must stay there).

Refused in every form: a leading `-` (git would read an option), control characters and
whitespace, git transports (`ext::`, `fd::`, any `x::`), other schemes (`file://`, `git://`,
`http://`), `?` and `#`. A URL's host (with its port when one is given) must be listed in
`security.codeHosts` of trainform.yaml, so a pull request cannot make CI contact a host of
its choosing. `code.ref` is a plain branch or tag name; `code.path` a relative path that
stays inside the repository.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

from trainform.specs.confinement import PathEscape, confined_path, is_within
from trainform.specs.errors import Diagnostic, Location, Severity
from trainform.specs.models.config import RootConfig
from trainform.specs.resource import Resource

REPO_FORMS = (
    "https://host/path, ssh://[user@]host[:port]/path, git@host:path, "
    "or a folder inside the spec folder"
)
REF_FORM = "a branch or tag name such as main, v1.2 or release/2024-06"
PATH_FORM = "a relative path inside the repository, e.g. recipes/sft"
MAX_LENGTH = 2048

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_SPACE = re.compile(r"\s")
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOST = re.compile(rf"^{_LABEL}(?:\.{_LABEL})*$")
_USER = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,63}$")
_REMOTE_PATH = re.compile(r"^[A-Za-z0-9._~%+@:/-]+$")
_REF = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._/+-]{0,254}$")
_SCP = re.compile(r"^(?P<user>[^@/:]+)@(?P<host>[^@/:]+):(?P<path>.*)$")
_FOLDER = re.compile(r"^[\w.+@/-]+$")
_FOLDER_CHARACTERS = "letters, digits and . _ + @ / -"


class UnsafeCode(ValueError):
    """A `spec.code` value refused; `field` is repo, ref or path, `code` the diagnostic code."""

    def __init__(
        self, field: str, message: str, *, code: str = "", expected: str = "", remedy: str = ""
    ) -> None:
        super().__init__(message)
        self.field = field
        self.code = code or f"code-{field}"
        self.expected = expected
        self.remedy = remedy


@dataclass(frozen=True, slots=True)
class CodeSource:
    """A `code.repo` that passed the syntax rules: its form and, for URLs, the host to allow."""

    form: str  # https, ssh, scp or folder
    host: str = ""  # `host` or `host:port`, lowercased; "" for a folder

    @property
    def remote(self) -> bool:
        return self.form != "folder"


def shown(value: str) -> str:
    """A value as a diagnostic quotes it: escaped, and short."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _common(field: str, value: str, expected: str) -> None:
    """Rules every code value obeys, whatever its form."""
    if not value:
        raise UnsafeCode(field, "is empty", expected=expected)
    if len(value) > MAX_LENGTH:
        raise UnsafeCode(field, f"is longer than {MAX_LENGTH} characters", expected=expected)
    if value.startswith("-"):
        raise UnsafeCode(
            field, "starts with '-', so git would read it as an option", expected=expected
        )
    if _CONTROL.search(value):
        raise UnsafeCode(
            field, "contains a control character (newline, NUL, ...)", expected=expected
        )
    if _SPACE.search(value):
        raise UnsafeCode(field, "contains whitespace", expected=expected)
    if "?" in value or "#" in value:
        raise UnsafeCode(field, "contains '?' or '#'", expected=expected)


def _remote_path(path: str, what: str) -> None:
    if not path or path == "/":
        raise UnsafeCode("repo", f"{what} names no repository path", expected=REPO_FORMS)
    if not _REMOTE_PATH.match(path):
        bad = sorted({c for c in path if not _REMOTE_PATH.match(c)})
        raise UnsafeCode(
            "repo",
            f"{what} path contains {', '.join(map(repr, bad))}: a repository path holds "
            "letters, digits and . _ ~ % + @ : / -",
            expected=REPO_FORMS,
        )
    decoded = unquote(path)
    if _CONTROL.search(decoded) or _SPACE.search(decoded):
        raise UnsafeCode("repo", f"{what} path encodes a control character or whitespace")
    if path.lstrip("/").startswith("-"):
        raise UnsafeCode("repo", f"{what} path starts with '-'", expected=REPO_FORMS)
    if ".." in decoded.split("/"):
        raise UnsafeCode("repo", f"{what} path has a '..' segment", expected=REPO_FORMS)


def _host_port(hostport: str, what: str) -> str:
    host, colon, port = hostport.partition(":")
    if hostport.startswith("["):
        raise UnsafeCode("repo", "IPv6 address hosts are not supported; use a host name")
    if not _HOST.match(host):
        raise UnsafeCode(
            "repo",
            f"{what} host {shown(host)} is not a host name (letters, digits, '-' and '.')",
            expected=REPO_FORMS,
        )
    if colon and not (port.isdigit() and port.isascii() and 0 < int(port) < 65536):
        raise UnsafeCode("repo", f"{what} port {shown(port)} is not a port number")
    return host.lower() + (f":{int(port)}" if colon else "")


def _url(repo: str) -> CodeSource:
    scheme, _, rest = repo.partition("://")
    if scheme not in ("https", "ssh"):
        if scheme.lower() == "file":
            message = "file:// is refused: name a folder inside the spec folder instead"
        else:
            message = f"scheme {shown(scheme)} is not allowed: only https:// and ssh://"
        raise UnsafeCode("repo", message, expected=REPO_FORMS)
    authority, slash, path = rest.partition("/")
    userinfo, at, hostport = authority.rpartition("@")
    if at:
        user, colon, _password = userinfo.partition(":")
        if colon:
            raise UnsafeCode(
                "repo",
                f"{scheme}:// URL carries a password",
                expected=REPO_FORMS,
                remedy="remove the credentials from the URL; git reads them from its "
                "credential helper or the SSH agent",
            )
        if not _USER.match(user):
            raise UnsafeCode("repo", f"{scheme}:// user {shown(user)} is not a user name")
    host = _host_port(hostport, f"{scheme}://")
    _remote_path(slash + path, f"{scheme}://")
    return CodeSource(scheme, host)


def parse_repo(repo: str) -> CodeSource:
    """The form of `repo`, or UnsafeCode naming the first rule it breaks (syntax only)."""
    _common("repo", repo, REPO_FORMS)
    if "::" in repo:
        raise UnsafeCode(
            "repo",
            "uses a git transport (`<transport>::`), which can run commands",
            expected=REPO_FORMS,
        )
    if "://" in repo:
        return _url(repo)
    scp = _SCP.match(repo)
    if scp:
        if not _USER.match(scp["user"]):
            raise UnsafeCode("repo", f"user {shown(scp['user'])} is not a user name")
        host = _host_port(scp["host"], "scp-style address")
        _remote_path(scp["path"], "scp-style address")
        return CodeSource("scp", host)
    if ":" in repo:
        raise UnsafeCode(
            "repo",
            "contains ':', which git reads as host:path; write git@host:path, or name a "
            "folder without ':'",
            expected=REPO_FORMS,
        )
    if repo.startswith(("/", "~", "\\")):
        raise UnsafeCode(
            "repo",
            "is an absolute path; code folders are named relative to the spec folder",
            code="path-escape",
            expected=REPO_FORMS,
        )
    _folder_characters("repo", repo, REPO_FORMS)
    return CodeSource("folder")


def _folder_characters(field: str, value: str, expected: str) -> None:
    if not _FOLDER.match(value):
        bad = sorted({c for c in value if not _FOLDER.match(c)})
        raise UnsafeCode(
            field,
            f"contains {', '.join(map(repr, bad))}: a folder name here holds {_FOLDER_CHARACTERS}",
            expected=expected,
        )


def check_ref(ref: str) -> None:
    """UnsafeCode unless `ref` is a plain branch or tag name."""
    _common("ref", ref, REF_FORM)
    parts = ref.split("/")
    if (
        not _REF.match(ref)
        or ".." in ref
        or "" in parts
        or any(part.startswith(".") or part.endswith(".lock") for part in parts)
        or ref.endswith(".")
    ):
        raise UnsafeCode(
            "ref",
            "is not a branch or tag name (letters, digits, . _ / + -; no '..', no empty or "
            "dot-led component)",
            expected=REF_FORM,
        )


def check_subpath(path: str) -> None:
    """UnsafeCode unless `path` is a relative path that stays inside the repository."""
    if path == "":
        return
    _common("path", path, PATH_FORM)
    if path.startswith(("/", "\\", "~")):
        raise UnsafeCode("path", "is an absolute path", expected=PATH_FORM)
    _folder_characters("path", path, PATH_FORM)
    depth = 0
    for part in path.split("/"):
        if part == "..":
            depth -= 1
            if depth < 0:
                raise UnsafeCode("path", "leaves the repository through '..'", expected=PATH_FORM)
        elif part not in ("", "."):
            depth += 1


def check_host(source: CodeSource, code_hosts: Sequence[str]) -> None:
    """UnsafeCode unless the host of a URL-form repository is an allowed code host."""
    if not source.remote:
        return
    allowed = {host.strip().lower() for host in code_hosts}
    if source.host in allowed:
        return
    listed = ", ".join(sorted(allowed)) if allowed else "none"
    raise UnsafeCode(
        "repo",
        f"code host {source.host} is not allowed (security.codeHosts in trainform.yaml: {listed})",
        code="code-host",
        expected="a code host listed in security.codeHosts of trainform.yaml",
        remedy=f"ask the platform admins to add {source.host} to trainform.yaml "
        f"(security: {{codeHosts: [{source.host}]}}), or ship the code in the spec folder",
    )


def code_folder(root: Path, repo: str, path: str = "") -> Path:
    """The real folder of spec-folder code `repo` (+ `path`); UnsafeCode if it leaves."""
    try:
        folder = confined_path(root, repo)
        target = confined_path(root, f"{repo}/{path}") if path else folder
    except PathEscape as exc:
        raise UnsafeCode(
            "repo",
            f"code folder {exc}",
            code="path-escape",
            expected="a folder inside the spec folder",
        ) from None
    if not is_within(target, folder):
        raise UnsafeCode(
            "path", "resolves outside the code folder", code="path-escape", expected=PATH_FORM
        )
    return target


def check_code(
    repo: str, ref: str | None, path: str, root: Path, code_hosts: Sequence[str]
) -> tuple[CodeSource, Path | None]:
    """Every rule at once: the source and, for spec-folder code, its confined folder."""
    source = parse_repo(repo)
    if ref is not None:
        check_ref(ref)
    check_subpath(path)
    check_host(source, code_hosts)
    folder = None if source.remote else code_folder(root, repo, path)
    return source, folder


def check_code_sources(
    resources: dict[str, Resource],
    config: RootConfig,
    root: Path,
    locate: Callable[[Resource, tuple[str | int, ...]], Location],
) -> list[Diagnostic]:
    """One diagnostic per code location that validate must refuse."""
    diagnostics: list[Diagnostic] = []
    hosts = config.security.code_hosts
    folders: dict[tuple[str, str], UnsafeCode | None] = {}
    # Many jobs share one repository: each distinct (repo, ref, path) is checked once.
    seen: dict[tuple[str, str | None, str], list[UnsafeCode]] = {}
    for resource in resources.values():
        if resource.kind not in ("TrainingJob", "EvalSuite"):
            continue
        code = getattr(resource.document.spec, "code", None)
        if code is None:
            continue
        key = (code.repo, code.ref, code.path)
        if key not in seen:
            seen[key] = _problems(code.repo, code.ref, code.path, root, hosts, folders)
        for problem in seen[key]:
            value = {"repo": code.repo, "ref": code.ref or "", "path": code.path}[problem.field]
            diagnostics.append(
                Diagnostic(
                    Severity.ERROR,
                    problem.code,
                    f"cannot use spec.code.{problem.field}: {problem}",
                    locate(resource, ("spec", "code", problem.field)),
                    field=f"spec.code.{problem.field}",
                    expected=problem.expected,
                    found=shown(value),
                    detail=f"help:     {problem.remedy}" if problem.remedy else "",
                    address=resource.address,
                )
            )
    return diagnostics


def _problems(
    repo: str,
    ref: str | None,
    path: str,
    root: Path,
    hosts: Sequence[str],
    folders: dict[tuple[str, str], UnsafeCode | None],
) -> list[UnsafeCode]:
    problems: list[UnsafeCode] = []
    source: CodeSource | None = None
    try:
        source = parse_repo(repo)
        check_host(source, hosts)
    except UnsafeCode as exc:
        problems.append(exc)
    for check, value in ((check_ref, ref), (check_subpath, path)):
        try:
            if value is not None:
                check(value)
        except UnsafeCode as exc:
            problems.append(exc)
    if source is not None and not source.remote and not problems:
        key = (repo, path)
        if key not in folders:
            try:
                code_folder(root, repo, path)
                folders[key] = None
            except UnsafeCode as exc:
                folders[key] = exc
        if folders[key] is not None:
            problems.append(folders[key])  # type: ignore[arg-type]
    return problems
