"""A real guest kernel with the virtio-mem driver (real and nested tiers).

Debian's own kernel package and busybox-static are fetched with
``apt-get download`` (the package manager's ordinary client) and
unpacked with ``dpkg-deb -x``; an initramfs holds busybox, the virtio
and virtio_mem modules and ``INIT`` below. Everything is cached
under CACHE (about 75 MB, built once, ~15 s). ``build()`` returns the
paths, or raises Unavailable saying why (no network, no apt, no
dpkg-deb). The harness ships it (the nested tier's virtio-mem scenario
boots it inside the nested host); tests/fixtures/vmem_guest re-exports
it for the one-node real tier.
"""

import fcntl
import glob
import gzip
import hashlib
import lzma
import os
import shutil
import subprocess

CACHE = '/var/tmp/numamig-vmem-guest'
MODULES = ('virtio_ring', 'virtio', 'virtio_pci_modern_dev',
           'virtio_pci_legacy_dev', 'virtio_pci', 'virtio_mem')
# The guest's /init: load the virtio-mem driver (unless the kernel
# command line says novmem), keep hot-plugged memory online, and print
# each guest node's MemTotal (kB) on the console every second, as
#   VMEM 0=<kB> 1=<kB>
# (what the tests read: the guest kernel's own view of its memory), and
# its PCI bus (sysfs, every function, driver or not) as
#   PCI 0000:00:03.0=8086:10d3 ...
# (the device scenarios read a hot-unplug and a hot-plug there).
INIT = """#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
for m in virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev \\
         virtio_pci; do
  insmod /lib/modules/$m.ko 2>/dev/null
done
grep -q novmem /proc/cmdline || insmod /lib/modules/virtio_mem.ko
while true; do
  for b in /sys/devices/system/memory/memory*/state; do
    [ "$(cat $b 2>/dev/null)" = offline ] &&
      echo online_movable > $b 2>/dev/null
  done
  line=VMEM
  for n in /sys/devices/system/node/node*; do
    kb=$(awk '/MemTotal/ {print $4}' $n/meminfo)
    line="$line ${n##*/node}=$kb"
  done
  echo "$line" > /dev/ttyS0
  line=PCI
  for d in /sys/bus/pci/devices/*; do
    line="$line ${d##*/}=$(cat $d/vendor):$(cat $d/device)"
  done
  echo "$line" | sed 's/=0x/=/g; s/:0x/:/g' > /dev/ttyS0
  sleep 1
done
"""


# What numamig's guest XML is built on for this guest (a driver's
# ``spawn(..., base_xml=...)``): direct kernel boot, its console on a
# file, TCG's plain CPU model; numamig adds the NUMA parts and devices.
_BASE = """<domain type='qemu'><os><type arch='x86_64' machine='pc'>hvm</type>
<kernel>{kernel}</kernel><initrd>{initrd}</initrd>
<cmdline>console=ttyS0 memhp_default_state=online_movable quiet panic=-1
{extra}</cmdline></os><features><acpi/></features>
<cpu mode='custom' match='exact' check='none'>
<model fallback='allow'>qemu64</model></cpu><on_crash>destroy</on_crash>
<devices><serial type='file'><source path='{serial}'/><target port='0'/>
</serial><memballoon model='none'/></devices></domain>"""


def base_xml(kernel, initrd, serial, extra=''):
    """The base domain XML booting this guest, its console in ``serial``
    (``extra``: more kernel arguments; ``novmem`` leaves the driver out).
    """
    return _BASE.format(kernel=kernel, initrd=initrd, serial=serial,
                            extra=extra)


class Unavailable(Exception):
    """The guest kernel cannot be had on this machine."""


def build(cache=CACHE):
    """Return (uncompressed kernel, initrd) paths, building them once.

    Test workers are processes that may all find the cache empty: one
    builds while the others wait on the cache's lock, then find it built.
    """
    # The initrd is named by its init's digest: a changed INIT builds a
    # new one beside the cached kernel and packages (no download).
    digest = hashlib.sha256(INIT.encode()).hexdigest()[:12]
    kernel, initrd = (os.path.join(cache, 'vmlinux'),
                      os.path.join(cache, f'initrd-{digest}.img'))
    if os.path.exists(kernel) and os.path.exists(initrd):
        return kernel, initrd
    os.makedirs(cache, exist_ok=True)
    with open(os.path.join(cache, '.lock'), 'w') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (os.path.exists(kernel) and os.path.exists(initrd)):
            _build(cache, kernel, initrd)
    return kernel, initrd


def _build(cache, kernel, initrd):
    _fetch(cache)
    root = os.path.join(cache, 'root')
    shutil.rmtree(root, ignore_errors=True)
    for sub in ('bin', 'lib/modules', 'proc', 'sys', 'dev'):
        os.makedirs(os.path.join(root, sub))
    shutil.copy(os.path.join(cache, 'bb', 'bin', 'busybox'),
                os.path.join(root, 'bin', 'busybox'))
    with open(os.path.join(root, 'init'), 'w') as f:
        f.write(INIT)
    os.chmod(os.path.join(root, 'init'), 0o755)
    version, = os.listdir(os.path.join(cache, 'k', 'lib', 'modules'))
    for name in MODULES:
        _copy_module(cache, version, name, root)
    _cpio(root, initrd + '.tmp')
    if not os.path.exists(kernel):
        _decompress(glob.glob(os.path.join(cache, 'k', 'boot',
                                           f'vmlinuz-{version}'))[0],
                    kernel + '.tmp')
        os.replace(kernel + '.tmp', kernel)
    os.replace(initrd + '.tmp', initrd)


def _run(argv, cwd):
    try:
        done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True,
                              timeout=600, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Unavailable(f"{argv[0]}: {exc}")
    if done.returncode:
        raise Unavailable(f"{' '.join(argv)}: {done.stderr.strip()[-300:]}")
    return done.stdout


def _fetch(cache):
    if not glob.glob(os.path.join(cache, 'linux-image-*.deb')):
        depends = _run(['apt-cache', 'depends', 'linux-image-amd64'], cache)
        package = next((line.split()[-1] for line in depends.splitlines()
                        if 'Depends: linux-image-' in line), None)
        if package is None:
            raise Unavailable("apt knows no linux-image-amd64 kernel")
        _run(['apt-get', 'download', package, 'busybox-static'], cache)
    for pattern, target in (('linux-image-*.deb', 'k'),
                            ('busybox-static_*.deb', 'bb')):
        if not os.path.isdir(os.path.join(cache, target)):
            deb, = glob.glob(os.path.join(cache, pattern))
            _run(['dpkg-deb', '-x', deb, target], cache)


def _copy_module(cache, version, name, root):
    found = glob.glob(os.path.join(cache, 'k', 'lib', 'modules', version,
                                   '**', f'{name}.ko*'), recursive=True)
    if not found:
        raise Unavailable(f"the kernel package has no {name} module")
    data = open(found[0], 'rb').read()
    if found[0].endswith('.xz'):
        data = lzma.decompress(data)
    elif found[0].endswith('.zst'):
        data = subprocess.run(['zstd', '-dcq'], input=data,
                              capture_output=True, check=True).stdout
    with open(os.path.join(root, 'lib', 'modules', f'{name}.ko'), 'wb') as f:
        f.write(data)


def _cpio(root, path):
    busybox = os.path.join(root, 'bin', 'busybox')
    names = subprocess.run(['find', '.'], cwd=root, capture_output=True,
                           check=True).stdout
    archive = subprocess.run([busybox, 'cpio', '-o', '-H', 'newc'],
                             cwd=root, input=names, capture_output=True,
                             check=True).stdout
    with gzip.open(path, 'wb', compresslevel=1) as f:
        f.write(archive)


def _decompress(vmlinuz, path):
    """The uncompressed kernel (PVH boot: ~2x faster than vmlinuz)."""
    data = open(vmlinuz, 'rb').read()
    start = data.find(b'\xfd7zXZ\x00')
    if start < 0:
        raise Unavailable("the kernel is not XZ-compressed")
    decoder = lzma.LZMADecompressor(format=lzma.FORMAT_XZ)
    with open(path, 'wb') as f:
        f.write(decoder.decompress(data[start:]))

