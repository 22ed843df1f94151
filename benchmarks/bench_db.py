"""Measure one database transaction through numamig's handle.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_db.py [--rounds N]

Every repository call is one transaction, and a migration makes a few
dozen of them on the conductor's critical path, so the cost a
transaction adds on top of SQLAlchemy is what matters. Measured on a
SQLite file (the embedded tier's database): a read of one row and a
conditional update, through ``numamig.db.api.Database`` (oslo.db's
enginefacade with numamig's settings) and, as the baseline in the same
run, through a bare SQLAlchemy engine and session on the same file with
the same statements. Rounds alternate between the two so that load from
other work falls on both alike. Prints the median microseconds per
transaction and the ratio to the baseline.
"""

import argparse
import contextlib
import datetime
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))

from numamig import _backend  # noqa: E402

_backend.select_threading()

import sqlalchemy as sa  # noqa: E402
from sqlalchemy import orm  # noqa: E402

from numamig.db import api  # noqa: E402
from numamig.db import models  # noqa: E402

ROW_UUID = '5f1c3c59-0d4a-4f57-9b0e-1a2b3c4d5e6f'


class BareSQLAlchemy:
    """The baseline: SQLAlchemy's own engine, pool and sessions."""

    def __init__(self, url):
        self.engine = sa.create_engine(url)
        self._sessions = orm.sessionmaker(self.engine,
                                          expire_on_commit=False)

    @contextlib.contextmanager
    def reader(self):
        with self._sessions() as session, session.begin():
            yield session

    writer = reader


def _insert_row(db):
    now = datetime.datetime.now(datetime.UTC)
    with db.writer() as session:
        session.execute(sa.insert(models.ComputeNode).values(
            host='bench', hypervisor_uri='test:///', hypervisor_type='test',
            service_version=1, fingerprint='x', report={},
            reported_at=now, created_at=now, updated_at=now))


def _read(db):
    with db.reader() as session:
        session.execute(sa.select(models.ComputeNode).where(
            models.ComputeNode.host == 'bench')).one()


def _write(db):
    with db.writer() as session:
        session.execute(sa.update(models.ComputeNode).where(
            models.ComputeNode.host == 'bench').values(fingerprint='y'))


def per_call_us(func, db, calls):
    start = time.perf_counter()
    for _ in range(calls):
        func(db)
    return (time.perf_counter() - start) / calls * 1e6


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--rounds', type=int, default=5)
    parser.add_argument('--calls', type=int, default=1000)
    args = parser.parse_args(argv)
    directory = tempfile.mkdtemp(prefix='numamig-bench-db-')
    url = f'sqlite:///{directory}/numamig.sqlite'
    numamig_db = api.Database(url)
    numamig_db.sync()
    _insert_row(numamig_db)
    handles = {'bare SQLAlchemy': BareSQLAlchemy(url),
               'numamig (oslo.db)': numamig_db}
    samples = {(name, op): [] for name in handles
               for op in ('read', 'write')}
    for _ in range(args.rounds):
        for name, db in handles.items():
            samples[name, 'read'].append(per_call_us(_read, db, args.calls))
            samples[name, 'write'].append(
                per_call_us(_write, db, args.calls // 4))
    print(f"SQLite file, {args.rounds} rounds x {args.calls} reads and "
          f"{args.calls // 4} writes, median us per transaction:")
    for op in ('read', 'write'):
        base = statistics.median(samples['bare SQLAlchemy', op])
        ours = statistics.median(samples['numamig (oslo.db)', op])
        print(f"  {op:5}  bare SQLAlchemy {base:7.0f}   numamig (oslo.db) "
              f"{ours:7.0f}   ratio {ours / base:.2f}")


if __name__ == '__main__':
    main()
