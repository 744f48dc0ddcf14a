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
