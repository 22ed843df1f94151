#!/bin/bash
# Build the root filesystem of a nested multi-NUMA host (numamig-ci --nested).
#
# usage: build-image.sh OUTDIR
#
# Debian bookworm (debootstrap minbase) with its kernel, libvirtd, QEMU and
# python3-libvirt, this directory's l1-init as PID 1, written with
# `mke2fs -d` (no loop mount) into OUTDIR/{root.img,vmlinuz,initrd.img}.
# The caller (numamig_ci/nested/image.py) names OUTDIR after a hash of this
# recipe, so a changed recipe builds a new image. Everything is built in
# OUTDIR.partial and renamed at the end: an interrupted build leaves no
# image that looks finished. Environment: MIRROR (default
# http://deb.debian.org/debian), SUITE (default bookworm).
set -euo pipefail
out=${1:?usage: build-image.sh OUTDIR}
here="$(cd "$(dirname "$0")" && pwd)"
mirror=${MIRROR:-http://deb.debian.org/debian}
suite=${SUITE:-bookworm}
work="$out.partial"
root="$work/rootfs"
pkgs="linux-image-amd64 libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients"
pkgs="$pkgs qemu-system-x86 numactl iproute2 util-linux procps kmod python3 python3-libvirt"
now() { date +%s; }

unmount_chroot() {
    for m in dev/pts dev sys proc; do
        mountpoint -q "$root/$m" && umount "$root/$m"
    done
    return 0
}
trap unmount_chroot EXIT

# A build killed outright (SIGKILL) may have left the chroot's mounts:
# never let rm descend into a bind-mounted /dev.
unmount_chroot
rm -rf --one-file-system "$work"
mkdir -p "$work"
t0=$(now)
debootstrap --variant=minbase "$suite" "$root" "$mirror" > "$work/debootstrap.log" 2>&1 \
    || { tail -5 "$work/debootstrap.log" >&2; exit 1; }
echo "debootstrap: $(( $(now) - t0 )) s"

t1=$(now)
mount -t proc proc "$root/proc"
mount -t sysfs sys "$root/sys"
mount --bind /dev "$root/dev"
mount --bind /dev/pts "$root/dev/pts"
# No daemon may start inside the chroot.
printf '#!/bin/sh\nexit 101\n' > "$root/usr/sbin/policy-rc.d"
chmod +x "$root/usr/sbin/policy-rc.d"
chroot "$root" /bin/sh -c "export DEBIAN_FRONTEND=noninteractive;
    apt-get update -q && apt-get install -y -q --no-install-recommends $pkgs && apt-get clean" \
    > "$work/apt.log" 2>&1 || { tail -5 "$work/apt.log" >&2; exit 1; }
unmount_chroot
echo "packages: $(( $(now) - t1 )) s"

t2=$(now)
# libvirt's QEMU driver resolves these at start; libvirt-daemon-system's
# postinst would create them, minbase does not have it.
for group in kvm libvirt-qemu tss; do
    chroot "$root" getent group "$group" > /dev/null || chroot "$root" groupadd -r "$group"
done
chroot "$root" getent passwd libvirt-qemu > /dev/null \
    || chroot "$root" useradd -r -g kvm -d /var/lib/libvirt -s /usr/sbin/nologin libvirt-qemu
chroot "$root" getent passwd tss > /dev/null \
    || chroot "$root" useradd -r -g tss -d /var/lib/tpm -s /usr/sbin/nologin tss
install -m 755 "$here/l1-init" "$root/sbin/numamig-l1-init"
echo numamig-l1 > "$root/etc/hostname"
rm -rf "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/locale/* \
    "$root"/var/lib/apt/lists/*
cp "$root"/boot/vmlinuz-* "$work/vmlinuz"
cp "$root"/boot/initrd.img-* "$work/initrd.img"
size_mb=$(du -smx --exclude=boot "$root" | cut -f1)
mke2fs -q -t ext4 -L numamig-l1 -d "$root" -E root_owner=0:0 "$work/root.img" \
    "$(( size_mb * 13 / 10 + 256 ))M"
rm -rf "$root"
echo "image: $(( $(now) - t2 )) s, root filesystem ${size_mb} MiB"
rm -rf --one-file-system "$out"
mv "$work" "$out"
