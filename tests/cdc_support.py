"""The `users` table the CDC tests share: id (key), name, age."""

from __future__ import annotations

from ordo.cdc import Column, ColumnType, TableSchema

USER_ID = Column(name="id", type=ColumnType.LONG, nullable=False)
USERS = TableSchema(
    table="users",
    columns=(
        USER_ID,
        Column(name="name", type=ColumnType.STRING),
        Column(name="age", type=ColumnType.LONG),
    ),
    partition_key=("id",),
)
