"""L0: what every other layer needs — errors, privacy losses, privacy units, the catalog, secure randomness, certified exact arithmetic."""
