"""numamig-ci: prove NUMA-aware live migration on a deployment, whitebox.

    numamig-ci --embedded
    numamig-ci --local-libvirt 2 --subunit out.subunit --junit out.xml
    numamig-ci --nested --nested-layout cores=2,threads=2,pages_2m=128:128
    numamig-ci --nested --nested-layout memory=1536:1536:1536 \
        --nested-layout memory=1536:1536 --scenario fewer-nodes
    numamig-ci --deployment deployment.json --scenario pins-recomputed
    numamig-ci --list

Exit codes: 0 every scenario passed (scenarios the backend cannot express
are reported skipped, with the reason; a skip fails the run only for
scenarios named with --scenario); 1 a scenario failed or broke, or none
passed; 2 bad command line or deployment file; 3 the deployment could not
be started or reached.
"""

import argparse
import contextlib
import logging
import os
import signal
import sys
import threading

from numamig import _backend
from numamig import exception

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_DEPLOYMENT = 0, 1, 2, 3


def build_parser():
    parser = argparse.ArgumentParser(
        prog='numamig-ci', description=__doc__.split('\n\n')[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    where = parser.add_mutually_exclusive_group()
    where.add_argument('--embedded', action='store_true',
                       help="a conductor and three multi-node test-driver "
                            "hosts in this process")
    where.add_argument('--local-libvirt', type=int, metavar='N',
                       help="N real libvirtd hosts on this machine (root), "
                            "a conductor and N compute agents as processes")
    where.add_argument('--nested', action='store_true',
                       help="two real libvirtd hosts inside a nested "
                            "multi-NUMA QEMU (TCG) virtual machine built "
                            "from Debian packages (root; the image is "
                            "cached, see doc/source/third-party-ci.rst)")
    where.add_argument('--deployment', metavar='FILE',
                       help="an existing deployment described by a JSON "
                            "file (see doc/source/third-party-ci.rst)")
    parser.add_argument('--scenario', action='append', default=[],
                        metavar='NAME', help="run only this scenario "
                        "(repeatable; default: all)")
    parser.add_argument('--list', action='store_true',
                        help="list the scenarios and exit")
    parser.add_argument('--suite-top', action='store_true',
                        help="print the directory holding the numamig_ci "
                             "package (stestr's --top-dir for running the "
                             "scenarios with stestr) and exit")
    parser.add_argument('--subunit', metavar='FILE',
                        help="also write a subunit v2 stream to FILE")
    parser.add_argument('--junit', metavar='FILE',
                        help="also write JUnit XML to FILE")
    parser.add_argument('--transport-url', default=None,
                        help="--embedded: oslo.messaging URL (default "
                             "inproc://); --local-libvirt, --nested: "
                             "default "
                             "rabbit://guest:guest@127.0.0.1:5672/")
    parser.add_argument('--database', default=None,
                        help="--local-libvirt: SQLAlchemy URL for the "
                             "conductor (default: a SQLite file)")
    parser.add_argument('--config-file', action='append', default=[],
                        metavar='FILE',
                        help="a numamig configuration file the harness "
                             "reads for its own connections (for instance "
                             "[oslo_messaging_rabbit] rabbit_quorum_queue, "
                             "which must match the deployment's daemons or "
                             "the broker refuses the harness's messages); "
                             "--local-libvirt also gives it to every daemon "
                             "it starts, after their own file. Repeatable; "
                             "OS_<GROUP>__<OPTION> environment variables "
                             "are read as well")
    parser.add_argument('--state-dir', default=None,
                        help="--local-libvirt: where hosts, configs and "
                             "logs go, kept afterwards (default: a "
                             "temporary directory, removed afterwards)")
    parser.add_argument('--nested-layout', action='append', default=[],
                        metavar='LAYOUT',
                        help="--nested: the virtual machine's NUMA layout, "
                             "e.g. 'cores=3,threads=2,memory=6656:3072,"
                             "pages_2m=128:126,pages_1g=4:1' (':' separates "
                             "nodes; default: that one; 'distances=10:21:"
                             "21:10' adds a NUMA distance table, row by "
                             "row; 'devices=2,pci_node=1' adds an emulated "
                             "IOMMU and two assignable e1000e on node 1, "
                             "offered as [pci] alias 'nested-nic'; ',vfs=2' "
                             "makes them igb with two SR-IOV VFs each, the "
                             "alias then type-VF, run by the QEMU of "
                             "tools/nested-qemu.sh). Given "
                             "twice: one "
                             "machine per host, with these layouts (hosts "
                             "with different node counts)")
    parser.add_argument('--log-file', default=None,
                        help="write numamig's own log messages there "
                             "(default: errors only, to stderr)")
    parser.add_argument('--debug', action='store_true',
                        help="log at debug level")
    return parser


def list_scenarios(stream):
    from numamig_ci.scenarios import registry
    for item in registry.SCENARIOS.values():
        needs = f" [needs: {', '.join(item.requires)}]" \
            if item.requires else ''
        stream.write(f"{item.name:26} {item.summary}{needs}\n")


def suite_top():
    """The directory stestr needs as --top-dir for numamig_ci.suite."""
    import numamig_ci
    return os.path.dirname(os.path.dirname(os.path.abspath(
        numamig_ci.__file__)))


def make_backend(args):
    """The backend the arguments name.

    :raises exception.Invalid: a bad argument or deployment file.
    """
    if args.embedded:
        from numamig_ci.backends import embedded
        return embedded.EmbeddedBackend(args.transport_url or 'inproc://')
    if args.local_libvirt is not None:
        from numamig_ci.backends import local_libvirt
        return local_libvirt.LocalLibvirtBackend(
            args.local_libvirt, transport_url=args.transport_url,
            db_url=args.database, state_dir=args.state_dir,
            config_files=args.config_file)
    if args.nested:
        return _nested_backend(args)
    from numamig_ci.backends import deployment
    return deployment.DeploymentBackend.from_file(args.deployment)


def _nested_backend(args):
    from numamig_ci.backends import nested
    from numamig_ci.nested import vm
    try:
        layouts = [vm.Layout.parse(text) for text in args.nested_layout]
    except ValueError as exc:
        raise exception.Invalid(reason=f"--nested-layout: {exc}")
    return nested.NestedBackend(
        layouts=layouts or None, transport_url=args.transport_url,
        db_url=args.database, state_dir=args.state_dir)


def main(argv=None, stdout=None):
    stdout = stdout or sys.stdout
    args = build_parser().parse_args(argv)
    _backend.select_threading(strict=False)
    try:
        _parse_conf(args.config_file)
    except exception.Invalid as exc:
        stdout.write(f"numamig-ci: {exc}\n")
        return EXIT_USAGE
    _setup_logging(args.debug, args.log_file)
    if args.list:
        list_scenarios(stdout)
        return EXIT_OK
    if args.suite_top:
        stdout.write(suite_top() + '\n')
        return EXIT_OK
    if not (args.embedded or args.local_libvirt is not None
            or args.nested or args.deployment):
        stdout.write("numamig-ci: choose --embedded, --local-libvirt N, "
                     "--nested or --deployment FILE (or --list)\n")
        return EXIT_USAGE
    from numamig_ci.scenarios import registry
    try:
        selected = registry.select(args.scenario)
        backend = make_backend(args)
    except KeyError as exc:
        stdout.write(f"numamig-ci: {exc.args[0]}\n")
        return EXIT_USAGE
    except exception.Invalid as exc:
        stdout.write(f"numamig-ci: {exc}\n")
        return EXIT_USAGE
    return _run(args, backend, selected, stdout)


def _stop_on_sigterm():
    """Make SIGTERM (a CI job's cancel) unwind like Ctrl-C: the backend
    tears down its hosts and daemons on the way out."""
    def interrupt(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, interrupt)


def _run(args, backend, selected, stdout):
    from numamig_ci import reporters
    from numamig_ci import runner
    _stop_on_sigterm()
    with contextlib.ExitStack() as stack:
        human = reporters.HumanReporter(stdout, total=len(selected))
        others = []
        if args.subunit:
            stream = stack.enter_context(open(args.subunit, 'wb'))
            others.append(reporters.subunit_reporter(stream))
        if args.junit:
            others.append(reporters.JUnitReporter(args.junit, backend.name))
        stdout.write(f"numamig-ci: starting the {backend.name} backend\n")
        try:
            stack.enter_context(backend)
        except exception.Invalid as exc:
            # What the deployment reports contradicts the file.
            stdout.write(f"numamig-ci: {exc}\n")
            return EXIT_USAGE
        except Exception as exc:
            stdout.write(f"numamig-ci: the {backend.name} backend could not "
                         f"start or reach its deployment: {exc}\n")
            return EXIT_DEPLOYMENT
        tally = runner.run(backend, selected, human, others)
    return runner.exit_code(tally, skips_fail=bool(args.scenario))


def _parse_conf(config_files):
    """Read numamig's options for the harness's own connections: the
    ``--config-file`` files and OS_<GROUP>__<OPTION> environment
    variables (oslo.config's). A process that parsed them already (a
    test, an embedding program) keeps what it parsed.

    :raises exception.Invalid: a file that cannot be read.
    """
    from oslo_config import cfg

    from numamig.conf import CONF
    for path in config_files:
        if not os.access(path, os.R_OK):
            raise exception.Invalid(
                reason=f"--config-file {path}: no such readable file")
    try:
        CONF.config_file  # noqa: B018 (registered by a parse only)
        return
    except cfg.NoSuchOptError:
        pass
    argv = [arg for path in config_files
            for arg in ('--config-file', os.path.abspath(path))]
    try:
        CONF(argv, project='numamig', default_config_files=[])
    except cfg.Error as exc:
        raise exception.Invalid(reason=f"--config-file: {exc}")


def _setup_logging(debug, log_file):
    """Keep numamig's service logs out of the human progress output.

    Failures the scenarios provoke (rollback, refusal) make the services
    log errors with tracebacks; those belong in ``--log-file``, while the
    verdicts go to the reporters.
    """
    handler = logging.FileHandler(log_file) if log_file else \
        logging.StreamHandler()
    handler.setFormatter(logging.Formatter(
        '%(asctime)s %(levelname)s %(name)s: %(message)s'))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if debug else
                  logging.INFO if log_file else logging.CRITICAL)


if __name__ == '__main__':
    sys.exit(main())
