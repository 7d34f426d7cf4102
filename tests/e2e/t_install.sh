#!/usr/bin/env bash
# make install: the installed gradtrace finds its agent and Python package
# (../lib, ../share/gradtrace/python), and a C program built against the
# installed gradtrace.pc records through the API, with the agent preloaded,
# and runs unchanged without it (the shim).
set -u
die() { echo "FAIL: $*" >&2; exit 1; }
cd "$ROOT"
prefix=$E2E_TMP/prefix
make -s install PREFIX="$prefix" BUILD="$BUILD" >"$E2E_TMP/install.log" 2>&1 || die "make install: $(tail -5 "$E2E_TMP/install.log")"
for f in bin/gradtrace bin/gradtraced lib/libgradtrace.so include/gradtrace/gradtrace.h \
         include/gradtrace/gradtrace_shim.h lib/pkgconfig/gradtrace.pc share/gradtrace/python/sitecustomize.py; do
  [ -e "$prefix/$f" ] || die "not installed: $f"
done
cd "$E2E_TMP"
cat >app.c <<'C'
#include <stdio.h>
#include "gradtrace/gradtrace_shim.h"
int main(void)
{
    uint32_t id = gt_shim_intern("installed-scope");
    for (int i = 0; i < 1000; i++) {
        gt_shim_scope_begin(id);
        gt_shim_scope_end();
    }
    printf("app done\n");
    return 0;
}
C
PKG_CONFIG_PATH=$prefix/lib/pkgconfig cc $(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --cflags gradtrace) \
  -o app app.c -ldl || die "cannot build against the installed headers"
[ "$(./app)" = "app done" ] || die "the shim program fails without the agent"
export GRADTRACE_SOCKET=$E2E_TMP/none/agent.sock GRADTRACE_CONTROL=$E2E_TMP/none/control.sock
"$prefix/bin/gradtrace" record -o out -- ./app >out.txt 2>err.txt || die "record failed: $(cat err.txt)"
[ "$(cat out.txt)" = "app done" ] || die "stdout changed"
n=$(grep -c '"name":"installed-scope"' out/*.json)
[ "$n" -eq 1000 ] || die "expected 1000 scopes in the trace, found $n"
echo ok
