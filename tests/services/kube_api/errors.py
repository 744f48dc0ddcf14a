"""The API server's errors as `Status` objects (kind Status, apiVersion v1, status Failure).

`ApiError` is raised anywhere below the HTTP layer; `server.py` turns it into the response
body. The constructors mirror k8s.io/apimachinery/pkg/api/errors: message texts, reasons and
`details` (where `kind` holds the resource plural, as on the real server) match its output.
"""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """A failed request: HTTP code, Status reason, message and optional details."""

    def __init__(
        self, code: int, reason: str, message: str, details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
        }
        if self.details is not None:
            body["details"] = self.details
        body["code"] = self.code
        return body


def _details(group: str, plural: str, name: str) -> dict[str, Any]:
    details: dict[str, Any] = {"name": name}
    if group:
        details["group"] = group
    details["kind"] = plural
    return details


def qualified(group: str, plural: str) -> str:
    return f"{plural}.{group}" if group else plural


def not_found(group: str, plural: str, name: str) -> ApiError:
    return ApiError(
        404,
        "NotFound",
        f'{qualified(group, plural)} "{name}" not found',
        _details(group, plural, name),
    )


def already_exists(group: str, plural: str, name: str) -> ApiError:
    return ApiError(
        409,
        "AlreadyExists",
        f'{qualified(group, plural)} "{name}" already exists',
        _details(group, plural, name),
    )


def conflict(group: str, plural: str, name: str, cause: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qualified(group, plural)} "{name}": {cause}',
        _details(group, plural, name),
    )


def stale(group: str, plural: str, name: str) -> ApiError:
    return conflict(
        group,
        plural,
        name,
        "the object has been modified; please apply your changes to the latest version "
        "and try again",
    )


def invalid(kind: str, group: str, name: str, field: str, problem: str) -> ApiError:
    """422 Invalid with one cause, e.g. field 'metadata.name', problem 'Required value: ...'."""
    cause = {"reason": "FieldValueInvalid", "message": problem, "field": field}
    if problem.startswith("Required value"):
        cause["reason"] = "FieldValueRequired"
    details: dict[str, Any] = {"name": name}
    if group:
        details["group"] = group
    details["kind"] = kind
    details["causes"] = [cause]
    return ApiError(
        422,
        "Invalid",
        f'{kind}.{group} "{name}" is invalid: {field}: {problem}'
        if group
        else f'{kind} "{name}" is invalid: {field}: {problem}',
        details,
    )


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def unprocessable(message: str) -> ApiError:
    """What the server answers when a patch cannot be applied (422, reason Invalid)."""
    return ApiError(422, "Invalid", message)


def method_not_allowed(
    message: str = "the server does not allow this method on the requested resource",
) -> ApiError:
    return ApiError(405, "MethodNotAllowed", message)


def unsupported_media_type(content_type: str) -> ApiError:
    return ApiError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - "
        f"accepted media types include: application/json-patch+json, "
        f"application/merge-patch+json, application/apply-patch+yaml ({content_type})",
    )


def not_found_path() -> ApiError:
    """An unknown URL: the real server answers a bare 404 Status with reason NotFound."""
    return ApiError(404, "NotFound", "the server could not find the requested resource")
