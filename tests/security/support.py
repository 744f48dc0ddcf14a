"""Shared pieces of the security suite: a canary that proves nothing ran, and attack folders.

Every test here is a real CLI run on a spec folder written for the attack. A canary is a
file path that an injected command would create (`touch CANARY`); after the run it must
not exist. `CANARY_PAYLOADS` are the ways a value could smuggle a command into a process.
"""

from __future__ import annotations

from pathlib import Path

from tests.helpers import BASE, CONFIG, write_tree


def canary_payloads(canary: Path) -> list[str]:
    """Strings that would create `canary` if any part of them reached a shell or an option."""
    return [
        f"--upload-pack=touch {canary};://",
        f"-u touch {canary}",
        f"$(touch {canary})",
        f"`touch {canary}`",
        f"x; touch {canary}",
        f"x && touch {canary} #",
        f"x\ntouch {canary}",
        f"--config=core.sshCommand=touch {canary}",
        f"ext::sh -c touch% {canary}",
    ]


def write_platform(root: Path, files: dict[str, str | bytes], config: str = CONFIG) -> Path:
    """A spec folder with the base platform (project, pool, queue, image, dataset) and `files`."""
    write_tree(root, {"trainform.yaml": config, "platform.yaml": BASE, **files})
    return root


def registry_folder(root: Path, host: str, username_env: str, password_env: str) -> Path:
    """A spec folder whose registry provider reads its credentials from the two variables
    (names that say nothing about credentials) and one Image pinned in that registry."""
    write_tree(
        root,
        {
            "trainform.yaml": f"""\
                apiVersion: trainform/v1
                providers:
                  - name: registry
                    type: registry
                    connection:
                      url: http://{host}
                      insecure: true
                      allowed: ["{host}"]
                      usernameEnv: {username_env}
                      passwordEnv: {password_env}
                state: {{backend: local, path: .trainform/state.json}}
                """,
            "images.yaml": f"""\
                apiVersion: trainform/v1
                kind: Image
                metadata: {{name: trainer}}
                spec: {{reference: "{host}/ml/trainer:v1@sha256:{"b" * 64}"}}
                """,
        },
    )
    return root
