# A database, sort and git with real workloads.
POOL=400

prepare() {
  cat >q.sql <<'SQL'
PRAGMA cache_size = -65536;
CREATE TABLE t(a INTEGER, b TEXT);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 200000)
INSERT INTO t SELECT x, printf('%08d-%s', (x * 7919) % 100003, hex(x * x)) FROM c;
CREATE INDEX tb ON t(b);
SELECT count(*), sum(length(b)) FROM t;
SELECT b FROM t ORDER BY b LIMIT 3;
SELECT a FROM t WHERE b > '00050000' ORDER BY b LIMIT 2;
SELECT length(replace(hex(zeroblob(4000000)), '0', 'ab'));
SELECT sum(length(g)) FROM (SELECT group_concat(b) AS g FROM t GROUP BY a % 7);
SQL
  awk 'BEGIN { srand(1); for (i = 0; i < 1500000; i++) printf "%08d %d %s\n", int(rand() * 1e8), i, "payload-payload" }' >lines
  /usr/bin/python3 - <<'PY'
# a fast-import stream: 40 commits over 300 files, and four files of 2 MiB
import random
r = random.Random(2)
out = open("history.fi", "wb")
def blob(data):
    out.write(b"data %d\n" % len(data) + data + b"\n")
for c in range(40):
    out.write(b"commit refs/heads/main\n")
    out.write(b"committer A U Thor <a@example.org> %d +0000\n" % (1700000000 + c * 3600))
    blob(b"commit %d\n" % c)
    for k in r.sample(range(300), 60) if c else range(300):
        out.write(b"M 644 inline src/f%03d.txt\n" % k)
        blob(b"".join(b"line %d of file %d, version %d: %x\n" % (i, k, c, r.getrandbits(40)) for i in range(200)))
    if c % 10 == 0:
        out.write(b"M 644 inline big/b%d.bin\n" % c)
        blob(r.randbytes(2 << 20))
out.close()
PY
}

programs() {
  prog sqlite3 one 0 sqlite3 :memory: ".read $IN/q.sql"
  # HUGEPOOL_HOLD=all: the 300 MiB buffer (which sort fills) is more than an
  # eighth of the pool, which the default would leave to glibc (check_sort).
  prog sort one 120 sh -c 'HUGEPOOL_HOLD=all sort -S 300M --parallel=2 "$IN/lines" | sha256sum'
  prog git procs 0 sh -c '
    export GIT_CONFIG_NOSYSTEM=1 HOME=$PWD GIT_AUTHOR_DATE=@1700000000 GIT_COMMITTER_DATE=@1700000000
    git init -q -b main r && cd r && git fast-import --quiet <"$IN/history.fi" &&
    git checkout -q main && git -c pack.threads=2 repack -adq --window=20 && git fsck --no-progress &&
    git rev-parse HEAD && git log --format="%H %s" | sha256sum &&
    git cat-file --batch-all-objects --batch-check | sha256sum &&
    git diff --stat HEAD~10 HEAD | tail -n 1 && git archive HEAD | sha256sum &&
    git grep -c "version 39" | wc -l'
}

# sort sizes its buffer at 1/8 of RAM without -S and touches a small part of
# it.  With HUGEPOOL_HOLD=share (the default outside MPI ranks) glibc serves
# it, as the pool's eighth is smaller: same output, no warning, the request
# counted in the statistics, and the kernel shows no hugetlb page for it.
# With HUGEPOOL_HOLD=all on this pool, which cannot hold it, the fallback
# policy hands it to glibc with one two-line warning.
check_sort() {
  local mode=$1 d=$2
  [ "$mode" = default ] || return 0
  local ram_pages pool
  ram_pages=$(( ($(awk '/MemTotal/ { print $2 }' /proc/meminfo) / 8) >> 11 ))
  pool=$(cat /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages)
  if ((pool / 8 >= ram_pages)); then
    echo "SKIP sort [default buffer]: an eighth of the pool has room for 1/8 of RAM"
    return 0
  fi
  "$run" -o "$work/stats/sort-default.default.%p" -- sh -c 'sort "$IN/lines" | sha256sum' >"$d/default-buffer.out" 2>"$d/default-buffer.err"
  if cmp -s "$d/default-buffer.out" "$work/r/sort.plain/out" && ! grep -q '^hugepool' "$d/default-buffer.err" &&
    grep -Eq 'beyond the pool share, to glibc +1$' "$work"/stats/sort-default.default.*; then
    pass "sort [default buffer, 1/8 of RAM]: beyond the pool share, glibc serves it silently, same output"
  else
    fail "sort [default buffer]: $(head -c 400 "$d/default-buffer.err")"
  fi
  local free
  free=$(cat /sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages)
  if ((free >= ram_pages)); then
    echo "SKIP sort [default buffer, --hold all]: the pool has room for 1/8 of RAM"
  else
    HUGEPOOL_HOLD=all "$run" -o "$work/stats/sort-all.default.%p" -- sh -c 'sort "$IN/lines" | sha256sum' >"$d/all-buffer.out" 2>"$d/all-buffer.err"
    if cmp -s "$d/all-buffer.out" "$work/r/sort.plain/out" && [ "$(grep -c '^hugepool-preload.*glibc malloc serves it' "$d/all-buffer.err")" -eq 1 ] &&
      [ "$(grep -c '^hugepool-preload\[[0-9]*\]: cannot map ' "$d/all-buffer.err")" -eq 1 ] &&
      [ "$(grep -c '^hugepool' "$d/all-buffer.err")" -eq 2 ]; then
      pass "sort [default buffer, --hold all, larger than the pool]: falls back to glibc with one two-line warning, same output"
    else
      fail "sort [default buffer, --hold all]: $(head -c 400 "$d/all-buffer.err")"
    fi
  fi
}

# -q (HUGEPOOL_WARN=0) silences the fallback warning: with an empty pool,
# the same output and no hugepool line.
check_sqlite3() {
  local mode=$1 d=$2
  [ "$mode" = empty ] || return 0
  (cd "$d/cwd" && "$run" -q -- sqlite3 :memory: ".read $IN/q.sql" >"$d/quiet.out" 2>"$d/quiet.err")
  if cmp -s "$d/quiet.out" "$work/r/sqlite3.plain/out" && ! grep -q '^hugepool' "$d/quiet.err"; then
    pass "sqlite3 [empty, -q]: same output, no warning line"
  else
    fail "sqlite3 [empty, -q]: $(grep -c '^hugepool' "$d/quiet.err") hugepool line(s): $(head -c 200 "$d/quiet.err")"
  fi
}
