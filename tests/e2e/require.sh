# Sourced by the e2e helper libraries (torch/, consumers/, hosts/).
# e2e_missing WHY: a prerequisite of this script is missing: skip (exit 77),
# except under CI, whose install step provides every prerequisite, so that
# a skip there would hide a missing install step: fail instead.
e2e_missing() {
  if [ -n "${CI:-}" ]; then
    echo "CI: $1 (no skip under CI)" >&2
    exit 1
  fi
  echo "skip: $1"
  exit 77
}
