# Compressors with two threads on a 6 MiB file of generated text: xz and
# zstd with large dictionaries (hundreds of MB of buffers), pigz.
POOL=400

prepare() {
  /usr/bin/python3 - <<'PY'
import random
r = random.Random(1)
words = ["".join(r.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(r.randint(2, 9))) for _ in range(5000)]
with open("data", "w") as f:
    size = 0
    while size < 6 << 20:
        line = " ".join(r.choice(words) for _ in range(r.randint(4, 16))) + f" {r.getrandbits(32):08x}\n"
        f.write(line)
        size += len(line)
PY
}

programs() {
  prog xz procs 64 sh -c 'xz -T2 -5 --block-size=2MiB -c "$IN/data" >d.xz && sha256sum <d.xz && xz -d -T2 -c d.xz | cmp - "$IN/data"'
  prog zstd procs 50 sh -c 'zstd -q -T2 -12 --long=27 -c "$IN/data" >d.zst && sha256sum <d.zst && zstd -q -d --long=27 -c d.zst | cmp - "$IN/data"'
  prog pigz none 0 sh -c 'pigz -p 2 -9 -c "$IN/data" >d.gz && sha256sum <d.gz && pigz -p 2 -d -c d.gz | cmp - "$IN/data"'
}
