# Interpreters whose programs grow large: numpy arrays and a bytearray of
# hundreds of MB, strings grown past 100 MB by appending, big sorted arrays,
# the JVM's direct buffers.
POOL=800

prepare() {
  cat >arrays.py <<'PY'
import hashlib
import numpy as np

def page_kb(addr):
    inside = False
    for line in open("/proc/self/smaps"):
        f = line.split()
        if "-" in f[0] and not f[0].endswith(":"):
            s, e = (int(x, 16) for x in f[0].split("-"))
            inside = s <= addr < e
        elif inside and f[0] == "KernelPageSize:":
            return int(f[1])

n = 16 << 20                                   # 128 MiB arrays
a = np.arange(n, dtype=np.int64)
b = (a * 2654435761) % 1000003
c = np.sort(b[: 4 << 20])                      # 32 MiB
f = np.sqrt(b.astype(np.float64))
print(int(b.sum()), int(c[::10007].sum()), int(np.searchsorted(c, 500000)))
for x in (a, b, c, f):
    print(hashlib.sha256(x.tobytes()).hexdigest())
grown = bytearray()
chunk = bytes(range(256)) * 4096               # 1 MiB
for i in range(240):                           # grown to 240 MiB
    grown += chunk
    grown[-1] = i & 255
print(len(grown), hashlib.sha256(grown).hexdigest())
addrs = [x.ctypes.data for x in (a, b, c, f)] + [np.frombuffer(grown, dtype=np.uint8).ctypes.data]
with open("pagesize", "w") as o:
    print(*[page_kb(p) for p in addrs], file=o)
PY
  cat >grow.pl <<'PL'
use strict;
use warnings;
use Digest::MD5 qw(md5_hex);
my $chunk = join('', map { chr(($_ * 7) & 255) } 0 .. 1023) x 1024;    # 1 MiB
my $s = '';
for my $i (0 .. 259) {                                                  # grown to 260 MiB
  $s .= $chunk;
  substr($s, -1, 1) = chr($i & 255);
}
print length($s), " ", md5_hex($s), "\n";
my %h;
$h{"k$_"} = $_ * 3 for 1 .. 100000;
my $t = 0;
$t += $h{"k$_"} for 1 .. 100000;
print "$t\n";
my @a = sort { $a <=> $b } map { ($_ * 7919) % 1000003 } 1 .. 300000;
print "$a[0] $a[150000] $a[-1]\n";
PL
  cat >grow.rb <<'RB'
require 'digest'
chunk = ((0...1024).map { |i| ((i * 7) & 255).chr }.join * 1024).b   # 1 MiB
s = String.new(encoding: Encoding::BINARY)
220.times { |i| s << chunk; s.setbyte(-1, i & 255) }                # grown to 220 MiB
puts s.bytesize, Digest::SHA256.hexdigest(s)
a = (1..500_000).map { |i| (i * 7919) % 1000003 }.sort
puts a[0], a[250_000], a[-1], a.sum
h = {}
100_000.times { |i| h["k#{i}"] = i * 3 }
puts h.values.sum
RB
  cat >grow.tcl <<'TCL'
set chunk [string repeat "abcdefghijklmnop" 65536]
set s ""
for {set i 0} {$i < 200} {incr i} { append s $chunk $i }
puts [string length $s]
puts "[string first 199 $s] [string last 57 $s]"
set l {}
for {set i 0} {$i < 100000} {incr i} { lappend l [expr {($i * 7919) % 1000003}] }
set l [lsort -integer $l]
puts "[lindex $l 0] [lindex $l 50000] [lindex $l end]"
TCL
  cat >big.js <<'JS'
const crypto = require('crypto');
const b = Buffer.alloc(256 << 20);
for (let i = 0; i < b.length; i += 4096) b[i] = (i >> 12) & 255;
console.log(crypto.createHash('sha256').update(b).digest('hex'));
const a = new Float64Array(2 << 20);
for (let i = 0; i < a.length; i++) a[i] = (i * 7919) % 1000003;
a.sort();
console.log(a[0], a[a.length >> 1], a[a.length - 1]);
let parts = [];
for (let i = 0; i < 100; i++) parts.push(Buffer.alloc(1 << 20, i));
const joined = Buffer.concat(parts);
console.log(joined.length, crypto.createHash('sha256').update(joined).digest('hex'));
JS
  cat >big.R <<'R'
set.seed(1)
x <- runif(1.6e7)
s <- sort(x[1:4e6])
cat(sprintf("%.12f %.12f %.12f\n", s[1], s[2e6], s[4e6]))
cat(sum(x > 0.5), "\n")
y <- cumsum(as.numeric(1:1.6e7) %% 7)
cat(sprintf("%.1f\n", y[length(y)]))
v <- character(0)
v <- paste0("k", 1:100000)
cat(length(unique(substr(v, 1, 4))), "\n")
R
  cat >Big.java <<'JAVA'
import java.nio.ByteBuffer;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

// Direct buffers are malloc'd by the JVM (Unsafe.allocateMemory) and freed
// by its Cleaner thread once collected: large requests made on one thread,
// freed on another.
public class Big {
  static long fill(ByteBuffer b, int seed) {
    long s = 0;
    for (int j = 0; j < b.capacity(); j += 64) {
      b.put(j, (byte) (seed + j / 64));
      s += b.get(j);
    }
    return s;
  }

  public static void main(String[] args) throws Exception {
    MessageDigest md = MessageDigest.getInstance("SHA-256");
    List<ByteBuffer> keep = new ArrayList<>();
    long sum = 0;
    for (int i = 0; i < 40; i++) {                 // 40 x 8 MiB, kept
      ByteBuffer b = ByteBuffer.allocateDirect(8 << 20);
      sum += fill(b, i);
      keep.add(b);
    }
    for (int round = 0; round < 3; round++) {      // 64 MiB buffers dropped and collected
      ByteBuffer t = ByteBuffer.allocateDirect(64 << 20);
      sum += fill(t, round);
      t = null;
      System.gc();
      Thread.sleep(50);
    }
    Thread[] th = new Thread[4];
    long[] part = new long[4];
    for (int k = 0; k < 4; k++) {                  // 16 MiB on each of four threads
      final int kk = k;
      th[k] = new Thread(() -> part[kk] = fill(ByteBuffer.allocateDirect(16 << 20), kk));
      th[k].start();
    }
    for (Thread t : th) t.join();
    for (long p : part) sum += p;
    for (ByteBuffer b : keep) {
      byte[] a = new byte[b.capacity()];
      b.get(0, a);
      md.update(a);
    }
    int[] arr = new int[1 << 24];                  // 64 MiB on the Java heap
    for (int i = 0; i < arr.length; i++) arr[i] = (int) ((i * 7919L) % 1000003);
    Arrays.sort(arr);
    System.out.println(sum + " " + arr[0] + " " + arr[arr.length / 2] + " " + arr[arr.length - 1]);
    StringBuilder hex = new StringBuilder();
    for (byte x : md.digest()) hex.append(String.format("%02x", x));
    System.out.println(hex);
  }
}
JAVA
  javac -d . Big.java || return 1
  cat >big.php <<'PHP'
<?php
$s = str_repeat("abcdefgh", 16 << 20);
$t = '';
for ($i = 0; $i < 200; $i++) { $t .= substr($s, $i, 1 << 20); }
echo strlen($t), " ", md5($t), " ", md5($s), "\n";
$a = array_map(fn($x) => ($x * 7919) % 1000003, range(1, 300000));
sort($a);
echo $a[0], " ", $a[150000], " ", $a[299999], "\n";
PHP
}

programs() {
  prog python-numpy one 400 /usr/bin/python3 "$IN/arrays.py"
  prog perl one 250 perl "$IN/grow.pl"
  prog ruby one 200 ruby "$IN/grow.rb"
  prog tclsh one 200 tclsh "$IN/grow.tcl"
  prog node one 250 node "$IN/big.js"
  prog r procs 150 Rscript "$IN/big.R"
  # the JVM's direct buffers are malloc'd, and freed by its Cleaner thread
  prog java one 300 java -XX:-UsePerfData -Xmx1g -cp "$IN" Big
  # php's own allocator (Zend MM) maps its memory itself; with
  # USE_ZEND_ALLOC=0 the same script runs on malloc
  prog php none 0 php -d memory_limit=-1 "$IN/big.php"
  prog php-malloc one 200 env USE_ZEND_ALLOC=0 php -d memory_limit=-1 "$IN/big.php"
}

# Each numpy array and the grown bytearray on 2 MB pages under the preload,
# on 4 KB pages plain: the page size of the mapping each lies in, from the
# program's own /proc/self/smaps.
check_python-numpy() {
  local mode=$1 d=$2 want="2048 2048 2048 2048 2048"
  case $mode in plain | empty) want="4 4 4 4 4" ;; eight) return ;; esac
  if [ "$(cat "$d/cwd/pagesize" 2>/dev/null)" = "$want" ]; then
    pass "python-numpy [$mode]: every array's and the bytearray's page size in smaps is $want kB"
  else
    fail "python-numpy [$mode]: page sizes in smaps '$(cat "$d/cwd/pagesize" 2>/dev/null)', expected '$want'"
  fi
}
