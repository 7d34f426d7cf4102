#!/usr/bin/env bash
# Builds gradtrace's module hooks in C (python/gradtrace/_hooks.c) as
# python/gradtrace/_gthooks<EXT_SUFFIX>, once per interpreter ABI, for
# each interpreter given that has its C headers (Python.h). An
# interpreter without headers is skipped with a note: the package then
# uses its Python hooks, which do the same more slowly.
#   scripts/build-pyext.sh CC CFLAGS PYTHON...
set -u
cd "$(dirname "$0")/.."
cc=$1 cflags=$2
shift 2
src=python/gradtrace/_hooks.c
done_suffixes=" "
for py in "$@"; do
  [ -x "$py" ] || continue
  info=$("$py" -c 'import sysconfig as s; print(s.get_paths()["include"]); print(s.get_config_var("EXT_SUFFIX") or "")' 2>/dev/null) || continue
  inc=$(printf '%s\n' "$info" | sed -n 1p)
  suffix=$(printf '%s\n' "$info" | sed -n 2p)
  [ -n "$suffix" ] || continue
  case $done_suffixes in *" $suffix "*) continue ;; esac
  done_suffixes="$done_suffixes$suffix "
  if [ ! -f "$inc/Python.h" ]; then
    echo "note: no Python.h for $py ($inc): module hooks stay in Python there" >&2
    continue
  fi
  out=python/gradtrace/_gthooks$suffix
  [ "$out" -nt "$src" ] && [ "$out" -nt "$0" ] && continue
  echo "  CC    $out ($py)"
  # shellcheck disable=SC2086
  $cc $cflags -shared -fPIC -fvisibility=hidden -I"$inc" "$src" -o "$out.tmp" &&
    mv "$out.tmp" "$out" || { rm -f "$out.tmp"; exit 1; }
done
