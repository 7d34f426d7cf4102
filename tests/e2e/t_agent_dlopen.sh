#!/usr/bin/env bash
# The agent also loads with dlopen (ctypes.CDLL, a plugin loader), not only
# through LD_PRELOAD: its static TLS stays small enough for a late load,
# and loading it that way prints nothing and exits cleanly.
set -u
B=$ROOT/$BUILD
lib=$B/libgradtrace.so
[ -f "$lib" ] || { echo "FAIL: $lib missing"; exit 1; }
cd "$E2E_TMP"
export GRADTRACE_SOCKET=$E2E_TMP/none/agent.sock
out=$(python3 -c "
import ctypes, threading
lib = ctypes.CDLL('$lib')
lib.gt_intern.restype = ctypes.c_uint32
def work():
    lib.gt_scope_begin(lib.gt_intern(b'x')); lib.gt_scope_end()
ts = [threading.Thread(target=work) for _ in range(4)]
[t.start() for t in ts]; [t.join() for t in ts]
print('loaded')
" 2>err.txt)
rc=$?
[ $rc -eq 0 ] || { echo "FAIL: dlopen run exited $rc: $(cat err.txt)"; exit 1; }
[ "$out" = loaded ] || { echo "FAIL: stdout changed: $out"; exit 1; }
[ ! -s err.txt ] || { echo "FAIL: stderr not empty: $(cat err.txt)"; exit 1; }
# Static TLS the library asks for: a late dlopen can count on ~1.6 KiB of
# surplus in glibc, so keep the agent's well below that.
tls=$(readelf -lW "$lib" | awk '$1 == "TLS" {print $6}'); tls=$((tls))
[ -n "$tls" ] && [ "$tls" -le 512 ] || { echo "FAIL: TLS segment of $tls bytes"; exit 1; }
echo "ok (TLS segment $tls bytes)"
