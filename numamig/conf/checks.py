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
    _check_reserved_huge_pages(conf)
    _check_report_timing(conf)


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
