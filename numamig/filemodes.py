"""File modes of what numamig writes, and a warning for what it reads.

numamig writes these files: the conductor's SQLite database
(every record: guests, hosts, migrations), its journal files (SQLite
gives them the database's mode), and the daemons' log files
(``[DEFAULT] log_file``: host names, guest UUIDs, errors). None needs to
be read by other users: the database is created 0600 and its directory
0750, a log file 0640 (readable by the group an operator's log shipper
runs in). A file that already exists keeps the mode it has: an
operator may have chosen it. The CI harness (numamig_ci) writes its
daemons' configuration files, which hold passwords, 0600.

numamig reads configuration files that hold the broker's and the
database's passwords; it never writes them. A daemon warns at start when
one of them is readable by every user.
"""

import os
import stat

from oslo_log import log as logging

LOG = logging.getLogger(__name__)

DATABASE_MODE = 0o600
DIRECTORY_MODE = 0o750
LOG_MODE = 0o640


def create(path, mode):
    """Create an empty file ``path`` with ``mode`` unless it exists.

    The mode is given to open(2) and the umask can only narrow it, so
    the file is never readable by more than ``mode`` allows, not even
    for an instant.

    :returns: True if it was created now.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    except FileExistsError:
        return False
    os.close(fd)
    return True


def write_private(path, text, mode=0o600):
    """Write ``text`` to ``path`` readable by its owner only, whatever
    mode an older copy had (configuration files numamig's CI harness
    writes hold the broker's and the database's passwords)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, 'w', encoding='utf-8') as handle:
        os.fchmod(handle.fileno(), mode)
        handle.write(text)


def make_directory(path, mode=DIRECTORY_MODE):
    """``os.makedirs`` with ``mode`` for every directory it creates."""
    os.makedirs(path, mode=mode, exist_ok=True)


def prepare_log_file(conf):
    """Create ``[DEFAULT] log_file`` (in ``log_dir``) 0640 before
    oslo.log opens it, which would create it with the umask's mode."""
    if not conf.log_file:
        return
    path = conf.log_file
    if conf.log_dir and not os.path.isabs(path):
        path = os.path.join(conf.log_dir, path)
    if os.path.dirname(path):
        make_directory(os.path.dirname(path))
    create(path, LOG_MODE)


def warn_readable_secrets(conf):
    """Warn about configuration files with a password anyone can read.

    :returns: the paths warned about.
    """
    warned = []
    for path in list(conf.config_file or []):
        try:
            mode = os.stat(path).st_mode
            with open(path, encoding='utf-8') as handle:
                holds = _holds_password(handle.read())
        except OSError:
            continue  # oslo.config already read or refused it
        if holds and mode & stat.S_IROTH:
            LOG.warning("%s holds a password and every user of this host "
                        "can read it (mode %04o): chmod 0640 it, owned by "
                        "root and the group numamig runs as", path,
                        stat.S_IMODE(mode))
            warned.append(path)
    return warned


def _holds_password(text):
    """A URL with a password (``scheme://user:password@``) in a
    transport_url or connection line."""
    for line in text.splitlines():
        key, _sep, value = line.partition('=')
        if key.strip() in ('transport_url', 'connection') and \
                '@' in value and ':' in value.split('//', 1)[-1] \
                .split('@', 1)[0]:
            return True
    return False
