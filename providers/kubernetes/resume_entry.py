"""The container entry of a training attempt that resumes from the run's latest valid
checkpoint whenever its pods start, not only when trainform submitted it.

Kueue re-admits a preempted Workload with the Job's original template (its pod set info
is restored on eviction), so the Job's environment still names the checkpoint the attempt
began from: a fixed TRAINFORM_RESUME_FROM would make every restart after a preemption
throw away the checkpoints written since. So a training attempt with `resume.policy:
latest` and an s3:// checkpoint prefix starts through this entry:
`sh -c <ENTRY> trainform-resume <argv...>`. The script runs the RESOLVER with the image's
`python3`; it lists `TRAINFORM_CHECKPOINT_DIR` (the run's s3:// prefix) with boto3 and
takes the newest `step-<N>` that is valid by the rule of providers/objectstore/
checkpoints.py (its manifest.json parses, names step N, and every file it lists is there
with the listed size and ETag). It exports TRAINFORM_RESUME_FROM and TRAINFORM_RESUME_STEP
(empty and 0 when the run has no valid checkpoint), says on stderr which checkpoint it
resumes from, and runs the job's argv with `exec "$@"` (argv is never shell text: specs
are untrusted input). When it cannot read the checkpoints (no python3 or boto3 in the
image, S3 refusing), it says so and keeps the values trainform set at submission.
The S3 endpoint and credentials are the pod's own (AWS_* variables, a service account).
Every pod of a multi-node attempt resolves on its own; they agree because Kueue admits the
attempt again only once none of its pods is left writing (the quota is released when the
Job has no active pod). Pure; no I/O.
"""

from __future__ import annotations

ENTRY_NAME = "trainform-resume"
"""`$0` of the script: what its messages are prefixed with."""

RESOLVER = r"""
import json, os, re, sys
prefix = os.environ.get("TRAINFORM_CHECKPOINT_DIR", "").rstrip("/")
if not prefix.startswith("s3://"):
    sys.exit(3)
bucket, _, base = prefix[len("s3://"):].partition("/")
base = base + "/" if base else ""
try:
    import boto3
    client = boto3.client("s3")
    objects = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=base):
        for item in page.get("Contents", []):
            objects[item["Key"][len(base):]] = (int(item["Size"]), item["ETag"].strip(chr(34)))
except Exception as error:
    print(error, file=sys.stderr)
    sys.exit(4)
steps = {}
for key in objects:
    match = re.match(r"step-(\d+)/manifest[.]json$", key)
    if match:
        steps[int(match.group(1))] = key
for step in sorted(steps, reverse=True):
    name = "step-%d" % step
    try:
        body = client.get_object(Bucket=bucket, Key=base + steps[step])["Body"].read()
        manifest = json.loads(body)
    except Exception:
        continue
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, list) or manifest.get("step", step) != step:
        continue
    good = True
    for entry in files:
        if not isinstance(entry, dict) or not {"path", "size", "etag"} <= set(entry):
            good = False
            break
        if objects.get(name + "/" + str(entry["path"])) != (entry["size"], entry["etag"]):
            good = False
            break
    if good:
        print(prefix + "/" + name, step)
        sys.exit(0)
"""
"""The resolver: stdlib and boto3 only; prints `<checkpoint uri> <step>`, or nothing when
no checkpoint is valid; exits non-zero when it cannot tell. No single quote in it: the
entry passes it to python3 as one single-quoted word."""

ENTRY = (
    r"""set -u
if found=$(python3 -c '"""
    + RESOLVER
    + r"""'); then
  if [ -n "$found" ]; then
    TRAINFORM_RESUME_FROM=${found% *}
    TRAINFORM_RESUME_STEP=${found##* }
    echo "$0: resuming from $TRAINFORM_RESUME_FROM (step $TRAINFORM_RESUME_STEP)," \
      "the run's latest valid checkpoint" >&2
  else
    TRAINFORM_RESUME_FROM=
    TRAINFORM_RESUME_STEP=0
    echo "$0: no valid checkpoint: starting from scratch" >&2
  fi
  export TRAINFORM_RESUME_FROM TRAINFORM_RESUME_STEP
else
  echo "$0: cannot read the run's checkpoints;" \
    "resuming from ${TRAINFORM_RESUME_FROM:-scratch} as submitted" >&2
fi
exec "$@"
"""
)
"""The entry script: the job's argv only ever as "$@"."""


def resume_command(argv: list[str]) -> list[str]:
    """The container command that resolves the latest valid checkpoint, then runs `argv`."""
    return ["sh", "-c", ENTRY, ENTRY_NAME, *argv]


def resumes_at_start(kind: str, resume: str, checkpoint_prefix: str) -> bool:
    """Whether an attempt starts through the entry: training, resume policy latest, and
    checkpoints on S3 (where the pods can read them)."""
    return kind == "train" and resume == "latest" and checkpoint_prefix.startswith("s3://")
