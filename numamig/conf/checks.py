"""Start-up checks of numamig's configuration, one option and across options.

oslo.config parses a value only when it is first read, so a typo in a
rarely used option would otherwise surface in the middle of a migration.
Daemons call ``check(conf)`` right after parsing: it reads every numamig
option once and applies the rules no single option's type can express.
"""

from oslo_config import cfg

from numamig import cpuspec
from numamig import exception
from numamig.conf import opts


def check(conf):
    """Raise InvalidConfiguration for the first unusable option.

    :param conf: a parsed ConfigOpts with numamig's options registered.
    :raises InvalidConfiguration: naming ``[group] option`` and the reason.
    """
    _read_every_option(conf)
    _check_cpu_sets(conf)
    _check_cpu_power(conf)
    _check_reserved_huge_pages(conf)
    _check_report_timing(conf)
    _check_migration_guard(conf)
    _check_placeholders(conf)


# The words in capitals that the shipped files (etc/numamig/deploy) ask
# the operator to replace; a test keeps this list equal to the files'.
SHIPPED_PLACEHOLDERS = ('HOSTNAME', 'CONTROLLER', 'RABBIT_PASSWORD',
                        'DB_PASSWORD', 'HOST_MIGRATION_ADDRESS')
# Where they stand, as (group, option); None: the DEFAULT group.
_PLACEHOLDER_OPTIONS = ((None, 'host'), (None, 'transport_url'),
                        ('database', 'connection'),
                        ('libvirt', 'live_migration_inbound_addr'))


def _check_placeholders(conf):
    """Refuse a shipped file's placeholder left in place: an agent named
    HOSTNAME would share its name (its queue, its records) with every
    other agent started the same way."""
    for group, name in _PLACEHOLDER_OPTIONS:
        try:
            value = getattr(conf[group] if group else conf, name)
        except (cfg.NoSuchOptError, KeyError):
            continue  # not registered in this process
        left = [word for word in SHIPPED_PLACEHOLDERS
                if isinstance(value, str) and word in value]
        if left:
            raise exception.InvalidConfiguration(
                option=f"[{group or 'DEFAULT'}] {name}",
                reason=f"it still holds {left[0]}, a placeholder of the "
                       f"shipped configuration files: replace it with "
                       f"this deployment's value")


def _read_every_option(conf):
    for group, group_opts in opts.list_opts():
        name = getattr(group, 'name', group)
        section = conf if name == 'DEFAULT' else conf[name]
        for opt in group_opts:
            try:
                getattr(section, opt.dest)
            except (cfg.ConfigFileValueError, ValueError) as exc:
                raise exception.InvalidConfiguration(
                    option=f'[{name}] {opt.name}',
                    reason=_value_error_reason(exc))


def _value_error_reason(exc):
    # oslo.config's text starts with the option and a LocationInfo repr;
    # the part after "is not valid:" is what the operator must fix.
    text = str(exc)
    marker = 'is not valid: '
    return text.split(marker, 1)[1] if marker in text else text


def _check_cpu_sets(conf):
    dedicated = cpuspec.parse_cpu_spec(conf.compute.cpu_dedicated_set)
    shared = cpuspec.parse_cpu_spec(conf.compute.cpu_shared_set)
    both = dedicated & shared
    if both:
        raise exception.InvalidConfiguration(
            option='[compute] cpu_dedicated_set',
            reason=f"CPUs {cpuspec.format_cpu_spec(both)} are also in "
                   f"[compute] cpu_shared_set; a CPU is either for pinned "
                   f"or for floating vCPUs, never both")


def _check_cpu_power(conf):
    """Power management needs an explicit dedicated set: without one every
    CPU not shared counts as dedicated, and the host's own CPUs would be
    taken offline whenever no guest pins them."""
    if conf.compute.cpu_power_management and \
            not cpuspec.parse_cpu_spec(conf.compute.cpu_dedicated_set):
        raise exception.InvalidConfiguration(
            option='[compute] cpu_power_management',
            reason="it powers down unused pCPUs of [compute] "
                   "cpu_dedicated_set, which is unset; set "
                   "cpu_dedicated_set to the CPUs reserved for pinned "
                   "guests, or turn cpu_power_management off")


def _check_reserved_huge_pages(conf):
    seen = set()
    for entry in conf.compute.reserved_huge_pages or []:
        pool = (entry['node'], entry['size'])
        if pool in seen:
            raise exception.InvalidConfiguration(
                option='[compute] reserved_huge_pages',
                reason=f"node {entry['node']} size {entry['size']} KiB is "
                       f"given twice; give one entry per pool")
        seen.add(pool)


def _check_report_timing(conf):
    if conf.report_interval >= conf.service_down_time:
        raise exception.InvalidConfiguration(
            option='[DEFAULT] report_interval',
            reason=f"{conf.report_interval} s is not below "
                   f"service_down_time ({conf.service_down_time} s): every "
                   f"compute host would look down between two reports")


def _check_migration_guard(conf):
    """The guard's files are named by absolute paths: libvirtd runs the
    hook from its own working directory, not the agent's."""
    if not conf.libvirt.migration_guard:
        return
    for option in ('migration_guard_hook_path',
                   'migration_guard_claims_file',
                   'migration_guard_log_file'):
        path = getattr(conf.libvirt, option)
        if option == 'migration_guard_log_file' and not path:
            continue
        if not path or not path.startswith('/'):
            raise exception.InvalidConfiguration(
                option=f'[libvirt] {option}',
                reason=f"{path!r} is not an absolute path; libvirtd runs "
                       f"the guard from its own working directory")
