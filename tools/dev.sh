#!/usr/bin/env bash
# Set up a Debian 12 machine for numamig and run one of its two jobs.
#
#   bash tools/dev.sh main   # the embedded main job (SQLite, inproc://, test driver)
#   bash tools/dev.sh test   # ruff, then the whole test suite; last line:
#                            #   stestr: N passed, N failed, N skipped
#
# Each job does its own set-up: Debian packages (installed when run as
# root, otherwise listed for you to install), a virtualenv in .venv, and
# numamig installed into it (main: the runtime only; test: also the
# tests' requirements and the CI harness, numamig_ci). Re-running skips
# what is already done.
set -euo pipefail

cd "$(dirname "$0")/.."
TOP=$(pwd)
VENV=${NUMAMIG_VENV:-$TOP/.venv}
PYTHON=${PYTHON:-python3}

# Build needs (libvirt-python) for every job; the real hypervisor tier of
# the tests also needs libvirtd and qemu; the nested multi-NUMA tier builds
# its host image with debootstrap and mke2fs (numamig_ci/nested/recipe).
BUILD_PKGS="libvirt-dev pkg-config gcc python3-dev"
REAL_PKGS="libvirt-daemon-system libvirt-clients qemu-system-x86 iproute2 util-linux"
NESTED_PKGS="debootstrap e2fsprogs"
# The metrics tests scrape the daemons with a real Prometheus server and
# check the shipped alert rules with its promtool.
MONITORING_PKGS="prometheus"
# The database failover tests run a primary and a streaming standby of
# their own with the server's initdb, pg_basebackup and pg_ctl.
# A silent database host (tests/functional/db/test_silent_server.py) is
# an iptables DROP inside a namespace of the test's own.
DATABASE_PKGS="postgresql iptables"

log() { printf '[numamig] %s\n' "$*" >&2; }

missing_pkgs() {
    local p out=""
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || out="$out $p"
    done
    echo "$out"
}

ensure_pkgs() {
    local missing
    missing=$(missing_pkgs "$@")
    [ -z "$missing" ] && return 0
    if [ "$(id -u)" -ne 0 ]; then
        log "missing Debian packages:$missing"
        log "install them as root: apt-get install -y --no-install-recommends$missing"
        exit 1
    fi
    log "installing Debian packages:$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $missing >/dev/null
}

# pip -q still warns about every index location a machine-wide pip.conf
# names but that does not exist; those lines bury real errors, so drop them.
pip_quiet() {
    "$VENV/bin/pip" -q "$@" 2> >(grep -v '^WARNING: Location .* is ignored' >&2)
}

# The main job needs the runtime only (requirements.txt, numamig).
ensure_venv() {
    if [ ! -x "$VENV/bin/python" ]; then
        log "creating virtualenv $VENV"
        "$PYTHON" -m venv "$VENV"
    fi
    local stamp="$VENV/.numamig-installed"
    if [ ! -f "$stamp" ] || [ requirements.txt -nt "$stamp" ] || \
       [ setup.cfg -nt "$stamp" ]; then
        log "installing numamig and its requirements into $VENV"
        pip_quiet install --upgrade pip >/dev/null
        pip_quiet install -r requirements.txt
        pip_quiet install -e .
        touch "$stamp"
    fi
}

# The tests also need their own requirements and the CI harness, a
# distribution of its own (numamig_ci/pyproject.toml), which they drive.
ensure_test_venv() {
    ensure_venv
    local stamp="$VENV/.numamig-test-installed"
    if [ ! -f "$stamp" ] || [ test-requirements.txt -nt "$stamp" ] || \
       [ numamig_ci/requirements.txt -nt "$stamp" ] || \
       [ numamig_ci/pyproject.toml -nt "$stamp" ] || \
       [ "$VENV/.numamig-installed" -nt "$stamp" ]; then
        log "installing the test requirements and numamig-ci into $VENV"
        pip_quiet install -r test-requirements.txt
        # Its output only if it fails: setuptools otherwise warns at length
        # that the numamig_ci directory here shadows the install (it is
        # the same code).
        local out
        if ! out=$("$VENV/bin/pip" -q install -e ./numamig_ci 2>&1); then
            printf '%s\n' "$out" >&2
            exit 1
        fi
        touch "$stamp"
    fi
}

run_main() {
    ensure_pkgs $BUILD_PKGS
    ensure_venv
    if [ -x "$VENV/bin/numamig-embedded" ]; then
        exec "$VENV/bin/numamig-embedded" "$@"
    fi
    # Until the embedded main job lands, show what exists: the offline NUMA
    # fit of an example guest onto an example host.
    exec "$VENV/bin/numamig-manage" numa fit \
        --host-topology etc/numamig/examples/host-2cell-smt.json \
        --request etc/numamig/examples/request-pinned-hugepages.json "$@"
}

run_tests() {
    ensure_pkgs $BUILD_PKGS $REAL_PKGS $NESTED_PKGS $MONITORING_PKGS \
        $DATABASE_PKGS
    ensure_test_venv
    # The nested tier's host image, cached outside the checkout between
    # runs: built here (its cold build time printed) rather than inside
    # a test whose deadline it would eat. Should it fail, the nested test
    # skips with the reason, and the skip check below fails the run.
    "$VENV/bin/python" -m numamig_ci.nested.image >&2 || true
    # Its machines with SR-IOV virtual functions (opt-in NUMAMIG_NESTED_VFS)
    # boot a QEMU with igb, which Debian 12's lacks: bookworm-backports'
    # unpacked into a private prefix, never over the system QEMU.
    bash tools/nested-qemu.sh || true
    # Lint first (ruff.toml; under a second): a finding fails the run,
    # and the tests still run so that one run reports both.
    local lint_rc=0
    "$VENV/bin/ruff" check numamig numamig_ci tests benchmarks || lint_rc=$?
    [ "$lint_rc" -eq 0 ] || log "ruff found problems (above); the run fails"
    rm -rf .stestr
    # A fresh repository knows no durations: seed the slowest tests' so
    # that stestr spreads them over its workers (tools/stestr_times.py).
    "$VENV/bin/python" tools/stestr_times.py tools/slow-tests.txt | \
        "$VENV/bin/stestr" load --force-init >/dev/null 2>&1 || \
        log "could not seed test durations; workers may be unbalanced"
    local rc=0
    PYTHONWARNINGS=ignore::DeprecationWarning \
        "$VENV/bin/stestr" run --color "$@" || rc=$?
    local stats passed=0 failed=0 skipped=0
    # subunit-stats exits 1 when a test failed; its counts are still what
    # we need, so its status is ignored here.
    stats=$("$VENV/bin/stestr" last --subunit 2>/dev/null | "$VENV/bin/subunit-stats" 2>/dev/null) || true
    passed=$(echo "$stats" | awk -F': *' '/^Passed tests/ {print $2}')
    failed=$(echo "$stats" | awk -F': *' '/^Failed tests/ {print $2}')
    skipped=$(echo "$stats" | awk -F': *' '/^Skipped tests/ {print $2}')
    passed=${passed:-0}; failed=${failed:-0}; skipped=${skipped:-0}
    if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
        # stestr exits non-zero with no failures on an import/discovery error.
        log "stestr exited $rc without failed tests: import or discovery error"
        failed=1
    fi
    if [ "$passed" -eq 0 ] && [ "$failed" -eq 0 ]; then
        log "no test ran"
        rc=1
    fi
    # Per tier, what ran; every skip must be an intended opt-in
    # (tests/intended-skips.yaml). A filtered run checks its skips but
    # not that every entry still names a test.
    local partial=()
    [ "$#" -gt 0 ] && partial=(--partial)
    "$VENV/bin/stestr" last --subunit 2>/dev/null | \
        "$VENV/bin/python" tools/test_report.py "${partial[@]}" \
        tests/intended-skips.yaml || rc=1
    echo "stestr: $passed passed, $failed failed, $skipped skipped"
    [ "$rc" -eq 0 ] && [ "$failed" -eq 0 ] && [ "$lint_rc" -eq 0 ]
}

case "${1:-}" in
    main) shift; run_main "$@" ;;
    test) shift; run_tests "$@" ;;
    *) echo "usage: bash tools/dev.sh main|test [args]" >&2; exit 2 ;;
esac
