// Placeholder source for a layer that has no sources yet.
