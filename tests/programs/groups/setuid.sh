# A setuid program (passwd) run by another user: the kernel marks it secure
# (AT_SECURE), so the dynamic loader must ignore LD_PRELOAD; and the same
# program run by root, where the preload is loaded.
POOL=50
# the loader drops the preload from a setuid program run by another user
NO_PRELOAD=passwd-nobody

prepare() { :; }

as_nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups)
programs() {
  prog passwd-nobody none 0 "${as_nobody[@]}" passwd -S
  prog passwd-root none 0 passwd -S root
}

# While passwd (setuid, run by nobody) waits for a password on a pipe, the
# kernel's map of it must not hold the preload; cat in its place (not
# setuid), run the same way, must: the check can fail.
mapped_in() { # program: prints yes/no/unknown
  local pid f i=0
  local flag=()
  [ "$mode" = smallheap ] && flag=(--small-heap)
  f=$(mktemp -u)
  mkfifo "$f"
  "$run" "${flag[@]}" -- "${as_nobody[@]}" "$1" <"$f" >/dev/null 2>&1 &
  pid=$!
  exec 8>"$f"
  while [ $i -lt 100 ] && [ "$(cat /proc/$pid/comm 2>/dev/null)" != "$1" ]; do sleep 0.05; i=$((i + 1)); done
  sleep 0.2
  if [ "$(cat /proc/$pid/comm 2>/dev/null)" != "$1" ]; then
    echo unknown
  elif grep -q libhugepool_preload "/proc/$pid/maps"; then
    echo yes
  else
    echo no
  fi
  exec 8>&-
  wait $pid 2>/dev/null
  rm -f "$f"
}

check_passwd-nobody() {
  mode=$1
  [ "$mode" = default ] || [ "$mode" = smallheap ] || return 0
  local suid plain
  suid=$(mapped_in passwd)
  plain=$(mapped_in cat)
  if [ "$suid" = no ] && [ "$plain" = yes ]; then
    pass "passwd-nobody [$mode]: the setuid passwd does not map the preload (cat run the same way does)"
  else
    fail "passwd-nobody [$mode]: preload mapped in setuid passwd: $suid, in cat: $plain"
  fi
}
