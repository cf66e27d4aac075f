"""One-off probes: where the time and the bits go."""
