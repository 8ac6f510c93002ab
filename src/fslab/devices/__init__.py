"""Block devices fslab runs on: loop images in its own work directory."""
