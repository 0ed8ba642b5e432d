"""A run around the algorithm: settings, directory, checkpoint, metrics, lines printed, Ray."""
