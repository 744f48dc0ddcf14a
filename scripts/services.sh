#!/usr/bin/env bash
# Installs the Debian packages of the servers the integration tests start themselves
# (the OCI registry; munge, MariaDB and Slurm for scripts/slurm-cluster.sh) and Chromium, the
# headless browser the HTML drift report is checked in (driven by the `playwright` Python
# package from the test extras, which never downloads a browser of its own), and jq and curl,
# which the CI example pipelines run by tests/ci/ call. Needs root and
# apt; elsewhere it says what is missing and goes on, and the tests that need a server skip
# (or fail under CI=true).
#
# Debian packages start their daemons on install; the tests start their own instead, so
# during the install a policy-rc.d that answers 101 ("action forbidden") is put in place.
# The script removes it again on every exit path (a trap), and only if it created it: a
# policy-rc.d that was there before is left untouched. Nothing else on the machine changes
# beyond the installed packages.
set -euo pipefail
packages=(jq curl docker-registry slurmctld slurmd slurmdbd slurm-client munge mariadb-server chromium)
policy_rc_d="${TRAINFORM_POLICY_RC_D:-/usr/sbin/policy-rc.d}"
missing=()
for package in "${packages[@]}"; do
  dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "services.sh: not root or no apt-get; install ${missing[*]} to run the integration tests" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
if [ ! -e "$policy_rc_d" ]; then
  trap 'rm -f -- "$policy_rc_d"' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM HUP
  printf '#!/bin/sh\nexit 101\n' > "$policy_rc_d"
  chmod +x -- "$policy_rc_d"
fi
apt-get install -y -q -- "${missing[@]}" >/dev/null 2>&1 \
  || { apt-get update -q >/dev/null && apt-get install -y -q -- "${missing[@]}" >/dev/null; }
