#!/usr/bin/env bash
# The CLI's usage contract (README: 0 success, 1 error, 2 bad usage):
# every subcommand answers --help with its usage on stdout and exit 0;
# bad usage (unknown option, missing value, stray operand, bad number) is
# one line on stderr, nothing on stdout, exit 2. No daemon is needed
# for those: bad usage never gets as far as the control socket (the
# sockets point into E2E_TMP, where nothing listens). Last, record's
# options end where CMD begins.
. "$(dirname "$0")/daemon_lib.sh"
need "$B/gradtrace" "$B/gradtraced"
[ -r "$B/libgradtrace.so" ] || skip "missing $B/libgradtrace.so (build first)"
GT=$B/gradtrace
export LC_ALL=C   # getopt's messages untranslated

# --help and -h, per subcommand: usage on stdout, stderr clean, exit 0.
for sub in status start stop trigger record daemon convert report diff; do
  for h in --help -h; do
    "$GT" $sub $h >"$E2E_TMP/o" 2>"$E2E_TMP/e"; rc=$?
    [ $rc -eq 0 ] || die "gradtrace $sub $h: exit $rc"
    grep -q "^usage: " "$E2E_TMP/o" || die "gradtrace $sub $h prints no usage on stdout"
    [ -s "$E2E_TMP/e" ] && die "gradtrace $sub $h wrote on stderr: $(cat "$E2E_TMP/e")"
  done
done

# The top level: --help, -h and help list every command; --version.
for h in --help -h help; do
  "$GT" $h >"$E2E_TMP/o" 2>"$E2E_TMP/e" || die "gradtrace $h: exit $?"
  for sub in record daemon status start stop trigger convert report diff; do
    grep -q "^  $sub " "$E2E_TMP/o" || die "gradtrace $h does not list $sub"
  done
  grep -q "Exit status" "$E2E_TMP/o" || die "gradtrace $h does not document exit codes"
done
"$GT" --version | grep -Eq "^gradtrace [0-9]" || die "gradtrace --version"
"$GT" >"$E2E_TMP/o" 2>"$E2E_TMP/e"; [ $? -eq 2 ] || die "gradtrace without a command must exit 2"
grep -q "^usage: " "$E2E_TMP/e" || die "gradtrace without a command: usage expected on stderr"

# Runs gradtrace with the arguments given; it must exit 2 with exactly one
# line on stderr, containing $want, and nothing on stdout.
want=
bad() {
  "$GT" "$@" >"$E2E_TMP/o" 2>"$E2E_TMP/e"; rc=$?
  [ $rc -eq 2 ] || die "gradtrace $*: exit $rc, want 2 ($(cat "$E2E_TMP/e"))"
  [ -s "$E2E_TMP/o" ] && die "gradtrace $*: wrote on stdout: $(cat "$E2E_TMP/o")"
  [ "$(wc -l <"$E2E_TMP/e")" -eq 1 ] || die "gradtrace $*: want one line on stderr, got:
$(cat "$E2E_TMP/e")"
  grep -qF -- "$want" "$E2E_TMP/e" || die "gradtrace $*: '$want' not in: $(cat "$E2E_TMP/e")"
}

# An unknown option names the subcommand and the option.
for sub in status start stop trigger record; do
  want="gradtrace $sub: unrecognized option '--no-such-option'"; bad $sub --no-such-option
done
want="gradtraced: unrecognized option '--no-such-option'"; bad daemon --no-such-option
want="gradtrace: unrecognized option '--no-such-option'"; bad --no-such-option
want="unknown command 'frobnicate'"; bad frobnicate
# convert, report and diff parse their own options (daemon/cli/convert.c,
# report.c, diff.c): bad usage is one line naming the command there too.
for sub in convert report diff; do
  want="gradtrace $sub: unknown option '--no-such-option'"
  [ $sub = diff ] && want="gradtrace diff: bad option or value '--no-such-option'"
  bad $sub --no-such-option
done
want="gradtrace convert: no input file"; bad convert
want="gradtrace report: expected at least one TRACE"; bad report
want="gradtrace report: a value is needed after '--iterations'"; bad report --iterations
want="gradtrace diff: expected BASE and NEW"; bad diff a.json
want="gradtrace merge: unrecognized option '--no-such-option'"; bad merge --no-such-option
want="gradtrace merge: --reference-rank: 'x' is not an integer from 0"; bad merge --reference-rank x -o o a.json

# Missing values, stray operands, bad numbers, options a command lacks.
want="'--pid' requires an argument"; bad start --pid
want="-- 'o'"; bad record -o
want="'--trigger' requires an argument"; bad record --trigger
want="gradtrace start: --pid: 'abc' is not an integer from 1"; bad start --pid abc
want="--pid: 'abc' is not an integer from 1"; bad start --pid=abc
want="--rank: '-1' is not an integer from 0"; bad stop --rank -1
want="--duration-ms: '1.5' is not an integer from 1"; bad start --duration-ms 1.5
want="gradtrace stop: unrecognized option '--iterations'"; bad stop --iterations 3
want="gradtrace status: unexpected argument 'extra'"; bad status extra
want="gradtrace start: unexpected argument 'extra'"; bad start extra
want="gradtrace status: option '--json' doesn't allow an argument"; bad status --json=yes
want="gradtrace trigger: expected one SPEC"; bad trigger
want="gradtrace trigger: expected one SPEC"; bad trigger layer=a layer=b
want="gradtrace trigger: --clear takes no SPEC"; bad trigger --clear layer=a
want="gradtrace trigger: unknown field"; bad trigger layer=a,colour=red
want="gradtrace record: no command given"; bad record
want="gradtrace record: no command given"; bad record --raw --
want="gradtrace record: --trigger 'layer=x,phase=sideways': phase"; bad record --trigger=layer=x,phase=sideways -- true
want="gradtraced: --max-file-mb: bad size '0'"; bad daemon --max-file-mb 0
want="gradtraced: unexpected argument 'extra'"; bad daemon extra

# Options end where the command's name is: record passes CMD's own
# options on untouched (CMD's --help is CMD's).
"$GT" record -o "$E2E_TMP/traces" -- sh -c 'echo "$1"' sh --help >"$E2E_TMP/o" 2>/dev/null \
  || die "record with CMD options: exit $?"
[ "$(cat "$E2E_TMP/o")" = "--help" ] || die "record passed CMD's --help wrongly: $(cat "$E2E_TMP/o")"

# A bad input (not bad usage) is one line too, exit 1, naming the command
# that read it (diff reads through report's loader) and what the file is.
head -c 100 /dev/zero >"$E2E_TMP/z.gtr"
printf '{"traceEvents":[]}\n' >"$E2E_TMP/t.gtr"
for cmd in "report $E2E_TMP/z.gtr" "diff $E2E_TMP/z.gtr $E2E_TMP/z.gtr" "convert $E2E_TMP/t.gtr"; do
  $GT $cmd >"$E2E_TMP/o" 2>"$E2E_TMP/e"; rc=$?
  [ $rc -eq 1 ] || die "gradtrace $cmd: exit $rc, want 1"
  [ "$(wc -l <"$E2E_TMP/e")" -eq 1 ] || die "gradtrace $cmd: want one line: $(cat "$E2E_TMP/e")"
  grep -q "^gradtrace ${cmd%% *}: " "$E2E_TMP/e" || die "gradtrace $cmd: $(cat "$E2E_TMP/e")"
done
grep -q "already a JSON trace" "$E2E_TMP/e" || die "convert of a JSON trace: $(cat "$E2E_TMP/e")"
# Every option a command takes is in its --help.
"$GT" daemon --help | grep -q -- "--stop" || die "daemon --help lacks --stop"
"$GT" trigger --help | grep -q "pass=K" || die "trigger --help lacks pass="
"$GT" trigger --help | grep -q "ops=1" || die "trigger --help lacks ops="
"$GT" record --help | grep -q -- "--ops" || die "record --help lacks --ops"
echo ok
