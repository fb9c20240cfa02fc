"""SQLite backend (standard library, WAL): the embedded default."""
