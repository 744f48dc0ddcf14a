"""`trainform init`: the files a new spec folder starts from.

`init_folder` writes, into a folder (created if missing):

- `trainform.yaml`: the local provider, a local state file, one `dev` environment, and a
  yaml-language-server modeline pointing at the Config schema;
- `.trainformignore`: gitignore patterns for YAML that is not a spec (Helm charts and
  values, docker-compose files), with a comment saying hidden entries are always skipped;
- `.schemas/trainform.schema.json` and `.schemas/config.schema.json`: the JSON Schemas of
  spec documents and of trainform.yaml, from this version of trainform;
- `.vscode/settings.json`: the YAML extension's `yaml.schemas` mapping those schemas to the
  spec files.

A file that already exists is never overwritten (its name is reported as kept), except the
two schema files, which are generated and always refreshed. Nothing outside the folder is
touched; each file is written whole or not at all (specs.file_writes).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from trainform.specs.discovery import CONFIG_FILE, IGNORE_FILE
from trainform.specs.file_writes import write_file
from trainform.specs.schema import document_schema

SCHEMA_DIR = ".schemas"
DOCUMENT_SCHEMA = f"{SCHEMA_DIR}/trainform.schema.json"
CONFIG_SCHEMA = f"{SCHEMA_DIR}/config.schema.json"
EDITOR_SETTINGS = ".vscode/settings.json"

CONFIG_TEXT = f"""\
# yaml-language-server: $schema={CONFIG_SCHEMA}
# trainform.yaml: what the specs in this folder are reconciled against.
apiVersion: trainform/v1
providers:
  # One machine, no servers: pools are this machine, jobs run as local processes.
  - name: local
    type: local
    connection:
      root: .trainform
state:
  backend: local
  path: .trainform/state.json
variables: {{}}
# Each environment is an isolated target: give a second one its own `state:` and
# provider connections (environments.NAME.providers.INSTANCE), or validate refuses it.
environments:
  dev:
    variables: {{}}
defaultEnvironment: dev
# Tenancy (project-isolation): platform kinds (pools, queues, quotas, projects) may only
# be declared in these files; give the platform team's folder (and CODEOWNERS) here.
policies:
  settings:
    project-isolation:
      adminPaths: ["platform/**"]
"""

GITIGNORE_FILE = ".gitignore"
GITIGNORE_TEXT = """\
# trainform's local state, journal, locks, backups and the local platform's files.
.trainform/
"""

IGNORE_TEXT = """\
# Files trainform does not read as specs (gitignore syntax). Hidden files and folders
# (.git, .github, .trainform, .schemas) are always skipped.
charts/
*.values.yaml
values*.yaml
docker-compose*.yaml
docker-compose*.yml
"""


def _editor_settings() -> str:
    settings = {
        "yaml.schemas": {
            f"./{CONFIG_SCHEMA}": [CONFIG_FILE],
            f"./{DOCUMENT_SCHEMA}": ["**/*.yaml", "**/*.yml", f"!{CONFIG_FILE}"],
        },
    }
    return json.dumps(settings, indent=2) + "\n"


@dataclass
class InitResult:
    written: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)


def init_folder(folder: str) -> InitResult:
    """Write the starting files of a spec folder into `folder`."""
    root = Path(folder)
    root.mkdir(parents=True, exist_ok=True)
    result = InitResult()
    starting = {
        CONFIG_FILE: CONFIG_TEXT,
        IGNORE_FILE: IGNORE_TEXT,
        GITIGNORE_FILE: GITIGNORE_TEXT,
        EDITOR_SETTINGS: _editor_settings(),
    }
    for name, text in starting.items():
        path = root / name
        if path.exists() or path.is_symlink():
            result.kept.append(name)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        write_file(path, text)
        result.written.append(name)
    schemas = {DOCUMENT_SCHEMA: document_schema(None), CONFIG_SCHEMA: document_schema("Config")}
    for name, schema in schemas.items():
        path = root / name
        if path.is_symlink():
            result.kept.append(name)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        write_file(path, json.dumps(schema, indent=2) + "\n")
        result.written.append(name)
    return result
