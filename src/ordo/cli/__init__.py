"""The `ordo` command line: thin commands over the library."""
