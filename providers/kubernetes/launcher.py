"""The per-pod launcher of a command that is not torchrun and runs several processes per
node: one fixed POSIX sh script that starts the job's command LOCAL_WORLD_SIZE times.

The container's command becomes `sh -c <LAUNCHER> trainform-launch <argv...>`: the job's
argv reaches the script only as its positional parameters and runs as `"$@"`, so no spec
value is ever shell text (specs are untrusted input). The script reads what the pod's
environment gives it (the launch contract, pods.py): NODE_RANK (the completion index) and
LOCAL_WORLD_SIZE, and starts local rank 0 .. LOCAL_WORLD_SIZE - 1 with RANK = NODE_RANK *
LOCAL_WORLD_SIZE + local rank and LOCAL_RANK, each in a small wrapper that forwards
SIGTERM to it and tells the launcher when it failed (`reap` tells a status from a wait a
trap interrupted, which returns above 128 too, and waits again). NODE_RANK and LOCAL_WORLD_SIZE
must be plain digits, or the launcher exits 2 before starting anything (a shell's arithmetic
would evaluate anything else). Then:

- a process that exits non-zero is named on stderr (rank, local rank, node, exit code),
  the launcher stops the others (SIGTERM) and exits with that code (1 when the shell lost
  it: bash's `wait` can answer -1 for a child reaped while a trap ran), so the pod fails
  and the Job's podFailurePolicy fails the whole group (FailJob);
- SIGTERM or SIGINT to the launcher (the kubelet stopping the pod, a drain) is passed on
  to every process;
- when every process exits 0 the launcher exits 0.
Pure; no I/O.
"""

from __future__ import annotations

LAUNCHER_NAME = "trainform-launch"
"""`$0` of the script: what its messages are prefixed with."""

LAUNCHER = r"""set -u
for number in "$NODE_RANK" "$LOCAL_WORLD_SIZE"; do
  case "$number" in
    '' | *[!0-9]*) echo "$0: NODE_RANK and LOCAL_WORLD_SIZE must be numbers" >&2; exit 2 ;;
  esac
done
reap() {
  code=
  while :; do
    interrupted=0
    wait "$1"; result=$?
    if [ "$result" -eq 127 ] && [ -n "$code" ]; then return; fi
    code=$result
    if [ "$interrupted" -eq 0 ] || [ "$result" -le 128 ]; then return; fi
  done
}
launcher=$$
pids=
stopping=0
failed=0
stop() {
  interrupted=1
  stopping=1
  for pid in $pids; do kill -TERM "$pid" 2>/dev/null; done
}
trap stop TERM INT
trap 'failed=1; stop' USR1
local_rank=0
while [ "$local_rank" -lt "$LOCAL_WORLD_SIZE" ] && [ "$stopping" -eq 0 ]; do
  rank=$((NODE_RANK * LOCAL_WORLD_SIZE + local_rank))
  (
    child=
    stopped=0
    end() {
      interrupted=1
      stopped=1
      if [ -n "$child" ]; then kill -TERM "$child" 2>/dev/null; fi
    }
    trap end TERM INT
    RANK=$rank LOCAL_RANK=$local_rank "$@" &
    child=$!
    reap "$child"
    if [ "$code" -ne 0 ] && [ "$stopped" -eq 0 ]; then
      echo "$0: rank $rank (local rank $local_rank on node $NODE_RANK) exited with code $code" >&2
      kill -USR1 "$launcher" 2>/dev/null
    fi
    exit "$code"
  ) &
  pids="$pids $!"
  local_rank=$((local_rank + 1))
done
status=0
for pid in $pids; do
  reap "$pid"
  case "$code" in *[!0-9]*) code=1 ;; esac
  if [ "$code" -ne 0 ] && { [ "$status" -eq 0 ] || [ "$status" -eq 143 ]; }; then
    status=$code
  fi
done
if [ "$failed" -eq 1 ] && { [ "$status" -eq 0 ] || [ "$status" -eq 143 ]; }; then
  status=1
fi
exit "$status"
"""
"""The launcher: fixed text, the job's argv only ever as "$@"."""


def launcher_command(argv: list[str]) -> list[str]:
    """The container command that runs `argv` once per local rank."""
    return ["sh", "-c", LAUNCHER, LAUNCHER_NAME, *argv]
