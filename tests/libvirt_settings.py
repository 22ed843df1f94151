"""The libvirt driver's settings as the test's CONF gives them.

The settings classes have no defaults (the options hold them): a test
builds them from CONF, as an agent does, and changes what it is about.
Override an option with ``flags`` first to change it everywhere.
"""

import dataclasses

from numamig.conf import CONF
from numamig.virt.libvirt import settings as lv_settings


def migration(**changes):
    """MigrationSettings of [libvirt], with ``changes``."""
    return dataclasses.replace(
        lv_settings.migration_from_conf(CONF.libvirt), **changes)


def host(**changes):
    """LibvirtSettings of [libvirt] and [compute], with ``changes``."""
    return dataclasses.replace(lv_settings.LibvirtSettings.from_conf(CONF),
                               **changes)


def guard(**changes):
    """GuardSettings of [libvirt] migration_guard_*, with ``changes``."""
    return dataclasses.replace(lv_settings.guard_from_conf(CONF.libvirt),
                               **changes)


def recovery(**changes):
    """The post-copy recovery bounds of [libvirt], with ``changes``."""
    return dataclasses.replace(migration().postcopy_recovery, **changes)
