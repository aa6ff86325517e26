#!/bin/bash
# The grader container's first process. It starts as root only for what needs root, then:
#  1. makes the container's own pids and memory cgroups writable (cgroup v1: Docker mounts them
#     read-only) inside this container's mount namespace, for the sandboxes' limits;
#  2. brings the course volume up to date with the image's course files, as the grader account;
#  3. starts the sandbox broker as root (it builds each submission's sandbox; only uid
#     GRADER_UID may talk to it), the formgrader and the feedback-on-submit grader as GRADER_UID
#     with no capabilities at all; when one stops, it stops the others and exits, so Docker's restart
#     policy brings them all back.
set -euo pipefail

# The formgrader's account (the grader image's `grader`, the uid of every container's files).
GRADER_UID=${GRADER_UID:-1000}
GRADER_GID=${GRADER_GID:-100}
# Where the broker listens; the formgrader finds it through the same variable.
export ATTENTION_SANDBOX_SOCKET=${ATTENTION_SANDBOX_SOCKET:-/run/attention-sandbox/sandbox.sock}

log() { echo "grader-entrypoint: $*" >&2; }

[ "$(id -u)" -eq 0 ] || { log "must start as root (it drops to uid $GRADER_UID itself)"; exit 1; }

# 1. cgroups. Under cgroup v1 each controller is its own mount; `remount,bind,rw` changes only
# this mount namespace's view of it. With `cgroup: private` (compose) the mount's root is the
# container's own cgroup, so sandboxes nest inside it and the container's limits still hold.
if [ "$(stat -fc %T /sys/fs/cgroup)" != cgroup2fs ]; then
  for controller in pids memory; do
    dir=/sys/fs/cgroup/$controller
    if [ -d "$dir" ] && [ ! -w "$dir" ]; then
      mount -o remount,bind,rw "$dir" || log "could not make $dir writable: the broker will refuse to grade"
    fi
  done
elif [ ! -w /sys/fs/cgroup ]; then
  mount -o remount,bind,rw /sys/fs/cgroup || log "could not make /sys/fs/cgroup writable: the broker will refuse to grade"
fi

as_grader() {
  # No capabilities kept or inheritable, none gainable (no_new_privs), no supplementary groups. The
  # bounding set stays (dropping it needs SETPCAP, which the container does not have): a uid-1000
  # process under no_new_privs gains nothing from it.
  # "exec" as the first argument replaces the calling (sub)shell, so a background job's pid is the process's.
  local exec=
  if [ "$1" = exec ]; then exec=exec; shift; fi
  HOME=$(getent passwd "$GRADER_UID" | cut -d: -f6) USER=grader \
    $exec setpriv --reuid="$GRADER_UID" --regid="$GRADER_GID" --clear-groups \
            --inh-caps=-all --ambient-caps=-all --no-new-privs -- "$@"
}

# 2. The course directory on its volume (owned by the grader account; root never walks it).
as_grader python /opt/dl-attention/bin/course-sync.py /opt/dl-attention/course "${COURSE_DIR:-/srv/course}"

# The course's folders in the exchange, made before the formgrader first releases anything, by the
# account the formgrader runs as (nbgrader refuses a course folder it does not own). The hub (uid
# 1000) adds each student's own folder below inbound/ and feedback/ at their first spawn.
exchange_course="${NBGRADER_EXCHANGE_ROOT:-/srv/nbgrader/exchange}/${NBGRADER_COURSE_ID:-dl-attention}"
make_exchange() {  # $1 = inbound's and feedback's mode
  sh -c 'for sub in outbound inbound feedback; do
      [ -d "$1/$sub" ] && continue
      mkdir -p "$1/$sub" && chmod 0755 "$1" && if [ "$sub" = outbound ]; then chmod 0755 "$1/$sub"; else chmod "$2" "$1/$sub"; fi
    done' sh "$exchange_course" "$1"
}

# 3. Broker (root) and formgrader (grader account).
as_grader bash -c "$(declare -f make_exchange); exchange_course='$exchange_course'; make_exchange 0711"

socket_dir=$(dirname "$ATTENTION_SANDBOX_SOCKET")
mkdir -p "$socket_dir"
chown "root:$GRADER_GID" "$socket_dir"
chmod 0750 "$socket_dir"
rm -f "$ATTENTION_SANDBOX_SOCKET"

pids=()
stop_all() { for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done; }
trap 'stop_all' TERM INT

# The broker re-executes itself with only what it needs of this environment (its tokens and passwords
# would be in every sandbox's memory otherwise: attention_platform/grading/sandbox/environment.py).
python -m attention_platform.grading.sandbox.broker --socket "$ATTENTION_SANDBOX_SOCKET" \
  --allow-uid "$GRADER_UID" --allow-gid "$GRADER_GID" &
pids+=($!)
for _ in $(seq 1 300); do
  [ -S "$ATTENTION_SANDBOX_SOCKET" ] && break
  kill -0 "${pids[0]}" 2>/dev/null || { log "the sandbox broker exited before listening"; exit 1; }
  sleep 0.1
done
[ -S "$ATTENTION_SANDBOX_SOCKET" ] || { log "the sandbox broker did not listen within 30 s"; stop_all; exit 1; }

as_grader exec python -m attention_platform.formgrader.formgrader_service &
pids+=($!)
# Feedback on submit (README): the grader account grades each new submission of an assignment whose
# policy is on, through the same broker; with no policy it only watches.
as_grader exec env JUPYTER_CONFIG_PATH="${GRADER_CONFIG_DIR:-/etc/dl-attention/grader}" \
  python -m attention_platform.cli feedback-on-submit --course "${COURSE_DIR:-/srv/course}" \
  --exchange "${NBGRADER_EXCHANGE_ROOT:-/srv/nbgrader/exchange}" &
pids+=($!)

status=0
wait -n "${pids[@]}" || status=$?
log "a process stopped (status $status): stopping the others"
stop_all
wait || true
exit "$status"
