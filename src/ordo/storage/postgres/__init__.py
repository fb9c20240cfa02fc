"""PostgreSQL backend (psycopg 3)."""
