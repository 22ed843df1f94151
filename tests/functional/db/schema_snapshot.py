"""A database's schema as lines of text, to compare releases' schemas.

What ``sqlalchemy.inspect`` reads back of every table (columns in their
order, with type, nullability and server default; primary key, indexes,
unique, foreign key and check constraints; the rows the revisions seed),
one line each, sorted where
the database gives no order. Two databases with the same lines have the
same schema as numamig and its repositories see it.

``python -m tests.functional.db.schema_snapshot URL`` prints a
database's lines: how the files under ``schemas/`` were written, from
databases synced with the development revisions release 2 replaced.
"""

import os
import sys

import sqlalchemy as sa

SCHEMAS = os.path.join(os.path.dirname(__file__), 'schemas')
# Tables whose rows the revisions write (the rows numamig's code locks
# and counts with): their rows are part of the schema.
SEEDED = ('locks', 'sequences')


def _default(value):
    # MariaDB quotes a server default ("'0'"), PostgreSQL may cast it
    # ("'drain'::character varying"); both are kept as read.
    return '' if value is None else f' DEFAULT {value}'


def lines(engine):
    """The schema of ``engine``'s database, alembic's table left out."""
    inspector = sa.inspect(engine)
    out = []
    for table in sorted(inspector.get_table_names()):
        if table == 'alembic_version':
            continue
        for column in inspector.get_columns(table):
            null = 'NULL' if column['nullable'] else 'NOT NULL'
            out.append(f"{table} column {column['name']} {column['type']} "
                       f"{null}{_default(column.get('default'))}")
        pk = inspector.get_pk_constraint(table)
        out.append(f"{table} primary key "
                   f"({', '.join(pk['constrained_columns'])})")
        out.extend(sorted(
            f"{table} index {index['name']} "
            f"({', '.join(index['column_names'])})"
            f"{' unique' if index.get('unique') else ''}"
            for index in inspector.get_indexes(table)))
        out.extend(sorted(
            f"{table} unique {unique['name']} "
            f"({', '.join(unique['column_names'])})"
            for unique in inspector.get_unique_constraints(table)))
        out.extend(sorted(
            f"{table} foreign key {fk['name']} "
            f"({', '.join(fk['constrained_columns'])}) -> "
            f"{fk['referred_table']} ({', '.join(fk['referred_columns'])})"
            f" ondelete {fk.get('options', {}).get('ondelete')}"
            for fk in inspector.get_foreign_keys(table)))
        out.extend(sorted(
            f"{table} check {check['name']} {check['sqltext']}"
            for check in inspector.get_check_constraints(table)))
        if table in SEEDED:
            with engine.connect() as connection:
                rows = connection.execute(sa.select(
                    sa.Table(table, sa.MetaData(), autoload_with=connection)
                )).all()
            out.extend(sorted(f"{table} row {tuple(row)}" for row in rows))
    return out


def path(release, backend):
    """The file holding ``release``'s schema on ``backend``."""
    return os.path.join(SCHEMAS, f'{release}-{backend}.txt')


def read(release, backend):
    with open(path(release, backend)) as snapshot:
        return snapshot.read().splitlines()


if __name__ == '__main__':
    engine = sa.create_engine(sys.argv[1])
    print('\n'.join(lines(engine)))
    engine.dispose()
