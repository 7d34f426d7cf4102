#!/usr/bin/env bash
# make install: the installed gradtrace finds its agent and Python package
# (../lib, ../share/gradtrace/python), and a C program built against the
# installed gradtrace.pc records through the API, with the agent preloaded,
# and runs unchanged without it (the shim). The agent is installed as
# libgradtrace.so.1 (its soname, symbols versioned GRADTRACE_1) with the
# unversioned link; a program linked with -lgradtrace needs the .so.1 and
# can ask which API it got; make uninstall removes both names. Each
# installed header compiles alone in C and C++.
set -u
die() { echo "FAIL: $*" >&2; exit 1; }
cd "$ROOT"
prefix=$E2E_TMP/prefix
make -s install PREFIX="$prefix" BUILD="$BUILD" >"$E2E_TMP/install.log" 2>&1 || die "make install: $(tail -5 "$E2E_TMP/install.log")"
for f in bin/gradtrace bin/gradtraced lib/libgradtrace.so lib/libgradtrace.so.1 include/gradtrace/gradtrace.h \
         include/gradtrace/gradtrace_shim.h lib/pkgconfig/gradtrace.pc share/gradtrace/python/sitecustomize.py; do
  [ -e "$prefix/$f" ] || die "not installed: $f"
done
[ -L "$prefix/lib/libgradtrace.so" ] && [ "$(readlink "$prefix/lib/libgradtrace.so")" = libgradtrace.so.1 ] ||
  die "lib/libgradtrace.so is not a link to libgradtrace.so.1"
lib1=$prefix/lib/libgradtrace.so.1
readelf -d "$lib1" | grep -q 'SONAME.*\[libgradtrace\.so\.1\]' || die "soname: $(readelf -d "$lib1" | grep SONAME)"
# Every exported definition carries the GRADTRACE_1 version, gt_api_version
# too, but for _exit and _Exit: they interpose libc's, so they carry its
# version (agent/libgradtrace.map).
objdump -T "$lib1" | awk '$2 == "g" && $0 !~ /\*UND\*/' >"$E2E_TMP/exports"
[ -s "$E2E_TMP/exports" ] || die "no exported symbols"
grep -v ' GRADTRACE_1 ' "$E2E_TMP/exports" | grep -Ev ' GLIBC_2\.2\.5 +(_exit|_Exit|GLIBC_2\.2\.5)$' \
  && die "unversioned exports (above)"
grep -q ' GRADTRACE_1 *gt_api_version$' "$E2E_TMP/exports" || die "gt_api_version is not exported"
grep -q ' GRADTRACE_1 *gt_scope_begin$' "$E2E_TMP/exports" || die "gt_scope_begin is not exported"
cd "$E2E_TMP"
# Each installed header compiles alone, in C and in C++ (a program that
# includes only it, as a user's first line would).
for h in gradtrace.h gradtrace_shim.h wire.h; do
  printf '#include <gradtrace/%s>\nint main(void) { return 0; }\n' "$h" >alone.c
  cc -std=c11 -Wall -Wextra -Werror -I"$prefix/include" -c alone.c -o alone.o 2>alone.err ||
    die "$h does not compile alone in C: $(head -3 alone.err)"
  cp alone.c alone.cpp
  if command -v c++ >/dev/null; then
    c++ -std=c++11 -Wall -Werror -I"$prefix/include" -c alone.cpp -o alone.o 2>alone.err ||
      die "$h does not compile alone in C++: $(head -3 alone.err)"
  fi
done
cat >linked.c <<'C'
#include <stdio.h>
#include "gradtrace/gradtrace.h"
int main(void)
{
    printf("%u %d\n", gt_api_version(), GT_API_VERSION);
    return gt_api_version() / 1000 == GT_API_VERSION_MAJOR ? 0 : 1;
}
C
PKG_CONFIG_PATH=$prefix/lib/pkgconfig cc $(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --cflags gradtrace) \
  -o linked linked.c $(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --libs gradtrace) ||
  die "cannot link against the installed agent"
readelf -d linked | grep -q 'NEEDED.*\[libgradtrace\.so\.1\]' || die "linked program does not need libgradtrace.so.1"
v=$(GRADTRACE_SOCKET=$E2E_TMP/none/agent.sock LD_LIBRARY_PATH=$prefix/lib ./linked) || die "linked program: $v"
set -- $v
[ "$1" = "$2" ] || die "gt_api_version() $1, header $2"
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
cd "$ROOT"
make -s uninstall PREFIX="$prefix" BUILD="$BUILD" >"$E2E_TMP/uninstall.log" 2>&1 || die "make uninstall: $(tail -5 "$E2E_TMP/uninstall.log")"
for f in lib/libgradtrace.so lib/libgradtrace.so.1; do
  [ -e "$prefix/$f" ] || [ -L "$prefix/$f" ] && die "not uninstalled: $f"
done
echo ok
