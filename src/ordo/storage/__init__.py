"""Storage backends behind the ports of the concept packages."""
