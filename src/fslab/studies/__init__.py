"""Built-in study files, run by name: `fslab run quick`."""
