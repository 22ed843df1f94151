#!/usr/bin/env bash
# Unpack bookworm-backports' qemu-system-x86 into a private prefix for the
# nested tier's machines with SR-IOV virtual functions (Layout vfs=N,
# scenario vf-move): Debian 12's QEMU 7.2 has no igb device (QEMU 8.0+).
#
#   bash tools/nested-qemu.sh     # -> $NUMAMIG_NESTED_QEMU_ROOT
#                                 #    (default /var/cache/numamig/qemu-bpo/root)
#
# Nothing is installed: apt-get downloads the .debs with a sources list of
# its own (its lists kept beside the prefix) and dpkg -x unpacks them. The
# system QEMU, which libvirt and every other tier use, stays as it is. The
# binary's libraries all come from bookworm (checked with ldd below); it
# takes the system's SeaBIOS and iPXE ROMs (the nested machine boots
# -kernel). Re-running does nothing once the binary has igb.
set -euo pipefail

ROOT=${NUMAMIG_NESTED_QEMU_ROOT:-/var/cache/numamig/qemu-bpo/root}
BASE=$(dirname "$ROOT")
MIRROR=${NUMAMIG_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITE=bookworm-backports
PKGS="qemu-system-x86 qemu-system-common qemu-system-data"
BIN=$ROOT/usr/bin/qemu-system-x86_64
MODULES=$ROOT/usr/lib/x86_64-linux-gnu/qemu

log() { printf '[numamig] %s\n' "$*" >&2; }

has_igb() {
    [ -x "$BIN" ] && QEMU_MODULE_DIR=$MODULES "$BIN" -device igb,help >/dev/null 2>&1
}

if has_igb; then
    log "nested QEMU with igb: $("$BIN" --version | head -1) at $BIN"
    exit 0
fi

mkdir -p "$BASE/apt/lists/partial" "$BASE/apt/cache/archives/partial" \
    "$BASE/apt/sources.list.d"
cat > "$BASE/apt/sources.list" <<EOF
deb $MIRROR bookworm main
deb $MIRROR $SUITE main
EOF
APT=(-o "Dir::Etc::sourcelist=$BASE/apt/sources.list"
     -o "Dir::Etc::sourceparts=$BASE/apt/sources.list.d"
     -o "Dir::State=$BASE/apt" -o "Dir::State::lists=$BASE/apt/lists"
     -o "Dir::Cache=$BASE/apt/cache" -o "Dir::State::status=/var/lib/dpkg/status"
     -o "APT::Sandbox::User=root")
log "fetching $PKGS from $SUITE ($MIRROR)"
apt-get "${APT[@]}" -qq update
work=$(mktemp -d "$BASE/unpack.XXXXXX")
trap 'rm -rf "$work"' EXIT
(cd "$work" && apt-get "${APT[@]}" -qq download \
    $(for p in $PKGS; do printf '%s/%s ' "$p" "$SUITE"; done))
mkdir -p "$work/root"
for deb in "$work"/*.deb; do
    dpkg -x "$deb" "$work/root"
done
missing=$(ldd "$work/root/usr/bin/qemu-system-x86_64" | grep 'not found' || true)
if [ -n "$missing" ]; then
    log "the backports QEMU needs libraries this machine lacks:"
    printf '%s\n' "$missing" >&2
    exit 1
fi
mkdir -p "$work/root/usr/lib/x86_64-linux-gnu/qemu"
rm -rf "$ROOT.old"
[ ! -e "$ROOT" ] || mv "$ROOT" "$ROOT.old"
mv "$work/root" "$ROOT"
rm -rf "$ROOT.old"
if ! has_igb; then
    log "$BIN has no igb device after unpacking"
    exit 1
fi
log "nested QEMU with igb: $("$BIN" --version | head -1) at $BIN"
