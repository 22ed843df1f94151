"""Install the migration guard's hook where libvirt runs it.

The compute agent writes a small shell shim at ``[libvirt]
migration_guard_hook_path`` (default ``/etc/libvirt/hooks/qemu.d/
numamig-migration-guard``: libvirt 6.5 and later run every executable
of ``qemu.d`` after the main ``qemu`` hook, each a filter of the
incoming XML, so the guard lives beside an operator's own hook). The
shim execs guard_hook with this host's settings baked in, so the hook
reads no configuration file. libvirtd only uses hooks present when it
started: a shim written or changed now takes effect at libvirtd's next
start, which the agent logs.

A file at the path that numamig did not write (no marker line) is never
overwritten: the guard is then reported ``failed``.
"""

import os
import shlex

from oslo_log import log as logging

LOG = logging.getLogger(__name__)

MARKER = '# numamig migration guard: written by numamig-compute'
HOOK_MODE = 0o755
# What a compute host reports as its guard's state.
OFF, ON, FAILED = 'off', 'on', 'failed'
STATES = (OFF, ON, FAILED)


def shim_text(settings):
    """The hook script for GuardSettings ``settings``."""
    # -I: libvirtd's environment and working directory choose no module.
    command = [settings.python, '-I', '-m',
               'numamig.virt.libvirt.guard_hook',
               '--claims-file', settings.claims_file,
               '--max-age', str(settings.max_age_s),
               '--when-unknown', settings.when_unknown,
               '--deadline', str(settings.deadline_s)]
    if settings.log_file:
        command += ['--log-file', settings.log_file]
    # Every other operation (each guest's start, stop, reconnect) ends
    # here, without Python: the XML is drained so that libvirt's write of
    # it never meets a closed pipe.
    return (f"#!/bin/sh\n{MARKER}; do not edit (it is rewritten at the\n"
            f"# agent's start from [libvirt] migration_guard_* options).\n"
            f"[ \"$2\" = migrate ] || {{ cat >/dev/null; exit 0; }}\n"
            f"exec {' '.join(shlex.quote(c) for c in command)} -- \"$@\"\n")


def install(settings, host):
    """Write the shim unless an identical one is there.

    :returns: (state, changed): ON, or FAILED with the reason logged;
        ``changed`` when the file was written now (libvirtd must start
        again to run it).
    """
    path, text = settings.hook_path, shim_text(settings)
    try:
        current = _read(path)
        if current == text:
            return ON, False
        if current is not None and MARKER not in current:
            LOG.error("%s: migration guard NOT installed: %s exists and "
                      "is not numamig's; install the guard elsewhere "
                      "([libvirt] migration_guard_hook_path, e.g. in "
                      "/etc/libvirt/hooks/qemu.d/) or remove that file",
                      host, path)
            return FAILED, False
        _write(path, text)
    except OSError as exc:
        LOG.error("%s: migration guard NOT installed: cannot write %s: %s",
                  host, path, exc.strerror or exc)
        return FAILED, False
    LOG.warning("%s: migration guard hook written to %s; libvirtd runs "
                "only the hooks present when it started: restart libvirtd "
                "(running guests keep running) for incoming migrations to "
                "be guarded", host, path)
    return ON, True


def _read(path):
    try:
        with open(path, encoding='utf-8', errors='replace') as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def _write(path, text):
    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
    # Not executable until written, and renamed over the old one, so
    # that libvirtd starting meanwhile runs a whole hook or none.
    directory, name = os.path.split(path)
    temporary = os.path.join(directory, f".{name}.numamig-tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, 'w', encoding='utf-8') as handle:
        handle.write(text)
        handle.flush()
        os.fchmod(handle.fileno(), HOOK_MODE)
    os.replace(temporary, path)
