#!/usr/bin/env bash
# Make sure SLURM (slurmctld, slurmd, sbatch) and MUNGE (munged) exist for the SLURM tests.
# The tests start their own throwaway one-node cluster on localhost (tests/helpers/slurm.py) and stop
# it; nothing runs as a service: the install is done with a policy-rc.d that forbids starting
# services, and any munge/slurm daemon the packages' scripts started anyway is stopped again.
set -euo pipefail
have_slurm() {
  local tool
  for tool in slurmctld slurmd sbatch munged; do
    command -v "$tool" >/dev/null 2>&1 || [ -x "/usr/sbin/$tool" ] || return 1
  done
}
if have_slurm; then exit 0; fi
if [ "$(id -u)" -ne 0 ]; then
  echo "ensure_slurm: slurmctld/slurmd/sbatch/munged missing and not root; SLURM tests will be skipped" >&2
  exit 0
fi
echo "ensure_slurm: installing SLURM and MUNGE (apt-get install slurm-wlm munge)" >&2
export DEBIAN_FRONTEND=noninteractive
policy=/usr/sbin/policy-rc.d
saved=""
if [ -e "$policy" ]; then
  saved="$(mktemp)"
  cp -p "$policy" "$saved"
fi
restore_policy() {
  if [ -n "$saved" ]; then mv -f "$saved" "$policy"; else rm -f "$policy"; fi
}
trap restore_policy EXIT
# invoke-rc.d asks policy-rc.d first; 101 = "action forbidden": no service starts during install.
printf '#!/bin/sh\nexit 101\n' >"$policy"
chmod 755 "$policy"
daemons() {  # pids of running munge/slurm daemons
  local name
  for name in munged slurmctld slurmd slurmdbd; do pgrep -x "$name" || true; done
}
# Daemons of these names that run already are not ours to stop afterwards.
before="$(daemons)"
apt-get update -qq
apt-get install -y -qq slurm-wlm munge >/dev/null
# Should a package script have started a daemon all the same, stop that one (by its pid).
for pid in $(daemons); do
  if ! grep -qx "$pid" <<<"$before"; then
    echo "ensure_slurm: stopping $(cat "/proc/$pid/comm" 2>/dev/null || echo daemon) (pid $pid) started by the install" >&2
    kill "$pid" 2>/dev/null || true
  fi
done
have_slurm
