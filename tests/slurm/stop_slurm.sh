#!/usr/bin/env bash
# Stops the test cluster that tests/slurm/start_slurm.sh STATE_DIR started: its jobs
# first (it is a private cluster, all of them are ours), then slurmd, slurmctld and
# munged by the PIDs recorded at start, each checked to still be that daemon.
set -uo pipefail

STATE=${1:?usage: stop_slurm.sh STATE_DIR}
[ -d "$STATE" ] || exit 0
STATE=$(cd "$STATE" && pwd)

running() {  # running NAME: the daemon start_slurm.sh recorded is alive and still itself
    local file="$STATE/$1.daemon.pid"
    [ -f "$file" ] && [ "$(cat "/proc/$(cat "$file")/comm" 2>/dev/null)" = "$1" ]
}

# Only a controller that is up can cancel anything; client commands would otherwise
# retry for minutes. Every call is bounded all the same.
if running slurmctld && command -v scancel >/dev/null; then
    export SLURM_CONF="$STATE/slurm.conf"
    # Jobs still running would outlive slurmd (slurmstepd is detached from it).
    timeout 10 scancel --full --quiet --partition=benchflow,benchflow-gpu 2>/dev/null || true
    for _ in $(seq 40); do
        [ -z "$(timeout 5 squeue -h -t running,completing -o %i 2>/dev/null)" ] && break
        sleep 0.25
    done
fi

stop() {  # stop NAME: the daemon whose PID start_slurm.sh wrote to NAME.daemon.pid
    local name=$1 file="$STATE/$1.daemon.pid" pid
    [ -f "$file" ] || return 0
    pid=$(cat "$file")
    # Only a live process that is still that daemon: a recycled PID is left alone.
    if running "$name"; then
        kill -TERM "$pid" 2>/dev/null
        for _ in $(seq 50); do [ -d "/proc/$pid" ] || break; sleep 0.2; done
        [ -d "/proc/$pid" ] && kill -KILL "$pid" 2>/dev/null
    fi
    rm -f "$file"
}
stop slurmd
stop slurmctld
stop munged
# The link start_slurm.sh made, and only if it is still ours.
if [ -L /etc/slurm/slurm.conf ] && [ "$(readlink /etc/slurm/slurm.conf)" = "$STATE/slurm.conf" ]; then
    rm -f /etc/slurm/slurm.conf
fi
exit 0
