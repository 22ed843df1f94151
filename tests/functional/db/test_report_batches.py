"""Reports written in batches (the conductor's group commit) on
PostgreSQL, MariaDB and SQLite: consecutive change numbers in commit
order, an older report kept out, concurrent batches never sharing a
number."""

import datetime
import threading

from numamig.db import compute_nodes
from tests.functional.db import base
from tests.unit.db import base as unit_base

T0 = datetime.datetime(2026, 11, 28, 12, 0, tzinfo=datetime.UTC)


def report(host, seconds=0):
    return unit_base.make_report(
        host=host, reported_at=T0 + datetime.timedelta(seconds=seconds))


class ReportBatchTestCase(base.ServerDBTestCase):

    def test_a_batch_takes_consecutive_numbers(self):
        compute_nodes.save_report(self.db, report('h1', seconds=30))
        _, seen = compute_nodes.changed_since(self.db, -1)
        saved = compute_nodes.save_reports_reading_guests(
            self.db, [report(f'h{i}', seconds=10) for i in range(4)])
        self.assertEqual([seen + 1, None, seen + 3, seen + 4],
                         [s.change_seq for s in saved])
        reports, later = compute_nodes.changed_since(self.db, seen)
        self.assertEqual(['h0', 'h2', 'h3'], [r.host for r in reports])
        self.assertEqual(seen + 4, later)

    def test_concurrent_batches_never_share_a_number(self):
        numbers, errors = [], []
        lock = threading.Lock()

        def write(start):
            try:
                saved = compute_nodes.save_reports_reading_guests(
                    self.db, [report(f'w{start}-{i}') for i in range(10)])
            except Exception as error:  # noqa: BLE001 - collected
                errors.append(error)
                return
            with lock:
                numbers.extend(s.change_seq for s in saved)
        threads = [threading.Thread(target=write, args=(n,))
                   for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        self.assertEqual([], errors)
        self.assertEqual(40, len(set(numbers)))
        reports, _ = compute_nodes.changed_since(self.db, -1)
        self.assertEqual(40, len(reports))
