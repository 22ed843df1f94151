"""The nested host's disk image: built from Debian packages, cached.

The image (a Debian root filesystem with libvirtd and QEMU, its kernel
and initrd) is built by ``recipe/build-image.sh`` and cached OUTSIDE the
checkout, under ``$NUMAMIG_NESTED_CACHE`` (default
``$XDG_CACHE_HOME/numamig/nested``, or ``/var/cache/numamig/nested`` when
XDG_CACHE_HOME is unset), in a directory named after a hash of the
recipe files: a changed recipe builds a new image, an unchanged one is
reused. Concurrent builders wait on a lock instead of building twice.
Boots never write the image (QEMU's ``snapshot=on``).
"""

import fcntl
import hashlib
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request

RECIPE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                          'recipe')
RECIPE_FILES = ('build-image.sh', 'l1-init')
IMAGE_FILES = ('root.img', 'vmlinuz', 'initrd.img')
DEFAULT_MIRROR = 'http://deb.debian.org/debian'
BUILD_TIMEOUT_S = 1800
MIRROR_TIMEOUT_S = 15
HOST_TOOLS = ('debootstrap', 'mke2fs', 'qemu-system-x86_64', 'unshare')


class ImageUnavailable(Exception):
    """The image is not cached and cannot be built here (why: str(exc))."""


def cache_root():
    explicit = os.environ.get('NUMAMIG_NESTED_CACHE')
    if explicit:
        return explicit
    xdg = os.environ.get('XDG_CACHE_HOME')
    if xdg:
        return os.path.join(xdg, 'numamig', 'nested')
    return '/var/cache/numamig/nested'


def recipe_key():
    """A hash of every recipe file: names and contents."""
    digest = hashlib.sha256()
    for name in RECIPE_FILES:
        digest.update(name.encode() + b'\0')
        with open(os.path.join(RECIPE_DIR, name), 'rb') as f:
            digest.update(f.read())
    return digest.hexdigest()[:16]


def image_dir(root=None):
    return os.path.join(root or cache_root(), recipe_key())


def cached(root=None):
    """The image directory when a finished image is cached, else None."""
    path = image_dir(root)
    if all(os.path.isfile(os.path.join(path, f)) for f in IMAGE_FILES):
        return path
    return None


def missing_requirements(mirror=None):
    """Why the image can neither be found nor built here, or None."""
    if os.geteuid() != 0:
        return "the nested hosts need root (debootstrap, 9p, namespaces)"
    for tool in HOST_TOOLS:
        if shutil.which(tool, path='/usr/sbin:/usr/bin:/sbin:/bin') is None:
            return f"{tool} is not installed"
    if cached():
        return None
    return mirror_unreachable(mirror or os.environ.get('MIRROR',
                                                       DEFAULT_MIRROR))


def mirror_unreachable(mirror):
    """Why the Debian mirror cannot serve a build, or None."""
    url = f"{mirror.rstrip('/')}/dists/bookworm/Release"
    try:
        with urllib.request.urlopen(url, timeout=MIRROR_TIMEOUT_S) as reply:
            reply.read(1)
    except (urllib.error.URLError, OSError) as exc:
        return (f"the nested host image is not cached and the Debian "
                f"mirror {mirror} is unreachable ({exc})")
    return None


def ensure(log=print, timeout=BUILD_TIMEOUT_S, root=None):
    """Return the directory of a finished image, building it if needed.

    :raises ImageUnavailable: missing tools, no mirror, or the build
        failed or overran ``timeout`` seconds (the reason says which).
    """
    found = cached(root)
    if found:
        return found
    reason = missing_requirements()
    if reason:
        raise ImageUnavailable(reason)
    target = image_dir(root)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with open(target + '.lock', 'w') as lock:
        _lock(lock, timeout)
        if cached(root):          # another process built it meanwhile
            return target
        _build(target, log, timeout)
    return target


def _lock(lock, timeout):
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise ImageUnavailable(f"another build held {lock.name} for "
                                       f"more than {timeout} s")
            time.sleep(1)


def _build(target, log, timeout):
    log(f"numamig-ci: building the nested host image in {target} "
        f"(a few minutes; cached afterwards)")
    started = time.monotonic()
    proc = subprocess.Popen(
        ['nice', '-n', '15', os.path.join(RECIPE_DIR, 'build-image.sh'),
         target], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL, start_new_session=True, text=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise ImageUnavailable(f"building the nested host image took more "
                               f"than {timeout} s")
    except BaseException:          # Ctrl-C: no build may outlive us
        _kill_group(proc)
        raise
    if proc.returncode != 0 or not cached(os.path.dirname(target)):
        raise ImageUnavailable(f"building the nested host image failed "
                               f"({proc.returncode}): {out[-1500:]}")
    log(f"numamig-ci: nested host image built in "
        f"{time.monotonic() - started:.0f} s: {out.strip()}")


def _kill_group(proc):
    try:
        os.killpg(proc.pid, 9)
    except ProcessLookupError:
        pass
    proc.wait()


def main():
    """Make sure the image is cached; say where, and how long a build
    took (the README's test command runs this before the tests, so the
    nested tier's deadline never includes a cold build)."""
    started = time.monotonic()
    found = cached()
    try:
        path = ensure()
    except ImageUnavailable as exc:
        print(f"numamig-ci: nested host image unavailable: {exc}")
        return 1
    if found:
        print(f"numamig-ci: nested host image cached in {path}")
    else:
        print(f"numamig-ci: nested host image cold build: "
              f"{time.monotonic() - started:.0f} s, in {path}")
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
