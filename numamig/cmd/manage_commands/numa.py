"""numamig-manage numa: offline NUMA engine actions (placeholder)."""

from numamig.cmd import common


class NumaCommands:
    """Offline NUMA placement: dry runs without any service."""

    @common.args('--host-topology', required=True, metavar='HOST.json',
                 help="Host topology file.")
    @common.args('--request', required=True, metavar='REQUEST.json',
                 help="Guest request file.")
    def fit(self, host_topology, request):
        """Fit a guest request onto a host topology (not implemented yet)."""
        print("numa fit: not implemented yet")
        return common.EXIT_UNEXPECTED
