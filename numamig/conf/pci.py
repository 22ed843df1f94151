"""Options of the [pci] group: PCI passthrough (Nova's spelling)."""

from oslo_config import cfg

pci_group = cfg.OptGroup(
    'pci', title='PCI passthrough',
    help="Which host PCI functions a compute agent offers guests "
         "(device_spec) and the names flavors ask for them by (alias). "
         "doc/source/devices.rst explains both and the NUMA affinity "
         "policies.")

opts = [
    cfg.MultiStrOpt(
        'device_spec', default=[],
        help="The allow-list of host PCI functions guests may be given, "
             "read by numamig-compute. Each value is a JSON object, or a "
             "JSON list of them, with any of 'vendor_id' and 'product_id' "
             "(four hex digits, or '*') and 'address' (a full "
             "'dddd:bb:ss.f' or a glob of one, such as '0000:81:*.*'). A "
             "function libvirt lists as a node device is offered when some "
             "entry matches every key it names. Example: "
             "device_spec = {\"vendor_id\": \"8086\", \"product_id\": "
             "\"154c\"}. Empty (the default): the host offers no device. "
             "An entry that is not valid JSON or names another key stops "
             "the agent at start with the entry named."),
    cfg.MultiStrOpt(
        'alias', default=[],
        help="Names flavors ask for PCI devices by (flavor extra spec "
             "pci_passthrough:alias = NAME:COUNT[,NAME:COUNT]), read by "
             "the conductor and the compute agents (give both the same "
             "list, as Nova's API and compute nodes share theirs): a new "
             "guest's aliases are resolved where it is created and "
             "recorded with it. Each value is a JSON object, or a JSON "
             "list of them, with 'name' (required), 'vendor_id', 'product_id' "
             "(four hex digits), 'device_type' (type-PCI, type-PF or "
             "type-VF; default: any but a PF with VFs in use) and "
             "'numa_policy' (required, legacy, preferred or socket; "
             "default legacy; a flavor's hw:pci_numa_affinity_policy "
             "overrides it). Example: alias = {\"name\": \"vf\", "
             "\"vendor_id\": \"8086\", \"product_id\": \"154c\", "
             "\"device_type\": \"type-VF\", \"numa_policy\": "
             "\"required\"}. An invalid entry, or a name given twice, "
             "stops the service at start with the entry named."),
]


def register_opts(conf):
    conf.register_group(pci_group)
    conf.register_opts(opts, group=pci_group)


def list_opts():
    return {pci_group: opts}
