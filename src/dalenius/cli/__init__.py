"""L5: the ``dalenius`` command line — a thin shell over the library that adds nothing."""
