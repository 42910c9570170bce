#!/usr/bin/env bash
# The production path's services on this machine, for tests and for trying it locally:
#   PostgreSQL (Debian's package)  Dagster's run/event/schedule storage and the SQL warehouse
#   moto's S3 server (PyPI)        the object store (a bucket is created at start)
#   redis-server (Debian's)        the broker of the distributed executor
# Every server listens on 127.0.0.1 only, keeps its state in a git-ignored project folder
# ($TEMPO_SERVICES_DIR, default .services/), and has its pid recorded there; `stop` ends
# exactly those pids, never a process found by name.
#
#   eval "$(scripts/dev_services.sh start)"   # start what is not running; print export lines
#   scripts/dev_services.sh env               # the export lines of the running services
#   scripts/dev_services.sh status            # one line per service
#   scripts/dev_services.sh workers N         # start N celery workers (dagster-celery's app)
#   scripts/dev_services.sh stop-workers      # stop the workers (by their recorded pids)
#   scripts/dev_services.sh stop              # stop workers and servers (PostgreSQL's data is kept)
#   scripts/dev_services.sh clean             # stop, then delete the state folder
#
# A worker shares nothing with the launcher but PostgreSQL and the object store: it runs in its
# own folder $STATE/workers/wN/ with its own DAGSTER_HOME (a copy of docs/deploy/dagster.yaml),
# its own TMPDIR and embedding cache, TEMPO_ARTEFACTS on S3 and TEMPO_EXECUTOR=celery; the
# variables of `env` are its environment, except those the caller has set (the caller's win:
# a test points them at its own bucket prefix or database). It is `celery -A dagster_celery.app
# worker` on queue `dagster`, prefork pool of one process, named tempo-wN@<host>, started with
# setsid (its pid is its process group) and stopped by that pid: SIGTERM (warm shutdown: the
# running step ends first), after $TEMPO_WORKER_STOP_S (default 60) s SIGKILL of its group.
#
# `start` and `env` print only `export NAME=value` lines on stdout (progress goes to stderr).
# Ports: $TEMPO_PG_PORT, $TEMPO_S3_PORT, $TEMPO_REDIS_PORT when set (a port already taken is
# an error), else the ports of the previous start when still free, else free ones.
# As root, PostgreSQL runs as the unprivileged `postgres` user of Debian's package (it refuses
# to run as root); where that user cannot reach the state folder, its cluster lives under
# /var/tmp/tempo-services-<hash>/ and the state folder records where.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
STATE=${TEMPO_SERVICES_DIR:-$REPO/.services}
PY=${TEMPO_SERVICES_PYTHON:-$REPO/.venv/bin/python}
BUCKET=${TEMPO_S3_BUCKET:-tempo}
PREFIX=${TEMPO_S3_PREFIX:-artefacts}
PG_USER=tempo
PG_DAGSTER_DB=dagster
PG_WAREHOUSE_DB=tempo_warehouse
DAGSTER_YAML=$REPO/docs/deploy/dagster.yaml
# moto accepts any key pair; these name the local server's, nothing else
S3_KEY_ID=tempo-local
S3_SECRET=tempo-local-secret
S3_REGION=us-east-1

log() { echo "dev_services.sh: $*" >&2; }
die() { log "error: $*"; exit 1; }

# -- helpers ------------------------------------------------------------------------------------
pid_of() {  # the recorded pid of service $1 if that process is alive and still the one we started
  local file="$STATE/$1.pid" token=$2 pid
  [ -f "$file" ] || return 1
  pid=$(cat "$file")
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  # a recycled pid belongs to another program: its command line must still be ours
  tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$token" || return 1
  echo "$pid"
}

port_free() {
  "$PY" - "$1" <<'EOF'
import socket, sys
s = socket.socket()
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(1)
finally:
    s.close()
EOF
}

free_port() {
  "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

choose_port() {  # $1 service, $2 the variable naming an explicit port
  local service=$1 var=$2 wanted=${!2:-} recorded
  if [ -n "$wanted" ]; then
    [[ "$wanted" =~ ^[0-9]+$ ]] || die "$var=$wanted is not a port number"
    port_free "$wanted" || die "port $wanted on 127.0.0.1 ($var, for $service) is already taken: stop what holds it or choose another port"
    echo "$wanted"; return
  fi
  if [ -f "$STATE/$service.port" ]; then
    recorded=$(cat "$STATE/$service.port")
    if port_free "$recorded"; then echo "$recorded"; return; fi
    log "$service: port $recorded of the previous start is taken now; choosing a free one"
  fi
  free_port
}

wait_for() {  # $1 what, $2 seconds, then a command that succeeds once the service answers
  local what=$1 seconds=$2; shift 2
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.2
  done
  log "$what is up"
}

stop_pid() {  # $1 service, $2 pid, $3 signal: signal, wait up to 30 s, then SIGKILL that pid
  local service=$1 pid=$2 signal=$3 deadline
  kill "-$signal" "$pid" 2>/dev/null || true
  deadline=$((SECONDS + 30))
  while kill -0 "$pid" 2>/dev/null; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      log "$service (pid $pid) outlived SIG$signal by 30 s: SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      break
    fi
    sleep 0.2
  done
  rm -f "$STATE/$service.pid"
  log "$service (pid $pid) stopped"
}

# -- PostgreSQL ---------------------------------------------------------------------------------
pg_bin() {
  local dir
  dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  [ -n "$dir" ] && [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ] \
    || die "PostgreSQL's server binaries are not under /usr/lib/postgresql/*/bin: install Debian's postgresql package (bash scripts/setup_system.sh --production)"
  echo "$dir"
}

as_pg() {  # run a server command as the unprivileged postgres user when we are root
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

pg_root() {  # where the cluster lives (created on first use, and again if it was deleted)
  local root=$STATE/postgres
  [ ! -f "$STATE/postgres.root" ] || root=$(cat "$STATE/postgres.root")
  mkdir -p "$root"
  if [ "$(id -u)" -eq 0 ]; then
    id postgres >/dev/null 2>&1 || die "user postgres is missing: it comes with Debian's postgresql package (bash scripts/setup_system.sh --production)"
    chown postgres: "$root"
    chmod 700 "$root"
    if [ "$root" = "$STATE/postgres" ] && ! runuser -u postgres -- test -w "$root"; then
      rmdir "$root"
      root=/var/tmp/tempo-services-$(printf '%s' "$STATE" | sha256sum | cut -c1-16)/postgres
      log "postgres: user postgres cannot reach $STATE; its cluster goes to $root"
      mkdir -p "$root"
      chown postgres: "$root"
      chmod 700 "$root"
    fi
  fi
  echo "$root" > "$STATE/postgres.root"
  echo "$root"
}

start_postgres() {
  local bin root port pid password
  bin=$(pg_bin)
  if pid=$(pid_of postgres postgres); then
    log "postgres already running (pid $pid, port $(cat "$STATE/postgres.port"))"
    return
  fi
  root=$(pg_root)
  if [ ! -f "$STATE/postgres.password" ]; then
    (umask 077; "$PY" -c 'import secrets; print(secrets.token_hex(16))' > "$STATE/postgres.password")
  fi
  password=$(cat "$STATE/postgres.password")
  if [ ! -f "$root/data/PG_VERSION" ]; then
    log "postgres: initdb $root/data"
    (umask 077; printf '%s\n' "$password" > "$root/pwfile")
    [ "$(id -u)" -ne 0 ] || chown postgres: "$root/pwfile"
    as_pg "$bin/initdb" -D "$root/data" -U "$PG_USER" --pwfile="$root/pwfile" \
      --auth=scram-sha-256 --encoding=UTF8 --locale=C >"$root/initdb.log" 2>&1 \
      || { rm -f "$root/pwfile"; die "initdb failed: see $root/initdb.log"; }
    rm -f "$root/pwfile"
    # TCP on 127.0.0.1 only, no unix socket; a development server commits asynchronously
    as_pg tee -a "$root/data/postgresql.conf" >/dev/null <<'EOF'
# written by scripts/dev_services.sh
listen_addresses = '127.0.0.1'
unix_socket_directories = ''
synchronous_commit = off
max_connections = 200
EOF
  fi
  port=$(choose_port postgres TEMPO_PG_PORT)
  log "postgres: starting on 127.0.0.1:$port"
  as_pg "$bin/pg_ctl" -D "$root/data" -l "$root/postgres.log" -w -t 60 -o "-p $port" start \
    >/dev/null || die "postgres did not start: see $root/postgres.log"
  head -n 1 "$root/data/postmaster.pid" > "$STATE/postgres.pid"
  echo "$port" > "$STATE/postgres.port"
  local db
  for db in "$PG_DAGSTER_DB" "$PG_WAREHOUSE_DB"; do
    if [ -z "$(PGPASSWORD=$password "$bin/psql" -h 127.0.0.1 -p "$port" -U "$PG_USER" -d postgres \
          -tAc "select 1 from pg_database where datname = '$db'")" ]; then
      PGPASSWORD=$password "$bin/createdb" -h 127.0.0.1 -p "$port" -U "$PG_USER" "$db"
      log "postgres: created database $db"
    fi
  done
  log "postgres is up (pid $(cat "$STATE/postgres.pid"))"
}

# -- moto's S3 server -----------------------------------------------------------------------------
start_s3() {
  local pid port moto
  if pid=$(pid_of s3 moto_server); then
    log "s3 already running (pid $pid, port $(cat "$STATE/s3.port"))"
    return
  fi
  moto=$(dirname "$PY")/moto_server
  [ -x "$moto" ] || die "$moto is missing: install the production extra (bash scripts/setup.sh --test)"
  port=$(choose_port s3 TEMPO_S3_PORT)
  log "s3: starting moto_server on 127.0.0.1:$port"
  setsid "$moto" -H 127.0.0.1 -p "$port" >"$STATE/s3.log" 2>&1 </dev/null &
  echo $! > "$STATE/s3.pid"
  echo "$port" > "$STATE/s3.port"
  wait_for "s3 (pid $!)" 60 "$PY" -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/moto-api/', timeout=2)" \
    || die "moto_server did not answer on 127.0.0.1:$port within 60 s: see $STATE/s3.log"
  AWS_ACCESS_KEY_ID=$S3_KEY_ID AWS_SECRET_ACCESS_KEY=$S3_SECRET AWS_DEFAULT_REGION=$S3_REGION \
    "$PY" - "http://127.0.0.1:$port" "$BUCKET" <<'EOF' || die "could not create the bucket"
import sys
import boto3
client = boto3.client("s3", endpoint_url=sys.argv[1])
if sys.argv[2] not in {b["Name"] for b in client.list_buckets()["Buckets"]}:
    client.create_bucket(Bucket=sys.argv[2])
EOF
  log "s3: bucket $BUCKET ready"
}

# -- redis ----------------------------------------------------------------------------------------
start_redis() {
  local pid port
  if pid=$(pid_of redis redis-server); then
    log "redis already running (pid $pid, port $(cat "$STATE/redis.port"))"
    return
  fi
  command -v redis-server >/dev/null || die "redis-server is missing: install Debian's redis-server package (bash scripts/setup_system.sh --production)"
  port=$(choose_port redis TEMPO_REDIS_PORT)
  mkdir -p "$STATE/redis"
  log "redis: starting on 127.0.0.1:$port"
  setsid redis-server --bind 127.0.0.1 --port "$port" --dir "$STATE/redis" --save '' \
    --appendonly no --daemonize no --protected-mode yes >"$STATE/redis.log" 2>&1 </dev/null &
  echo $! > "$STATE/redis.pid"
  echo "$port" > "$STATE/redis.port"
  wait_for "redis (pid $!)" 30 "$PY" -c "import socket; s = socket.create_connection(('127.0.0.1', $port), 2); s.sendall(b'PING\r\n'); assert s.recv(16).startswith(b'+PONG')" \
    || die "redis-server did not answer on 127.0.0.1:$port within 30 s: see $STATE/redis.log"
}

# -- celery workers -------------------------------------------------------------------------------
worker_ids() {
  local file
  for file in "$STATE"/workers/w*.pid; do
    [ -e "$file" ] || continue
    file=${file##*/}; echo "${file%.pid}"
  done
}

worker_pid() {  # the recorded pid of worker $1 if alive and still that worker
  local file="$STATE/workers/$1.pid" pid
  [ -f "$file" ] || return 1
  pid=$(cat "$file")
  [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
  tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q -- "tempo-$1@" || return 1
  echo "$pid"
}

worker_env() {  # export the variables of `env`, the caller's own values winning
  local line name
  while IFS= read -r line; do
    name=${line#export }; name=${name%%=*}
    [ -n "${!name:-}" ] || eval "$line"
  done < <(print_env)
}

cmd_workers() {
  local count=${1:-2} i id dir pid celery started=0
  [[ "$count" =~ ^[1-9][0-9]*$ ]] || die "workers N: N must be a positive number, got '$count'"
  all_running || die "not every service is running: scripts/dev_services.sh start"
  celery=$(dirname "$PY")/celery
  [ -x "$celery" ] || die "$celery is missing: install the production extra (bash scripts/setup.sh --test)"
  mkdir -p "$STATE/workers"
  for ((i = 1; i <= count; i++)); do
    id=w$i dir=$STATE/workers/w$i
    if pid=$(worker_pid "$id"); then log "worker $id already running (pid $pid)"; continue; fi
    mkdir -p "$dir/dagster_home" "$dir/tmp" "$dir/config"
    cp "$DAGSTER_YAML" "$dir/dagster_home/dagster.yaml"
    (
      worker_env
      case "$TEMPO_ARTEFACTS" in
        *://*) ;;
        *) die "TEMPO_ARTEFACTS=$TEMPO_ARTEFACTS is a local folder: workers share only the object store" ;;
      esac
      # dagster_celery reads the broker and result backend from this module on its path; the
      # master imports it before it forks its pool, so every step's instance pools its
      # PostgreSQL connection (tempo_assets/postgres_pool.py)
      printf 'broker_url = %s\nresult_backend = %s\nbroker_connection_retry_on_startup = True\n%s\n' \
        "$("$PY" -c 'import sys; print(repr(sys.argv[1]))' "$TEMPO_BROKER_URL")" \
        "$("$PY" -c 'import sys; print(repr(sys.argv[1]))' "$TEMPO_BROKER_URL")" \
        "__import__('tempo_assets.postgres_pool').postgres_pool.pool_connections()" \
        > "$dir/config/dagster_celery_config.py"
      export DAGSTER_HOME=$dir/dagster_home TMPDIR=$dir/tmp TEMPO_CACHE=$dir/dagster_home/embedding_cache
      # the caller's PYTHONPATH after the repository and the config (a test's sitecustomize, a method's modules)
      export TEMPO_EXECUTOR=celery PYTHONPATH=$REPO:$dir/config${PYTHONPATH:+:$PYTHONPATH}
      cd "$dir"
      setsid "$celery" -A dagster_celery.app worker --pool prefork --concurrency 1 \
        --prefetch-multiplier 1 -Q dagster -n "tempo-$id@%h" --loglevel INFO \
        >"$dir/worker.log" 2>&1 </dev/null &
      echo $! > "$STATE/workers/$id.pid"
    )
    started=$((started + 1))
  done
  # a worker is up once it answers a ping on the broker
  for id in $(worker_ids); do
    pid=$(worker_pid "$id") || die "worker $id exited at start: see $STATE/workers/$id/worker.log"
    wait_for "worker $id (pid $pid)" 120 grep -q "tempo-$id@.* ready" "$STATE/workers/$id/worker.log" \
      || die "worker $id did not get ready within 120 s: see $STATE/workers/$id/worker.log"
  done
  log "$started worker(s) started; $(worker_ids | wc -l) running"
}

cmd_stop_workers() {
  local id pid deadline
  local -A stopping=()
  # SIGTERM to every worker first, then wait for each: a worker's warm shutdown takes seconds even
  # when idle (its pool joined, then the interpreter's exit), and the workers spend them together
  for id in $(worker_ids); do
    if pid=$(worker_pid "$id"); then kill -TERM "$pid" 2>/dev/null || true; stopping[$id]=$pid; fi
  done
  deadline=$((SECONDS + ${TEMPO_WORKER_STOP_S:-60}))
  for id in $(worker_ids); do
    if [ -n "${stopping[$id]:-}" ]; then
      pid=${stopping[$id]}
      while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.2; done
      if kill -0 "$pid" 2>/dev/null; then
        log "worker $id (pid $pid) outlived SIGTERM: SIGKILL of its process group"
        kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
      fi
      log "worker $id (pid $pid) stopped"
    fi
    # its pool processes are in its process group: none may outlive it
    kill -KILL -- "-$(cat "$STATE/workers/$id.pid")" 2>/dev/null || true
    rm -f "$STATE/workers/$id.pid"
  done
}

# -- the instance and the environment -------------------------------------------------------------
write_dagster_home() {
  mkdir -p "$STATE/dagster_home"
  cp "$DAGSTER_YAML" "$STATE/dagster_home/dagster.yaml"
}

set_pool_limits() {  # the test_score asset's pool: one TEST score at a time on the instance
  local dagster
  dagster=$(dirname "$PY")/dagster
  (eval "$(print_env)"; "$dagster" instance concurrency set test_score 1 >/dev/null) \
    || die "could not set the test_score pool limit on the instance"
  log "dagster: pool test_score limited to 1 slot"
}

print_env() {
  local pg_port s3_port redis_port password
  pg_port=$(cat "$STATE/postgres.port"); s3_port=$(cat "$STATE/s3.port")
  redis_port=$(cat "$STATE/redis.port"); password=$(cat "$STATE/postgres.password")
  local -a lines=(
    "DAGSTER_HOME=$STATE/dagster_home"
    "TEMPO_PG_HOST=127.0.0.1"
    "TEMPO_PG_PORT=$pg_port"
    "TEMPO_PG_USER=$PG_USER"
    "TEMPO_PG_PASSWORD=$password"
    "TEMPO_PG_DB=$PG_DAGSTER_DB"
    "TEMPO_WAREHOUSE_URL=postgresql+psycopg://$PG_USER:$password@127.0.0.1:$pg_port/$PG_WAREHOUSE_DB"
    "TEMPO_ARTEFACTS=s3://$BUCKET/$PREFIX"
    "AWS_ENDPOINT_URL=http://127.0.0.1:$s3_port"
    "AWS_ACCESS_KEY_ID=$S3_KEY_ID"
    "AWS_SECRET_ACCESS_KEY=$S3_SECRET"
    "AWS_DEFAULT_REGION=$S3_REGION"
    "TEMPO_BROKER_URL=redis://127.0.0.1:$redis_port/0"
  )
  local line
  for line in "${lines[@]}"; do
    printf 'export %s=%q\n' "${line%%=*}" "${line#*=}"
  done
}

all_running() {
  pid_of postgres postgres >/dev/null && pid_of s3 moto_server >/dev/null \
    && pid_of redis redis-server >/dev/null
}

cmd_start() {
  mkdir -p "$STATE"
  [ -x "$PY" ] || die "$PY is missing: run bash scripts/setup.sh --test first"
  start_postgres
  start_s3
  start_redis
  write_dagster_home
  set_pool_limits
  print_env
}

cmd_status() {
  local service token pid rc=0
  for service in postgres:postgres s3:moto_server redis:redis-server; do
    token=${service#*:}; service=${service%%:*}
    if pid=$(pid_of "$service" "$token"); then
      echo "$service: running (pid $pid, 127.0.0.1:$(cat "$STATE/$service.port"))"
    else
      echo "$service: stopped"; rc=3
    fi
  done
  for service in $(worker_ids); do
    if pid=$(worker_pid "$service"); then echo "worker $service: running (pid $pid)"; else echo "worker $service: stopped"; fi
  done
  return $rc
}

cmd_stop() {
  local pid
  cmd_stop_workers
  # PostgreSQL: SIGINT is its fast shutdown (SIGKILL of the postmaster would orphan its backends,
  # so the escalation is SIGQUIT, its immediate shutdown)
  if pid=$(pid_of postgres postgres); then
    kill -INT "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + 60))
    while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.2; done
    if kill -0 "$pid" 2>/dev/null; then
      log "postgres (pid $pid) outlived its fast shutdown: immediate shutdown"
      stop_pid postgres "$pid" QUIT
    else
      rm -f "$STATE/postgres.pid"; log "postgres (pid $pid) stopped"
    fi
  else
    rm -f "$STATE/postgres.pid"
  fi
  if pid=$(pid_of s3 moto_server); then stop_pid s3 "$pid" TERM; else rm -f "$STATE/s3.pid"; fi
  if pid=$(pid_of redis redis-server); then stop_pid redis "$pid" TERM; else rm -f "$STATE/redis.pid"; fi
}

cmd_clean() {
  cmd_stop
  local root=""
  [ -f "$STATE/postgres.root" ] && root=$(cat "$STATE/postgres.root")
  if [ -n "$root" ] && [ "$root" != "$STATE/postgres" ]; then
    rm -rf "$root"
    rmdir "$(dirname "$root")" 2>/dev/null || true
  fi
  rm -rf "$STATE"
  log "removed $STATE"
}

case "${1:-}" in
  start) cmd_start ;;
  env) all_running || die "not every service is running: scripts/dev_services.sh start"; print_env ;;
  status) cmd_status ;;
  stop) cmd_stop ;;
  clean) cmd_clean ;;
  workers) cmd_workers "${2:-2}" ;;
  stop-workers) cmd_stop_workers ;;
  *) echo "usage: scripts/dev_services.sh start|env|status|workers N|stop-workers|stop|clean" >&2; exit 2 ;;
esac
