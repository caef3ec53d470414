# redis-server: a forking server (BGSAVE writes an RDB file from a child,
# DEBUG RELOAD writes and reads one) that rewrites its environment for its process
# title, on a unix socket in its working directory, stopped by the script.
# PostgreSQL runs as its own user (a second user under the preload): its
# server writes its warnings to its log (checked in check_postgres), its
# clients to stderr.
# Each redis-cli -x reads 1 MiB: a large request, so with a short pool every
# one of them warns once, as the server does.
POOL=500
OWN_HEAP=redis

prepare() {
  cat >redis.sh <<'SH'
sock=$PWD/redis.sock
redis-server --port 0 --unixsocket "$sock" --unixsocketperm 700 --dir "$PWD" --save "" \
  --appendonly no --daemonize no --enable-debug-command local --logfile "$PWD/redis.log" &
srv=$!
trap 'kill $srv 2>/dev/null' EXIT
cli() { redis-cli -s "$sock" "$@"; }
i=0
until [ "$(cli ping 2>/dev/null)" = PONG ]; do
  i=$((i + 1)); [ $i -lt 200 ] || { echo "redis did not start" >&2; exit 1; }; sleep 0.05
done
cli debug populate 300000 key 100
# a string grown 1 MiB at a time to 220 MiB: redis reallocs it at every
# other APPEND (sds keeps at most 1 MiB spare), one growth step a MiB
head -c 1048576 /dev/zero | tr '\0' 'a' >mib
for k in $(seq 220); do cli -x append big <mib >/dev/null || exit 1; done
cli setrange big 230686719 x
cli strlen big
last=$(cli lastsave)
cli bgsave >/dev/null
i=0
until [ "$(cli lastsave)" != "$last" ] && cli info persistence | grep -q 'rdb_bgsave_in_progress:0'; do
  i=$((i + 1)); [ $i -lt 1200 ] || { echo "BGSAVE did not finish" >&2; exit 1; }; sleep 0.05
done
cli info persistence | grep rdb_last_bgsave_status | tr -d '\r'
cli dbsize
d1=$(cli debug digest)
cli debug reload
d2=$(cli debug digest)
echo "$d1"
[ "$d1" = "$d2" ] && echo "digest unchanged by the reload"
cli getrange big 230686710 230686730
cli shutdown nosave >/dev/null 2>&1
wait $srv
echo "server exit $?"
SH
  cat >postgres.sh <<'SH'
# PostgreSQL as its own user: initdb, the server started from this script
# (its backends call setsid; hugetlb-peak follows them as its descendants),
# a sort and a hash aggregate in work_mem, 200 connections each forking a
# backend, and a smart shutdown once the last client has gone.  Its shared
# memory stays off hugetlb (huge_pages=off): the pages checked are the ones
# hugepool's malloc gives its processes.  The logs are written by this
# script (root) into the working directory, never into the directory the
# postgres user owns.
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
as_pg() { setpriv --reuid=postgres --regid=postgres --init-groups -- "$@"; }
for lib in ${LD_PRELOAD:-}; do
  as_pg test -r "$lib" || { echo "the postgres user cannot read $lib (LD_PRELOAD)" >&2; exit 1; }
done
mkdir data && chown postgres: data || exit 1
db=$PWD/data/db
as_pg "$bin/initdb" -D "$db" -A trust -E UTF8 --locale=C --no-sync --no-instructions >initdb.log 2>&1 ||
  { cat initdb.log >&2; exit 1; }
# not through as_pg: $! is then the server itself
setpriv --reuid=postgres --regid=postgres --init-groups -- "$bin/postgres" -D "$db" -k "$PWD/data" \
  -c listen_addresses= -c huge_pages=off -c fsync=off -c autovacuum=off -c shared_buffers=64MB \
  -c work_mem=512MB -c max_parallel_workers_per_gather=0 -c logging_collector=off >server.log 2>&1 &
srv=$!
trap 'kill -TERM $srv 2>/dev/null; wait $srv' EXIT
export PGHOST=$PWD/data PGDATABASE=postgres PGUSER=postgres
# ready (padded with spaces): what pg_ctl waits for, read without connecting (a connection
# made too early is refused with a FATAL line in the log)
i=0
until sed -n 8p "$db/postmaster.pid" 2>/dev/null | grep -qx 'ready *'; do
  i=$((i + 1))
  [ $i -lt 600 ] && kill -0 $srv 2>/dev/null || { echo "postgres did not start" >&2; cat server.log >&2; exit 1; }
  sleep 0.05
done
q() { as_pg "$bin/psql" -X -At -v ON_ERROR_STOP=1 -c "$1"; }
as_pg "$bin/pgbench" -i -s 5 -q >init.log 2>&1 || { cat init.log >&2; exit 1; }
q "select count(*), sum(abalance), sum(bid) from pgbench_accounts"
# an in-memory sort of 500,000 rows and a hash aggregate, in work_mem
q "select string_agg(aid::text, ',') from (select aid from pgbench_accounts order by md5(aid::text) limit 8) s"
q "select count(*), sum(n) from (select aid % 99991 as k, count(*) as n from pgbench_accounts group by 1) s"
q "select sum(length(x)) from (select repeat(md5(aid::text), 20) as x from pgbench_accounts order by x desc limit 1000) s"
# 200 connections, each its own backend forked from the server
as_pg "$bin/pgbench" -C -c 4 -j 2 -t 50 -S -n 2>&1 | grep -E '^number of (transactions actually processed|failed)'
trap - EXIT
kill -TERM $srv
wait $srv
echo "server exit $?"
SH
}

programs() {
  # redis-server and redis-cli link jemalloc: hugepool stays out of such a
  # program unless asked (HUGEPOOL_OTHER_HEAP=share; tests/preload/other-heaps
  # checks the default), and the small heap stays off in it (OWN_HEAP).
  prog redis procs 220 env HUGEPOOL_OTHER_HEAP=share sh "$IN/redis.sh"
  prog postgres some 32 bash "$IN/postgres.sh"
}

# The server's processes write to its log, not to the run's stderr: there,
# too, a roomy pool gives no hugepool line and a short one at most one a
# process; and the server shut down cleanly.
check_postgres() {
  local mode=$1 log=$2/cwd/server.log
  [ -f "$log" ] || { fail "postgres [$mode]: no server log"; return; }
  local lines pids
  read -r lines pids < <(report_counts "$log")
  case $mode in
  plain | default | smallheap) [ "$lines" -eq 0 ] || { fail "postgres [$mode]: $lines hugepool lines in the server log: $(grep -v "$split_re" "$log" | grep -m 2 '^hugepool' | cut -c1-200 | tr '\n' '|')"; return; } ;;
  *) [ "$lines" -eq "$pids" ] || { fail "postgres [$mode]: $lines hugepool lines in the server log from $pids processes"; return; } ;;
  esac
  if grep -q -E '^[0-9: .-]+UTC \[[0-9]+\] (FATAL|ERROR|PANIC):|cannot be preloaded' "$log"; then
    fail "postgres [$mode]: the server log has $(grep -m 1 -E 'FATAL|ERROR|PANIC|cannot be preloaded' "$log" | cut -c1-200)"
    return
  fi
  grep -q 'database system is shut down' "$log" || { fail "postgres [$mode]: the server did not shut down cleanly"; return; }
  pass "postgres [$mode]: server log: $lines hugepool line(s) from $pids process(es), no error, a clean shutdown"
}
