#!/usr/bin/env bash
# Issue 23, item 10: layer names are agent strings, and trace files are
# untrusted. A trace whose layer, class and host names hold terminal
# controls (OSC "ESC ] 0;", CSI "ESC [ 2J", C1 controls U+0080..U+009F as
# UTF-8 and as raw bytes, invalid UTF-8, a newline, U+FFFE) and CSV/XML
# syntax (comma, quote, <, &) goes through `report` (table, CSV, JSON,
# --svg) and `diff`: what reaches the terminal is valid UTF-8 without
# C0/DEL/C1 controls, the CSV has as many fields in every row as in its
# header, the JSON is valid, the SVG is well-formed XML 1.0, and the
# hostile rows are still there (cleaned, not dropped).
set -u
B=$ROOT/$BUILD
die() { echo "FAIL: $*" >&2; exit 1; }
[ -x "$B/gradtrace" ] && [ -x "$B/progs/gen_gtr" ] || die "build/gradtrace or gen_gtr missing"
PY=${PY:-python3}
cd "$E2E_TMP"
"$B/progs/gen_gtr" -o a.gtr --level 0 --layers 2 --steps --iterations 2 >/dev/null || die "gen_gtr"
"$B/gradtrace" convert a.gtr -o clean.json -q || die "convert"
"$PY" - clean.json hostile.json <<'PY' || die "could not make the hostile trace"
import sys
t = open(sys.argv[1], "rb").read()
# JSON escapes decode to control bytes; raw bytes are invalid UTF-8 / C1.
h1 = rb'layers.0.\u001b]0;pwned\u0007\u001b[2J,\"fc1<&>'
h2 = b'layers.1.\xc2\x9b2J\x9b31m\xff\xfe\xef\xbf\xbeact'
cls = rb'Lin\near\u0085'
t = t.replace(b"layers.0.fc1", h1).replace(b"layers.1.act", h2).replace(b"Linear", cls)
merge = (b'"merge":{"reference_rank":0,"ranks":[{"rank":0,"host":"h\\u001b]0;x\\u0007'
         b'\xff\xc2\x9b","method":"ref\\u001b[2J","correction_ns":0,'
         b'"uncertainty_ns":0,"collectives_matched":0}]},\n')
i = t.index(b'\n"lost":{') + 1
open(sys.argv[2], "wb").write(t[:i] + merge + t[i:])
PY
"$B/gradtrace" report hostile.json >table.out 2>table.err || die "report: $(cat table.err)"
"$B/gradtrace" report --csv hostile.json >csv.out 2>csv.err || die "report --csv: $(cat csv.err)"
"$B/gradtrace" report --format json hostile.json >json.out 2>json.err || die "report --format json: $(cat json.err)"
"$B/gradtrace" report --svg chart.svg hostile.json >svg.out 2>svg.err || die "report --svg: $(cat svg.err)"
"$B/gradtrace" diff hostile.json hostile.json >diff.out 2>diff.err; rc=$?
[ $rc -le 1 ] || die "diff exit $rc: $(cat diff.err)"
"$PY" - <<'PY' || exit 1
import csv, io, json, re, sys
import xml.etree.ElementTree as ET
bad = re.compile("[\x00-\x08\x0b-\x1f\x7f\x80-\x9f]")
fails = []
def text(name, allow_nl=True):
    raw = open(name, "rb").read()
    try:
        s = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        fails.append(f"{name}: not valid UTF-8 ({e})")
        s = raw.decode("utf-8", "replace")
    m = bad.search(s.replace("\n", "") if allow_nl else s)
    if m:
        fails.append(f"{name}: control U+{ord(m.group()):04X} at {m.start()}")
    return s
for name in ("table.out", "svg.out", "diff.out", "table.err", "diff.err"):
    s = text(name)
    if name in ("table.out", "diff.out") and s is not None and "pwned" not in s:
        fails.append(f"{name}: the hostile row is gone")
s = text("csv.out")
if s is not None:
    rows = list(csv.reader(io.StringIO(s)))
    w = len(rows[0])
    odd = [r for r in rows[1:] if len(r) != w]
    if odd:
        fails.append(f"csv.out: {len(odd)} rows without {w} fields: {odd[0][:3]}")
    if not any("pwned" in r[0] for r in rows[1:]):
        fails.append("csv.out: the hostile row is gone")
s = text("json.out")
if s is not None:
    try:
        doc = json.loads(s)
        def walk(v):
            if isinstance(v, str) and bad.search(v):
                fails.append(f"json.out: a string holds a control: {v!r}")
            elif isinstance(v, dict):
                for k, x in v.items(): walk(k); walk(x)
            elif isinstance(v, list):
                for x in v: walk(x)
        walk(doc)
    except ValueError as e:
        fails.append(f"json.out: not valid JSON: {e}")
try:
    root = ET.parse("chart.svg").getroot()
    labels = "".join(root.itertext())
    if bad.search(labels):
        fails.append("chart.svg: a control in its text")
    if "pwned" not in labels:
        fails.append("chart.svg: the hostile row is gone")
except ET.ParseError as e:
    fails.append(f"chart.svg: not well-formed XML: {e}")
for f in fails:
    print("FAIL:", f)
print(f"{len(fails)} problems")
sys.exit(1 if fails else 0)
PY
echo ok
