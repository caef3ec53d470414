# redis-server: a forking server (BGSAVE writes an RDB file from a child,
# DEBUG RELOAD writes and reads one) that rewrites its environment for its process
# title, on a unix socket in its working directory, stopped by the script.
# Each redis-cli -x reads 1 MiB: a large request, so with a short pool every
# one of them warns once, as the server does.
POOL=500

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
}

programs() {
  prog redis procs 220 sh "$IN/redis.sh"
}
