"""Reports of a study run: the console table, Markdown, CSV and JSON."""
