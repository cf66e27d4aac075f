"""Learning studies: curves against published anchors, seeds, policy lag."""
