"""L4: the engine — a session that takes SQL to a released, budgeted answer."""
