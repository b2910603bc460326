"""The PostgreSQL protocol listener: psql, JDBC, psycopg and BI tools ask the gateway."""
