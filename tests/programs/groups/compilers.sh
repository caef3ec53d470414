# Compilers on a large generated translation unit, and make -j2 building a
# small program from several files and running it.
POOL=300

prepare() {
  /usr/bin/python3 - <<'PY'
import os
with open("big.c", "w") as f:
    f.write("static const unsigned table[] = {" +
            ",".join(str((i * 2654435761) % 4294967291) for i in range(200000)) + "};\n")
    for i in range(2000):
        f.write(f"int f{i}(int x) {{ return x * {i} + (int)table[{i}] - f{i - 1 if i else 0}(x - 1); }}\n")
os.mkdir("mk")
n = 6
for k in range(n):
    with open(f"mk/part{k}.c", "w") as f:
        f.write(f"static const int t{k}[] = {{" + ",".join(str((i * 7919 + k) % 10007) for i in range(20000)) + "};\n")
        for i in range(300):
            f.write(f"static int g{k}_{i}(int x) {{ return x * {i + 1} % 10007 + t{k}[(x + {i}) % 20000]; }}\n")
        f.write(f"long part{k}(int x) {{ long s = 0;\n")
        for i in range(300):
            f.write(f"  s += g{k}_{i}(x + {i});\n")
        f.write("  return s; }\n")
with open("mk/main.c", "w") as f:
    f.write("#include <stdio.h>\n")
    for k in range(n):
        f.write(f"long part{k}(int);\n")
    f.write("int main(void) { long s = 0;\n")
    for k in range(n):
        f.write(f"  s += part{k}({k});\n")
    f.write('  printf("%ld\\n", s); return 0; }\n')
objs = " ".join(f"part{k}.o" for k in range(n)) + " main.o"
with open("mk/Makefile", "w") as f:
    f.write(f"app: {objs}\n\t$(CC) -o $@ {objs}\n%.o: %.c\n\t$(CC) -O2 -c $< -o $@\n")
PY
}

programs() {
  prog gcc procs/none 0 sh -c 'gcc -O1 -c "$IN/big.c" -o big.o && sha256sum <big.o'
  prog clang one 16 sh -c 'clang -O1 -c "$IN/big.c" -o big.o && sha256sum <big.o'
  prog make-j2 procs/some 0 sh -c 'cp "$IN"/mk/* . && make -s -j2 && ./app && sha256sum <app'
}
