"""A host's CPU and a guest's CPU as libvirt describes them.

The host's comes from the host capabilities (``<host><cpu>``) and the
domain capabilities (``<cpu><mode name='host-model'>`` and ``<mode
name='custom'>``); the guest's from its domain XML as it would migrate.
The rules that compare them are numamig.cpumodel's; libvirt's own
comparison (``compareHypervisorCPU``) is asked here where the hypervisor
has it.
"""

import libvirt
from lxml import etree

from numamig import cpumodel
from numamig import objects

# The feature policies a guest requires, and those it refuses.
_REQUIRED = ('require', 'force', None)
_REFUSED = ('disable', 'forbid')


def _root(xml_text):
    if xml_text is None:
        return None
    data = xml_text.encode() if isinstance(xml_text, str) else xml_text
    return etree.fromstring(data)


def _text(el, path):
    found = el.find(path) if el is not None else None
    return found.text.strip() if found is not None and found.text else None


def host_cpu(capabilities_xml, domain_capabilities_xml=None):
    """The HostCPU of a host from its capabilities XML texts.

    :param domain_capabilities_xml: None where the hypervisor has none
        (libvirt's test driver): only the host capabilities are used.
    :raises lxml.etree.XMLSyntaxError: a text is not XML.
    """
    cpu = _root(capabilities_xml).find('./host/cpu')
    host_model = None
    required, disabled, usable, blockers = set(), set(), set(), {}
    domcaps = _root(domain_capabilities_xml)
    if domcaps is not None:
        mode = domcaps.find("./cpu/mode[@name='host-model']")
        if mode is not None and mode.get('supported') != 'no':
            host_model = _text(mode, 'model')
            for feature in mode.iterfind('feature'):
                policy = feature.get('policy')
                if policy in _REFUSED:
                    disabled.add(feature.get('name'))
                elif policy in _REQUIRED:
                    required.add(feature.get('name'))
        custom = domcaps.find("./cpu/mode[@name='custom']")
        if custom is not None and custom.get('supported') != 'no':
            for model in custom.iterfind('model'):
                name = (model.text or '').strip()
                if model.get('usable', 'yes') == 'yes':
                    usable.add(name)
                else:
                    blockers[name] = []
            for block in custom.iterfind('blockers'):
                name = block.get('model')
                if name in blockers:
                    blockers[name] = sorted(
                        f.get('name') for f in block.iterfind('feature'))
    return objects.HostCPU(
        arch=_text(cpu, 'arch'), vendor=_text(cpu, 'vendor'),
        model=_text(cpu, 'model'),
        features=sorted({f.get('name') for f in cpu.iterfind('feature')}
                        if cpu is not None else ()),
        host_model=host_model, host_model_features=sorted(required),
        host_model_disabled=sorted(disabled),
        custom_models=sorted(usable), model_blockers=blockers)


def guest_cpu(domain_xml, host=None):
    """The GuestCPU of a domain XML (the migratable one, where host-model
    is already expanded to the model and features the guest runs with).

    :param host: this host's HostCPU: a host-passthrough guest sees this
        host's CPU, so its model and features are this host's.
    """
    cpu = _root(domain_xml).find('cpu')
    if cpu is None:
        return cpumodel.GuestCPU()
    mode = cpu.get('mode')
    if mode is None:
        # A <cpu> with a <model> and no mode is a custom CPU; one with
        # only <numa> or <topology> asks for the default model.
        mode = cpumodel.MODE_CUSTOM if cpu.find('model') is not None \
            else None
    if mode is None:
        return cpumodel.GuestCPU()
    if mode in (cpumodel.MODE_PASSTHROUGH, cpumodel.MODE_MAXIMUM):
        return cpumodel.GuestCPU(
            mode=mode, model=host.model if host is not None else None,
            features=frozenset(host.features if host is not None else ()))
    features = {f.get('name'): f.get('policy') for f in cpu.iterfind(
        'feature')}
    return cpumodel.GuestCPU(
        mode=mode, model=_text(cpu, 'model'),
        features=frozenset(n for n, p in features.items()
                           if p in _REQUIRED),
        disabled=frozenset(n for n, p in features.items()
                           if p in _REFUSED))


def guest_cpu_xml(guest):
    """The ``<cpu>`` XML libvirt compares with a host CPU for ``guest``.

    A host-passthrough guest is described as the CPU it sees (its model
    and features as a custom CPU that must match exactly). No ``<arch>``:
    libvirt refuses one beside ``match``; the architecture is an argument
    of the comparison.
    """
    cpu = etree.Element('cpu', mode='custom', match='exact')
    if guest.model:
        etree.SubElement(cpu, 'model', fallback='forbid').text = guest.model
    for name in sorted(guest.features):
        etree.SubElement(cpu, 'feature', policy='require', name=name)
    for name in sorted(guest.disabled):
        etree.SubElement(cpu, 'feature', policy='disable', name=name)
    return etree.tostring(cpu, encoding='unicode')


def compare(conn, guest, arch=None, virt_type=None):
    """libvirt's answer whether this host can run ``guest``.

    :param arch: the host's architecture; :param virt_type: the domain
        type guests run with here (kvm, qemu), None: libvirt's default.

    :returns: a cpumodel.Compatibility; None where the hypervisor cannot
        compare (libvirt's test driver, an old libvirt): the caller then
        judges by the reported HostCPU (numamig.cpumodel).
    """
    if guest is None or guest.mode is None or not guest.model:
        return cpumodel.RUNS
    text = guest_cpu_xml(guest)
    try:
        answer = conn.compareHypervisorCPU(
            None, arch, None, virt_type, text,
            libvirt.VIR_CONNECT_COMPARE_CPU_FAIL_INCOMPATIBLE)
    except libvirt.libvirtError as exc:
        if exc.get_error_code() == libvirt.VIR_ERR_NO_SUPPORT:
            return None
        if exc.get_error_code() == libvirt.VIR_ERR_CPU_INCOMPATIBLE:
            # libvirt's message names the features it lacks ("Host CPU
            # does not provide required features: avx512f, ...").
            reason = exc.get_error_message() or str(exc)
            return cpumodel.Compatibility(
                False, f"libvirt: {reason.strip()}",
                _features_named(reason))
        raise
    if answer == libvirt.VIR_CPU_COMPARE_INCOMPATIBLE:
        return cpumodel.Compatibility(False, "libvirt: the host CPU is "
                                             "incompatible with the guest's")
    return cpumodel.RUNS


def _features_named(message):
    """The feature names after the last ': ' of a libvirt message."""
    _head, sep, tail = message.rpartition(': ')
    if not sep:
        return ()
    return tuple(sorted(name.strip() for name in tail.split(',')
                        if name.strip() and ' ' not in name.strip()))
