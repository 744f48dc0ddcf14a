"""A stand-in for the parts of GitLab's REST API (v4) the example pipeline calls.

The token's user, merge request notes (list, create, edit), merge requests (the open
ones, one with its head pipeline, those of a commit with their head pipeline), a
pipeline's jobs, one file of a job's artifacts, project issues (list, create, edit, close)
and notes on them. Requests without the bot's `PRIVATE-TOKEN` get 401 as GitLab answers;
an unknown route gets 404. Every request is recorded, so a test can say what was posted.
Form bodies are read as curl's `--data-urlencode` sends them.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

TOKEN = "glpat-test-bot"
PROJECT = "42"
BOT = "project_42_bot_trainform"


@dataclass
class Forge:
    """What the stand-in knows; tests fill `merge_requests`, `pipelines` and `artifacts`."""

    artifacts: Path
    notes: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    issues: list[dict[str, Any]] = field(default_factory=list)
    merge_requests: list[dict[str, Any]] = field(default_factory=list)
    pipelines: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    requests: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    next_id: int = 500

    def new_id(self) -> int:
        self.next_id += 1
        return self.next_id


Route = Callable[[Forge, re.Match[str], dict[str, str], dict[str, list[str]]], tuple[int, Any]]
ROUTES: list[tuple[str, re.Pattern[str], Route]] = []


def route(
    method: str, pattern: str, scope: str = f"/projects/{PROJECT}"
) -> Callable[[Route], Route]:
    def register(handler: Route) -> Route:
        ROUTES.append((method, re.compile(f"^/api/v4{scope}{pattern}$"), handler))
        return handler

    return register


@route("GET", "/user", scope="")
def current_user(forge: Forge, m: re.Match[str], form: Any, query: Any) -> Any:
    return 200, {"username": BOT}


@route("GET", r"/merge_requests/(\d+)/notes")
def list_notes(forge: Forge, m: re.Match[str], form: dict[str, str], query: Any) -> Any:
    return 200, forge.notes.get(int(m.group(1)), [])


@route("POST", r"/merge_requests/(\d+)/notes")
def create_note(forge: Forge, m: re.Match[str], form: dict[str, str], query: Any) -> Any:
    note = {"id": forge.new_id(), "body": form["body"], "author": {"username": BOT}}
    forge.notes.setdefault(int(m.group(1)), []).append(note)
    return 201, note


@route("PUT", r"/merge_requests/(\d+)/notes/(\d+)")
def edit_note(forge: Forge, m: re.Match[str], form: dict[str, str], query: Any) -> Any:
    for note in forge.notes.get(int(m.group(1)), []):
        if note["id"] == int(m.group(2)):
            note["body"] = form["body"]
            return 200, note
    return 404, {"message": "404 Not found"}


@route("GET", r"/repository/commits/(\w+)/merge_requests")
def commit_merge_requests(forge: Forge, m: re.Match[str], form: Any, query: Any) -> Any:
    return 200, [mr for mr in forge.merge_requests if mr["merge_commit_sha"] == m.group(1)]


@route("GET", r"/merge_requests")
def list_merge_requests(
    forge: Forge, m: re.Match[str], form: Any, query: dict[str, list[str]]
) -> Any:
    """As GitLab's list: no head_pipeline (only a single merge request's GET has it)."""
    state = query.get("state", ["all"])[0]
    return 200, [{k: v for k, v in mr.items() if k != "head_pipeline"}
                 for mr in forge.merge_requests if state in ("all", mr["state"])]


@route("GET", r"/merge_requests/(\d+)")
def one_merge_request(forge: Forge, m: re.Match[str], form: Any, query: Any) -> Any:
    found = [mr for mr in forge.merge_requests if mr["iid"] == int(m.group(1))]
    return (200, found[0]) if found else (404, {"message": "404 Not found"})


@route("GET", r"/pipelines/(\d+)/jobs")
def pipeline_jobs(forge: Forge, m: re.Match[str], form: Any, query: dict[str, list[str]]) -> Any:
    jobs = forge.pipelines.get(int(m.group(1)), [])
    scopes = query.get("scope[]", [])
    return 200, [job for job in jobs if not scopes or job["status"] in scopes]


@route("GET", r"/jobs/(\d+)/artifacts/(.+)")
def artifact_file(forge: Forge, m: re.Match[str], form: Any, query: Any) -> Any:
    path = forge.artifacts / m.group(1) / m.group(2)
    return (200, path.read_bytes()) if path.is_file() else (404, {"message": "404 Not Found"})


@route("GET", r"/issues")
def list_issues(forge: Forge, m: re.Match[str], form: Any, query: dict[str, list[str]]) -> Any:
    state = query.get("state", ["all"])[0]
    return 200, [i for i in forge.issues if state in ("all", i["state"])]


@route("POST", r"/issues")
def create_issue(forge: Forge, m: re.Match[str], form: dict[str, str], query: Any) -> Any:
    issue = {"iid": len(forge.issues) + 1, "title": form["title"],
             "description": form["description"], "state": "opened",
             "author": {"username": BOT}}
    forge.issues.append(issue)
    return 201, issue


@route("PUT", r"/issues/(\d+)")
def edit_issue(forge: Forge, m: re.Match[str], form: dict[str, str], query: Any) -> Any:
    """Edit title/description; `state_event` close or reopen (GitLab's Issues API: any other
    value is 400, an unknown iid 404)."""
    issue = next((i for i in forge.issues if i["iid"] == int(m.group(1))), None)
    if issue is None:
        return 404, {"message": "404 Not found"}
    event = form.get("state_event")
    if event is not None and event not in ("close", "reopen"):
        return 400, {"error": "state_event does not have a valid value"}
    issue.update({k: v for k, v in form.items() if k in ("title", "description")})
    if event is not None:
        issue["state"] = "closed" if event == "close" else "opened"
    return 200, issue


@route("POST", r"/issues/(\d+)/notes")
def create_issue_note(forge: Forge, m: re.Match[str], form: dict[str, str], query: Any) -> Any:
    """A note on an issue (GitLab's Notes API: `body` is required, 400 without it)."""
    issue = next((i for i in forge.issues if i["iid"] == int(m.group(1))), None)
    if issue is None:
        return 404, {"message": "404 Not found"}
    if not form.get("body"):
        return 400, {"error": "body is missing"}
    note = {"id": forge.new_id(), "body": form["body"], "author": {"username": BOT}}
    issue.setdefault("notes", []).append(note)
    return 201, note


def serve(forge: Forge) -> tuple[ThreadingHTTPServer, str]:
    """Start the stand-in on a free local port; (server, its /api/v4 URL)."""

    class Handler(BaseHTTPRequestHandler):
        def handle_one(self, method: str) -> None:
            url = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length).decode() if length else ""
            form = {k: v[0] for k, v in parse_qs(raw, keep_blank_values=True).items()}
            forge.requests.append((method, url.path, form))
            if self.headers.get("PRIVATE-TOKEN") != TOKEN:
                return self.answer(401, {"message": "401 Unauthorized"})
            for verb, pattern, handler in ROUTES:
                match = pattern.match(url.path)
                if verb == method and match:
                    return self.answer(*handler(forge, match, form, parse_qs(url.query)))
            return self.answer(404, {"error": "404 Not Found"})

        def answer(self, status: int, body: Any) -> None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            self.handle_one("GET")

        def do_POST(self) -> None:  # noqa: N802
            self.handle_one("POST")

        def do_PUT(self) -> None:  # noqa: N802
            self.handle_one("PUT")

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_port}/api/v4"
