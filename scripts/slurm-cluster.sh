#!/usr/bin/env bash
# A Slurm test cluster on 127.0.0.1 (one slurmctld, two slurmd nodes), everything under one
# folder.
#
#   scripts/slurm-cluster.sh start DIR   # munge, MariaDB, slurmdbd, slurmctld, slurmd
#   scripts/slurm-cluster.sh stop DIR    # stops the daemons DIR's pid files name
#   scripts/slurm-cluster.sh status DIR  # scontrol ping, sinfo
#   scripts/slurm-cluster.sh restart-controller DIR  # after a bad include made it exit
#
# `start` on a folder that holds a cluster stops it first (jobs lost, accounting kept) and
# starts it again on new ports; `stop` cancels the jobs, stops the daemons by the pids their
# pid files name, then kills the cluster's leftover slurmstepd processes and their children.
#
# Needs root and the Debian packages scripts/services.sh installs (Slurm 22.05). No systemd:
# each daemon is started directly, with its config, state, logs, pid file and socket under
# DIR, so several clusters (one per test session) can run side by side and nothing global is
# touched. Ports are free ones picked here, or SLURM_CLUSTER_PORTS="mysql dbd ctld slurmd"
# (the further nodes' slurmd listen on the ports after that one).
# Nodes: SLURM_CLUSTER_NODES of them (default 2), each its own slurmd on this host (Debian's
# Slurm is built with --enable-multiple-slurmd: `scontrol show config` says MULTIPLE_SLURMD
# = Yes), started as `slurmd -N NAME` with a Port= of its own in its NodeName line and its
# pid file, spool folder and log named after it (%n). The first node is the short hostname
# and alone in the default `debug` partition; the others are `<hostname>-2` ... with
# Feature=extra, in no partition until a test's own partition names them (a multi-node job).
# Every node (at 127.0.0.1) has 4 fake GPUs: character devices made with mknod under DIR/dev
# (gres/gpu needs File= entries; count-only GRES drains the node).
# After start, DIR holds:
#   slurm.conf                   SLURM_CONF for clients (sbatch, squeue, sacct, sacctmgr ...)
#   trainform-partitions.conf    included at the end of slurm.conf, empty at start; the
#                                `debug` default partition lives in slurm.conf itself
#   cluster.env                  CLUSTER NODE NODES CPUS MEMORY GPUS and the ports, shell syntax
#   jobs/                        a folder for job outputs (always pass -o to sbatch)
#   log/                         every daemon's log
# Start fails (non-zero, with the log tails) unless every daemon answers and the node is idle.
set -euo pipefail

CLUSTER_NAME=${SLURM_CLUSTER_NAME:-trainform}
GPUS=4
NODE_COUNT=${SLURM_CLUSTER_NODES:-2}
CPUS=${SLURM_CLUSTER_CPUS:-8}
MEMORY=${SLURM_CLUSTER_MEMORY:-8192}

usage() {
  echo "usage: $0 start|stop|status|restart-controller DIR" >&2
  exit 2
}

log_tails() {
  local dir=$1 file
  for file in "$dir"/log/*.log "$dir"/munge/munged.log "$dir"/mysql/mysqld.log; do
    [ -f "$file" ] || continue
    echo "---- $file (last 25 lines)" >&2
    tail -n 25 "$file" >&2
  done
}

fail() {
  local dir=$1
  shift
  echo "slurm-cluster.sh: cannot start the Slurm cluster in $dir: $*" >&2
  log_tails "$dir"
  exit 1
}

# Waits until "$@" succeeds, at most $1 seconds; returns non-zero on timeout. Each try of a
# Slurm client is itself bounded with `timeout`: a client retries for minutes otherwise.
wait_for() {
  local deadline=$((SECONDS + $1))
  shift
  while ((SECONDS < deadline)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.2
  done
  return 1
}

# Like wait_for, but gives up as soon as the daemon behind pid file $2 (program $3) has
# died: a port in use or a bad configuration makes a daemon exit at once.
wait_for_daemon() {
  local deadline=$((SECONDS + $1)) file=$2 program=$3 started=$SECONDS
  shift 3
  while ((SECONDS < deadline)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    if [ -s "$file" ] || ((SECONDS - started > 10)); then
      live_pid "$file" "$program" >/dev/null \
        || { sleep 0.5; live_pid "$file" "$program" >/dev/null; } \
        || { echo "slurm-cluster.sh: $program exited" >&2; return 1; }
    fi
    sleep 0.2
  done
  return 1
}

# The pid a pid file names, if that process is alive and is the program $2 (a pid file
# left by a previous run may name a pid that an unrelated process reuses since).
live_pid() {
  local file=$1 program=$2 pid
  [ -s "$file" ] || return 1
  pid=$(cat "$file")
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$program" ] || return 1
  echo "$pid"
}

free_ports() {
  python3 - "$1" <<'EOF'
import socket, sys
held = []
for _ in range(int(sys.argv[1])):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    held.append(sock)
print(" ".join(str(sock.getsockname()[1]) for sock in held))
EOF
}

# The slurmstepd processes of this cluster: slurmd passes its environment, SLURM_CONF
# included, to the steps it starts; stopping slurmd leaves them running.
cluster_steps() {
  local conf="SLURM_CONF=$1/slurm.conf" proc
  for proc in /proc/[0-9]*; do
    [ "$(cat "$proc/comm" 2>/dev/null)" = slurmstepd ] || continue
    tr '\0' '\n' <"$proc/environ" 2>/dev/null | grep -qxF "$conf" && echo "${proc#/proc/}"
  done
  return 0
}

# $@ and all their descendants.
process_tree() {
  local pid child
  for pid in "$@"; do
    echo "$pid"
    for child in $(ps -o pid= --ppid "$pid" 2>/dev/null); do process_tree "$child"; done
  done
}

# TERM the pids given, wait up to $1 tenths of a second, KILL what is left.
terminate() {
  local tenths=$1 pid i
  shift
  local pids=("$@")
  for pid in "${pids[@]+"${pids[@]}"}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for ((i = 0; i < tenths && ${#pids[@]} > 0; i++)); do
    local alive=()
    for pid in "${pids[@]}"; do
      kill -0 "$pid" 2>/dev/null && alive+=("$pid")
    done
    pids=("${alive[@]+"${alive[@]}"}")
    [ ${#pids[@]} -gt 0 ] && sleep 0.1
  done
  for pid in "${pids[@]+"${pids[@]}"}"; do kill -KILL "$pid" 2>/dev/null || true; done
}

stop_cluster() {
  local dir=$1 pids=() pid entry jobs
  # Jobs first, while the controller is up: cancelled jobs end in accounting, and their
  # steps exit instead of outliving slurmd.
  if live_pid "$dir/run/slurmctld.pid" slurmctld >/dev/null; then
    jobs=$(SLURM_CONF="$dir/slurm.conf" timeout 10 \
      squeue -h -t PD,R,CG,S,CF,RQ,RS -o %A 2>/dev/null || true)
    if [ -n "$jobs" ]; then
      # shellcheck disable=SC2086 # one job id per word
      SLURM_CONF="$dir/slurm.conf" timeout 10 scancel $jobs 2>/dev/null || true
      wait_for 5 no_steps "$dir" || true
    fi
  fi
  # Every daemon at once (one by one takes ~9 s: each polls for ~2 s before it exits);
  # KILL whatever is still there after 15 s. Only the pids DIR's pid files name.
  for entry in $(slurmd_pid_files "$dir") run/slurmctld.pid:slurmctld \
      run/slurmdbd.pid:slurmdbd mysql/mysqld.pid:mariadbd munge/munged.pid:munged; do
    if pid=$(live_pid "$dir/${entry%%:*}" "${entry##*:}"); then pids+=("$pid"); fi
  done
  terminate 150 "${pids[@]+"${pids[@]}"}"
  # Steps left behind (by a slurmd that was killed, say) and the job processes under them.
  mapfile -t pids < <(process_tree $(cluster_steps "$dir"))
  terminate 20 "${pids[@]+"${pids[@]}"}"
  rm -f "$dir"/run/*.pid "$dir/mysql/mysqld.pid" "$dir/munge/munged.pid"
}

# "run/slurmd-<node>.pid:slurmd" for every node's slurmd (and an older one-node layout's).
slurmd_pid_files() {
  local file
  for file in "$1"/run/slurmd.pid "$1"/run/slurmd-*.pid; do
    [ -e "$file" ] && echo "run/${file##*/}:slurmd"
  done
  return 0
}

no_steps() {
  [ -z "$(cluster_steps "$1")" ]
}

# After a reconfigure made slurmctld exit: start it again on the same configuration.
restart_controller() {
  local dir=$1 pid
  export SLURM_CONF="$dir/slurm.conf"
  if pid=$(live_pid "$dir/run/slurmctld.pid" slurmctld); then terminate 150 "$pid"; fi
  slurmctld -f "$dir/slurm.conf" || fail "$dir" "slurmctld did not start"
  wait_for_daemon 60 "$dir/run/slurmctld.pid" slurmctld timeout 10 scontrol ping \
    || fail "$dir" "slurmctld does not answer"
  # The node is `unknown` until slurmd registers again; SIGHUP makes it register now
  # instead of at the controller's next node ping (seconds later).
  for entry in $(slurmd_pid_files "$dir"); do
    if pid=$(live_pid "$dir/${entry%%:*}" slurmd); then kill -HUP "$pid"; fi
  done
  wait_for 60 node_usable "$dir" \
    || fail "$dir" "node is '$(node_state "$dir")' after the controller restarted"
}

start_munge() {
  local dir=$1
  mkdir -p "$dir/munge"
  chown munge:munge "$dir/munge"
  chmod 0755 "$dir/munge"  # munged wants the socket folder open to all (the key is 0400)
  if [ ! -s "$dir/munge/munge.key" ]; then
    # A key of this cluster's own: nothing outside DIR uses it.
    dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
    chown munge:munge "$dir/munge/munge.key"
    chmod 0400 "$dir/munge/munge.key"
  fi
  # munged refuses to run as root; it runs as user munge, as it would under systemd.
  runuser -u munge -- munged \
    --socket="$dir/munge/munge.socket.2" \
    --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/munge/munged.pid" \
    --log-file="$dir/munge/munged.log" \
    --seed-file="$dir/munge/munged.seed" \
    || fail "$dir" "munged did not start"
  wait_for 10 munge --socket="$dir/munge/munge.socket.2" --no-input \
    || fail "$dir" "munged does not answer on $dir/munge/munge.socket.2"
}

start_mysql() {
  local dir=$1 port=$2 password=$3
  mkdir -p "$dir/mysql"
  if [ ! -d "$dir/mysql/data/mysql" ]; then
    mysql_install_db --no-defaults --user=root --datadir="$dir/mysql/data" \
      --auth-root-authentication-method=socket --skip-test-db \
      >"$dir/mysql/install.log" 2>&1 \
      || fail "$dir" "mysql_install_db failed: $(tail -n 5 "$dir/mysql/install.log")"
  fi
  setsid mariadbd --no-defaults --user=root \
    --datadir="$dir/mysql/data" \
    --socket="$dir/mysql/mysqld.sock" \
    --pid-file="$dir/mysql/mysqld.pid" \
    --log-error="$dir/mysql/mysqld.log" \
    --bind-address=127.0.0.1 --port="$port" --skip-name-resolve \
    --innodb-buffer-pool-size=32M --innodb-log-file-size=16M --skip-log-bin \
    --innodb-flush-log-at-trx-commit=0 --performance-schema=OFF \
    </dev/null >/dev/null 2>&1 &
  wait_for_daemon 60 "$dir/mysql/mysqld.pid" mariadbd \
    mariadb --no-defaults --socket="$dir/mysql/mysqld.sock" -e "SELECT 1" \
    || fail "$dir" "MariaDB does not answer on $dir/mysql/mysqld.sock"
  mariadb --no-defaults --socket="$dir/mysql/mysqld.sock" <<EOF \
    || fail "$dir" "cannot create the slurm database user"
CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '$password';
ALTER USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$password';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
EOF
}

make_gpu_devices() {
  local dir=$1 i
  mkdir -p "$dir/dev"
  for ((i = 0; i < GPUS; i++)); do
    # Character devices with the NVIDIA major number; nothing ever opens them.
    [ -c "$dir/dev/nvidia$i" ] || mknod "$dir/dev/nvidia$i" c 195 "$i"
  done
}

# The node names: the short hostname first, then <hostname>-2 ...
node_names() {
  local node=$1 i
  echo "$node"
  for ((i = 2; i <= NODE_COUNT; i++)); do echo "$node-$i"; done
}

# NodeName lines, one per node, each with its slurmd's own port: $2, $3 ... as given, else
# the one after the previous.
node_lines() {
  local node=$1 i=0 name port feature
  shift
  local ports=("$@")
  for name in $(node_names "$node"); do
    port=${ports[$i]:-$((ports[0] + i))}
    feature=""
    ((i > 0)) && feature=" Feature=extra"
    echo "NodeName=$name NodeHostname=$node NodeAddr=127.0.0.1 Port=$port CPUs=$CPUS" \
      "RealMemory=$MEMORY Gres=gpu:$GPUS State=UNKNOWN$feature"
    i=$((i + 1))
  done
}

write_configs() {
  local dir=$1 node=$2 mysql_port=$3 dbd_port=$4 ctld_port=$5 slurmd_port=$6 password=$7
  shift 7
  local name
  local auth_info="socket=$dir/munge/munge.socket.2"
  # SlurmUser=root: acceptable for a test cluster (one folder, 127.0.0.1 only); a real
  # cluster runs the controller and slurmdbd as an unprivileged `slurm` user.
  cat >"$dir/slurmdbd.conf" <<EOF
AuthType=auth/munge
AuthInfo=$auth_info
DbdHost=$node
DbdAddr=127.0.0.1
DbdPort=$dbd_port
SlurmUser=root
DebugLevel=info
LogFile=$dir/log/slurmdbd.log
PidFile=$dir/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$mysql_port
StorageUser=slurm
StoragePass=$password
StorageLoc=slurm_acct_db
EOF
  chmod 0600 "$dir/slurmdbd.conf"

  # Every node's slurmd sees the same fake devices (nothing opens them).
  for name in $(node_names "$node"); do
    echo "NodeName=$name Name=gpu File=$dir/dev/nvidia[0-$((GPUS - 1))]"
  done >"$dir/gres.conf"

  cat >"$dir/slurm.conf" <<EOF
# Written by scripts/slurm-cluster.sh: a test cluster, all state under $dir.
ClusterName=$CLUSTER_NAME
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
# SlurmUser=root: acceptable for a test cluster only.
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=$auth_info
CredType=cred/munge
StateSaveLocation=$dir/state/ctld
# One slurmd per node on this host: pid file, spool folder and log of each named after it.
SlurmdSpoolDir=$dir/state/slurmd-%n
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
# No cgroups here: device constraints make every job fail on this kind of machine.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# Without a default memory per CPU a job takes the whole node and jobs run one at a time.
DefMemPerCPU=256
# The node's CPUs and memory are the ones configured here, not the machine's.
SlurmdParameters=config_overrides
GresTypes=gpu
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$dbd_port
# With auth/munge this names the munge socket clients and slurmctld use to reach slurmdbd
# (AuthInfo covers only the other connections).
AccountingStoragePass=$dir/munge/munge.socket.2
AccountingStorageTRES=gres/gpu
AccountingStorageEnforce=associations,limits,qos
# sacct shows a job's --comment only with this flag.
AccountingStoreFlags=job_comment
JobCompType=jobcomp/none
PriorityType=priority/multifactor
PreemptType=preempt/qos
PreemptMode=REQUEUE
JobRequeue=1
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2,bf_interval=2
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=60
InactiveLimit=0
KillWait=5
MinJobAge=600
$(node_lines "$node" "$slurmd_port" "$@")
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP
Include $dir/trainform-partitions.conf
EOF
  # Not empty: every Slurm command warns about an empty included file.
  [ -s "$dir/trainform-partitions.conf" ] \
    || echo "# Slurm partitions written by trainform" >"$dir/trainform-partitions.conf"
}

# The state of node $2 (default: the first), or of every node with "all" (one a line),
# lowercase as sinfo shows it (scontrol: sinfo leaves out nodes in no partition).
node_state() {
  local names=${2:-$(hostname -s)} name
  [ "$names" = all ] && names=$(node_names "$(hostname -s)")
  for name in $names; do
    SLURM_CONF="$1/slurm.conf" timeout 10 scontrol -o show node "$name" 2>/dev/null \
      | grep -o ' State=[^ ]*' | cut -d= -f2 | tr '[:upper:]' '[:lower:]'
  done
}

# Node $2 (default: the first) is idle.
node_idle() {
  [ "$(node_state "$1" "${2:-}")" = idle ]
}

# Every node can run jobs.
node_usable() {
  local states state
  states=$(node_state "$1" all)
  [ -n "$states" ] || return 1
  for state in $states; do
    case $state in idle | mixed | allocated | completing) ;; *) return 1 ;; esac
  done
}

start_cluster() {
  local dir=$1 node ports mysql_port dbd_port ctld_port slurmd_port more_ports password name
  [ "$(id -u)" = 0 ] || { echo "slurm-cluster.sh: must run as root" >&2; exit 1; }
  for program in munged mariadbd mysql_install_db slurmdbd slurmctld slurmd sacctmgr sinfo; do
    command -v "$program" >/dev/null || {
      echo "slurm-cluster.sh: $program is not installed (scripts/services.sh installs it)" >&2
      exit 1
    }
  done
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  # Whatever a previous start in this folder left running goes first.
  stop_cluster "$dir"
  chmod 0755 "$dir"
  mkdir -p "$dir/run" "$dir/log" "$dir/state/ctld" "$dir/jobs"
  chmod 1777 "$dir/jobs"
  node=$(hostname -s)
  ports=${SLURM_CLUSTER_PORTS:-$(free_ports $((3 + NODE_COUNT)))}
  read -r mysql_port dbd_port ctld_port slurmd_port more_ports <<<"$ports"
  if [ -z "$slurmd_port" ]; then
    echo "slurm-cluster.sh: SLURM_CLUSTER_PORTS needs 4 ports" >&2
    exit 2
  fi
  password=$(head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')
  make_gpu_devices "$dir"
  # shellcheck disable=SC2086 # one port per word
  write_configs "$dir" "$node" "$mysql_port" "$dbd_port" "$ctld_port" "$slurmd_port" \
    "$password" ${more_ports:-}
  cat >"$dir/cluster.env" <<EOF
CLUSTER=$CLUSTER_NAME
NODE=$node
NODES=$(node_names "$node" | paste -sd,)
CPUS=$CPUS
MEMORY=$MEMORY
GPUS=$GPUS
MYSQL_PORT=$mysql_port
DBD_PORT=$dbd_port
CTLD_PORT=$ctld_port
SLURMD_PORT=$slurmd_port
EOF
  export SLURM_CONF="$dir/slurm.conf"

  start_munge "$dir"
  start_mysql "$dir" "$mysql_port" "$password"

  # slurmdbd has no -f: it reads slurmdbd.conf next to $SLURM_CONF.
  slurmdbd || fail "$dir" "slurmdbd did not start"
  wait_for_daemon 60 "$dir/run/slurmdbd.pid" slurmdbd timeout 10 sacctmgr -nP show cluster \
    || fail "$dir" "slurmdbd does not answer on port $dbd_port"
  if [ -z "$(sacctmgr -nP show cluster format=cluster where cluster="$CLUSTER_NAME")" ]; then
    sacctmgr -i add cluster "$CLUSTER_NAME" >/dev/null \
      || fail "$dir" "cannot register cluster $CLUSTER_NAME"
  fi

  slurmctld -f "$dir/slurm.conf" || fail "$dir" "slurmctld did not start"
  wait_for_daemon 60 "$dir/run/slurmctld.pid" slurmctld timeout 10 scontrol ping \
    || fail "$dir" "slurmctld does not answer on port $ctld_port"
  for name in $(node_names "$node"); do
    mkdir -p "$dir/state/slurmd-$name"
    slurmd -f "$dir/slurm.conf" -N "$name" || fail "$dir" "slurmd of node $name did not start"
  done
  for name in $(node_names "$node"); do
    if ! wait_for_daemon 60 "$dir/run/slurmd-$name.pid" slurmd node_idle "$dir" "$name"; then
      fail "$dir" "node $name is '$(node_state "$dir" "$name")', not idle:" \
        "$(scontrol show node "$name" 2>&1 | grep -E 'State|Reason' | tr -s ' ')"
    fi
  done
  for entry in $(slurmd_pid_files "$dir") run/slurmctld.pid:slurmctld \
      run/slurmdbd.pid:slurmdbd mysql/mysqld.pid:mariadbd munge/munged.pid:munged; do
    live_pid "$dir/${entry%%:*}" "${entry##*:}" >/dev/null \
      || fail "$dir" "${entry%%:*} names no running ${entry##*:}"
  done
  echo "slurm cluster $CLUSTER_NAME up: SLURM_CONF=$dir/slurm.conf" \
    "nodes=$(node_names "$node" | paste -sd,)" \
    "cpus=$CPUS memory=$MEMORY gpus=$GPUS"
}

status_cluster() {
  local dir=$1
  export SLURM_CONF="$dir/slurm.conf"
  scontrol ping
  sacctmgr -nP show cluster format=cluster
  sinfo
}

[ $# -eq 2 ] || usage
case $1 in
  start) start_cluster "$2" ;;
  stop) if [ -d "$2" ]; then stop_cluster "$(cd "$2" && pwd)"; fi ;;
  status) status_cluster "$(cd "$2" && pwd)" ;;
  restart-controller) restart_controller "$(cd "$2" && pwd)" ;;
  *) usage ;;
esac
